"""Renewing an end user's OAuth connection (`oauth_user`, written by `echo_tools.governance.connect`).

`renew(store, key)` runs before every use of an `oauth_user` credential (`credential_for`): once its
access token has expired (or is within `RENEW_MARGIN_S` of it), the credential's own refresh token is
exchanged for a new access token at its `token_url` (one request under the egress policy, the answer
bounded), and the credential is stored again under the same key, with the refresh token the server
rotated to, if it did. A key names one user's credential (`name@user`), so one user's renewal only ever
reads and writes that user's secret. One renewal at a time per credential in a process; a refresh token
another process used first is no error when that process stored the renewed token. No secret appears in
an error.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from echo_tools.errors import ToolExecutionError

if TYPE_CHECKING:
    from echo_tools.egress import EgressPolicy

__all__ = ["RENEW_MARGIN_S", "expiry", "renew"]

RENEW_MARGIN_S = 30.0  # renew an access token this long before it expires
MAX_ANSWER_BYTES = 64 * 1024
clock = time.time  # the wall clock `expires_at` is kept in (epoch seconds)
_KEPT = ("type", "refresh_token", "token_url", "client_id", "client_secret", "resource")


class CredentialStore(Protocol):
    """What a renewal uses of `echo_tools.credentials.CredentialStore`."""

    def load_mcp_oauth(self, name: str) -> dict[str, Any] | None: ...

    def owner_of(self, name: str) -> str | None: ...

    def set(
        self,
        name: str,
        credential: Mapping[str, Any],
        *,
        owner: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, str]: ...


# per event loop (gone with it), per store key: one renewal at a time
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)
_locks_lock = threading.Lock()


def expiry(answer: dict[str, Any]) -> dict[str, float]:
    """`{"expires_at": epoch seconds}` of a token answer with a positive numeric `expires_in` (else {})."""
    lifetime = answer.get("expires_in")
    if isinstance(lifetime, bool) or not isinstance(lifetime, int | float) or lifetime <= 0:
        return {}
    return {"expires_at": clock() + float(lifetime)}


def _due(cred: dict[str, Any] | None) -> bool:
    """Whether an `oauth_user` credential's access token must be renewed before it is sent."""
    if cred is None or cred.get("type") != "oauth_user" or not cred.get("refresh_token"):
        return False
    expires_at = cred.get("expires_at")
    return expires_at is not None and clock() >= float(expires_at) - RENEW_MARGIN_S


async def renew(store: CredentialStore, key: str, *, policy: EgressPolicy | None = None) -> None:
    """Renew the access token of the `oauth_user` credential at store key `key` when it has expired;
    nothing when it has not, or when the key holds no such credential.

    Raises:
        ToolExecutionError: the token endpoint refused or failed (named, with the standard error code
            only; the person connects again).
    """
    cred = await asyncio.to_thread(store.load_mcp_oauth, key)
    if not _due(cred):
        return
    with _locks_lock:
        lock = _locks.setdefault(asyncio.get_running_loop(), {}).setdefault(key, asyncio.Lock())
    async with lock:
        cred = await asyncio.to_thread(store.load_mcp_oauth, key)
        if cred is None or not _due(cred):
            return  # renewed by the call that held the lock before this one
        await _refresh(store, key, cred, policy)


async def _refresh(
    store: CredentialStore, key: str, cred: dict[str, Any], policy: EgressPolicy | None
) -> None:
    from echo_tools.credentials.per_user import split_key

    name, user_id = split_key(key)
    form = {
        "grant_type": "refresh_token",
        "refresh_token": cred["refresh_token"],
        "client_id": cred["client_id"],
    }
    form.update({k: cred[k] for k in ("resource", "client_secret") if cred.get(k)})
    try:
        answer = await _post(name, cred["token_url"], form, policy)
    except ToolExecutionError:
        latest = await asyncio.to_thread(store.load_mcp_oauth, key)
        if latest is not None and latest.get("token") != cred["token"] and not _due(latest):
            return  # another process renewed it with the same refresh token first
        raise
    renewed = {k: cred[k] for k in _KEPT if k in cred}  # the stored hosts and owner stay where they are
    renewed.update(token=answer["access_token"], **expiry(answer))
    rotated = answer.get("refresh_token")
    if isinstance(rotated, str) and rotated:
        renewed["refresh_token"] = rotated
    from echo_tools.redaction import remember_secrets

    remember_secrets(answer["access_token"])  # as secret as the credential that renewed it
    await asyncio.to_thread(store.set, name, renewed, owner=store.owner_of(key), user_id=user_id)


async def _post(name: str, url: str, form: dict[str, str], policy: EgressPolicy | None) -> dict[str, Any]:
    """The token endpoint's answer to `form`: one request through the egress client, bounded."""
    import httpx

    from echo_tools.egress import EgressPolicy, egress_client

    def fail(reason: str) -> ToolExecutionError:
        return ToolExecutionError(
            f"credential {name!r}: renewing the OAuth connection's token at {url!r} {reason}; connect again",
            field="credential",
        )

    client = egress_client(policy or EgressPolicy(), max_body_bytes=MAX_ANSWER_BYTES, follow_redirects=False)
    async with client as http:
        try:
            response = await http.post(url, data=form, headers={"Accept": "application/json"}, timeout=30.0)
            body = response.content
        except httpx.DecodingError as exc:
            raise fail(f"answered more than {MAX_ANSWER_BYTES} bytes ({type(exc).__name__})") from exc
        except httpx.HTTPError as exc:
            raise fail(f"failed: {type(exc).__name__}") from exc
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if response.status_code != 200 or not isinstance(data, dict):
        code = data.get("error") if isinstance(data, dict) else None  # only the standard error code
        raise fail(
            f"answered HTTP {response.status_code}"
            + (f" ({str(code)[:60]!r})" if isinstance(code, str) else "")
        )
    if not isinstance(data.get("access_token"), str) or not data["access_token"]:
        raise fail("answered no access_token")
    return data
