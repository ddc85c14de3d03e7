"""docs/mcp.md's sampling, elicitation and roots example runs as written (from the repository root, as
its relative server path expects) and prints what its comments say; in this process, the server in its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def example() -> str:
    text = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    section = text[text.index("## Sampling") : text.index("## The connector path")]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return code


def test_the_docs_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # in this process (a fresh interpreter would import CrewAI again for RehearsalLLM: several seconds of
    # CPU), from the repository root, with its default storage in a folder of this test
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("ECHO_TOOLS_HOME", str(tmp_path / "home"))
    exec(compile(example(), str(ROOT / "docs" / "mcp.md"), "exec"), {"__name__": "__main__"})
    lines = capsys.readouterr().out.splitlines()
    assert "sampling refused: no model is bound" in lines[0]
    assert '"model": "echo-rehearsal"' in lines[1]
    assert '"action": "decline"' in lines[2]
    assert '"content": {"name": "Ada"}' in lines[3]
    assert "file:///srv/reports" in lines[4]
    assert lines[5] == "['refused', 'answered', 'declined', 'accept']"
