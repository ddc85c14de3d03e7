"""Reading a streamed response of the egress client under a bound (`read_bounded`), and what its body was
encoded with (`content_encoding_of`).

Apart from `bounded_body` (the decoder) because these read what the egress transport (`egress_transport`,
which itself decodes through `bounded_body`) marks on a response; neither imports httpx at load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from echo_tools.bounded_body import BoundedDecoder, UndecodableBodyError

if TYPE_CHECKING:
    import httpx

__all__ = ["content_encoding_of", "read_bounded"]


def content_encoding_of(response: httpx.Response) -> str | None:
    """The `Content-Encoding` the server sent (the egress transport decodes it and drops the header)."""
    from echo_tools.egress_transport import DECODED_FROM

    return response.extensions.get(DECODED_FROM) or response.headers.get("content-encoding")


async def read_bounded(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The decoded body of a streamed response, at most `limit` bytes, and whether it was cut there.

    A response of the egress client arrives decoded already, under the client's own bound; this bound
    (often smaller) applies on top.

    Raises:
        UndecodableBodyError: the encoding is refused or the bytes do not decode.
    """
    from echo_tools.egress_transport import RefusedEncodingError, ResponseTooLargeError

    decoder = BoundedDecoder(response.headers.get("content-encoding"), limit)
    parts: list[bytes] = []
    raw_total = 0
    try:
        async for chunk in response.aiter_raw():
            raw_total += len(chunk)
            parts.append(decoder.feed(chunk))
            if decoder.exceeded or raw_total > limit:
                return b"".join(parts)[:limit], True
    except ResponseTooLargeError:
        return b"".join(parts)[:limit], True
    except RefusedEncodingError as exc:
        raise UndecodableBodyError(str(exc)) from exc
    return b"".join(parts), False
