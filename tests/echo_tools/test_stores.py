"""WorkflowStore and AgentStore read and write EchoAI's workflow and agent layouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_tools import AgentStore, NotStoredError, ToolNotFoundError, ToolStorageError, WorkflowStore


def _workflow(workflow_id: str = "wf_research", version: str = "0.1", **extra: object) -> dict[str, object]:
    return {"workflow_id": workflow_id, "name": "Research", "version": version, "agents": [], **extra}


def test_save_writes_echoais_file_names_per_state(tmp_path: Path) -> None:
    store = WorkflowStore(tmp_path)
    assert store.save(_workflow()) == tmp_path / "draft" / "wf_research.draft.json"
    assert store.save(_workflow(), state="temp") == tmp_path / "temp" / "wf_research.temp.json"
    assert store.save(_workflow(version="1.2"), state="final") == tmp_path / "final" / "wf_research.v1.2.json"
    assert json.loads((tmp_path / "final" / "wf_research.v1.2.json").read_text())["version"] == "1.2"


def test_get_without_a_version_prefers_the_newest_final_then_draft_then_temp(tmp_path: Path) -> None:
    store = WorkflowStore(tmp_path)
    store.save(_workflow(name="temp"), state="temp")
    assert store.get("wf_research")["name"] == "temp"
    store.save(_workflow(name="draft"))
    assert store.get("wf_research")["name"] == "draft"
    for version in ("0.9", "0.10", "0.2"):
        store.save(_workflow(version=version, name=f"final {version}"), state="final")
    assert store.get("wf_research")["name"] == "final 0.10"
    assert store.get("wf_research", version="0.2")["name"] == "final 0.2"


def test_a_workflow_that_is_not_stored_is_named_in_the_error(tmp_path: Path) -> None:
    store = WorkflowStore(tmp_path)
    with pytest.raises(NotStoredError, match="workflow_id 'wf_missing' is not stored") as info:
        store.get("wf_missing")
    assert info.value.field == "workflow_id"
    assert isinstance(info.value, ToolNotFoundError)
    store.save(_workflow(version="0.1"), state="final")
    with pytest.raises(NotStoredError, match=r"no final version '9\.9' \(final versions: 0\.1\)"):
        store.get("wf_research", version="9.9")


@pytest.mark.parametrize("bad", ["../escape", "/etc/passwd", "wf.x", "", "a" * 200, None, 5])
def test_ids_that_could_be_paths_are_refused_naming_the_field(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ValueError, match=f"workflow_id {bad!r} is invalid"):
        WorkflowStore(tmp_path).get(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=f"agent_id {bad!r} is invalid"):
        AgentStore(tmp_path).save({"agent_id": bad})
    assert list(tmp_path.iterdir()) == []


def test_a_bad_state_or_final_version_is_refused(tmp_path: Path) -> None:
    store = WorkflowStore(tmp_path)
    with pytest.raises(ValueError, match="state 'archive' is unknown"):
        store.save(_workflow(), state="archive")
    with pytest.raises(ValueError, match="version '../x' is invalid"):
        store.save(_workflow(version="../x"), state="final")


def test_a_damaged_file_is_reported_and_left_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "draft").mkdir()
    damaged = tmp_path / "draft" / "wf_broken.draft.json"
    damaged.write_text("{not json")
    store = WorkflowStore(tmp_path)
    with pytest.raises(ToolStorageError, match="cannot read .*wf_broken.draft.json"):
        store.get("wf_broken")
    assert store.list() == []
    assert damaged.read_text() == "{not json"


def test_list_summarises_every_stored_file(tmp_path: Path) -> None:
    store = WorkflowStore(tmp_path)
    store.save(_workflow("wf_b"))
    store.save(_workflow("wf_a"), state="temp")
    store.save(_workflow("wf_a"))
    assert [(s["workflow_id"], s["state"]) for s in store.list()] == [
        ("wf_a", "draft"),
        ("wf_a", "temp"),
        ("wf_b", "draft"),
    ]


def test_agents_round_trip_and_a_missing_one_names_its_id(tmp_path: Path) -> None:
    store = AgentStore(tmp_path / "agents")
    agent = {"agent_id": "agt_0123abcd", "name": "Researcher", "tools": ["tool_web_search"]}
    assert store.save(agent) == tmp_path / "agents" / "agt_0123abcd.json"
    assert store.get("agt_0123abcd") == agent
    assert store.list() == [agent]
    with pytest.raises(NotStoredError, match="agent_id 'agt_missing' has no file 'agt_missing.json'"):
        store.get("agt_missing")
    assert AgentStore(tmp_path / "nowhere").list() == []
