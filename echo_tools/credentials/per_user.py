"""Credentials that belong to one end user (`ToolContext.user_id`), beside the shared ones.

`CredentialStore.set(name, secret, user_id="alice")` keeps Alice's credential under its own key,
`name@alice`: `@` never appears in a credential name, so no shared name can reach it. A call resolves its
user's credential first, then the shared one of that name; another user's is never looked at, so a call of
Bob's (or one without a user) sees "does not exist", never Alice's secret.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from echo_tools.credentials.fields import CredentialError

USER_MARK = "@"
MAX_USER_ID = 200


def check_user_id(user_id: object) -> str:
    """Return `user_id` when it can own credentials, else raise `CredentialError` naming the field."""
    if (
        not isinstance(user_id, str)
        or not user_id
        or len(user_id) > MAX_USER_ID
        or any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in user_id)
    ):
        raise CredentialError(
            f"user_id {user_id!r:.80} is invalid: a non-empty text of at most {MAX_USER_ID} printable characters",
            field="user_id",
        )
    return user_id


def user_key(name: str, user_id: str | None) -> str:
    """The store key of credential `name` of `user_id` (None: the shared credential, its name)."""
    return name if user_id is None else f"{name}{USER_MARK}{check_user_id(user_id)}"


def split_key(key: str) -> tuple[str, str | None]:
    """(name, user id or None) of a store key."""
    name, mark, user = key.partition(USER_MARK)
    return (name, user) if mark else (key, None)


def listed_order(item: tuple[str, Any]) -> tuple[str, str]:
    """How `CredentialStore.list` orders its entries: by name, the shared one before the users' own."""
    name, user = split_key(item[0])
    return name, user or ""


def shared_names(entries: Mapping[str, Any]) -> list[str]:
    """The names an error may list: the shared credentials (an end user's own are nobody else's business)."""
    return sorted(k for k in entries if split_key(k)[1] is None)
