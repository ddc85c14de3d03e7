"""docs/echoai.md: its Python blocks, run in order as one script from another folder (a new user's), work as
written: the shared objects, Option 1 with its HITL pause and resume (in memory and through the run
history), Option 2's plugin calls, and the runner."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.echo_tools._storage_support import REPO_ROOT, child_env

DOC = REPO_ROOT / "docs" / "echoai.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.slow
def test_the_python_blocks_run_as_written_from_another_folder(tmp_path: Path) -> None:
    blocks = _python_blocks()
    assert len(blocks) == 6
    checks = (
        "\nimport json\n"
        "print('CHECK ' + json.dumps({'paused': '__interrupt__' in final_state, 'title': request['title'],\n"
        "    'approved': final['result'], 'resumed': history.run('run_2')['status'],\n"
        "    'tools': [t.name for t in tools], 'ids': ids, 'events': [e['type'] for e in final_state['tool_events']],\n"
        "    'runner_paused': '__interrupt__' in state, 'nodes': len(mapped.agents)}))\n"
    )
    (tmp_path / "doc.py").write_text("\n".join(blocks) + checks)
    result = subprocess.run(
        [sys.executable, "doc.py"], cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("CHECK "))
    out = json.loads(line[len("CHECK ") :])
    assert out["paused"] and out["title"] == "Is the sum right?"
    assert out["events"] == ["tool.invoked", "tool.completed"]  # the calculator ran before the pause
    assert "5" in out["approved"]
    assert out["resumed"] == "completed"
    assert out["tools"] == ["calculator"]
    assert out["ids"] == ["tool_calculator", "tool_web_search"]
    assert out["runner_paused"] and out["nodes"] == 3
    assert '"result": 5' in result.stdout  # Option 2's bound tool, called directly
    assert (tmp_path / "apps" / "storage" / "tools" / "runs.sqlite").is_file()  # in the user's folder
