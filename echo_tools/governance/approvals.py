"""Approvals: a call that waits for a person before it runs, and runs exactly once when approved.

Which calls: `ToolDef.approval` is `never` (default), `always`, or `external` (when the tool's
`side_effect` is `external`); `ToolExecutor(approval_policy=fn)` may decide per call (`fn(call)` returns
True, False, or None to leave it to the tool).

Outside a graph, the call does not run: its result has `error_type="approval_required"` and
`metadata["approval_id"]`; `executor.decide(approval_id, "approve" | "reject" | "edit", args=...)` (or
`POST /tools/approvals/{id}`, `echo-tools approvals approve ID`) decides it, and an approved call runs
then. Inside a graph node that can pause (CrewAI agent nodes of a canvas run, `ExecutorToolNode`, our
tools under LangChain's `create_agent`), the call pauses the run with a LangGraph `interrupt` carrying
`{type: "tool_approval", approval_id, tool, args, agent_name}`; the run resumes with the decision.

Exactly once: every approval is a row of an `ApprovalStore` (in memory, the history's SQLite file, or
PostgreSQL). Deciding moves it from `pending` in one conditional update (a second decision finds it
decided: 409); running moves it from `approved` to `running` the same way, so only one process, one
retry or one resume runs it; the result is kept with it (`done`), and a call that finds its approval
done gets that result back instead of running again. The approval id is the call's idempotency key.

What the reviewer approved: a record keeps the digest of the tool's definition and the sealed scope of the
call that asked (its principal, end user, ceiling and budget totals, `echo_tools.gate.CallScope`). An
approved call runs with that scope, never the decider's; a definition that changed since voids the
approval (`void`). A pending approval expires after its tool's `approval_ttl_s` (`expired`), and a
principal has at most `MAX_PENDING` pending approvals at once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sqlite3
import threading
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from echo_tools.errors import ScopeRestoreError, ToolError
from echo_tools.gate import Seal
from echo_tools.models import Approval, SideEffect, ToolDef

__all__ = [
    "DECISIONS",
    "MAX_PENDING",
    "ApprovalDecisionError",
    "ApprovalRecord",
    "ApprovalStore",
    "MemoryApprovalStore",
    "SqliteApprovalStore",
    "check_record",
    "needs_approval",
    "seal_record",
]

DECISIONS = ("approve", "reject", "edit")
PENDING, APPROVED, REJECTED, RUNNING, DONE = "pending", "approved", "rejected", "running", "done"
VOID, EXPIRED = "void", "expired"  # the definition changed before it ran; nobody decided in time
STATUSES = (PENDING, APPROVED, REJECTED, RUNNING, DONE, VOID, EXPIRED)
MAX_PENDING = 100  # pending approvals of one principal at once: one key cannot bury everyone else's

ApprovalPolicy = Callable[[Any], "bool | None"]


class ApprovalDecisionError(ToolError, error_type="validation"):
    """A decision that cannot be taken: `status` is what the HTTP API answers (404 unknown or foreign
    approval, 409 already decided, 422 a bad decision or edit arguments that do not validate)."""

    def __init__(self, message: str, *, status: int, field: str, approval_id: str) -> None:
        super().__init__(message, field=field)
        self.status = status
        self.approval_id = approval_id


def now_text(after_s: float = 0.0) -> str:
    """The time now (plus `after_s` seconds), UTC, ISO 8601 with `Z`: the form records keep and compare."""
    moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=after_s)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class ApprovalRecord:
    """One call waiting for (or past) a decision. `kind` is `call` (decided and run by `decide`) or `run`
    (a paused graph run, carried on by resuming it)."""

    approval_id: str
    tool_id: str
    tool_name: str
    args: dict[str, Any]
    context: dict[str, Any]
    kind: str = "call"
    status: str = PENDING
    owner: str | None = None
    created_at: str = field(default_factory=now_text)
    decided_at: str | None = None
    decided_by: str | None = None
    decision: str | None = None
    comment: str | None = None
    result: dict[str, Any] | None = None
    digest: str | None = None  # of the tool's definition when it was asked (`ToolDef.digest`)
    scope: dict[str, Any] | None = field(default=None, repr=False)  # the sealed `CallScope.to_record()`
    expires_at: str | None = None  # a pending approval past this is `expired`
    note: str | None = None  # why an approved call waits for another process to run it
    seal: str | None = field(default=None, repr=False)  # `<key id>:<HMAC>` of what was asked (`seal_record`)

    def expired(self, now: str | None = None) -> bool:
        """Whether this pending approval is past its `expires_at`."""
        return (
            self.status == PENDING and self.expires_at is not None and self.expires_at <= (now or now_text())
        )

    @property
    def run_id(self) -> str | None:
        value = self.context.get("run_id")
        return value if isinstance(value, str) else None

    @property
    def agent_name(self) -> str | None:
        value = self.context.get("agent_name")
        return value if isinstance(value, str) else None

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON (what `GET /tools/approvals` lists); the context is reduced to its ids, the
        kept scope to who asked and for which user."""
        data = asdict(self)
        if self.expired():
            data["status"] = EXPIRED
        scope = data.pop("scope", None) or {}
        data["user_id"] = scope.get("user_id") or self.context.get("user_id")
        data["context"] = {k: v for k, v in self.context.items() if k in _SHOWN_CONTEXT and v is not None}
        data["run_id"], data["agent_name"] = self.run_id, self.agent_name
        return data

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_json(cls, text: str | bytes | dict[str, Any]) -> ApprovalRecord:
        data = text if isinstance(text, dict) else json.loads(text)
        return cls(**{k: v for k, v in data.items() if k in _FIELDS})


