"""What counts as a secret, and how values are hidden before anyone outside the call sees them.

The one home of the rule: events, schema error messages, the MCP server listing and the CLI all ask here.
A key is secret when one of its words is a secret word (`access_token`, `X-Api-Key`, `clientSecret`);
plain substrings would also hide harmless keys such as `max_tokens` or `keyboard`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

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

# the answers so far: events carry the same few keys over and over (bounded; keys come from LLMs too)
_verdicts: dict[str, bool] = {}


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
    """`value` with the values of secret-named keys replaced by `***`, at any depth.

    Returns `value` itself when it holds nothing to hide (no copy), otherwise a copy: the caller's data is
    never changed.
    """
    if _depth > _MAX_DEPTH:
        return value
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
