"""Discovery: the service that scans folders of `tool_manifest.json` files into a catalogue.

`ToolRegistry.discover_local_tools` calls `discover_local_tools(registry, dirs)`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from echo_tools.builtin_tools import builtin_tools_dir, check_builtin_importable
from echo_tools.catalogue import Catalogue
from echo_tools.definitions import coerce_definition, written_by_host
from echo_tools.errors import ToolError, ToolRegistrationError
from echo_tools.models import ToolDef, ToolSource, ToolStatus
from echo_tools.storage import Problem
from echo_tools.trust import PYTHON_TYPES, entry_point, remote_definition, unmarked_copy_of

logger = logging.getLogger("echo_tools.registry")

MANIFEST_NAME = "tool_manifest.json"
_MAX_MANIFEST_BYTES = 1024 * 1024


def discover_local_tools(catalogue: Catalogue, dirs: Iterable[str | Path] | None = None) -> list[ToolDef]:
    """Scan `discovery_dirs` (or `dirs`) for `*/tool_manifest.json` and register what changed.

    New tools are registered, changed manifests update the stored copy, unchanged ones are left as
    they are (not rewritten). In a store the host wrote (files without a `source`: EchoAI's), manifests
    are used in memory only and its files stay byte for byte. A bad manifest is reported through
    `problems()` and does not stop the scan.

    Returns:
        Every tool whose manifest was valid, registered or not.

    Raises:
        ToolConfigError: a folder is the shipped tools' (`builtin_tools_dir()`) but `import AgentTools`
            loads another package (a host's own `AgentTools`): both paths are named.
    """
    found: list[ToolDef] = []
    problems: list[Problem] = []
    declared_before = _declarations(catalogue)
    bases = [Path(d) for d in dirs] if dirs is not None else catalogue.discovery_dirs
    # a store the host wrote (EchoAI's) is read as is: manifests are used in memory, nothing is written
    host_store = any(written_by_host(t) for t in catalogue._tools.values())
    if any(_is_builtin_dir(base) for base in bases):
        check_builtin_importable()  # before anything is registered
    for base in bases:
        try:
            folders = sorted(p for p in base.iterdir() if p.is_dir())
        except OSError as exc:
            # a relative folder is read from the current one: say where it was looked for
            where = base if base.is_absolute() else Path.cwd() / base
            logger.warning("discovery folder %s cannot be read: %s", where, exc.strerror or exc)
            problems.append(Problem(str(where), f"discovery folder cannot be read: {exc.strerror or exc}"))
            continue
        for folder in folders:
            manifest = folder / MANIFEST_NAME
            if not manifest.is_file():
                continue
            try:
                tool = read_manifest(manifest)
                current = catalogue._tools.get(tool.tool_id)
                if current is not None and unmarked_copy_of(current, tool):
                    # EchoAI's own copy of the manifest: known as builtin, its file untouched
                    with catalogue._lock:
                        catalogue._put(tool)
                elif (current is not None and written_by_host(current)) or (current is None and host_store):
                    catalogue._adopt(tool)
                elif current is None or current.to_storage_dict() != tool.to_storage_dict():
                    catalogue.register(tool)
                found.append(catalogue._tools.get(tool.tool_id) or tool)
            except ToolError as exc:
                logger.warning("manifest %s skipped: %s", manifest, exc)
                problems.append(Problem(str(manifest), str(exc)))
            except OSError as exc:
                problems.append(Problem(str(manifest), f"cannot be read: {exc.strerror or exc}"))
    catalogue._discovery_problems = problems
    if _declarations(catalogue) != declared_before:
        _refresh_remote_tools(catalogue)
    return found


def _declarations(catalogue: Catalogue) -> dict[tuple[str, ...], dict[str, Any]]:
    return {
        entry_point(t): t.to_storage_dict()
        for t in catalogue._tools.values()
        if t.source == ToolSource.BUILTIN and t.tool_type in PYTHON_TYPES
    }


def _refresh_remote_tools(catalogue: Catalogue) -> None:
    # a changed manifest changes what its remote clones may do: give them its new permissions and
    # limits, and disable the ones whose entry point no manifest declares any more
    for tool in [t for t in catalogue._tools.values() if t.source == ToolSource.REMOTE]:
        try:
            fresh = remote_definition(tool, list(catalogue._tools.values()), allowed_env=None)
        except ToolRegistrationError as exc:
            if tool.status == ToolStatus.DISABLED:
                continue
            logger.warning("remote tool %s disabled: %s", tool.tool_id, exc)
            fresh = tool.model_copy(update={"status": ToolStatus.DISABLED})
        if fresh.to_storage_dict() != tool.to_storage_dict():
            try:
                catalogue._store(fresh, None)
            except ToolError as exc:
                logger.warning("remote tool %s not refreshed: %s", tool.tool_id, exc)


def read_manifest(path: Path) -> ToolDef:
    size = path.stat().st_size
    if size > _MAX_MANIFEST_BYTES:
        raise ToolRegistrationError(f"manifest is {size} bytes, more than the {_MAX_MANIFEST_BYTES} allowed")
    try:
        data = json.loads(path.read_bytes())
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise ToolRegistrationError(f"manifest is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ToolRegistrationError(
            f"manifest must be a JSON object, got {type(data).__name__}: {data!r:.60}"
        )
    if "name" not in data:
        raise ToolRegistrationError("manifest has no 'name' field; every tool needs one", field="name")
    # a manifest found by discovery is what the package ships: `builtin`, whatever the file says
    return coerce_definition(data, source=ToolSource.BUILTIN)  # checked by register() when new or changed


def _is_builtin_dir(base: Path) -> bool:
    try:
        return base.resolve() == builtin_tools_dir()
    except OSError:
        return False