_FIELDS = frozenset(ApprovalRecord.__dataclass_fields__)
_SHOWN_CONTEXT = ("agent_id", "agent_name", "workflow_id", "run_id", "node_id", "tool_call_id", "user_id")


def _sealed(record: ApprovalRecord) -> dict[str, Any]:
    """What an approval's seal covers: which call (tool, arguments, the definition's digest), asked by
    whom (owner, end user, the sealed scope), as what (a call, or a paused run's)."""
    return {
        "approval_id": record.approval_id,
        "tool_id": record.tool_id,
        "kind": record.kind,
        "args": record.args,
        "digest": record.digest,
        "scope": record.scope,
        "owner": record.owner,
        "user_id": record.context.get("user_id"),
        "run_id": record.run_id,
    }


def seal_record(record: ApprovalRecord, seal: Seal) -> None:
    """Seal what the record asks (after it is made, and after an edit decision changed its arguments)."""
    body = {**_sealed(record), "key": seal.key_id}
    record.seal = f"{seal.key_id}:{seal.sign(body)}"


def check_record(record: ApprovalRecord, seal: Seal) -> None:
    """Verify that the record asks what was sealed.

    Raises:
        ScopeKeyElsewhere: it was sealed with another key: it cannot be checked in this process.
        ScopeRestoreError: it carries no seal (kept before seals were, or the seal removed) or was changed.
    """
    what = f"approval {record.approval_id!r}"
    if not record.seal or ":" not in record.seal:
        raise ScopeRestoreError(
            f"{what} is kept without a seal (asked before this version, or its seal removed): nothing runs "
            "under it; ask for the call again",
            field="scope.seal",
        )
    key, _, mac = record.seal.partition(":")
    seal.check({**_sealed(record), "key": key}, mac, what)


def needs_approval(tool: ToolDef, call: Any, policy: ApprovalPolicy | None) -> bool:
    """Whether `call` of `tool` waits for a person: the executor's policy first, else the tool's setting."""
    if policy is not None:
        verdict = policy(call)
        if verdict is not None:
            return bool(verdict)
    if tool.approval is Approval.ALWAYS:
        return True
    return tool.approval is Approval.EXTERNAL and tool.side_effect is SideEffect.EXTERNAL


def graph_approval_id(thread: str, task: str, tool_call_id: str | None, tool_id: str, args: Any) -> str:
    """The id of a call's approval inside a graph run: the same when the paused node runs again on resume
    (the run, the node's task, the call's id or else its tool and arguments), so it is found again."""
    text = json.dumps([thread, task, tool_call_id or "", tool_id, args], sort_keys=True, default=str)
    return "apr_" + hashlib.sha256(text.encode()).hexdigest()[:24]


def new_approval_id() -> str:
    return "apr_" + uuid.uuid4().hex[:24]


