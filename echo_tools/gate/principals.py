"""Principals: who calls (`Principal`, its `Grants`, the actions), and the keys of a server that name them.

The CLI and in-process Python are the `OPERATOR` principal (everything). `echo-tools serve --principals
FILE` maps keys, stored as their SHA-256 (`hash_key`), to principals (`principals_from`, `load_principals`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from echo_tools.errors import ToolConfigError
from echo_tools.gate.budget import Budget, BudgetMeter
from echo_tools.models import ToolPermission

ACTIONS = ("invoke", "run", "register", "import", "credentials", "mcp", "history", "approve", "compile")
# not actions of a grant: READ is what every authenticated principal may do (list, show, search, metrics),
# PUBLIC marks the few routes that need no key at all (health)
READ = "read"
PUBLIC = "public"


@dataclass(frozen=True)
class Grants:
    """What a principal may do: permissions (the ceiling of every call; None = unrestricted), actions,
    its budget per request, whether it may act for end users (`X-Echo-User`) and whether it is admin
    (owns everything: may replace, delete or reuse what others own)."""

    permissions: tuple[ToolPermission, ...] | None = None
    actions: frozenset[str] = frozenset(ACTIONS)
    budget: Budget = field(default_factory=Budget)
    act_for_users: bool = False
    admin: bool = False

    def __init__(
        self,
        permissions: Iterable[str | ToolPermission] | None = None,
        actions: Iterable[str] | None = None,
        budget: Budget | None = None,
        act_for_users: bool = False,
        admin: bool = False,
    ) -> None:
        perms = None
        if permissions is not None:
            perms = tuple(_permission(p) for p in permissions)
        chosen = frozenset(ACTIONS) if actions is None else frozenset(actions)
        unknown = sorted(chosen - set(ACTIONS))
        if unknown:
            raise ToolConfigError(
                f"unknown action {unknown[0]!r}; the actions are {', '.join(ACTIONS)}", field="actions"
            )
        object.__setattr__(self, "permissions", perms)
        object.__setattr__(self, "actions", chosen)
        object.__setattr__(self, "budget", budget or Budget())
        object.__setattr__(self, "act_for_users", bool(act_for_users))
        object.__setattr__(self, "admin", bool(admin))


@dataclass(frozen=True)
class Principal:
    """Who calls: a name (what `owner` records), its grants, and the end user it acts for, if any."""

    name: str
    grants: Grants = field(default_factory=Grants)
    user_id: str | None = None

    def may(self, action: str) -> bool:
        """True when the principal's grants include `action` (READ and PUBLIC: always)."""
        return action in (READ, PUBLIC) or action in self.grants.actions or self.grants.admin

    @property
    def granted_permissions(self) -> list[ToolPermission] | None:
        """The ceiling of every call it makes (None: the tools' own limits only)."""
        perms = self.grants.permissions
        return None if perms is None else list(perms)

    def owns(self, owner: str | None) -> bool:
        """True when something owned by `owner` (None: the operator's) is this principal's to change,
        delete, reuse or lend: its own, or anything for an admin."""
        return self.grants.admin or (owner is not None and owner == self.name)

    def meter(self) -> BudgetMeter:
        """A fresh meter of this principal's budget, for one request or run."""
        return BudgetMeter(self.grants.budget)


OPERATOR_NAME = "operator"
OPERATOR = Principal(OPERATOR_NAME, Grants(admin=True, act_for_users=True))


def _permission(value: str | ToolPermission) -> ToolPermission:
    try:
        return ToolPermission(value)
    except ValueError as exc:
        known = ", ".join(p.value for p in ToolPermission)
        raise ToolConfigError(
            f"unknown permission {value!r}; the permissions are {known}", field="permissions"
        ) from exc


# -- principals: the keys of a server --------------------------------------------------------------------


def hash_key(key: str) -> str:
    """The stored form of an API key: its SHA-256, hex (`echo-tools` never keeps a key in clear)."""
    return hashlib.sha256(key.encode()).hexdigest()


def principals_from(
    data: Mapping[str, Any] | list[Any], *, where: str = "principals"
) -> dict[str, Principal]:
    """Principals keyed by `hash_key(key)` from the principals file's JSON.

    The shape: `{"principals": [{"name", "key_sha256", "actions"?, "permissions"?, "budget"?,
    "act_for_users"?, "admin"?}, ...]}`. A key in clear is refused (store its hash).

    Raises:
        ToolConfigError: naming the entry and the field that is wrong.
    """
    entries = data.get("principals") if isinstance(data, Mapping) else data
    if not isinstance(entries, list) or not entries:
        raise ToolConfigError(f"{where}: expected a non-empty list 'principals'", field="principals")
    table: dict[str, Principal] = {}
    names: set[str] = set()
    for index, entry in enumerate(entries):
        at = f"{where}.principals[{index}]"
        if not isinstance(entry, Mapping):
            raise ToolConfigError(f"{at} must be an object, got {entry!r:.60}", field="principals")
        unknown = sorted(set(entry) - _ENTRY_KEYS)
        if unknown:
            hint = " (store the key's SHA-256 as 'key_sha256')" if unknown[0] == "key" else ""
            raise ToolConfigError(f"{at}: unknown field {unknown[0]!r}{hint}", field=unknown[0])
        name, digest = entry.get("name"), entry.get("key_sha256")
        if not isinstance(name, str) or not name.strip() or name in names:
            raise ToolConfigError(f"{at}.name must be a unique non-empty string, got {name!r}", field="name")
        if name == OPERATOR_NAME and entry.get("admin") is not True:
            # the operator owns what the CLI and in-process Python make: only an admin may be called so
            raise ToolConfigError(
                f"{at}.name {name!r} is the operator's (the --api-key holder, the CLI and in-process Python), "
                "which owns their runs and approvals: only an admin principal may have it; name this one "
                "otherwise",
                field="name",
            )
        if not isinstance(digest, str) or len(digest) != 64 or not all(c in _HEX for c in digest.lower()):
            raise ToolConfigError(
                f"{at}.key_sha256 must be the 64 hex digits of the key's SHA-256, got {digest!r:.80}",
                field="key_sha256",
            )
        if digest.lower() in table:
            raise ToolConfigError(f"{at}: the same key is given to two principals", field="key_sha256")
        try:
            budget = Budget(**(entry.get("budget") or {}))
            grants = Grants(
                permissions=entry.get("permissions"),
                actions=entry.get("actions"),
                budget=budget,
                act_for_users=entry.get("act_for_users", False),
                admin=entry.get("admin", False),
            )
        except TypeError as exc:
            raise ToolConfigError(f"{at}.budget: {exc}", field="budget") from exc
        except ToolConfigError as exc:
            raise ToolConfigError(f"{at}: {exc.message}", field=exc.field) from exc
        names.add(name)
        table[digest.lower()] = Principal(name, grants)
    return table


_ENTRY_KEYS = {"name", "key_sha256", "actions", "permissions", "budget", "act_for_users", "admin"}
_HEX = frozenset("0123456789abcdef")


def load_principals(path: str | Path) -> dict[str, Principal]:
    """`principals_from` of a JSON file (`echo-tools serve --principals FILE`)."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ToolConfigError(
            f"principals file {str(file)!r} cannot be read: {exc}", field="principals"
        ) from exc
    return principals_from(data, where=str(file))
