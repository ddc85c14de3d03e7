"""docs/mcp.md's sampling, elicitation and roots example runs as written (from the repository root, as
its relative server path expects) and prints what its comments say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def example() -> str:
    text = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    section = text[text.index("## Sampling") : text.index("## The connector path")]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return code


@pytest.mark.slow
def test_the_docs_example_runs_as_written():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", example()], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "sampling refused: no model is bound" in lines[0]
    assert '"model": "echo-rehearsal"' in lines[1]
    assert '"action": "decline"' in lines[2]
    assert '"content": {"name": "Ada"}' in lines[3]
    assert "file:///srv/reports" in lines[4]
    assert lines[5] == "['refused', 'answered', 'declined', 'accept']"
