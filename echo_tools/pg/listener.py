"""LISTEN/NOTIFY on a thread of its own: how one replica hears another's writes within milliseconds.

`PgListener` holds one dedicated connection (not from the pool: a LISTEN lasts as long as its session)
and calls `on_notify(channel, payload)` for every notification. When the connection breaks it reconnects
with a growing pause and then calls `on_reconnect()`, because notifications sent meanwhile are lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

import psycopg
from psycopg import sql

logger = logging.getLogger("echo_tools.pg")

_POLL_S = 0.25  # how often the thread looks at its stop flag between notifications
_MAX_PAUSE_S = 2.0


class PgListener:
    """A daemon thread listening on `channels` of the database at `dsn`.

    Args:
        dsn: where to connect.
        channels: the channels to LISTEN on.
        on_notify: called on the listener's thread with (channel, payload) for each notification.
        on_reconnect: called after a reconnection (notifications may have been missed meanwhile).
    """

    def __init__(
        self,
        dsn: str,
        channels: Iterable[str],
        on_notify: Callable[[str, str], None],
        on_reconnect: Callable[[], None] = lambda: None,
    ) -> None:
        self.dsn = dsn
        self.channels = tuple(channels)
        self.on_notify = on_notify
        self.on_reconnect = on_reconnect
        self.connected = threading.Event()  # set while LISTEN is in force
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="echo-tools-pg-listener", daemon=True)

    def start(self, *, wait: float = 5.0) -> PgListener:
        """Start listening; waits up to `wait` seconds for the first LISTEN to be in force."""
        self._thread.start()
        self.connected.wait(wait)
        return self

    def close(self) -> None:
        """Stop the thread (it notices within a quarter of a second) and wait for it."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        pause = 0.05
        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
                    for channel in self.channels:
                        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self.connected.set()
                    pause = 0.05
                    if not first:
                        self._call(self.on_reconnect)
                    first = False
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=_POLL_S):
                            self._call(self.on_notify, note.channel, note.payload)
            except psycopg.Error as exc:
                if self.connected.is_set():
                    logger.warning("lost the LISTEN connection to the database: %s; reconnecting", exc)
                self.connected.clear()
                first = False
                self._stop.wait(pause)
                pause = min(pause * 2, _MAX_PAUSE_S)
        self.connected.clear()

    @staticmethod
    def _call(callback: Callable[..., None], *args: str) -> None:
        try:
            callback(*args)
        except Exception:  # boundary: a failing subscriber must not stop the listener
            logger.exception("a database change subscriber failed")
