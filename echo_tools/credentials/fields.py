"""What a credential is: its types and fields, checked before anything is stored, and the store's key.

Kept apart from the store so the CLI and the routes can check input without opening it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from echo_tools.errors import ToolConfigError

SECRET_KEY_ENV = "ECHO_TOOLS_SECRET_KEY"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
HOST_PATTERN = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})?\.?$")
HEADER_NAME_PATTERN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")

# type -> (required fields, optional fields); secret fields are never shown anywhere
CREDENTIAL_TYPES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "bearer": (("token",), ()),
    "api_key": (("in", "name", "value"), ()),
    "basic": (("username", "password"), ()),
    "oauth2_client_credentials": (("token_url", "client_id", "client_secret"), ("scopes", "client_auth")),
    # written by an MCP server's OAuth 2.1 flow (echo_tools.mcp.auth): its tokens and client registration,
    # as the SDK's JSON; it authenticates that server's connections only
    "mcp_oauth": (("server_url",), ("tokens", "client_info", "expires_at")),
    # written by an end user's OAuth 2.1 connection (echo_tools.governance.connect): the access token, sent
    # as a bearer token, and what renews it once it expires (the refresh token is a secret, never shown)
    "oauth_user": (
        ("token",),
        ("refresh_token", "token_url", "client_id", "client_secret", "resource", "expires_at"),
    ),
}
SECRET_FIELDS = frozenset(
    {"token", "value", "password", "client_secret", "tokens", "client_info", "refresh_token"}
)
NEW_KEY_HINT = (
    f"make one with `echo-tools credentials new-key` and set it as {SECRET_KEY_ENV} "
    "(keep it safe: the credentials cannot be read without it)"
)


class CredentialError(ToolConfigError):
    """A credential, or the credential store, cannot be used (unknown name, bad fields, missing or wrong key)."""


def new_key() -> str:
    """A fresh Fernet key (URL-safe base64 text) for `ECHO_TOOLS_SECRET_KEY`."""
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode("ascii")


def check_name(name: Any) -> str:
    """Return `name` when it can name a credential, else raise `CredentialError` naming it."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise CredentialError(
            f"credential name {name!r} is invalid: it must match {NAME_PATTERN.pattern}", field="name"
        )
    return name


def check_credential(name: str, credential: Any) -> dict[str, Any]:
    """The credential as a clean dict, or `CredentialError` naming the field (never a secret value)."""
    if not isinstance(credential, Mapping):
        raise CredentialError(
            f"credential {name!r} must be an object with a 'type', got {type(credential).__name__}",
            field="credential",
        )
    kind = credential.get("type")
    if kind not in CREDENTIAL_TYPES:
        raise CredentialError(
            f"credential {name!r}: type {kind!r} is unknown; expected one of {sorted(CREDENTIAL_TYPES)}",
            field="type",
        )
    required, optional = CREDENTIAL_TYPES[kind]
    unknown = sorted(set(credential) - {"type", "hosts", *required, *optional})
    if unknown:
        raise CredentialError(
            f"credential {name!r} of type {kind!r} has unknown field {unknown[0]!r}; "
            f"it takes {', '.join(required + optional)}",
            field=unknown[0],
        )
    clean: dict[str, Any] = {"type": kind}
    _check_required(name, kind, credential, required, clean)
    if "hosts" in credential:
        clean["hosts"] = _checked_hosts(name, credential["hosts"])
    check = _CHECKS_BY_TYPE.get(kind)
    if check is not None:
        check(name, credential, clean)
    return clean


def _check_required(
    name: str, kind: str, credential: Mapping[str, Any], required: tuple[str, ...], clean: dict[str, Any]
) -> None:
    for key in required:
        value = credential.get(key)
        if not isinstance(value, str) or not value:
            shown = "a secret" if key in SECRET_FIELDS else repr(value)
            raise CredentialError(
                f"credential {name!r} of type {kind!r} needs field {key!r} as a non-empty string, got {shown}",
                field=key,
            )
        if any(c in value for c in "\r\n\x00"):
            raise CredentialError(
                f"credential {name!r}: field {key!r} must not contain line breaks or NUL", field=key
            )
        clean[key] = value


