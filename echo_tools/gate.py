"""The gate: who may do what (`Principal`, `Grants`, actions) and how much (`Budget`, `BudgetMeter`).

Every entry point passes it: an HTTP route declares its action with `Gatekeeper.requires(action)` (a
FastAPI dependency: key -> principal, action checked, 401/403 naming both), and every tool call that
carries a `BudgetMeter` in `ToolContext.budget` is admitted by `admit` (step 2 of the executor) against
the budget shared by the whole request or run, so a fan-out cannot multiply it. The CLI and in-process
Python are the `OPERATOR` principal. No web framework is imported here (`requires` loads FastAPI lazily).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from echo_tools.errors import ToolBudgetError, ToolConfigError, ToolError
from echo_tools.models import ToolPermission

if TYPE_CHECKING:
    from echo_tools.models import ToolContext, ToolDef, ToolResult

__all__ = [
    "ACTIONS",
    "OPERATOR",
    "PUBLIC",
    "READ",
    "Budget",
    "BudgetMeter",
    "Grants",
    "Principal",
    "ToolOwnedError",
    "acting",
    "acting_as",
    "acting_owner",
    "admit",
    "check_owner",
    "hash_key",
    "load_principals",
    "may_store",
    "metered",
    "principals_from",
    "under_acting",
]

ACTIONS = ("invoke", "run", "register", "import", "credentials", "mcp", "history", "approve", "compile")
# not actions of a grant: READ is what every authenticated principal may do (list, show, search, metrics),
# PUBLIC marks the few routes that need no key at all (health)
READ = "read"
PUBLIC = "public"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Budget:
    """What one request or run may spend, in total, through every nested call."""

    max_calls: int = 1000
    max_depth: int = 8
    max_fanout: int = 64  # calls in flight at once below the request's first call
    deadline_s: float = 300.0
    max_output_bytes: int = 64 * MIB
    max_llm_calls: int = 50  # MCP sampling requests
    max_llm_tokens: int = 50_000

    def __post_init__(self) -> None:
        for name in ("max_calls", "max_depth", "max_fanout", "deadline_s", "max_output_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ToolConfigError(f"budget.{name} must be a positive number, got {value!r}", field=name)
        for name in ("max_llm_calls", "max_llm_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ToolConfigError(f"budget.{name} must be an integer >= 0, got {value!r}", field=name)


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


OPERATOR = Principal("operator", Grants(admin=True, act_for_users=True))


def _permission(value: str | ToolPermission) -> ToolPermission:
    try:
        return ToolPermission(value)
    except ValueError as exc:
        known = ", ".join(p.value for p in ToolPermission)
        raise ToolConfigError(
            f"unknown permission {value!r}; the permissions are {known}", field="permissions"
        ) from exc


class BudgetMeter:
    """The running total of one request or run against its `Budget`; shared (and thread-safe) by every
    nested call, so each call, the depth, the calls in flight, the output and MCP sampling all count once."""

    __slots__ = (
        "_lock",
        "budget",
        "calls",
        "deadline",
        "in_flight",
        "llm_calls",
        "llm_tokens",
        "output_bytes",
        "queued",
    )

    def __init__(self, budget: Budget | None = None) -> None:
        self.budget = budget or Budget()
        self.calls = 0
        self.in_flight = 0
        self.queued = 0  # inner calls composite tools have started and not yet seen end (`reserve`)
        self.output_bytes = 0
        self.llm_calls = 0
        self.llm_tokens = 0
        self.deadline = time.monotonic() + self.budget.deadline_s
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"BudgetMeter(calls={self.calls}, in_flight={self.in_flight}, output_bytes={self.output_bytes})"
        )

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def admit(self, tool_id: str, depth: int) -> ToolBudgetError | None:
        """Count one call starting at `depth`; the error naming the limit it would pass, else None."""
        b = self.budget
        with self._lock:
            if self.calls >= b.max_calls:
                return _spent(tool_id, "max_calls", b.max_calls, f"{self.calls} calls were made")
            if depth > b.max_depth:
                return _spent(tool_id, "max_depth", b.max_depth, f"this call is at depth {depth}")
            if depth > 0 and self.in_flight - 1 > b.max_fanout:  # the first call is in flight too
                return _spent(
                    tool_id, "max_fanout", b.max_fanout, f"{self.in_flight - 1} calls are in flight"
                )
            if self.output_bytes >= b.max_output_bytes:
                return _spent(
                    tool_id,
                    "max_output_bytes",
                    b.max_output_bytes,
                    f"{self.output_bytes} bytes were returned",
                )
            if time.monotonic() >= self.deadline:
                return _spent(tool_id, "deadline_s", b.deadline_s, "the request's deadline passed")
            self.calls += 1
        return None

    def reserve(self, tool_id: str) -> ToolBudgetError | None:
        """A composite tool is about to start an inner call: reserve a place among the calls in flight
        (counted from the moment the work is built, not when it starts running), or the error naming the
        limit. Every reservation is given back with `release`."""
        b = self.budget
        with self._lock:
            if self.calls >= b.max_calls:
                return _spent(tool_id, "max_calls", b.max_calls, f"{self.calls} calls were made")
            if self.queued >= b.max_fanout:
                return _spent(
                    tool_id, "max_fanout", b.max_fanout, f"{self.queued} nested calls are in flight"
                )
            self.queued += 1
        return None

    def release(self) -> None:
        with self._lock:
            self.queued -= 1

    def enter(self) -> None:
        with self._lock:
            self.in_flight += 1

    def leave(self, output: Any) -> ToolBudgetError | None:
        """A call ended with `output`: count its size; the error when the total passed the limit."""
        size = _size(output)
        with self._lock:
            self.in_flight -= 1
            self.output_bytes += size
            total = self.output_bytes
        limit = self.budget.max_output_bytes
        if total > limit:
            return _spent(None, "max_output_bytes", limit, f"{total} bytes were returned")
        return None

    def sample(self, tokens: int, prompt_tokens: int = 0) -> ToolBudgetError | None:
        """Count one MCP sampling request: its prompt (`prompt_tokens`, the server's text sent to the model)
        and up to `tokens` tokens of answer; the error when over budget."""
        b = self.budget
        asked = tokens + max(0, prompt_tokens)
        with self._lock:
            if self.llm_calls >= b.max_llm_calls:
                return _spent(
                    None, "max_llm_calls", b.max_llm_calls, f"{self.llm_calls} sampling calls were made"
                )
            if self.llm_tokens + asked > b.max_llm_tokens:
                left = b.max_llm_tokens - self.llm_tokens
                detail = f"{asked} asked ({prompt_tokens} of prompt, {tokens} of answer), {left} left"
                return _spent(None, "max_llm_tokens", b.max_llm_tokens, detail)
            self.llm_calls += 1
            self.llm_tokens += asked
        return None

    def refund_tokens(self, unused: int) -> None:
        """Give back the tokens a sampling answer did not use (it was counted at its `maxTokens`)."""
        if unused > 0:
            with self._lock:
                self.llm_tokens = max(0, self.llm_tokens - unused)


def estimate_tokens(text: str) -> int:
    """The tokens a model counts in `text`, estimated without its tokenizer: one per 4 bytes of UTF-8 (about
    a word piece of English; more for other scripts, whose characters take more bytes)."""
    return -(-len(text.encode("utf-8")) // 4)


def _spent(tool_id: str | None, limit: str, value: float, detail: str) -> ToolBudgetError:
    what = f"Tool {tool_id!r} refused" if tool_id else "Refused"
    return ToolBudgetError(
        f"{what}: the request's budget {limit}={value!r} is exhausted ({detail}); "
        "ask the operator for a larger budget or split the work",
        tool_id=tool_id,
        field=f"budget.{limit}",
    )


def _size(output: Any) -> int:
    if output is None or isinstance(output, bool):
        return 0
    if isinstance(output, (str, bytes)):
        return len(output)
    if isinstance(output, (int, float)):
        return 8
    try:
        return len(json.dumps(output, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return len(repr(output))


# -- the executor's side: one call at step 2, one wrapper around the pipeline -----------------------------


def admit(tool: ToolDef, context: ToolContext) -> ToolBudgetError | None:
    """Step 2 of the executor, for a context that carries a meter: the call counts against the budget."""
    meter = context.budget
    if meter is None:
        return None
    return meter.admit(tool.tool_id, context.depth)  # type: ignore[no-any-return]


async def metered(call: Coroutine[Any, Any, ToolResult], context: ToolContext) -> ToolResult:
    """Await one pipeline run with the context's meter counting it in flight and its output; a result
    whose output passes the budget's byte limit becomes a `budget` failure. Never suspends on its own,
    so the executor's synchronous driver can run it too."""
    meter: BudgetMeter = context.budget
    meter.enter()
    output: Any = None
    try:
        result = await call
        output = result.output
    finally:
        over = meter.leave(output)
    if over is not None and result.success:
        return result.model_copy(
            update={
                "success": False,
                "output": None,
                "error": over.message,
                "error_type": "budget",
                "error_field": over.field,
            }
        )
    return result


# -- who is acting in this thread of work (what a library call deep inside a request asks) ----------------


@dataclass(frozen=True)
class _Acting:
    principal: Principal
    stores: bool
    meter: BudgetMeter


_ACTING: ContextVar[_Acting | None] = ContextVar("echo_tools_acting", default=None)


@contextmanager
def acting_as(
    principal: Principal, *, stores: bool = True, meter: BudgetMeter | None = None
) -> Iterator[Principal]:
    """While the block runs (and in the threads it starts with its context), `acting()` is `principal`;
    `stores=False` (a compile) makes `may_store` False whatever the grants. `meter` (default: a fresh one
    of the principal's budget) is what every tool call made under the block without a meter of its own
    counts against (`under_acting`)."""
    token = _ACTING.set(_Acting(principal, stores, meter or principal.meter()))
    try:
        yield principal
    finally:
        _ACTING.reset(token)


def acting() -> Principal:
    """The principal a request runs for; the CLI and in-process Python are the `OPERATOR`."""
    found = _ACTING.get()
    return OPERATOR if found is None else found.principal


def acting_owner() -> str | None:
    """The `owner` to record on what the work running now stores: the acting principal's name, or None
    outside an `acting_as` block (the CLI and in-process Python: the operator's, as before owners)."""
    found = _ACTING.get()
    return None if found is None else found.principal.name


def may_store(action: str) -> bool:
    """Whether the work running now may store what `action` covers (an MCP server from a canvas entry:
    `mcp`); never during a compile, which stores nothing."""
    found = _ACTING.get()
    return found is None or (found.stores and found.principal.may(action))


def under_acting(context: ToolContext) -> ToolContext:
    """`context` with the acting principal's ceiling, budget meter, name and end user, for a tool call made
    under `acting_as` by a path that built its own context (a LangGraph tool node, `create_agent`'s tools):
    the same refusals as `/tools/invoke`. A context that already names its principal (a route's, a run's)
    or a call outside any `acting_as` block is returned as is."""
    found = _ACTING.get()
    if found is None or context.principal is not None:
        return context
    principal = found.principal
    granted = principal.grants.permissions
    asked = context.granted_permissions
    if granted is None:
        ceiling = asked
    else:
        ceiling = list(granted) if asked is None else [p for p in asked if p in granted]
    return context.model_copy(
        update={
            "granted_permissions": ceiling,
            "budget": context.budget if context.budget is not None else found.meter,
            "principal": principal.name,
            "user_id": context.user_id or principal.user_id,
        }
    )


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
