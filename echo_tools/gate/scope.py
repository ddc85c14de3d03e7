"""The scope of a call: who calls, for which end user, under which permission ceiling and budget, in which run.

A `CallScope` is made once, where a request or a run is admitted (`CallScope.admit`), and never widened:
nested calls get a narrower or equal scope (`narrowed`, `within`), never a new one. `acting_as(scope)` makes
it the scope of the work running in this thread of work (and the threads started with its context, as
LangGraph starts a graph's nodes): what `acting()`, `acting_owner()`, `may_store()` and `under_acting()`
read where a framework calls us without passing a context of ours.

A deferral (an approval, a paused run) keeps `scope.to_record(seal)`: the scope's fields and the totals of
its budget meter, sealed with an HMAC. `CallScope.from_record` restores it and refuses a record that was
changed or names a principal that no longer exists; the ceiling and the budget become the narrower of the
kept ones and what the principal holds now. The work after a decision runs with the restored scope, never
the decider's.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from echo_tools.errors import ScopeKeyElsewhere, ScopeRestoreError, ToolError
from echo_tools.gate.budget import BudgetMeter
from echo_tools.gate.principals import OPERATOR, Grants, Principal

if TYPE_CHECKING:
    from echo_tools.models import ToolContext, ToolPermission

SECRET_KEY_ENV = "ECHO_TOOLS_SECRET_KEY"  # the credentials' key; when set, it seals kept scopes too
KEY_FILE = ".scope.key"

PrincipalLookup = Callable[[str], Principal | None]


@dataclass(frozen=True)
class Nesting:
    """What the inner calls of a composite call (a `workflow` or `agent` tool) inherit besides the scope:
    their parent call, depth and chain of composite tools, the call's deadline (`time.monotonic()`), and
    whether it has ended (a thread cannot be killed: its next node or tool call stops it)."""

    parent_call_id: str | None
    depth: int
    call_path: tuple[str, ...]
    deadline: float
    trace_id: str | None = None
    stopped: list[bool] = field(default_factory=lambda: [False], compare=False)


@dataclass(frozen=True)
class CallScope:
    """Who calls and under which limits, for one request or run (see the module docstring)."""

    principal: Principal = OPERATOR
    user_id: str | None = None
    ceiling: tuple[ToolPermission, ...] | None = None  # None: the tools' own permissions only
    meter: BudgetMeter | None = None  # None: no budget (in-process Python without one)
    run_id: str | None = None
    workflow_id: str | None = None
    agent_id: str | None = None
    stores: bool = True  # False during a compile, which stores nothing
    nesting: Nesting | None = None

    @classmethod
    def admit(
        cls,
        principal: Principal,
        *,
        run_id: str | None = None,
        workflow_id: str | None = None,
        meter: BudgetMeter | None = None,
        stores: bool = True,
    ) -> CallScope:
        """The scope of a request or run `principal` starts: its ceiling, a fresh meter of its budget (or
        `meter`) and the end user it acts for."""
        return cls(
            principal,
            principal.user_id,
            principal.grants.permissions,
            meter if meter is not None else principal.meter(),
            run_id,
            workflow_id,
            stores=stores,
        )

    def narrowed(self, permissions: Iterable[ToolPermission] | None) -> CallScope:
        """This scope with its ceiling cut to `permissions` too (None: unchanged). Never widens."""
        if permissions is None:
            return self
        wanted = tuple(permissions)
        ceiling = wanted if self.ceiling is None else tuple(p for p in wanted if p in self.ceiling)
        return replace(self, ceiling=ceiling)

    def within(self, **ids: Any) -> CallScope:
        """The same scope for another part of the work: `run_id`, `workflow_id`, `agent_id`, `nesting`."""
        return replace(self, **ids)

    def context(self, **ids: Any) -> ToolContext:
        """A `ToolContext` of a call under this scope (`ids`: agent, node, tool call ids, a timeout)."""
        from echo_tools.models import ToolContext

        fields: dict[str, Any] = {
            "run_id": self.run_id,
            "workflow_id": self.workflow_id,
            "agent_id": self.agent_id,
            **ids,
            "granted_permissions": None if self.ceiling is None else list(self.ceiling),
            "budget": self.meter,
            "principal": self.principal.name,
            "user_id": self.user_id,
        }
        return ToolContext(**fields)

    def apply(self, context: ToolContext) -> ToolContext:
        """`context` under this scope: the ceiling cut to what it asks too, this meter, principal and user."""
        asked = context.granted_permissions
        ceiling = self.narrowed(asked).ceiling if asked is not None else self.ceiling
        return context.model_copy(
            update={
                "granted_permissions": None if ceiling is None else list(ceiling),
                "budget": self.meter if self.meter is not None else context.budget,
                "principal": self.principal.name,
                # the scope's end user is the one it was admitted (or kept) for; a context may only add one
                "user_id": self.user_id if self.user_id is not None else context.user_id,
            }
        )

    @classmethod
    def of(cls, context: ToolContext, principal: Principal | None = None) -> CallScope:
        """The scope a call's context carries (its principal named there; `principal` when known)."""
        name = context.principal
        ceiling = context.granted_permissions
        if principal is None or principal.name != name:
            principal = _stand_in(name, None if ceiling is None else tuple(ceiling))
        return cls(
            principal,
            context.user_id,
            None if ceiling is None else tuple(ceiling),
            context.budget,
            context.run_id,
            context.workflow_id,
            context.agent_id,
        )

    # -- kept across a deferral ------------------------------------------------------------------------

    def to_record(self, seal: Seal) -> dict[str, Any]:
        """The scope as JSON, sealed: what an approval or a paused run keeps."""
        record: dict[str, Any] = {
            "principal": self.principal.name,
            "user_id": self.user_id,
            "ceiling": None if self.ceiling is None else [str(getattr(p, "value", p)) for p in self.ceiling],
            "meter": None if self.meter is None else self.meter.totals(),
            "run_id": self.run_id,
            "workflow_id": self.workflow_id,
            "agent_id": self.agent_id,
            "key": seal.key_id,
        }
        record["seal"] = seal.sign(record)
        return record

    @classmethod
    def from_record(
        cls, record: Any, seal: Seal, *, principals: PrincipalLookup | None = None, what: str = "scope"
    ) -> CallScope:
        """The scope `to_record` kept, for the work that carries on after a decision.

        Args:
            record: what `to_record` returned.
            seal: the seal of the store that kept it.
            principals: the principals there are now, by name (a server's table); None: the record's
                principal is taken as named (in-process Python, the CLI).
            what: the deferral, for messages (`"approval 'apr_...'"`, `"run 'run_...'"`).

        Raises:
            ScopeRestoreError: the record is malformed, was changed since it was kept, or names a principal
                that no longer exists; nothing may run under it.
        """
        if not isinstance(record, Mapping) or not isinstance(record.get("principal"), str):
            raise ScopeRestoreError(f"{what}: its kept scope is missing or malformed", field="scope")
        body = {k: v for k, v in record.items() if k != "seal"}
        seal.check(body, record.get("seal"), f"{what}: its kept scope")
        name = record["principal"]
        current = _principal_named(name, principals, what)
        from echo_tools.models import ToolPermission

        try:
            kept = record.get("ceiling")
            ceiling = None if kept is None else tuple(ToolPermission(p) for p in kept)
            totals = record.get("meter")
            ceiling_budget = current.grants.budget if current is not None else None
            meter = None if totals is None else BudgetMeter.resumed(totals, ceiling_budget)
        except (ValueError, TypeError, ToolError) as exc:
            raise ScopeRestoreError(f"{what}: its kept scope is malformed ({exc})", field="scope") from None
        if current is not None:  # a right the owner lost since: the narrower of the kept and the current
            now = current.grants.permissions
            if now is not None:
                ceiling = now if ceiling is None else tuple(p for p in ceiling if p in now)
            principal = current
        else:
            principal = _stand_in(name, ceiling)
        return cls(
            principal,
            record.get("user_id"),
            ceiling,
            meter,
            record.get("run_id"),
            record.get("workflow_id"),
            record.get("agent_id"),
        )


