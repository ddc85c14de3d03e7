"""ToolStorage: tool definitions as JSON files in EchoAI's layout, written atomically under a file lock.

Layout (readable by EchoAI, and able to open EchoAI's own folder): `<dir>/<tool_id>.json` per tool, plus
`<dir>/tool_index.json` (a summary EchoAI never reads back; we rebuild it when it is damaged). Every write
goes to a temp file in the same folder, is fsynced and renamed over the target, so a crash leaves either
the old or the new file. Writers in different processes are serialised by `<dir>/.echo_tools.lock`.
A file that cannot be read is reported and skipped, and is moved aside (never silently overwritten)
before a new version is written in its place.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from pydantic import ValidationError

from echo_tools.errors import ToolStorageError
from echo_tools.models import ToolDef, check_tool_id

logger = logging.getLogger("echo_tools.storage")

INDEX_FILE = "tool_index.json"
LOCK_FILE = ".echo_tools.lock"
RESERVED_FILES = frozenset({INDEX_FILE, "mcp_servers.json"})
_TMP_PREFIX = ".tmp-"


@dataclass(frozen=True)
class Problem:
    """A file that could not be used, and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def _naive_utc() -> str:
    # EchoAI writes naive UTC timestamps; keep its shape so its own code reads ours.
    return datetime.now(UTC).replace(tzinfo=None).isoformat()


def atomic_write_json(path: Path, data: Any) -> None:
    """Write `data` as JSON to `path` atomically: temp file in the same folder, fsync, rename, fsync folder."""
    directory = path.parent
    fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


