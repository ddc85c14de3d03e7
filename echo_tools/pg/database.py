"""One PostgreSQL database for every replica: a psycopg pool, errors that name host and database.

`PgDatabase(dsn)` checks the database answers (a wrong DSN or an unreachable server is a
`ToolStorageError` naming host, port and database, not a traceback), applies the schema migrations, and
hands out pooled connections. The pool checks a connection before lending it, so after the server
restarts the next call gets a fresh one; a call made while the server is away fails with a
`ToolStorageError` saying so.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from echo_tools.errors import ToolStorageError

logger = logging.getLogger("echo_tools.pg")

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_POOL_SIZE = 8


def dsn_parts(dsn: str) -> dict[str, str]:
    """The DSN's fields (`host`, `port`, `dbname`, `user`, ...), or `ToolStorageError` naming the DSN."""
    if not isinstance(dsn, str) or not dsn.strip():
        raise ToolStorageError(f"database URL must be a postgresql://... string, got {dsn!r}")
    try:
        return conninfo.conninfo_to_dict(dsn)  # type: ignore[return-value]
    except psycopg.ProgrammingError as exc:
        # libpq's message quotes the whole DSN, password included
        reason = str(exc).replace(dsn, redact(dsn))
        raise ToolStorageError(f"database URL {redact(dsn)!r} is invalid: {reason}") from exc


def redact(dsn: str) -> str:
    """The DSN with its password replaced by `***` (for messages and logs)."""
    try:
        parts = conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        # not parsable: mask what looks like a password and show the rest, so the message names it
        masked = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", dsn)
        return re.sub(r"(password\s*=\s*)\S+", r"\1***", masked)
    if "password" in parts:
        parts["password"] = "***"
    return conninfo.make_conninfo("", **parts)


def describe(dsn: str) -> str:
    """`database 'echo' on host 10.0.0.5 port 5432`: where a DSN points, for error messages."""
    parts = dsn_parts(dsn)
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    return f"database {parts.get('dbname') or parts.get('user') or '(default)'!r} on host {host} port {parts.get('port') or 5432}"


class PgDatabase:
    """A pool of connections to one PostgreSQL database whose schema is migrated to this version.

    Args:
        dsn: a libpq URL or key=value string (`postgresql://user:pw@host:5432/echo`).
        pool_size: the most connections this process holds.
        timeout: seconds to wait for the server (at start, and for a connection on each call).
        migrate: apply the schema migrations (under an advisory lock: replicas starting at once migrate once).

    Raises:
        ToolStorageError: the DSN is invalid or the database cannot be reached (the message names host,
            port and database, and the server's reason).
    """

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        timeout: float = DEFAULT_TIMEOUT_S,
        migrate: bool = True,
    ) -> None:
        self.where = describe(dsn)
        self.dsn = dsn
        self.timeout = timeout
        self._check_reachable()
        self.pool = ConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            timeout=timeout,
            check=ConnectionPool.check_connection,
            open=False,
            name="echo-tools",
        )
        try:
            self.pool.open(wait=True, timeout=timeout)
        except PoolTimeout as exc:
            self.pool.close()
            raise ToolStorageError(f"PostgreSQL {self.where} did not answer within {timeout} s") from exc
        if migrate:
            from echo_tools.pg.schema import migrate_schema

            try:
                with self.connection() as conn:
                    migrate_schema(conn, self.where)
            except BaseException:
                self.pool.close()
                raise

    def _check_reachable(self) -> None:
        # one direct connection first: the pool only says "timed out", libpq says why
        try:
            psycopg.connect(self.dsn, connect_timeout=max(1, round(self.timeout))).close()
        except psycopg.Error as exc:
            reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            raise ToolStorageError(f"cannot connect to PostgreSQL {self.where}: {reason}") from exc

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in autocommit mode (use `conn.transaction()` for several statements).

        Raises:
            ToolStorageError: the server is away or the connection broke during the call.
        """
        try:
            with self.pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise ToolStorageError(
                f"PostgreSQL {self.where} is unreachable (no connection within {self.timeout} s); "
                "the call was not made, try again when the database is back"
            ) from exc
        except psycopg.OperationalError as exc:
            raise ToolStorageError(
                f"PostgreSQL {self.where}: the connection broke during the call ({_first_line(exc)}); "
                "its transaction was rolled back, try again"
            ) from exc

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection inside one transaction: committed on exit, rolled back on error."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        """Close every pooled connection."""
        self.pool.close()

    def __enter__(self) -> PgDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def open_database(target: str | PgDatabase) -> tuple[PgDatabase, bool]:
    """`(database, owned)`: a ready `PgDatabase`, or a new one for a DSN (owned: the caller closes it)."""
    if isinstance(target, PgDatabase):
        return target, False
    return PgDatabase(target), True