def _principal_named(name: str, principals: PrincipalLookup | None, what: str) -> Principal | None:
    """The principal `name` as it is now (None: no table to ask: in-process Python, the CLI)."""
    if principals is None:
        return None
    found = principals(name)
    if found is None:
        raise ScopeRestoreError(
            f"{what} was asked for by principal {name!r}, which no longer exists; nothing runs for it",
            field="scope.principal",
        )
    return found


def _stand_in(name: str | None, ceiling: tuple[ToolPermission, ...] | None) -> Principal:
    """The principal a scope names where its grants are not known: the operator by its name, anyone else
    with the ceiling the scope carries and no action of the gate (it may store nothing on its own)."""
    if name in (None, OPERATOR.name):
        return OPERATOR
    return Principal(name, Grants(permissions=ceiling, actions=()))


class Seal:
    """The HMAC that kept scopes carry: from `ECHO_TOOLS_SECRET_KEY` when it is set (every replica has
    it: it encrypts credentials too), else a key kept beside the store (`key`), else one of this process."""

    def __init__(self, key: bytes | None = None) -> None:
        secret = os.environ.get(SECRET_KEY_ENV)
        if secret:
            key = hashlib.sha256(b"echo-tools scope seal\0" + secret.encode()).digest()
        self._key = key if key is not None else _PROCESS_KEY
        # names the key (never reveals it): a record sealed with another key says so, instead of "changed"
        self.key_id = hashlib.sha256(b"echo-tools key id\0" + self._key).hexdigest()[:12]

    @classmethod
    def in_folder(cls, folder: str | Path) -> Seal:
        """The seal of a store kept in `folder`: its key is `<folder>/.scope.key`, made on first use."""
        if os.environ.get(SECRET_KEY_ENV):
            return cls()
        path = Path(folder) / KEY_FILE
        try:
            return cls(_key_in(path))
        except FileNotFoundError:
            pass
        # written whole under another name, then linked into place: a reader never sees half a key, and of
        # two processes making it at once, one key wins and both use it
        draft = path.with_name(f"{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(secrets.token_bytes(32))
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(draft, path)
        except FileExistsError:  # another process linked its key first
            pass
        finally:
            draft.unlink(missing_ok=True)
        return cls(_key_in(path))

    def check(self, body: Mapping[str, Any], signature: Any, what: str) -> None:
        """Verify a record sealed with `sign` (its `key` field names the key it was sealed with).

        Raises:
            ScopeKeyElsewhere: it was sealed with another key (another ECHO_TOOLS_SECRET_KEY or store).
            ScopeRestoreError: it was changed since it was sealed (field `scope.seal`).
        """
        if body.get("key") not in (None, self.key_id):
            raise ScopeKeyElsewhere(
                f"{what} was sealed with another key (key {body.get('key')!r}; this process has "
                f"{self.key_id!r}: is ECHO_TOOLS_SECRET_KEY the same in both processes?); it cannot be "
                "checked here",
                field="scope.seal",
            )
        if not self.verify(body, signature):
            raise ScopeRestoreError(
                f"{what} was changed since it was kept (its seal does not match); nothing runs under it",
                field="scope.seal",
            )

    def sign(self, body: Mapping[str, Any]) -> str:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()

    def verify(self, body: Mapping[str, Any], signature: Any) -> bool:
        return isinstance(signature, str) and hmac.compare_digest(self.sign(body), signature)


_PROCESS_KEY = secrets.token_bytes(32)


def _key_in(path: Path) -> bytes:
    """The key kept in `path`: exactly 32 bytes, or ScopeRestoreError naming the file."""
    key = path.read_bytes()
    if len(key) != 32:
        raise ScopeRestoreError(
            f"the seal key file {str(path)!r} holds {len(key)} bytes, not 32: it was damaged; remove it (records "
            "sealed with it can then no longer be restored) or set ECHO_TOOLS_SECRET_KEY",
            field="scope.seal",
        )
    return key


# -- the scope of the work running now --------------------------------------------------------------------

_CURRENT: ContextVar[CallScope | None] = ContextVar("echo_tools_scope", default=None)


def current_scope() -> CallScope | None:
    """The scope of the work running now (None: in-process Python or the CLI outside any request)."""
    return _CURRENT.get()


@contextmanager
def acting_as(
    principal: Principal | CallScope, *, stores: bool = True, meter: BudgetMeter | None = None
) -> Iterator[Principal]:
    """While the block runs (and in the threads it starts with its context), `acting()` is the principal.
    Given a `Principal`, its scope is admitted here (`meter`: the one its calls count against; default a
    fresh one of its budget); given a `CallScope`, that scope. `stores=False` (a compile) makes
    `may_store` False whatever the grants."""
    if isinstance(principal, CallScope):
        scope = principal if stores else replace(principal, stores=False)
    else:
        scope = CallScope.admit(principal, meter=meter, stores=stores)
    token = _CURRENT.set(scope)
    try:
        yield scope.principal
    finally:
        _CURRENT.reset(token)


def acting() -> Principal:
    """The principal a request runs for; the CLI and in-process Python are the `OPERATOR`."""
    found = _CURRENT.get()
    return OPERATOR if found is None else found.principal


def acting_owner() -> str | None:
    """The `owner` to record on what the work running now stores: the acting principal's name, or None
    outside an `acting_as` block (the CLI and in-process Python: the operator's, as before owners)."""
    found = _CURRENT.get()
    return None if found is None else found.principal.name


def may_store(action: str) -> bool:
    """Whether the work running now may store what `action` covers (an MCP server from a canvas entry:
    `mcp`); never during a compile, which stores nothing."""
    found = _CURRENT.get()
    return found is None or (found.stores and found.principal.may(action))


def under_acting(context: ToolContext) -> ToolContext:
    """`context` under the scope of the work running now, for a tool call made by a path that built its own
    context (a LangGraph tool node, `create_agent`'s tools): the same refusals as `/tools/invoke`. A context
    that already names its principal (a route's, a run's) or a call outside any scope is returned as is."""
    found = _CURRENT.get()
    if found is None or context.principal is not None:
        return context
    return found.apply(context)


class ToolOwnedError(ToolError, error_type="owned"):
    """Something another principal owns was to be replaced, removed or reused (HTTP 409 `owned`)."""


def check_owner(owner: str | None, what: str, *, field: str, principal: Principal | None = None) -> None:
    """Raise `ToolOwnedError` naming the owner when `what` (owned by `owner`; None: the operator) is not
    `principal`'s (default: the one acting now) to replace, remove or reuse."""
    who = principal or acting()
    if who.owns(owner):
        return
    raise ToolOwnedError(
        f"{what} is owned by {owner or OPERATOR.name!r}; principal {who.name!r} may not replace, remove or "
        "reuse it (only its owner or an admin may)",
        field=field,
    )