class ToolStorage:
    """A folder of tool JSON files. Safe for several processes writing at once.

    Args:
        directory: the folder; created when missing.
        lock_timeout: seconds to wait for another process's write before giving up.
    """

    def __init__(self, directory: str | Path, *, lock_timeout: float = 30.0) -> None:
        self.directory = Path(directory).expanduser().resolve()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ToolStorageError(
                f"Storage folder {str(self.directory)!r} cannot be created: {exc}"
            ) from exc
        self._lock = FileLock(str(self.directory / LOCK_FILE), timeout=lock_timeout)

    # -- paths ---------------------------------------------------------------------------------------

    def path_for(self, tool_id: str) -> Path:
        """The file of `tool_id`; the id is checked first, so it can never name a path outside the folder."""
        try:
            check_tool_id(tool_id)
        except ValueError as exc:
            raise ToolStorageError(str(exc), tool_id=tool_id if isinstance(tool_id, str) else None) from exc
        path = self.directory / f"{tool_id}.json"
        if path.parent != self.directory or path.name in RESERVED_FILES:
            raise ToolStorageError(f"tool_id {tool_id!r} names a reserved file", tool_id=tool_id)
        return path

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder's cross-process write lock."""
        try:
            with self._lock:
                yield
        except Timeout as exc:
            raise ToolStorageError(
                f"Storage folder {str(self.directory)!r} is locked by another writer (waited "
                f"{self._lock.timeout} s for {LOCK_FILE})"
            ) from exc
        except PermissionError as exc:
            raise ToolStorageError(
                f"Storage folder {str(self.directory)!r} is not writable: {exc.strerror}"
            ) from exc

    # -- writes --------------------------------------------------------------------------------------

    def save(self, tool: ToolDef) -> None:
        """Write one tool and update the index, atomically and under the lock."""
        path = self.path_for(tool.tool_id)
        data = tool.to_storage_dict()
        data["_saved_at"] = _naive_utc()
        with self.locked():
            try:
                self._move_aside_if_unreadable(path)
                atomic_write_json(path, data)
                index = self._read_index_for_update()
                index["tools"][tool.tool_id] = self._index_entry(tool, data["_saved_at"])
                self._write_index(index)
            except OSError as exc:
                raise ToolStorageError(
                    f"Tool {tool.tool_id!r} could not be saved in {str(self.directory)!r}: {exc}",
                    tool_id=tool.tool_id,
                ) from exc

    def delete(self, tool_id: str) -> bool:
        """Remove one tool's file and index entry; False when it was not stored."""
        path = self.path_for(tool_id)
        with self.locked():
            try:
                existed = path.exists()
                if existed:
                    path.unlink()
                index = self._read_index_for_update()
                if index["tools"].pop(tool_id, None) is not None or existed:
                    self._write_index(index)
            except OSError as exc:
                raise ToolStorageError(
                    f"Tool {tool_id!r} could not be deleted: {exc}", tool_id=tool_id
                ) from exc
        return existed

    # -- reads ---------------------------------------------------------------------------------------

    def load(self, tool_id: str) -> ToolDef | None:
        """One stored tool, or None when it is absent or unreadable."""
        path = self.path_for(tool_id)
        if not path.exists():
            return None
        tool, problem = self._read_tool(path)
        if problem:
            logger.warning("%s", problem)
        return tool

    def load_all(self) -> tuple[list[ToolDef], list[Problem]]:
        """Every readable tool (sorted by id) and a problem for each file that could not be used."""
        tools: list[ToolDef] = []
        problems: list[Problem] = []
        try:
            names = sorted(os.listdir(self.directory))
        except OSError as exc:
            raise ToolStorageError(f"Storage folder {str(self.directory)!r} cannot be read: {exc}") from exc
        for name in names:
            if not name.endswith(".json") or name in RESERVED_FILES or name.startswith((".", _TMP_PREFIX)):
                continue
            tool, problem = self._read_tool(self.directory / name)
            if problem is not None:
                logger.warning("skipping %s", problem)
                problems.append(problem)
            elif tool is not None:
                tools.append(tool)
        return tools, problems

    def read_index(self) -> dict[str, Any]:
        """The index as stored (an empty index when it is missing)."""
        path = self.directory / INDEX_FILE
        if not path.exists():
            return self._empty_index()
        return json.loads(path.read_text(encoding="utf-8"))

    def rebuild_index(self) -> None:
        """Rewrite the index from the tool files (after damage, or for a folder EchoAI wrote)."""
        with self.locked():
            tools, _ = self.load_all()
            index = self._empty_index()
            for tool in tools:
                index["tools"][tool.tool_id] = self._index_entry(tool, _naive_utc())
            self._write_index(index)

    # -- internals -----------------------------------------------------------------------------------

    def _read_tool(self, path: Path) -> tuple[ToolDef | None, Problem | None]:
        try:
            raw = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return None, Problem(str(path), f"cannot be read: {exc}")
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            return None, Problem(str(path), f"is not valid JSON: {exc}")
        if not isinstance(data, dict):
            return None, Problem(str(path), f"must hold a JSON object, got {type(data).__name__}")
        data.pop("_saved_at", None)
        try:
            tool = ToolDef.model_validate(data)
        except ValidationError as exc:
            return None, Problem(
                str(path), f"is not a valid tool definition: {describe_validation_error(exc)}"
            )
        if path.stem != tool.tool_id:
            return None, Problem(
                str(path), f"holds tool_id {tool.tool_id!r}, which does not match its file name"
            )
        return tool, None

    def _move_aside_if_unreadable(self, path: Path) -> None:
        if not path.exists():
            return
        _, problem = self._read_tool(path)
        if problem is not None:
            backup = path.with_name(f"{path.name}.corrupt-{int(time.time() * 1000)}")
            os.replace(path, backup)
            logger.warning("moved unreadable %s aside to %s before writing a new version", path, backup.name)

    def _read_index_for_update(self) -> dict[str, Any]:
        path = self.directory / INDEX_FILE
        if not path.exists():
            return self._rebuilt_index()
        try:
            index = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(index, dict) or not isinstance(index.get("tools"), dict):
                raise ValueError("the 'tools' object is missing")
            return index
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            backup = path.with_name(f"{INDEX_FILE}.corrupt-{int(time.time() * 1000)}")
            os.replace(path, backup)
            logger.warning(
                "index %s was damaged (%s); kept as %s and rebuilt from the tool files", path, exc, backup
            )
            return self._rebuilt_index()

    def _rebuilt_index(self) -> dict[str, Any]:
        tools, _ = self.load_all()
        index = self._empty_index()
        for tool in tools:
            index["tools"][tool.tool_id] = self._index_entry(tool, _naive_utc())
        return index

    def _write_index(self, index: dict[str, Any]) -> None:
        now = _naive_utc()
        index.setdefault("created_at", now)
        index["last_updated"] = now
        index["tool_count"] = len(index["tools"])
        atomic_write_json(self.directory / INDEX_FILE, index)

    @staticmethod
    def _empty_index() -> dict[str, Any]:
        return {"tools": {}, "created_at": _naive_utc(), "last_updated": _naive_utc(), "tool_count": 0}

    @staticmethod
    def _index_entry(tool: ToolDef, updated_at: str) -> dict[str, Any]:
        return {
            "name": tool.name,
            "tool_type": tool.tool_type.value,
            "status": tool.status.value,
            "version": tool.version,
            "tags": list(tool.tags),
            "updated_at": updated_at,
        }


def describe_validation_error(exc: ValidationError) -> str:
    """A pydantic error as `field: message (got value)` sentences."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        value = err.get("input")
        got = f" (got {value!r:.60})" if err.get("type") != "missing" else ""
        parts.append(f"{loc}: {err.get('msg')}{got}")
    return "; ".join(parts)