class ApprovalStore(Protocol):
    """Where approvals live. Every change of status is one conditional step (`decide`, `claim`, `void`), so
    two processes deciding or running the same approval cannot both succeed. A pending approval past its
    `expires_at` is expired: no step moves it, and the listings leave it out."""

    blocking: bool
    seal: Seal  # what seals the scopes its records keep

    def add(self, record: ApprovalRecord) -> ApprovalRecord:
        """Keep `record` unless one with its id exists; returns the stored one."""

    def get(self, approval_id: str) -> ApprovalRecord | None: ...

    def pending(
        self, limit: int = 100, *, owner: str | None = None, every_owner: bool = True
    ) -> list[ApprovalRecord]:
        """The oldest pending approvals, at most `limit`: of every owner, or (`every_owner=False`) only of
        `owner` (None: the operator's), filtered before the limit is applied."""

    def pending_count(self, owner: str | None) -> int:
        """How many approvals of `owner` are pending now."""

    def decide(self, record: ApprovalRecord) -> bool:
        """Store `record` (decided) if its stored copy is still pending; False when it was not."""

    def claim(self, approval_id: str) -> bool:
        """Move an approved approval to running; False when it is not (already run, or running)."""

    def void(self, approval_id: str, reason: str) -> bool:
        """Move a pending or approved approval to `void` (it will never run), keeping `reason`."""

    def finish(self, approval_id: str, result: dict[str, Any]) -> None:
        """Keep the result of the call that ran under `approval_id` (status `done`)."""


def _copy(record: ApprovalRecord) -> ApprovalRecord:
    copied = ApprovalRecord(**asdict(record))
    if copied.expired():
        copied.status = EXPIRED
    return copied


class MemoryApprovalStore:
    """Approvals of this process only (the default of a `ToolExecutor`)."""

    blocking = False

    def __init__(self) -> None:
        self._records: dict[str, ApprovalRecord] = {}
        self._lock = threading.Lock()
        self.seal = Seal()

    def add(self, record: ApprovalRecord) -> ApprovalRecord:
        with self._lock:
            return _copy(self._records.setdefault(record.approval_id, record))

    def get(self, approval_id: str) -> ApprovalRecord | None:
        with self._lock:
            found = self._records.get(approval_id)
            return _copy(found) if found is not None else None

    def pending(
        self, limit: int = 100, *, owner: str | None = None, every_owner: bool = True
    ) -> list[ApprovalRecord]:
        now = now_text()
        with self._lock:
            found = [
                _copy(r)
                for r in self._records.values()
                if r.status == PENDING and not r.expired(now) and (every_owner or r.owner == owner)
            ]
        return found[:limit]

    def pending_count(self, owner: str | None) -> int:
        return len(self.pending(MAX_PENDING + 1, owner=owner, every_owner=False))

    def decide(self, record: ApprovalRecord) -> bool:
        return self._move(record.approval_id, (PENDING,), record)

    def claim(self, approval_id: str) -> bool:
        return self._move(approval_id, (APPROVED,), None, RUNNING)

    def void(self, approval_id: str, reason: str) -> bool:
        with self._lock:
            found = self._records.get(approval_id)
            if found is None or found.status not in (PENDING, APPROVED):
                return False
            found.status, found.comment = VOID, reason
            return True

    def finish(self, approval_id: str, result: dict[str, Any]) -> None:
        with self._lock:
            found = self._records.get(approval_id)
            if found is not None:
                found.status, found.result = DONE, result

    def _move(
        self, approval_id: str, old: tuple[str, ...], record: ApprovalRecord | None, new: str = ""
    ) -> bool:
        with self._lock:
            found = self._records.get(approval_id)
            if found is None or found.status not in old or found.expired():
                return False
            if record is not None:
                self._records[approval_id] = ApprovalRecord(**asdict(record))
            else:
                found.status = new
            return True


