"""What counts as a secret, and how values are hidden before anyone outside the call sees them.

The one home of the rule: events, schema error messages, the MCP server listing and the CLI all ask here.
A key is secret when one of its words is a secret word (`access_token`, `X-Api-Key`, `clientSecret`);
plain substrings would also hide harmless keys such as `max_tokens` or `keyboard`.

A value is secret, whatever key it sits under, once the credential store has said so
(`remember_credential`, called as a credential is used; `remember_secrets` for tokens fetched with one):
a service that echoes a credential back (httpbin's `/bearer`, an error page quoting the request) has it
replaced by `***` in the output, the error, the events and the history.
"""

from __future__ import annotations

import base64
import itertools
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

REDACTED = "***"

_SECRET_WORDS = frozenset(
    {"token", "secret", "password", "passwd", "pwd", "passphrase", "authorization", "auth", "bearer",
     "credential", "credentials", "cookie", "apikey", "privatekey", "accesskey", "secretkey", "signature"}
)  # fmt: skip
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key")})
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_NON_WORD = re.compile(r"[^a-z0-9]+")
_ENV_REFERENCE = re.compile(r"\$\{\w+\}")
_MAX_DEPTH = 20
_CACHE_SIZE = 4096

MIN_SECRET_CHARS = 6  # shorter values would be found inside ordinary text
_SECRET_FIELDS = ("token", "value", "password", "client_secret", "access_token", "refresh_token")

# the answers so far: events carry the same few keys over and over (bounded; keys come from LLMs too)
_verdicts: dict[str, bool] = {}
# the secret values seen so far (this process), and one pattern finding any of them
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None
_lock = threading.Lock()


def remember_secrets(*values: Any) -> None:
    """From now on, hide these strings wherever they appear (with their URL-encoded forms)."""
    global _pattern
    new = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_CHARS}
    new |= {quote(v, safe="") for v in new}
    if new <= _secrets:
        return
    with _lock:
        _secrets.update(new)
        ordered = sorted(_secrets, key=len, reverse=True)  # the longest first: no half-hidden secret
        _pattern = re.compile("|".join(re.escape(v) for v in ordered))


def remember_credential(credential: Mapping[str, Any]) -> None:
    """Hide a stored credential's secret values from now on: its token, key, password or client secret,
    and the `Basic` form of a username and password."""
    values = [credential.get(name) for name in _SECRET_FIELDS]
    for user, secret in (("username", "password"), ("client_id", "client_secret")):
        if isinstance(credential.get(user), str) and isinstance(credential.get(secret), str):
            pair = f"{credential[user]}:{credential[secret]}".encode()
            values.append(base64.b64encode(pair).decode("ascii"))
    remember_secrets(*values)


def hide_secret_values(text: str) -> str:
    """`text` with every remembered secret value replaced by `***`."""
    pattern = _pattern
    if pattern is None or not text:
        return text
    return pattern.sub(REDACTED, text)


def is_secret_key(key: str) -> bool:
    """True when a mapping key names a secret (`api_key`, `Authorization`, `refreshToken`)."""
    verdict = _verdicts.get(key)
    if verdict is None:
        words = [w for w in _NON_WORD.split(_CAMEL.sub(r"\1_\2", key).lower()) if w]
        verdict = any(w in _SECRET_WORDS for w in words) or any(
            pair in _SECRET_PAIRS for pair in itertools.pairwise(words)
        )
        if len(_verdicts) >= _CACHE_SIZE:
            _verdicts.clear()
        _verdicts[key] = verdict
    return verdict


def redact(value: Any, _depth: int = 0) -> Any:
    """`value` with the values of secret-named keys, and every remembered secret value, replaced by `***`,
    at any depth.

    Returns `value` itself when it holds nothing to hide (no copy), otherwise a copy: the caller's data is
    never changed.
    """
    if _depth > _MAX_DEPTH:
        return value
    if type(value) is str:
        pattern = _pattern
        return value if pattern is None or pattern.search(value) is None else pattern.sub(REDACTED, value)
    if isinstance(value, dict):
        out: dict[Any, Any] | None = None
        for key, item in value.items():
            new = REDACTED if isinstance(key, str) and is_secret_key(key) else redact(item, _depth + 1)
            if new is not item and out is None:
                out = dict(value)
            if out is not None:
                out[key] = new
        return value if out is None else out
    if isinstance(value, (list, tuple)):
        items = [redact(item, _depth + 1) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items
    return value


def contains_secret(value: Any) -> bool:
    """True when `redact` would hide something in `value`."""
    return redact(value) is not value


def hide_values(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Every value hidden except `${VAR}` references (which name a secret without holding it).

    For mappings that are secret as a whole, whatever their keys: an MCP server's `env` and `headers`.
    """
    return {k: v if _ENV_REFERENCE.fullmatch(str(v)) else REDACTED for k, v in mapping.items()}
