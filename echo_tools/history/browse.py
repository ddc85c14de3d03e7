"""What the run viewer (`/ui/`) asks a run history: a page of runs, one run's events, the runs that changed.

`RunBrowser` (a history's `browser`) holds the queries, written once for SQLite and PostgreSQL with `?`
placeholders and `{events}` / `{runs}` tables, and answers plain dicts.
The runs table is the list (recorded workflow runs: `echo-tools run`, `POST /workflows/run`, EchoAI);
a run's events include those of its nested sub-runs (`RUN_ID/<tool>/<hex>`, made by workflow and agent
tools). `INDEXES` keeps every query an index lookup: a page of runs, one run's events and the runs
changed since a moment each read only what they answer, whatever the size of the history.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("echo_tools.history")

Read = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
Change = Callable[[str], object]

# made on first use by the viewer's queries (`IF NOT EXISTS`: any history, any schema version)
INDEXES = (
    "CREATE INDEX IF NOT EXISTS {runs}_created ON {runs} (created, run_id)",
    "CREATE INDEX IF NOT EXISTS {runs}_updated ON {runs} (updated)",
    "CREATE INDEX IF NOT EXISTS {events}_run_agent ON {events} (run_id, agent_id, type)",
)
PAGE_DEFAULT = 50
PAGE_MAX = 200
EVENTS_MAX = 20_000  # events of one run answered at most (a run of 10,000 calls)
CHANGES_MAX = 200
RARE_AGENT_EVENTS = 2_000  # an agent with fewer events is filtered through its own index
_RUN_KEYS = ("run_id", "workflow_id", "status", "error", "created", "updated")
_FAILED = ("tool.failed", "tool.timeout")


def check_page_limit(limit: int) -> int:
    """`limit` when it is within 1..200, else `ValueError` naming it."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= PAGE_MAX:
        raise ValueError(f"limit must be an integer from 1 to {PAGE_MAX}, got {limit!r}")
    return limit


def encode_cursor(created: str, run_id: str) -> str:
    """The `before` cursor of the page after the run (`created`, `run_id`)."""
    return json.dumps([created, run_id], separators=(",", ":"))


def decode_cursor(before: str) -> tuple[str, str]:
    """A `before` cursor read back, or `ValueError` naming it."""
    try:
        created, run_id = json.loads(before)
        if isinstance(created, str) and isinstance(run_id, str):
            return created, run_id
    except (TypeError, ValueError):
        pass
    raise ValueError(f"before must be the 'next' cursor of a runs page, got {before[:80]!r}")


def json_text(column: str, key: str, postgres: bool) -> str:
    """The SQL of the text value of `key` in the JSON object a text column holds (None when absent)."""
    return f"({column}::json ->> '{key}')" if postgres else f"json_extract({column}, '$.{key}')"


def owner_clause(postgres: bool) -> str:
    """The WHERE clause matching the runs of one owner (`?`; a run recorded before owners: the operator's)."""
    return f"COALESCE({json_text('source', 'owner', postgres)}, 'operator') = ?"


