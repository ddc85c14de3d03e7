"""docs/echoai.md: its Python blocks, run in order as one script from another folder (a new user's), work as
written: the shared objects, Option 1 with its HITL pause and resume (in memory and through the run
history), Option 2's plugin calls, and the runner.

The script runs in this process, its current folder a fresh one (a fresh interpreter would import CrewAI
again: about 5 s of CPU); tests/test_docs_examples.py checks that it sees the page's blocks.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.echo_tools._storage_support import REPO_ROOT

DOC = REPO_ROOT / "docs" / "echoai.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.slow  # whole workflow runs (CrewAI, LangGraph)
def test_the_python_blocks_run_as_written_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = _python_blocks()
    assert len(blocks) == 6
    monkeypatch.chdir(tmp_path)
    doc: dict[str, Any] = {"__name__": "__main__"}
    try:
        exec(compile("\n".join(blocks), str(DOC), "exec"), doc)
        resumed = doc["history"].run("run_2")["status"]
    finally:
        for name in ("executor", "history"):  # what a script's end would release
            if name in doc:
                doc[name].close()
    printed = capsys.readouterr().out

    assert "__interrupt__" in doc["final_state"] and doc["request"]["title"] == "Is the sum right?"
    # the calculator ran before the pause
    assert [e["type"] for e in doc["final_state"]["tool_events"]] == ["tool.invoked", "tool.completed"]
    assert "5" in doc["final"]["result"]
    assert resumed == "completed"
    assert [t.name for t in doc["tools"]] == ["calculator"]
    assert doc["ids"] == ["tool_calculator", "tool_web_search"]
    assert "__interrupt__" in doc["state"] and len(doc["mapped"].agents) == 3
    assert '"result": 5' in printed  # Option 2's bound tool, called directly
    assert (tmp_path / "apps" / "storage" / "tools" / "runs.sqlite").is_file()  # in the user's folder
