"""PgToolStorage: the tool catalogue in PostgreSQL, with the public behaviour the registry uses.

A `ToolStore` (echo_tools.store) like the folder's `ToolStorage`, so `ToolRegistry(storage=PgToolStorage(dsn))`
needs no other change; its MCP configs and secrets are tables of the same database.
Every write is one transaction that also bumps `echo_catalogue.version` and sends a NOTIFY; names are
unique through `echo_tool_keys`'s primary key, so two replicas racing for one name cannot both win. A row
that is not a valid tool is reported as a `Problem`, never fatal.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from pydantic import ValidationError

from echo_tools.errors import ToolNameConflictError, ToolStorageError
from echo_tools.models import ToolDef
from echo_tools.pg.database import PgDatabase, open_database
from echo_tools.pg.listener import PgListener
from echo_tools.pg.stores import PgMcpConfigStore, PgSecretStore
from echo_tools.storage import (
    Guard,
    Problem,
    describe_validation_error,
    separate_problems,
    storable_tool_id,
)

logger = logging.getLogger("echo_tools.pg")

CHANNEL = "echo_catalogue"


class PgToolStorage:
    """The catalogue in PostgreSQL, shared by every replica on the database.

    Args:
        database: a DSN (a pool is opened and closed with this object) or a shared `PgDatabase`.
        listen: hear other replicas' writes through LISTEN/NOTIFY (off: `changed_elsewhere` asks the
            database each time).
    """

    stale_temp_files = 0  # the registry asks; a database leaves no temp files

    def __init__(self, database: str | PgDatabase, *, listen: bool = True) -> None:
        self.db, self._owns_db = open_database(database)
        self.directory: Path | None = None  # not a folder: MCP configs and secrets are tables
        self.origin = uuid.uuid4().hex  # our own NOTIFYs carry it, so we skip them
        self.mcp_configs = PgMcpConfigStore(self.db)
        self.secrets = PgSecretStore(self.db)
        self._known_version: int | None = None
        self._changed = False
        self._state_lock = threading.Lock()
        self._subscribers: list[Callable[[], None]] = []
        self._listener: PgListener | None = None
        if listen:
            self._listener = PgListener(self.db.dsn, [CHANNEL], self._heard, self._reconnected).start()

    # -- change detection ----------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (on the listener's thread) each time another writer changes the catalogue.

        `storage.subscribe(registry.reload)` keeps a replica's catalogue fresh without waiting for a miss.
        """
        self._subscribers.append(callback)

    def _heard(self, channel: str, payload: str) -> None:
        try:
            origin = json.loads(payload).get("origin")
        except (ValueError, AttributeError):
            origin = None
        if origin == self.origin:
            return
        self._mark_changed()

    def _reconnected(self) -> None:
        self._mark_changed()  # notifications sent while we were away are lost: assume a change

    def _mark_changed(self) -> None:
        with self._state_lock:
            self._changed = True
        for callback in list(self._subscribers):
            callback()

    def signature(self) -> int | None:
        """The catalogue's change counter (bumped by every write on any replica)."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT version FROM echo_catalogue WHERE id = 1").fetchone()
        return int(row[0]) if row else None

    def changed_elsewhere(self) -> bool:
        """True when another writer changed the catalogue since we last read it.

        With the listener connected this reads a flag; otherwise it asks the database, and an unreachable
        database answers False (the cached catalogue stays usable until it is back).
        """
        if self._changed:
            return True
        if self._listener is not None and self._listener.connected.is_set():
            return False
        try:
            return self.signature() != self._known_version
        except ToolStorageError:
            return False

    # -- paths (the registry names problems by them) -------------------------------------------------

    def location(self, tool_id: str) -> str:
        """Where the tool's row is, as problems name it: `postgresql:echo_tools/<id>`."""
        return f"postgresql:echo_tools/{storable_tool_id(tool_id)}"

    def contains(self, tool_id: str) -> bool:
        """True when a row for `tool_id` is stored."""
        with self.db.connection() as conn:
            return (
                conn.execute("SELECT 1 FROM echo_tools WHERE tool_id = %s", (tool_id,)).fetchone() is not None
            )

    def index_matches(self, tool_ids: Iterable[str]) -> bool:
        return True  # the table is its own index

    def repair_index(self) -> bool:
        return False

    # -- writes --------------------------------------------------------------------------------------

    def save(self, tool: ToolDef, *, check_names: bool = True, replaces: Guard | None = None) -> bool:
        """Store one tool in a transaction; False when the stored copy was already identical.

        `replaces` (as `ToolStorage.save`) is called with the stored copy, under its row lock, before
        anything is written; it raises to refuse (a `remote` write over a shipped tool).

        Raises:
            ToolNameConflictError: `check_names` and another stored tool has one of its lookup keys (its
                name compared case-insensitively and after slugging, or its id).
            ToolStorageError: the database cannot be reached or refused the write.
        """
        storable_tool_id(tool.tool_id)
        data = tool.to_storage_dict()
        keys = sorted(tool.lookup_keys() | {tool.tool_id})
        try:
            with self.db.transaction() as conn:
                row = conn.execute(
                    "SELECT body FROM echo_tools WHERE tool_id = %s FOR UPDATE", (tool.tool_id,)
                ).fetchone()
                if row is not None and replaces is not None:
                    self._guard(tool.tool_id, row[0], replaces)
                if row is not None and row[0] == data:
                    return False
                conn.execute(
                    "INSERT INTO echo_tools (tool_id, name, body, saved_at) VALUES (%s, %s, %s, now())"
                    " ON CONFLICT (tool_id) DO UPDATE SET name = excluded.name, body = excluded.body,"
                    " saved_at = excluded.saved_at",
                    (tool.tool_id, tool.name, psycopg.types.json.Jsonb(data)),
                )
                conn.execute("DELETE FROM echo_tool_keys WHERE tool_id = %s", (tool.tool_id,))
                on_clash = "" if check_names else " ON CONFLICT (key) DO NOTHING"
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO echo_tool_keys (key, tool_id) VALUES (%s, %s){on_clash}",
                        [(key, tool.tool_id) for key in keys],
                    )
                self._bump(conn, tool.tool_id)
        except psycopg.errors.UniqueViolation as exc:
            raise self._conflict(tool, keys) from exc
        return True

    def save_many(
        self, tools: Sequence[ToolDef], *, check_names: bool = True, replaces: Guard | None = None
    ) -> list[bool]:
        """`save` for each tool, each in its own transaction (a batch is not all or nothing here)."""
        return [self.save(tool, check_names=check_names, replaces=replaces) for tool in tools]

    def delete(self, tool_id: str, *, removes: Guard | None = None) -> bool:
        """Remove one tool (and its keys) in a transaction; False when it was not stored.

        `removes` is called with the stored copy, under its row lock, before anything is removed.
        """
        storable_tool_id(tool_id)
        with self.db.transaction() as conn:
            if removes is not None:
                row = conn.execute(
                    "SELECT body FROM echo_tools WHERE tool_id = %s FOR UPDATE", (tool_id,)
                ).fetchone()
                if row is not None:
                    self._guard(tool_id, row[0], removes)
            gone = conn.execute("DELETE FROM echo_tools WHERE tool_id = %s", (tool_id,)).rowcount
            if gone:
                self._bump(conn, tool_id)
        return bool(gone)

    def _guard(self, tool_id: str, body: Any, check: Guard) -> None:
        stored, _ = self._parse(tool_id, body)
        if stored is not None:  # an unreadable stored copy is replaced, as in the JSON store
            check(stored)

    def _bump(self, conn: psycopg.Connection[Any], tool_id: str) -> None:
        # the row lock on echo_catalogue orders every catalogue write; NOTIFY is sent at commit
        row = conn.execute(
            "UPDATE echo_catalogue SET version = version + 1 WHERE id = 1 RETURNING version"
        ).fetchone()
        version = int(row[0]) if row else 0
        payload = json.dumps({"origin": self.origin, "version": version, "tool_id": tool_id})
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
        with self._state_lock:
            if self._known_version is not None and version == self._known_version + 1:
                self._known_version = version  # nobody else wrote since we last read
            else:
                self._changed = True

    def _conflict(self, tool: ToolDef, keys: list[str]) -> ToolNameConflictError:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT t.tool_id, t.name FROM echo_tool_keys k JOIN echo_tools t USING (tool_id)"
                " WHERE k.key = ANY(%s) AND k.tool_id <> %s LIMIT 1",
                (keys, tool.tool_id),
            ).fetchone()
        other_id, other_name = row if row else ("?", "?")
        return ToolNameConflictError(
            f"Tool name {tool.name!r} (tool_id {tool.tool_id!r}) clashes with stored tool {other_name!r} "
            f"(tool_id {other_id!r}) in PostgreSQL {self.db.where}: names must be unique ignoring case and "
            f"punctuation; choose another name, or use tool_id {other_id!r} to update that tool",
            tool_id=tool.tool_id,
            field="name",
        )

    # -- reads ---------------------------------------------------------------------------------------

    def load(self, tool_id: str) -> ToolDef | None:
        """One stored tool, or None when it is absent or not a valid tool (logged)."""
        storable_tool_id(tool_id)
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT tool_id, body FROM echo_tools WHERE tool_id = %s", (tool_id,)
            ).fetchone()
        if row is None:
            return None
        tool, problem = self._parse(row[0], row[1])
        if problem is not None:
            logger.warning("%s", problem)
        return tool

    def load_all(self) -> tuple[list[ToolDef], list[Problem]]:
        """Every valid stored tool (sorted by id) and a problem for each row that is not one."""
        with self.db.connection() as conn, conn.transaction():
            # one snapshot: the counter and the rows agree
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            with self._state_lock:
                self._changed = False  # a NOTIFY from now on is a change after this snapshot
            row = conn.execute("SELECT version FROM echo_catalogue WHERE id = 1").fetchone()
            rows = conn.execute("SELECT tool_id, body FROM echo_tools ORDER BY tool_id").fetchall()
        with self._state_lock:
            self._known_version = int(row[0]) if row else None
        return separate_problems((self._parse(tool_id, body) for tool_id, body in rows), logger)

    def _parse(self, tool_id: str, body: Any) -> tuple[ToolDef | None, Problem | None]:
        where = f"postgresql:echo_tools/{tool_id}"
        if not isinstance(body, dict):
            return None, Problem(where, f"must hold a JSON object, got {type(body).__name__}")
        try:
            tool = ToolDef.model_validate(body)
        except ValidationError as exc:
            return None, Problem(where, f"is not a valid tool definition: {describe_validation_error(exc)}")
        if tool.tool_id != tool_id:
            return None, Problem(where, f"holds tool_id {tool.tool_id!r}, which does not match its row")
        return tool, None

    def close(self) -> None:
        """Stop listening and close the pool when this object opened it."""
        if self._listener is not None:
            self._listener.close()
        if self._owns_db:
            self.db.close()