def _checked_hosts(name: str, hosts: Any) -> list[str]:
    if (
        not isinstance(hosts, list)
        or not hosts
        or not all(isinstance(h, str) and HOST_PATTERN.fullmatch(h) for h in hosts)
    ):
        raise CredentialError(
            f"credential {name!r}: hosts must be a list of host names (e.g. ['api.github.com']), "
            f"got {hosts!r:.80}",
            field="hosts",
        )
    return sorted({h.lower().rstrip(".") for h in hosts})


def _check_api_key(name: str, credential: Mapping[str, Any], clean: dict[str, Any]) -> None:
    if clean["in"] not in ("header", "query"):
        raise CredentialError(
            f"credential {name!r}: field 'in' must be 'header' or 'query', got {clean['in']!r}", field="in"
        )
    if not HEADER_NAME_PATTERN.fullmatch(clean["name"]):
        raise CredentialError(
            f"credential {name!r}: name {clean['name']!r} is not a valid header or parameter name",
            field="name",
        )


def _check_oauth2_client_credentials(name: str, credential: Mapping[str, Any], clean: dict[str, Any]) -> None:
    if urlsplit(clean["token_url"]).scheme not in ("http", "https"):
        raise CredentialError(
            f"credential {name!r}: token_url must be an http(s) URL, got {clean['token_url']!r}",
            field="token_url",
        )
    scopes = credential.get("scopes", [])
    if isinstance(scopes, str):
        scopes = scopes.split()
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise CredentialError(
            f"credential {name!r}: scopes must be a list of strings, got {scopes!r}", field="scopes"
        )
    clean["scopes"] = scopes
    auth = credential.get("client_auth", "basic")
    if auth not in ("basic", "body"):
        raise CredentialError(
            f"credential {name!r}: client_auth must be 'basic' or 'body', got {auth!r}",
            field="client_auth",
        )
    clean["client_auth"] = auth


def _check_mcp_oauth(name: str, credential: Mapping[str, Any], clean: dict[str, Any]) -> None:
    if urlsplit(clean["server_url"]).scheme not in ("http", "https"):
        raise CredentialError(
            f"credential {name!r}: server_url must be an http(s) URL, got {clean['server_url']!r}",
            field="server_url",
        )
    for key in ("tokens", "client_info"):
        value = credential.get(key)
        if value is None:
            continue
        try:
            ok = isinstance(value, str) and isinstance(json.loads(value), dict)
        except ValueError:
            ok = False
        if not ok:
            raise CredentialError(
                f"credential {name!r}: {key} must be a JSON object as text, got a secret that is not",
                field=key,
            )
        clean[key] = value
    _check_expiry(name, credential, clean)


def _check_oauth_user(name: str, credential: Mapping[str, Any], clean: dict[str, Any]) -> None:
    for key in ("refresh_token", "token_url", "client_id", "client_secret", "resource"):
        value = credential.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value or any(c in value for c in "\r\n\x00"):
            shown = "a secret" if key in SECRET_FIELDS else repr(value)
            raise CredentialError(
                f"credential {name!r}: {key} must be a non-empty string on one line, got {shown}", field=key
            )
        clean[key] = value
    for key in ("token_url", "resource"):
        if key in clean and urlsplit(clean[key]).scheme not in ("http", "https"):
            raise CredentialError(
                f"credential {name!r}: {key} must be an http(s) URL, got {clean[key]!r}", field=key
            )
    if "refresh_token" in clean and not ("token_url" in clean and "client_id" in clean):
        raise CredentialError(
            f"credential {name!r}: a refresh_token needs the token_url and client_id that renew it",
            field="token_url" if "token_url" not in clean else "client_id",
        )
    _check_expiry(name, credential, clean)


def _check_expiry(name: str, credential: Mapping[str, Any], clean: dict[str, Any]) -> None:
    expires_at = credential.get("expires_at")
    if expires_at is not None:
        if isinstance(expires_at, bool) or not isinstance(expires_at, int | float):
            raise CredentialError(
                f"credential {name!r}: expires_at must be a number (epoch seconds), got {expires_at!r}",
                field="expires_at",
            )
        clean["expires_at"] = float(expires_at)


# the checks of one credential type beyond its required fields (the other types have none)
_CHECKS_BY_TYPE: dict[str, Callable[[str, Mapping[str, Any], dict[str, Any]], None]] = {
    "api_key": _check_api_key,
    "oauth2_client_credentials": _check_oauth2_client_credentials,
    "mcp_oauth": _check_mcp_oauth,
    "oauth_user": _check_oauth_user,
}
