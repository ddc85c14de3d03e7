"""ToolStorage: tool definitions as JSON files in EchoAI's layout, written atomically under a file lock.

Layout (readable by EchoAI, and able to open EchoAI's own folder): `<dir>/<tool_id>.json` per tool, plus
`<dir>/tool_index.json` (a summary EchoAI never reads back; we repair it when it is damaged or stale). Every
write goes to a temp file in the same folder, is fsynced and renamed over the target, so a crash leaves either
the old or the new file. A tool and the index are both written in full before either is renamed into place,
so a full disk leaves the folder as it was. Writers in different processes are serialised by `<dir>/.echo_tools.lock`.
A file that cannot be read is reported and skipped, and is moved aside (never silently overwritten)
before a new version is written in its place.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from pydantic import ValidationError
from pydantic_core import from_json

from echo_tools.errors import ToolNameConflictError, ToolStorageError
from echo_tools.folder_files import (
    _TMP_PREFIX,
    FolderMcpConfigs,
    _unlink_quietly,
    empty_index,
    encode_tool,
    fsync_files,
    index_entry,
    is_stale_temp,
    naive_utc,
    remove_stale_temp_files,
    sync_directory,
    write_temp,
)
from echo_tools.folder_files import atomic_write_json as atomic_write_json  # re-exported
from echo_tools.models import ToolDef, check_tool_id, name_keys

logger = logging.getLogger("echo_tools.storage")

INDEX_FILE = "tool_index.json"
LOCK_FILE = ".echo_tools.lock"
MCP_CONFIG_FILE = "mcp_servers.json"
RESERVED_FILES = frozenset({INDEX_FILE, MCP_CONFIG_FILE})
_LOCK_POLL_SECONDS = 0.002

Signature = tuple[int, int, int]
# called with the stored copy of a tool before a write replaces it or a delete removes it; raises to refuse
Guard = Callable[[ToolDef], None]


@dataclass(frozen=True)
class Problem:
    """A file that could not be used, and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@contextmanager
def gc_paused() -> Iterator[None]:
    # Loading thousands of small models allocates millions of containers; the cyclic collector then runs
    # over and over and finds nothing (it was 60% of load time for 10,000 tools). Nothing here makes cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def separate_problems(
    read: Iterable[tuple[ToolDef | None, Problem | None]], log: logging.Logger
) -> tuple[list[ToolDef], list[Problem]]:
    """The tools read and, apart, the problems met (each logged to `log` as skipped), in order."""
    tools: list[ToolDef] = []
    problems: list[Problem] = []
    for tool, problem in read:
        if problem is not None:
            log.warning("skipping %s", problem)
            problems.append(problem)
        elif tool is not None:
            tools.append(tool)
    return tools, problems


def storable_tool_id(tool_id: str) -> str:
    """`tool_id` when it is safe to name a file or a row by, else `ToolStorageError` naming it."""
    try:
        return check_tool_id(tool_id)
    except ValueError as exc:
        raise ToolStorageError(str(exc), tool_id=tool_id if isinstance(tool_id, str) else None) from exc


