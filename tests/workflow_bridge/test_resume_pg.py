"""resume_run on PostgreSQL: a run paused with one `PgRunHistory` is resumed through the database URL alone
(a fresh history and checkpointer, as another replica would), on a real server on 127.0.0.1."""

from __future__ import annotations

import pytest

from echo_tools.pg.history import PgRunHistory
from tests.echo_tools._pg_support import PgServer
from tests.workflow_bridge._compiler_support import agent, chain, make_executor, make_registry
from workflow_bridge.runner import RunResumeError, resume_run, run_status, run_workflow


def test_a_run_paused_on_postgresql_resumes_through_its_url(pg_server: PgServer) -> None:
    dsn = pg_server.new_database()
    wf, agents = chain(
        agent("a", tools=["Echo"]),
        agent("gate", "HITL", metadata={"hitl_config": {"title": "OK?"}}),
        agent("end", "End", output_schema=["result"]),
    )
    registry = make_registry()
    executor, _ = make_executor(registry)
    first = PgRunHistory(dsn)
    try:
        paused = run_workflow(
            {"workflow": wf, "agents": agents},
            registry=registry,
            executor=executor,
            user_input="x",
            run_id="run_pg",
            history=first,
        )
    finally:
        first.close()
    assert "__interrupt__" in paused
    assert run_status("run_pg", storage=dsn)["status"] == "interrupted"
    final = resume_run(
        "run_pg",
        {"decision": "edit", "edits": {"crew_result": "shipped"}},
        storage=dsn,
        registry=registry,
        executor=executor,
    )
    assert final["result"] == "shipped"
    assert run_status("run_pg", storage=dsn)["status"] == "completed"
    with pytest.raises(RunResumeError, match="'completed'"):
        resume_run("run_pg", "approve", storage=dsn, registry=registry, executor=executor)


def test_a_canvas_without_workflow_id_paused_on_postgresql_runs_its_second_agent_on_resume(
    pg_server: PgServer,
) -> None:
    from tests.workflow_bridge._canvas_runs import gated_canvas
    from tests.workflow_bridge._compiler_support import agent_tools_registry

    dsn = pg_server.new_database()
    registry = agent_tools_registry()
    executor, _ = make_executor(registry)
    first = PgRunHistory(dsn)
    try:
        paused = run_workflow(
            gated_canvas(), registry=registry, executor=executor, run_id="run_pg_canvas", history=first
        )
    finally:
        first.close()
    assert "__interrupt__" in paused
    replica = agent_tools_registry()  # another replica: its own registry, executor, history and graph
    executor, log = make_executor(replica)
    final = resume_run("run_pg_canvas", "approve", storage=dsn, registry=replica, executor=executor)
    assert [e.input["operation"] for e in log.events if e.type == "tool.invoked"] == ["multiply"]
    assert '"result": 42' in final["crew_result"]
    assert run_status("run_pg_canvas", storage=dsn)["status"] == "completed"