def nested_clause(run_id: str, postgres: bool) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause matching a run's events and its sub-runs' (`RUN_ID/...`), index-friendly."""
    if postgres:  # LIKE: a text range would follow the database's collation, not the bytes
        pattern = run_id.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "/%"
        return "(run_id = ? OR run_id LIKE ? ESCAPE '!')", (run_id, pattern)
    return "(run_id = ? OR (run_id > ? AND run_id < ?))", (run_id, run_id + "/", run_id + "0")


class RunBrowser:
    """The viewer's queries on one history.

    Args:
        read: the history's read (`HistoryQueries._read`: waits for this process's queued events first).
        change: runs one statement (`{events}` / `{runs}` names) in its own transaction.
        postgres: the history is PostgreSQL's (`nested_clause` differs).
    """

    def __init__(self, read: Read, change: Change, *, postgres: bool = False) -> None:
        self.read = read
        self.postgres = postgres
        for statement in INDEXES:
            try:
                change(statement)
            except Exception as exc:  # boundary: without its index a query is slower, never wrong
                logger.warning("run history: index for the run viewer not made (%s): %s", statement, exc)

    def run_page(
        self,
        *,
        status: str | None = None,
        workflow_id: str | None = None,
        agent_id: str | None = None,
        before: str | None = None,
        limit: int = PAGE_DEFAULT,
        owner: str | None = None,
    ) -> dict[str, Any]:
        """`{"runs": [...], "next": cursor | None, "total": n}`: the recorded runs matching every filter
        (`owner`: the runs that principal started), newest first, `limit` of them after the `before`
        cursor, each with its calls, failures and agents (`total` is None when an `agent_id` filter names
        an agent of many events).

        Raises:
            ValueError: `limit` or `before` is out of range or malformed (the message names it).
        """
        check_page_limit(limit)
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("status", status), ("workflow_id", workflow_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if owner is not None:
            clauses.append(owner_clause(self.postgres))
            params.append(owner)
        rare = agent_id is not None and self._few_events_of(agent_id)
        if agent_id is not None:
            # an agent of few events: its runs, found by the agent's index; else each run is asked in
            # turn (newest first), which fills a page quickly when the agent is common
            clauses.append(
                "run_id IN (SELECT run_id FROM {events} WHERE agent_id = ?)"
                if rare
                else "EXISTS (SELECT 1 FROM {events} e WHERE e.run_id = {runs}.run_id AND e.agent_id = ?)"
            )
            params.append(agent_id)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        total = None  # counting a common agent's runs would probe every run: the page says "more" instead
        if agent_id is None or rare:
            total = int(self.read(f"SELECT COUNT(*) FROM {{runs}} {where}", tuple(params))[0][0])
        if before is not None:
            created, after_id = decode_cursor(before)
            clauses.append("(created < ? OR (created = ? AND run_id < ?))")
            params += [created, created, after_id]
            where = f"WHERE {' AND '.join(clauses)}"
        rows = self.read(
            f"SELECT {', '.join(_RUN_KEYS)} FROM {{runs}} {where} ORDER BY created DESC, run_id DESC LIMIT ?",
            (*params, limit + 1),
        )
        runs = [dict(zip(_RUN_KEYS, row, strict=True)) for row in rows[:limit]]
        self._add_call_counts(runs)
        last = runs[-1] if len(rows) > limit else None
        return {
            "runs": runs,
            "next": encode_cursor(last["created"], last["run_id"]) if last else None,
            "total": total,
        }

    def _few_events_of(self, agent_id: str) -> bool:
        """True when the agent made fewer than `RARE_AGENT_EVENTS` events (read from its index only)."""
        rows = self.read(
            "SELECT COUNT(*) FROM (SELECT 1 FROM {events} WHERE agent_id = ? LIMIT ?) few",
            (agent_id, RARE_AGENT_EVENTS),
        )
        return int(rows[0][0]) < RARE_AGENT_EVENTS

    def _add_call_counts(self, runs: list[dict[str, Any]]) -> None:
        """Each run's `calls`, `failed` and `agents` (`[{agent_id, agent_name}]`), from the events index."""
        first_seq: dict[int, list[dict[str, Any]]] = {}
        for run in runs:
            clause, params = nested_clause(run["run_id"], self.postgres)
            rows = self.read(
                f"SELECT agent_id, type, COUNT(*), MIN(seq) FROM {{events}} WHERE {clause}"
                " GROUP BY agent_id, type",
                params,
            )
            run["calls"] = sum(int(n) for _, kind, n, _ in rows if kind == "tool.invoked")
            run["failed"] = sum(int(n) for _, kind, n, _ in rows if kind in _FAILED)
            agents: dict[str, dict[str, Any]] = {}
            for agent, _, _, seq in rows:
                if agent is not None and (agent not in agents or seq < agents[agent]["seq"]):
                    agents[agent] = {"agent_id": agent, "agent_name": None, "seq": seq}
            run["agents"] = list(agents.values())
            for entry in run["agents"]:
                first_seq.setdefault(entry["seq"], []).append(entry)
        if first_seq:  # the canvas names travel in the event bodies: one read for the whole page
            marks = ", ".join("?" * len(first_seq))
            rows = self.read(f"SELECT seq, body FROM {{events}} WHERE seq IN ({marks})", tuple(first_seq))
            for seq, body in rows:
                name = json.loads(body).get("agent_name")
                for entry in first_seq.get(seq, []):
                    entry["agent_name"] = name if isinstance(name, str) else None
        for run in runs:
            for entry in run["agents"]:
                del entry["seq"]

    def run_record(self, run_id: str) -> dict[str, Any] | None:
        """The recorded run without its source (`run_id`, `workflow_id`, `status`, `error`, `created`,
        `updated`), or None."""
        rows = self.read(f"SELECT {', '.join(_RUN_KEYS)} FROM {{runs}} WHERE run_id = ?", (run_id,))
        return dict(zip(_RUN_KEYS, rows[0], strict=True)) if rows else None

    def run_events_json(self, run_id: str) -> tuple[list[str], bool]:
        """The kept events of a run and its sub-runs as stored (JSON text, oldest first, at most
        `EVENTS_MAX`), and whether there were more."""
        clause, params = nested_clause(run_id, self.postgres)
        rows = self.read(
            f"SELECT body FROM {{events}} WHERE {clause} ORDER BY seq LIMIT ?", (*params, EVENTS_MAX + 1)
        )
        return [body for (body,) in rows[:EVENTS_MAX]], len(rows) > EVENTS_MAX

    def runs_changed(self, since: str, owner: str | None = None) -> list[dict[str, Any]]:
        """The recorded runs (of `owner` only, when given) updated after `since` (a timestamp), oldest
        change first (at most 200)."""
        mine = f" AND {owner_clause(self.postgres)}" if owner is not None else ""
        rows = self.read(
            f"SELECT {', '.join(_RUN_KEYS)} FROM {{runs}} WHERE updated > ?{mine} ORDER BY updated LIMIT ?",
            (since, *((owner,) if owner is not None else ()), CHANGES_MAX),
        )
        return [dict(zip(_RUN_KEYS, row, strict=True)) for row in rows]
