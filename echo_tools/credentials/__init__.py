"""Named credentials for third-party APIs and MCP servers, encrypted at rest (`CredentialStore`).

`store` keeps them (Fernet, key from `ECHO_TOOLS_SECRET_KEY`) and applies one to a request; `fields`
checks each credential type's fields; `oauth` fetches and caches OAuth2 client-credentials tokens.
"""

from echo_tools.credentials.binding import check_tool_credential, credential_for
from echo_tools.credentials.store import (
    SECRET_KEY_ENV,
    STORE_FILE,
    CredentialError,
    CredentialStore,
    check_name,
    new_key,
)

__all__ = [
    "SECRET_KEY_ENV",
    "STORE_FILE",
    "CredentialError",
    "CredentialStore",
    "check_name",
    "check_tool_credential",
    "credential_for",
    "new_key",
]