class ToolStorage:
    """A folder of tool JSON files. Safe for several processes writing at once.

    Args:
        directory: the folder; created when missing.
        lock_timeout: seconds to wait for another process's write before giving up.
    """

    def __init__(self, directory: str | Path, *, lock_timeout: float = 30.0) -> None:
        self.directory = Path(directory).expanduser().resolve()
        if self.directory.exists() and not self.directory.is_dir():
            raise ToolStorageError(f"Storage folder {str(self.directory)!r} is not a folder (it is a file)")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ToolStorageError(
                f"Storage folder {str(self.directory)!r} cannot be created: {exc.strerror or exc}"
            ) from exc
        self._lock = FileLock(str(self.directory / LOCK_FILE), timeout=lock_timeout)
        self._index_path = self.directory / INDEX_FILE
        # The index's signature when we last read the folder or wrote it; any other writer replaces the
        # index file (a new inode), so a different signature means "changed elsewhere".
        self._known_signature: Signature | None = None
        self._changed_elsewhere = False
        self.stale_temp_files = 0  # temp files of dead writers seen by the last scan (repair_index removes)
        self.mcp_configs = FolderMcpConfigs(self.directory / MCP_CONFIG_FILE, self.locked)
        self.secrets = None  # the credential store is `credentials.enc` in `directory`

    # -- paths ---------------------------------------------------------------------------------------

    def path_for(self, tool_id: str) -> Path:
        """The file of `tool_id`; the id is checked first, so it can never name a path outside the folder."""
        path = self.directory / f"{storable_tool_id(tool_id)}.json"
        if path.parent != self.directory or path.name in RESERVED_FILES:
            raise ToolStorageError(f"tool_id {tool_id!r} names a reserved file", tool_id=tool_id)
        return path

    def location(self, tool_id: str) -> str:
        """The file of `tool_id`, as problems name it."""
        return str(self.path_for(tool_id))

    def contains(self, tool_id: str) -> bool:
        """True when the file of `tool_id` exists."""
        return self.path_for(tool_id).exists()

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder's cross-process write lock."""
        try:
            # filelock polls; its 50 ms default made four busy writers spend most of their time asleep
            self._lock.acquire(poll_interval=_LOCK_POLL_SECONDS)
        except Timeout as exc:
            raise ToolStorageError(
                f"Storage folder {str(self.directory)!r} is locked by another writer (waited "
                f"{self._lock.timeout} s for {LOCK_FILE})"
            ) from exc
        except OSError as exc:  # EACCES, and EROFS on a read-only mount
            raise ToolStorageError(
                f"Storage folder {str(self.directory)!r} is not writable: {exc.strerror or exc}"
            ) from exc
        try:
            yield
        finally:
            self._lock.release()

    # -- change detection ----------------------------------------------------------------------------

    def signature(self) -> Signature | None:
        """(mtime, size, inode) of the index file, or None when it is missing; changes on every write."""
        try:
            st = os.stat(self._index_path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def changed_elsewhere(self) -> bool:
        """True when another writer (process or storage object) changed the folder since we last read it."""
        return self._changed_elsewhere or self.signature() != self._known_signature

    # -- writes --------------------------------------------------------------------------------------

    def save(self, tool: ToolDef, *, check_names: bool = True, replaces: Guard | None = None) -> bool:
        """Write one tool and update the index, atomically and under the lock.

        Args:
            tool: the definition to store.
            check_names: refuse a name that another stored tool already has (compared case-insensitively
                and after slugging, against the index, so writers in other processes are seen too).
            replaces: called under the lock with the stored copy, when there is one, before anything is
                written; it raises to refuse the replacement (the trust rules use it).

        Returns:
            False when the stored copy was already identical and nothing was written.

        Raises:
            ToolNameConflictError: `check_names` and another stored tool has the same name.
            ToolStorageError: the folder cannot be written.
        """
        return self.save_many([tool], check_names=check_names, replaces=replaces)[0]

    def save_many(
        self,
        tools: Sequence[ToolDef],
        *,
        check_names: bool = True,
        replaces: Guard | None = None,
    ) -> list[bool]:
        """`save` for many tools at once: one lock, one index write, all or nothing.

        Every check (names, `replaces`) runs for every tool before anything is written; then the tool
        files and the index are written in full and renamed into place, and a failed rename puts back
        the files already replaced. Returns, per tool, False when its stored copy was already identical.

        Raises:
            ToolNameConflictError: `check_names` and a tool's name clashes with another stored tool's or
                with another tool of the batch (nothing is written).
            ToolStorageError: the folder cannot be written (nothing is changed).
        """
        paths = [self.path_for(tool.tool_id) for tool in tools]
        if len({p.name for p in paths}) != len(paths):
            raise ToolStorageError("save_many was given the same tool_id twice")
        changed: list[bool] = []
        writes: list[tuple[Path, dict[str, Any]]] = []
        with self.locked():
            try:
                self._note_foreign_writes()
                if replaces is not None:
                    for path in paths:
                        self._guard(path, replaces)
                index = self._read_index_for_update()
                if check_names:
                    self._check_names_free(index, tools)
                for tool, path in zip(tools, paths, strict=True):
                    data = tool.to_storage_dict()
                    entry = index["tools"].get(tool.tool_id)
                    if (
                        self._stored_copy_is(path, data)
                        and isinstance(entry, dict)
                        and entry.get("name") == tool.name
                    ):
                        changed.append(False)
                        continue
                    data["_saved_at"] = naive_utc()
                    index["tools"][tool.tool_id] = index_entry(tool, data["_saved_at"])
                    writes.append((path, data))
                    changed.append(True)
                if writes:
                    self._write_files(writes, index)
            except OSError as exc:
                who = f"Tool {tools[0].tool_id!r}" if len(tools) == 1 else f"{len(writes)} tools"
                raise ToolStorageError(
                    f"{who} could not be saved in {str(self.directory)!r}: {exc.strerror or exc}",
                    tool_id=tools[0].tool_id if len(tools) == 1 else None,
                ) from exc
        return changed

    def delete(self, tool_id: str, *, removes: Guard | None = None) -> bool:
        """Remove one tool's file and index entry; False when it was not stored.

        Args:
            tool_id: the tool to remove.
            removes: called under the lock with the stored copy before anything is removed; it raises to
                refuse.
        """
        path = self.path_for(tool_id)
        with self.locked():
            try:
                self._note_foreign_writes()
                if removes is not None:
                    self._guard(path, removes)
                existed = path.exists()
                index = self._read_index_for_update()
                if index["tools"].pop(tool_id, None) is not None or existed:
                    # the new index is written in full before the tool file goes (a full disk changes nothing)
                    tmp = self._stage_index(index)
                    try:
                        if existed:
                            path.unlink()
                        os.replace(tmp, self._index_path)
                    finally:
                        if os.path.lexists(tmp):
                            _unlink_quietly(tmp)
                    sync_directory(self.directory)
                    self._index_written()
            except OSError as exc:
                raise ToolStorageError(
                    f"Tool {tool_id!r} could not be deleted from {str(self.directory)!r}: "
                    f"{exc.strerror or exc}",
                    tool_id=tool_id,
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
        signature = self.signature()  # taken first: a write during the scan leaves us "changed elsewhere"
        found = self._scan()
        self._known_signature = signature
        self._changed_elsewhere = False
        return found

    def _scan(self) -> tuple[list[ToolDef], list[Problem]]:
        try:
            names = sorted(os.listdir(self.directory))
        except OSError as exc:
            raise ToolStorageError(f"Storage folder {str(self.directory)!r} cannot be read: {exc}") from exc
        directory = str(self.directory)
        self.stale_temp_files = 0
        read: list[tuple[ToolDef | None, Problem | None]] = []
        with gc_paused():
            for name in names:
                if name.startswith(_TMP_PREFIX):
                    self.stale_temp_files += is_stale_temp(Path(directory, name))
                    continue
                if not name.endswith(".json") or name in RESERVED_FILES or name.startswith("."):
                    continue
                read.append(self._read_tool(os.path.join(directory, name)))
            return separate_problems(read, logger)

    def read_index(self) -> dict[str, Any]:
        """The index as stored (an empty index when it is missing).

        Raises:
            ToolStorageError: the index is not valid JSON or lacks its `tools` object.
        """
        if not self._index_path.exists():
            return empty_index()
        try:
            index = json.loads(self._index_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ToolStorageError(f"Index {str(self._index_path)!r} cannot be read: {exc}") from exc
        if not isinstance(index, dict) or not isinstance(index.get("tools"), dict):
            raise ToolStorageError(f"Index {str(self._index_path)!r} has no 'tools' object")
        return index

    def index_matches(self, tool_ids: Iterable[str]) -> bool:
        """True when the index is readable and lists exactly `tool_ids`."""
        try:
            return set(self.read_index()["tools"]) == set(tool_ids)
        except ToolStorageError:
            return False

    def repair_index(self) -> bool:
        """Make the index list exactly the readable tool files; a damaged index is kept aside first.

        Also removes temp files left by writers that died. Entries of tools that did not change keep their
        `updated_at`. Returns True when the index was rewritten.
        """
        with self.locked():
            try:
                remove_stale_temp_files(self.directory)
                index = self._read_index_for_update(rebuild_if_missing=False)
                tools, _ = self._scan()
                wanted = {tool.tool_id: tool for tool in tools}
                if index is not None and set(index["tools"]) == set(wanted):
                    return False
                old = index["tools"] if index is not None else {}
                fresh = empty_index()
                if index is not None:
                    fresh["created_at"] = index.get("created_at", fresh["created_at"])
                for tool_id, tool in wanted.items():
                    entry = old.get(tool_id)
                    fresh["tools"][tool_id] = entry if isinstance(entry, dict) else index_entry(tool, None)
                self._write_index(fresh)
            except OSError as exc:
                raise ToolStorageError(
                    f"Index of {str(self.directory)!r} could not be repaired: {exc.strerror or exc}"
                ) from exc
        logger.info("index of %s repaired: it now lists %d tools", self.directory, len(wanted))
        return True

    def rebuild_index(self) -> None:
        """Rewrite the index from the tool files (after damage, or for a folder EchoAI wrote)."""
        with self.locked():
            try:
                index = self._read_index_for_update(rebuild_if_missing=False)
                tools, _ = self._scan()
                fresh = empty_index()
                if index is not None:
                    fresh["created_at"] = index.get("created_at", fresh["created_at"])
                for tool in tools:
                    fresh["tools"][tool.tool_id] = index_entry(tool, None)
                self._write_index(fresh)
            except OSError as exc:
                raise ToolStorageError(
                    f"Index of {str(self.directory)!r} could not be rebuilt: {exc.strerror or exc}"
                ) from exc

    # -- internals -----------------------------------------------------------------------------------

    def _guard(self, path: Path, check: Guard) -> None:
        if path.exists():
            stored, _ = self._read_tool(path)
            if stored is not None:
                check(stored)

    def _write_files(self, writes: list[tuple[Path, dict[str, Any]]], index: dict[str, Any]) -> None:
        """Replace tool files and the index together: all are written in full first (a full disk fails
        there and changes nothing), then renamed; a failed rename puts back the tool files already
        replaced (their old content is kept through a hard link until the index is in place)."""
        staged: list[str] = []
        done: list[tuple[Path, str | None, bool]] = []  # (path, backup, existed) of each rename made
        try:
            temps: list[str] = []
            for path, data in writes:
                temps.append(write_temp(path, data, sync_file=len(writes) == 1, encode=encode_tool))
                staged.append(temps[-1])
            if len(writes) > 1:
                fsync_files(temps)
            index_tmp = self._stage_index(index)
            staged.append(index_tmp)
            try:
                for (path, _), tmp in zip(writes, temps, strict=True):
                    backup, existed = None, path.exists()
                    if existed:
                        name = str(path.with_name(f"{_TMP_PREFIX}{path.name}.{time.time_ns()}.old"))
                        try:
                            os.link(path, name)
                            backup = name
                            staged.append(name)
                        except OSError:
                            pass  # no hard links on this file system: a failed rename keeps the new file
                    os.replace(tmp, path)
                    done.append((path, backup, existed))
                os.replace(index_tmp, self._index_path)
            except OSError:
                for path, backup, existed in reversed(done):
                    if backup is not None:
                        os.replace(backup, path)
                    elif not existed:
                        _unlink_quietly(path)
                raise
        finally:
            for leftover in staged:
                if os.path.lexists(leftover):
                    _unlink_quietly(leftover)
        sync_directory(self.directory)
        self._index_written()

    def _read_tool(self, path: str | Path) -> tuple[ToolDef | None, Problem | None]:
        where = os.fspath(path)  # plain strings: a Path per file was a tenth of loading 10,000 tools
        try:
            with open(where, "rb") as fh:
                raw = fh.read()
        except OSError as exc:
            return None, Problem(where, f"cannot be read: {exc.strerror or exc}")
        stem = os.path.basename(where)[:-5]
        try:  # the common case in one pass (parse and validate in pydantic-core): a third of the load time
            fast = ToolDef.model_validate_json(raw)
            if fast.tool_id == stem and "tool_id" in fast.model_fields_set:
                return fast, None
        except ValidationError:
            pass  # read again below, for the problem's exact wording (or EchoAI's legacy form)
        try:
            data = from_json(raw)  # pydantic's parser: twice as fast as json.loads on tool files
        except ValueError as exc:
            return None, Problem(where, f"is not valid JSON: {exc}")
        if not isinstance(data, dict):
            return None, Problem(where, f"must hold a JSON object, got {type(data).__name__}")
        data.pop("_saved_at", None)
        if not data.get("tool_id"):
            # EchoAI's legacy {name, description} files carry no id: the file name is the id
            data["tool_id"] = stem
        try:
            tool = ToolDef.model_validate(data)
        except ValidationError as exc:
            return None, Problem(where, f"is not a valid tool definition: {describe_validation_error(exc)}")
        if stem != tool.tool_id:
            return None, Problem(where, f"holds tool_id {tool.tool_id!r}, which does not match its file name")
        return tool, None

    def _stored_copy_is(self, path: Path, data: dict[str, Any]) -> bool:
        """True when `path` already holds `data`; an unreadable file is moved aside (never overwritten)."""
        if not path.exists():
            return False
        stored, problem = self._read_tool(path)
        if problem is not None:
            backup = path.with_name(f"{path.name}.corrupt-{time.time_ns()}")
            os.replace(path, backup)
            logger.warning("moved unreadable %s aside to %s before writing a new version", path, backup.name)
            return False
        return stored is not None and stored.to_storage_dict() == data

    def _check_names_free(self, index: dict[str, Any], tools: Sequence[ToolDef]) -> None:
        # one pass over the index: the lookup keys of every other stored tool (its name's keys and its id)
        batch = {tool.tool_id for tool in tools}
        owners: dict[str, tuple[str, Any]] = {}
        for other_id, entry in index["tools"].items():
            if other_id in batch or not isinstance(entry, dict):
                continue
            other_name = entry.get("name")
            theirs = name_keys(other_name) if isinstance(other_name, str) else frozenset()
            for key in (*theirs, other_id):
                owners.setdefault(key, (other_id, other_name))
        for tool in tools:
            mine = tool.lookup_keys()
            for key in sorted(mine | {tool.tool_id}):
                other_id, other_name = owners.get(key, (tool.tool_id, None))
                if other_id != tool.tool_id:
                    raise ToolNameConflictError(
                        f"Tool name {tool.name!r} (tool_id {tool.tool_id!r}) clashes with stored tool "
                        f"{other_name!r} (tool_id {other_id!r}) in {str(self.directory)!r}: names must be "
                        f"unique ignoring case and punctuation; choose another name, or use tool_id "
                        f"{other_id!r} to update that tool",
                        tool_id=tool.tool_id,
                        field="name",
                    )
            for key in mine | {tool.tool_id}:
                owners[key] = (tool.tool_id, tool.name)

    def _note_foreign_writes(self) -> None:
        # called under the lock, before our own write replaces the index
        if self.signature() != self._known_signature:
            self._changed_elsewhere = True

    def _read_index_for_update(self, *, rebuild_if_missing: bool = True) -> Any:
        if not self._index_path.exists():
            return self._rebuilt_index() if rebuild_if_missing else None
        try:
            return self.read_index()
        except ToolStorageError as exc:
            backup = self._index_path.with_name(f"{INDEX_FILE}.corrupt-{time.time_ns()}")
            os.replace(self._index_path, backup)
            logger.warning("%s; kept as %s and rebuilt from the tool files", exc, backup.name)
            return self._rebuilt_index() if rebuild_if_missing else None

    def _rebuilt_index(self) -> dict[str, Any]:
        tools, _ = self._scan()
        index = empty_index()
        for tool in tools:
            index["tools"][tool.tool_id] = index_entry(tool, None)
        return index

    def _write_index(self, index: dict[str, Any]) -> None:
        tmp = self._stage_index(index)
        try:
            os.replace(tmp, self._index_path)
        except BaseException:
            _unlink_quietly(tmp)
            raise
        sync_directory(self.directory)
        self._index_written()

    def _stage_index(self, index: dict[str, Any]) -> str:
        now = naive_utc()
        index.setdefault("created_at", now)
        index["last_updated"] = now
        index["tool_count"] = len(index["tools"])
        # The index is a summary that load repairs when it is damaged or stale, so it skips the file fsync
        # and is written compactly (10,000 entries: 13 ms instead of 51 ms); the folder's fsync after the
        # rename makes the tool file's rename durable too.
        return write_temp(self._index_path, index, sync_file=False, indent=None)

    def _index_written(self) -> None:
        if not self._changed_elsewhere:
            self._known_signature = self.signature()


def describe_validation_error(exc: ValidationError) -> str:
    """A pydantic error as `field: message (got value)` sentences."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        value = err.get("input")
        got = f" (got {value!r:.60})" if err.get("type") != "missing" and not isinstance(value, dict) else ""
        parts.append(f"{loc}: {err.get('msg')}{got}")
    return "; ".join(parts)
