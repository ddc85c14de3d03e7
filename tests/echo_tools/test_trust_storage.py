"""A tool file and the index change together: when the index cannot be renamed into place, the tool file
is put back as it was (issue 11, finding 9)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from echo_tools import ToolRegistry, ToolStorageError
from tests.echo_tools._storage_support import folder_state

TOOL = {"name": "Weather", "tool_type": "api", "execution_config": {"url": "https://api.example.com/w"}}


def fail_index_renames(monkeypatch: pytest.MonkeyPatch) -> None:
    real_replace = os.replace

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if os.fspath(dst).endswith("tool_index.json"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("existing", [True, False])
def test_a_failed_index_rename_leaves_the_tool_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    store = tmp_path / "tools"
    registry = ToolRegistry(store)
    registry.register({**TOOL, "name": "Other"})  # the folder has its index and lock file
    if existing:
        registry.register(TOOL)
    before = folder_state(store)
    fail_index_renames(monkeypatch)
    with pytest.raises(ToolStorageError) as caught:
        registry.register({**TOOL, "description": "changed"})
    monkeypatch.undo()
    assert str(store) in caught.value.message
    assert folder_state(store) == before
    restarted = ToolRegistry(store).get("tool_weather")
    assert (restarted is not None and restarted.description == "") if existing else restarted is None
