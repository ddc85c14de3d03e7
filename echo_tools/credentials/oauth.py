"""OAuth2 client-credentials: one token request to `token_url` (RFC 6749 §4.4), under the egress policy,
with the answer size-bounded and no secret in any error. The store caches what this returns."""

from __future__ import annotations

import base64
import json
import logging
from typing import TYPE_CHECKING, Any

from echo_tools.errors import ToolExecutionError

if TYPE_CHECKING:
    import httpx

    from echo_tools.egress import EgressPolicy

logger = logging.getLogger("echo_tools.credentials")

MAX_TOKEN_RESPONSE_BYTES = 64 * 1024
DEFAULT_TOKEN_LIFETIME_S = 300.0


def basic_auth(username: str, password: str) -> str:
    """The `Authorization` value of HTTP Basic authentication."""
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


async def fetch_token(
    name: str,
    cred: dict[str, Any],
    egress: EgressPolicy | None,
    client: httpx.AsyncClient | None,
    tool_id: str | None,
) -> tuple[str, float]:
    """`(access_token, lifetime_s)` from the credential's token endpoint.

    Raises:
        EgressDeniedError: the token URL is refused by the policy.
        ToolExecutionError: the request failed or the answer is not a token (named, never a secret).
    """
    import httpx

    from echo_tools.bounded_body import UndecodableBodyError
    from echo_tools.bounded_read import read_bounded
    from echo_tools.egress import EgressPolicy, egress_client

    url = cred["token_url"]
    policy = egress or EgressPolicy()
    policy.check_url(url)  # before a secret is put in a request; the client checks the address it reaches

    def fail(reason: str) -> ToolExecutionError:
        return ToolExecutionError(
            f"{f'Tool {tool_id!r}: ' if tool_id else ''}credential {name!r}: the OAuth2 token request "
            f"to {url!r} {reason}",
            tool_id=tool_id,
            field="execution_config.credential",
        )

    form = {"grant_type": "client_credentials"}
    if cred.get("scopes"):
        form["scope"] = " ".join(cred["scopes"])
    headers = {"Accept": "application/json"}
    if cred.get("client_auth", "basic") == "body":
        form.update(client_id=cred["client_id"], client_secret=cred["client_secret"])
    else:
        headers["Authorization"] = basic_auth(cred["client_id"], cred["client_secret"])
    owned = client is None
    http = client or egress_client(policy, max_body_bytes=MAX_TOKEN_RESPONSE_BYTES)
    try:
        request = http.build_request("POST", url, data=form, headers=headers, timeout=30.0)
        response = await http.send(request, stream=True)
        try:
            body, cut = await read_bounded(response, MAX_TOKEN_RESPONSE_BYTES)
        finally:
            await response.aclose()
        if cut:
            raise fail(f"answered more than {MAX_TOKEN_RESPONSE_BYTES} bytes (decoded); reading stopped")
    except UndecodableBodyError as exc:
        raise fail(f"answered a body that cannot be decoded: {exc}") from exc
    except httpx.HTTPError as exc:
        raise fail(f"failed: {type(exc).__name__}") from exc
    finally:
        if owned:
            await http.aclose()
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if response.status_code != 200 or not isinstance(data, dict):
        # only the standard error code is shown: a token endpoint may echo what it was sent
        code = data.get("error") if isinstance(data, dict) else None
        shown = f" ({str(code)[:60]!r})" if isinstance(code, str) else ""
        raise fail(f"answered HTTP {response.status_code}{shown}")
    value = data.get("access_token")
    if not isinstance(value, str) or not value:
        raise fail("answered without an access_token")
    lifetime = data.get("expires_in", DEFAULT_TOKEN_LIFETIME_S)
    try:
        lifetime = max(float(lifetime), 0.0)
    except (TypeError, ValueError):
        lifetime = DEFAULT_TOKEN_LIFETIME_S
    from echo_tools.redaction import remember_secrets

    remember_secrets(value)  # the token is as secret as the credential that fetched it
    logger.info("credential %r: OAuth2 token fetched, valid for %.0f s", name, lifetime)
    return value, lifetime
