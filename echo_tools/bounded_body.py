"""HTTP response bodies decoded under a size bound, so a small compressed body cannot fill the memory.

httpx decodes a whole network chunk before anyone can count it: 49 KB of zstd became 3 GB. Here the raw
bytes are read (`aiter_raw`) and every `Content-Encoding` layer is undone in steps that never produce
more than the bytes still allowed (zlib's `max_length`, a zstd writer whose sink stops at the bound).
Encodings that cannot be bounded here (`br`) are refused; unknown ones are kept undecoded, as httpx does.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    pass

try:
    import zstandard
except ImportError:  # optional: without it zstd is neither asked for nor accepted
    zstandard = None  # type: ignore[assignment]

ACCEPT_ENCODING = "gzip, deflate, zstd" if zstandard is not None else "gzip, deflate"
MAX_LAYERS = 3  # `Content-Encoding: gzip, gzip, ...` beyond this is refused
ZSTD_MAX_WINDOW = 8 * 1024 * 1024  # RFC 9659: HTTP zstd decoders need no larger window
_REFUSED = {"br": "no bounded brotli decoder is installed"}


class UndecodableBodyError(Exception):
    """The body's `Content-Encoding` is refused here, or its bytes are not valid for it."""


class _Layer(Protocol):
    def feed(self, data: bytes, room: int) -> tuple[bytes, bool]:
        """At most `room` decoded bytes of `data`, and whether more output was left over."""
        ...


class _Zlib:
    """gzip (`wbits` 16 + MAX_WBITS) and deflate (zlib-wrapped, or raw as some servers send it)."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        gzip = encoding in ("gzip", "x-gzip")
        self.wbits = zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS
        self.raw_fallback = not gzip
        self.started = False
        self.obj = zlib.decompressobj(self.wbits)

    def feed(self, data: bytes, room: int) -> tuple[bytes, bool]:
        try:
            out = self.obj.decompress(data, room + 1)
        except zlib.error as exc:
            if self.started or not self.raw_fallback:
                raise UndecodableBodyError(f"the {self.encoding} body is corrupt: {exc}") from exc
            self.raw_fallback = False  # "deflate" without the zlib header: raw deflate
            self.obj = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.feed(data, room)
        self.started = True
        # reaching max_length means there is more where that came from: over the bound
        return out[:room], len(out) > room


class _Full(Exception):
    """Raised inside the zstd writer's sink to stop decoding at the bound."""


class _Sink:
    def __init__(self) -> None:
        self.room = 0
        self.parts: list[bytes] = []
        self.over = False

    def write(self, data: bytes) -> int:
        take = bytes(data[: self.room])
        self.parts.append(take)
        self.room -= len(take)
        if len(data) > len(take):
            self.over = True
            raise _Full
        return len(data)


class _Zstd:
    def __init__(self) -> None:
        assert zstandard is not None
        self.sink = _Sink()
        decompressor = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
        self.writer = decompressor.stream_writer(self.sink, write_size=64 * 1024)  # type: ignore[arg-type]

    def feed(self, data: bytes, room: int) -> tuple[bytes, bool]:
        self.sink.room, self.sink.parts = room, []
        try:
            self.writer.write(data)
        except _Full:
            pass
        except zstandard.ZstdError as exc:
            raise UndecodableBodyError(f"the zstd body cannot be decoded: {exc}") from exc
        return b"".join(self.sink.parts), self.sink.over


def _layers(content_encoding: str) -> list[_Layer]:
    names = [n.strip().lower() for n in content_encoding.split(",") if n.strip()]
    names = [n for n in names if n != "identity"]
    if len(names) > MAX_LAYERS:
        raise UndecodableBodyError(
            f"Content-Encoding {content_encoding!r} has {len(names)} layers; at most {MAX_LAYERS} are decoded"
        )
    layers: list[_Layer] = []
    for name in reversed(names):  # the last encoding applied is undone first
        if name in ("gzip", "x-gzip", "deflate"):
            layers.append(_Zlib(name))
        elif name == "zstd" and zstandard is not None:
            layers.append(_Zstd())
        elif name in _REFUSED or name == "zstd":
            reason = _REFUSED.get(name, "zstandard is not installed")
            raise UndecodableBodyError(
                f"Content-Encoding {name!r} is refused: {reason}, so its decoded size cannot be bounded"
            )
        # any other token: kept undecoded, as httpx does
    return layers


class BoundedDecoder:
    """Undoes a `Content-Encoding` chunk by chunk; never holds or returns more than `limit` bytes.

    `feed` returns the decoded bytes of the next raw chunk; once the decoded body would pass `limit`,
    `exceeded` is set and the bytes up to the limit are all that was returned. Any layer, intermediate
    ones included, is cut at `limit` too.
    """

    def __init__(self, content_encoding: str | None, limit: int) -> None:
        self.limit = limit
        self.encoding = content_encoding
        self.layers = _layers(content_encoding or "")
        self.produced = [0] * (len(self.layers) + 1)  # bytes out of each layer; the last entry: returned
        self.exceeded = False

    def feed(self, raw: bytes) -> bytes:
        if self.exceeded:
            return b""
        data = raw
        for index, layer in enumerate(self.layers):
            room = self.limit - self.produced[index]
            data, over = layer.feed(data, room)
            self.produced[index] += len(data)
            if over:
                self.exceeded = True
        room = self.limit - self.produced[-1]
        if len(data) > room:
            data, self.exceeded = data[:room], True
        self.produced[-1] += len(data)
        return data
