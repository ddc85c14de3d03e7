"""Approvals on the HTTP API and the CLI: `GET /tools/approvals`, `POST /tools/approvals/{id}`,
`echo-tools approvals list|approve|reject`, deciding what another process asked (the store is the
history's file), with 404/409/422 for bad decisions."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from echo_tools import ToolRegistry, create_app

from ._cli_support import InProcessCli
from .test_governance_approvals import LINE_SCHEMA, SIDE

FIXTURES = "tests.echo_tools.fixture_tools"


def stored_registry(home: Path) -> ToolRegistry:
    registry = ToolRegistry(storage_dir=home, allowed_modules=[FIXTURES])
    registry.register(
        {
            "name": "Write",
            "tool_type": "local",
            "input_schema": LINE_SCHEMA,
            "execution_config": {"module": SIDE, "function": "append_line"},
            "approval": "always",
        }
    )
    return registry


def test_the_cli_lists_and_approves_a_call_another_process_asked_for(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    home, out = tmp_path / "home", tmp_path / "out.txt"
    stored_registry(home)
    allow = ("--allow-module", FIXTURES)
    asked = run_cli(home, *allow, "invoke", "Write", "--input", json.dumps({"path": str(out), "line": "hi"}))
    assert asked.returncode == 1
    approval_id = json.loads(asked.stdout)["metadata"]["approval_id"]
    assert "approval_required" in asked.stderr and approval_id in asked.stderr
    listed = run_cli(home, *allow, "approvals", "list")
    assert listed.returncode == 0 and approval_id in listed.stdout and "tool_write" in listed.stdout
    as_json = json.loads(run_cli(home, *allow, "approvals", "list", "--json").stdout)
    assert [a["approval_id"] for a in as_json["approvals"]] == [approval_id]
    approved = run_cli(home, *allow, "approvals", "approve", approval_id)
    assert approved.returncode == 0, approved.stderr
    assert f"approval {approval_id} approved" in approved.stdout
    assert out.read_text().splitlines() == ["hi"]
    again = run_cli(home, *allow, "approvals", "approve", approval_id)
    assert again.returncode == 1 and "already" in again.stderr and approval_id in again.stderr
    assert out.read_text().splitlines() == ["hi"]
    assert "no pending approvals" in run_cli(home, *allow, "approvals", "list").stdout


def test_the_cli_rejects_and_refuses_bad_edits_naming_the_problem(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    home, out = tmp_path / "home", tmp_path / "out.txt"
    stored_registry(home)
    allow = ("--allow-module", FIXTURES)
    ids = []
    for line in ("a", "b"):
        asked = run_cli(
            home, *allow, "invoke", "Write", "--input", json.dumps({"path": str(out), "line": line})
        )
        ids.append(json.loads(asked.stdout)["metadata"]["approval_id"])
    bad = run_cli(
        home, *allow, "approvals", "approve", ids[0], "--edit", json.dumps({"path": str(out), "line": 5})
    )
    assert bad.returncode == 2 and "input.line" in bad.stderr and "still pending" in bad.stderr
    not_json = run_cli(home, *allow, "approvals", "approve", ids[0], "--edit", "{oops")
    assert not_json.returncode == 2 and "--edit" in not_json.stderr
    rejected = run_cli(home, *allow, "approvals", "reject", ids[1], "--comment", "no")
    assert rejected.returncode == 0 and "rejected" in rejected.stdout
    unknown = run_cli(home, *allow, "approvals", "reject", "apr_unknown")
    assert unknown.returncode == 1 and "apr_unknown" in unknown.stderr
    edited = run_cli(
        home,
        *allow,
        "approvals",
        "approve",
        ids[0],
        "--edit",
        json.dumps({"path": str(out), "line": "edited"}),
    )
    assert edited.returncode == 0, edited.stderr
    assert out.read_text().splitlines() == ["edited"]


def test_the_http_routes_list_and_decide_approvals(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    registry = stored_registry(tmp_path / "home")
    from echo_tools import EgressPolicy, ToolExecutor

    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    client = TestClient(create_app(registry, executor), base_url="http://127.0.0.1")
    asked = client.post("/tools/invoke/Write", json={"path": str(out), "line": "x"})
    assert asked.status_code == 202
    body = asked.json()
    assert body["error_type"] == "approval_required"
    approval_id = body["result"]["metadata"]["approval_id"]
    listed = client.get("/tools/approvals").json()["approvals"]
    assert [a["approval_id"] for a in listed] == [approval_id]
    assert client.get(f"/tools/approvals/{approval_id}").json()["status"] == "pending"
    bad = client.post(
        f"/tools/approvals/{approval_id}", json={"decision": "edit", "args": {"path": 1, "line": "y"}}
    )
    assert bad.status_code == 422 and bad.json()["field"] == "input.path"
    assert client.get(f"/tools/approvals/{approval_id}").json()["status"] == "pending"
    word = client.post(f"/tools/approvals/{approval_id}", json={"decision": "perhaps"})
    assert word.status_code == 422 and word.json()["field"] == "decision"
    done = client.post(f"/tools/approvals/{approval_id}", json={"decision": "approve"})
    assert done.status_code == 200
    assert done.json()["result"]["success"] is True and done.json()["approval"]["status"] == "approved"
    twice = client.post(f"/tools/approvals/{approval_id}", json={"decision": "approve"})
    assert twice.status_code == 409 and approval_id in twice.json()["message"]
    missing = client.post("/tools/approvals/apr_missing", json={"decision": "reject"})
    assert missing.status_code == 404 and "apr_missing" in missing.json()["message"]
    assert client.get("/tools/approvals/apr_missing").status_code == 404
    assert out.read_text().splitlines() == ["x"]
    executor.close()


def test_quota_and_denied_calls_have_their_own_http_status(tmp_path: Path) -> None:
    from echo_tools import EgressPolicy, ToolExecutor

    registry = ToolRegistry(storage_dir=tmp_path / "home", allowed_modules=[FIXTURES])
    registry.register(
        {
            "name": "Limited",
            "tool_type": "local",
            "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}},
            "execution_config": {"module": f"{FIXTURES}.basic", "function": "as_text"},
            "quotas": [{"limit": 1, "per_s": 60}],
        }
    )
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    client = TestClient(create_app(registry, executor), base_url="http://127.0.0.1")
    assert client.post("/tools/invoke/Limited", json={"word": "a"}).status_code == 200
    over = client.post("/tools/invoke/Limited", json={"word": "a"})
    assert over.status_code == 429 and over.json()["result"]["metadata"]["retry_after_s"] > 0
    executor.close()


def test_a_principal_sees_and_decides_only_its_own_approvals(tmp_path: Path) -> None:
    import json as _json

    from echo_tools import ApiSettings, EgressPolicy, ToolExecutor
    from echo_tools.gate import hash_key, load_principals

    principals = tmp_path / "principals.json"
    principals.write_text(
        _json.dumps(
            {
                "principals": [
                    {
                        "name": "alpha",
                        "key_sha256": hash_key("alpha-key-0123456789"),
                        "actions": ["invoke", "approve"],
                    },
                    {
                        "name": "beta",
                        "key_sha256": hash_key("beta-key-0123456789"),
                        "actions": ["invoke", "approve"],
                    },
                    {
                        "name": "viewer",
                        "key_sha256": hash_key("viewer-key-0123456789"),
                        "actions": ["invoke"],
                    },
                ]
            }
        )
    )
    out = tmp_path / "out.txt"
    registry = stored_registry(tmp_path / "home")
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    settings = ApiSettings(api_key="operator-key-0123456789", principals=load_principals(principals))
    client = TestClient(create_app(registry, executor, settings), base_url="http://127.0.0.1")
    alpha, beta = {"X-API-Key": "alpha-key-0123456789"}, {"X-API-Key": "beta-key-0123456789"}
    asked = client.post("/tools/invoke/Write", json={"path": str(out), "line": "a"}, headers=alpha)
    approval_id = asked.json()["result"]["metadata"]["approval_id"]
    assert client.get("/tools/approvals", headers=beta).json()["approvals"] == []
    foreign = client.post(f"/tools/approvals/{approval_id}", json={"decision": "approve"}, headers=beta)
    assert foreign.status_code == 404 and approval_id in foreign.json()["message"]
    no_action = client.get("/tools/approvals", headers={"X-API-Key": "viewer-key-0123456789"})
    assert no_action.status_code == 403 and "approve" in no_action.json()["message"]
    operator = {"X-API-Key": "operator-key-0123456789"}
    assert [
        a["approval_id"] for a in client.get("/tools/approvals", headers=operator).json()["approvals"]
    ] == [approval_id]
    mine = client.post(f"/tools/approvals/{approval_id}", json={"decision": "approve"}, headers=alpha)
    assert mine.status_code == 200 and mine.json()["approval"]["decided_by"] == "alpha"
    assert out.read_text().splitlines() == ["a"]
    executor.close()


def test_a_user_quota_over_http_counts_each_x_echo_user_apart(tmp_path: Path) -> None:
    from echo_tools import ApiSettings, EgressPolicy, ToolExecutor

    registry = ToolRegistry(storage_dir=tmp_path / "home", allowed_modules=[FIXTURES])
    registry.register(
        {
            "name": "Per User",
            "tool_type": "local",
            "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}},
            "execution_config": {"module": f"{FIXTURES}.basic", "function": "as_text"},
            "quotas": [{"limit": 2, "per_s": 60, "scope": "user"}],
        }
    )
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    client = TestClient(
        create_app(registry, executor, ApiSettings(api_key="operator-key-0123456789")),
        base_url="http://127.0.0.1",
    )

    def call(user: str) -> int:
        headers = {"X-API-Key": "operator-key-0123456789", "X-Echo-User": user}
        return client.post("/tools/invoke/Per User", json={"word": "w"}, headers=headers).status_code

    assert [call("ann"), call("ann"), call("ann"), call("ben")] == [200, 200, 429, 200]
    executor.close()
