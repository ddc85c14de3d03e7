"""EchoAI without glue: `install(user_of=...)` carries EchoAI's logged-in user into the runs its own
`/workflows/execute` route starts (their per-user credentials are used), `install(approval_policy=...)`
holds the calls it names, and `install(egress=...)` is the policy of every outbound request."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from echo_tools.credentials import SECRET_KEY_ENV, new_key
from echo_tools.egress import EgressPolicy
from tests.workflow_bridge._compiler_support import agent, chain
from tests.workflow_bridge.test_dropin_echoai_host import AgentRegistry, Container, HostExecutor
from workflow_bridge import echoai


class _Seen(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.seen.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        body = b'{"customer": "found"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def crm() -> Iterator[tuple[str, list[str | None]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Seen)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", server.seen  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


def _echoai_app(tmp_path: Path, base: str, **options: Any) -> tuple[FastAPI, Any]:
    """EchoAI's container and gateway with its own `/workflows/execute` route, and echo-tools installed
    and mounted as docs/echoai.md says: one agent calling the CRM lookup tool."""
    wf, agents = chain(agent("lookup", "Agent", tools=["tool_crm_lookup"]), agent("end", "End"))
    container = Container()
    store = tmp_path / "tools"
    echoai.install(container, storage_dir=store, **options)
    host = HostExecutor({("wf_crm", "final"): wf}, AgentRegistry(agents, tmp_path))
    container.register("workflow.executor", lambda: host)
    layer = echoai.install(container, storage_dir=store, **options)
    layer.registry.credentials.set("crm", {"type": "bearer", "token": "shared-token", "hosts": ["127.0.0.1"]})
    for user in ("ann", "ben"):
        layer.registry.credentials.set("crm", {"type": "bearer", "token": f"{user}-token"}, user_id=user)
    layer.registry.register(
        {
            "tool_id": "tool_crm_lookup",
            "name": "CRM lookup",
            "tool_type": "api",
            "execution_config": {"url": f"{base}/customers/42", "method": "GET", "credential": "crm"},
        }
    )
    app = FastAPI()

    @app.post("/workflows/execute")  # EchoAI's own route: it knows nothing of echo-tools' scopes
    def execute(request: Request) -> dict[str, Any]:
        return container.resolve("workflow.executor").execute_workflow(
            "wf_crm", "final", "1", {"message": "42"}
        )

    echoai.mount(app, storage_dir=store)
    return app, layer


def test_echoais_logged_in_user_reaches_the_run_its_own_route_starts(
    tmp_path: Path, crm: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    base, seen = crm
    app, layer = _echoai_app(
        tmp_path,
        base,
        egress=EgressPolicy.local(),
        user_of=lambda request: request.headers.get("X-Demo-User"),
    )
    client = TestClient(app, base_url="http://127.0.0.1")
    for user in ("ann", "ben", None):
        headers = {"X-Demo-User": user} if user else {}
        answer = client.post("/workflows/execute", headers=headers)
        assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
    # each user's own token, and the shared one for a request without a logged-in user
    assert seen == ["Bearer ann-token", "Bearer ben-token", "Bearer shared-token"]
    runs = [layer.history.run(r.run_id) for r in layer.history.runs()]
    kept = sorted((r["source"].get("scope") or {}).get("user_id") or "-" for r in runs if r is not None)
    assert kept == ["-", "ann", "ben"]


def test_an_approval_policy_given_to_install_holds_the_calls_it_names(
    tmp_path: Path, crm: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    base, seen = crm
    app, layer = _echoai_app(
        tmp_path,
        base,
        egress=EgressPolicy.local(),
        approval_policy=lambda call: call.tool_id == "tool_crm_lookup",
    )
    answer = TestClient(app, base_url="http://127.0.0.1").post("/workflows/execute").json()
    assert answer["status"] == "interrupted", answer
    (pending,) = layer.executor.governance.approvals.pending()
    assert (pending.tool_id, pending.run_id) == ("tool_crm_lookup", answer["run_id"])
    assert seen == []  # held for a person: nothing went out


def test_the_egress_policy_given_to_install_refuses_what_it_does_not_allow(
    tmp_path: Path, crm: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    base, seen = crm
    with pytest.raises(Exception, match="loopback"):  # the strict default: the tool cannot even be registered
        _echoai_app(tmp_path, base)
    assert seen == []