class SqlApprovalStore:
    """The SQL both database stores share: one `approvals` row per approval, its record as JSON, its owner
    and expiry in columns of their own so that listings filter before they limit."""

    blocking = True
    table = "echo_approvals"
    mark = "%s"
    seal: Seal

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _change(self, sql: str, params: tuple[Any, ...]) -> int:
        raise NotImplementedError

    def add(self, record: ApprovalRecord) -> ApprovalRecord:
        m = self.mark
        self._change(
            f"INSERT INTO {self.table} (approval_id, status, run_id, created, record, owner, expires) "
            f"VALUES ({m}, {m}, {m}, {m}, {m}, {m}, {m}) ON CONFLICT (approval_id) DO NOTHING",
            (
                record.approval_id,
                record.status,
                record.run_id,
                record.created_at,
                record.to_json(),
                record.owner,
                record.expires_at,
            ),
        )
        stored = self.get(record.approval_id)
        assert stored is not None
        return stored

    def get(self, approval_id: str) -> ApprovalRecord | None:
        rows = self._rows(
            f"SELECT record, status FROM {self.table} WHERE approval_id = {self.mark}", (approval_id,)
        )
        return self._record(rows[0]) if rows else None

    def _record(self, row: tuple[Any, ...]) -> ApprovalRecord:
        record = ApprovalRecord.from_json(row[0])
        record.status = row[1]  # the column is what the conditional steps move
        if record.expired():
            record.status = EXPIRED
        return record

    def pending(
        self, limit: int = 100, *, owner: str | None = None, every_owner: bool = True
    ) -> list[ApprovalRecord]:
        m = self.mark
        where, params = self._live()
        if not every_owner:
            where += " AND owner IS NULL" if owner is None else f" AND owner = {m}"
            params += () if owner is None else (owner,)
        rows = self._rows(
            f"SELECT record, status FROM {self.table} WHERE {where} ORDER BY created, approval_id LIMIT {m}",
            (*params, limit),
        )
        return [self._record(r) for r in rows]

    def pending_count(self, owner: str | None) -> int:
        where, params = self._live()
        where += " AND owner IS NULL" if owner is None else f" AND owner = {self.mark}"
        rows = self._rows(
            f"SELECT count(*) FROM {self.table} WHERE {where}",
            (*params, *(() if owner is None else (owner,))),
        )
        return int(rows[0][0])

    def _live(self) -> tuple[str, tuple[Any, ...]]:
        """The condition of a pending approval that has not expired, and its parameters."""
        m = self.mark
        return f"status = {m} AND (expires IS NULL OR expires > {m})", (PENDING, now_text())

    def decide(self, record: ApprovalRecord) -> bool:
        m = self.mark
        live, params = self._live()
        changed = self._change(
            f"UPDATE {self.table} SET status = {m}, record = {m} WHERE approval_id = {m} AND {live}",
            (record.status, record.to_json(), record.approval_id, *params),
        )
        return changed == 1

    def claim(self, approval_id: str) -> bool:
        m = self.mark
        changed = self._change(
            f"UPDATE {self.table} SET status = {m} WHERE approval_id = {m} AND status = {m}",
            (RUNNING, approval_id, APPROVED),
        )
        return changed == 1

    def void(self, approval_id: str, reason: str) -> bool:
        record = self.get(approval_id)
        if record is None or record.status not in (PENDING, APPROVED):
            return False
        record.status, record.comment = VOID, reason
        m = self.mark
        changed = self._change(
            f"UPDATE {self.table} SET status = {m}, record = {m} WHERE approval_id = {m} "
            f"AND status IN ({m}, {m})",
            (VOID, record.to_json(), approval_id, PENDING, APPROVED),
        )
        return changed == 1

    def finish(self, approval_id: str, result: dict[str, Any]) -> None:
        record = self.get(approval_id)
        if record is None:
            return
        record.status, record.result = DONE, result
        m = self.mark
        self._change(
            f"UPDATE {self.table} SET status = {m}, record = {m} WHERE approval_id = {m}",
            (DONE, record.to_json(), approval_id),
        )


TABLE_SQL = """CREATE TABLE IF NOT EXISTS {table} (
    approval_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    run_id TEXT,
    created TEXT NOT NULL,
    record TEXT NOT NULL
)"""
# added since: an approval's owner and expiry as columns, filled from the record for rows kept before
SQLITE_UPGRADES = (
    "ALTER TABLE {table} ADD COLUMN owner TEXT",
    "ALTER TABLE {table} ADD COLUMN expires TEXT",
    "UPDATE {table} SET owner = json_extract(record, '$.owner') WHERE owner IS NULL",
    "CREATE INDEX IF NOT EXISTS {table}_pending ON {table} (status, owner, created)",
)


class SqliteApprovalStore(SqlApprovalStore):
    """Approvals in the embedded run history's file (`<storage>/runs.sqlite`), shared by every process on
    the storage folder: `echo-tools approvals approve` decides what a paused `echo-tools run` asked.

    Args:
        path: the history file, or the storage folder holding `runs.sqlite`.
    """

    mark = "?"

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        self.path = path if path.suffix and not path.is_dir() else path / "runs.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(TABLE_SQL.format(table=self.table))
        for statement in SQLITE_UPGRADES:
            try:
                self._db.execute(statement.format(table=self.table))
            except sqlite3.OperationalError as exc:  # a column added by an earlier start
                if "duplicate column" not in str(exc):
                    raise
        self.seal = Seal.in_folder(self.path.parent)

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def _change(self, sql: str, params: tuple[Any, ...]) -> int:
        with self._lock:
            return self._db.execute(sql, params).rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()
