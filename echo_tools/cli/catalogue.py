"""The catalogue and executor a command works on: the registry of `--storage` (or the database), the
executor feeding the run history, and the hint shown when a stored tool's module is not allowed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from echo_tools.cli.common import ENV_ALLOWED_MODULES, CliError, agent_tools_dir, allowed_modules, storage_dir

if TYPE_CHECKING:
    from echo_tools.executor import ToolExecutor
    from echo_tools.registry import ToolRegistry


def open_registry(args: argparse.Namespace, *, strict_egress: bool = False) -> ToolRegistry:
    """The registry of `--storage`; the AgentTools manifests are discovered when the storage is empty.

    The CLI is a local tool, so loopback egress is allowed (local API and MCP servers), except for
    `serve`, which keeps the strict default unless `--allow-loopback-egress` is given.
    """
    from echo_tools.cli.history import pg_stores
    from echo_tools.egress import EgressPolicy
    from echo_tools.registry import DEFAULT_ALLOWED_MODULES, ToolRegistry

    tools_dir = agent_tools_dir()
    given = allowed_modules(args)
    if given:
        _look_in_current_folder()
    allowed = tuple(dict.fromkeys((*DEFAULT_ALLOWED_MODULES, *given)))
    stores = pg_stores(args)
    registry = ToolRegistry(
        storage_dir=None if stores is not None else storage_dir(args),
        storage=stores.storage if stores is not None else None,
        discovery_dirs=[tools_dir] if tools_dir else [],
        allowed_modules=allowed,
        egress=EgressPolicy() if strict_egress else EgressPolicy.local(),
    )
    if stores is not None:
        from echo_tools.pg.wiring import attach

        attach(registry, stores)  # another replica's catalogue change reloads this one
    if len(registry) == 0 and tools_dir is not None:
        registry.discover_local_tools()
    return registry


def _look_in_current_folder() -> None:
    """Let `--allow-module my_tools` find `./my_tools.py`, as `python -m` would: the current folder is
    searched last, after the installed packages, so it cannot shadow them (and only allowed modules are
    ever imported for a tool)."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.append(here)


def refused_tools(registry: ToolRegistry) -> list[dict[str, str]]:
    """Stored tools that were not loaded because their module is outside the allowed modules:
    `{tool_id, name, module, path}` each, read from the stored files the registry reported."""
    out: list[dict[str, str]] = []
    for problem in registry.problems():
        if "allowed modules" not in problem.message:
            continue
        try:
            data = json.loads(Path(problem.path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            config = data.get("execution_config")
            module = config.get("module") if isinstance(config, dict) else None
            out.append(
                {
                    "tool_id": str(data.get("tool_id") or Path(problem.path).stem),
                    "name": str(data.get("name") or ""),
                    "module": str(module or "?"),
                    "path": problem.path,
                }
            )
    return out


def refused_hint(registry: ToolRegistry, ref: str | None = None) -> str | None:
    """Why `ref` (or, without one, some stored tools) is missing when its module is not allowed, and how
    to allow it; None when no stored tool was refused for that reason."""
    refused = refused_tools(registry)
    if ref is not None:
        wanted = ref.strip().lower()
        refused = [t for t in refused if wanted in (t["tool_id"].lower(), t["name"].lower())]
    if not refused:
        return None
    packages = sorted({t["module"].split(".")[0] for t in refused})
    if ref is not None:
        what = (
            f"tool {ref!r} is stored ({refused[0]['path']}) but its module {refused[0]['module']!r} "
            "is not allowed"
        )
    else:
        listed = ", ".join(f"{t['tool_id']!r} ({t['module']})" for t in refused)
        what = f"{len(refused)} stored tool(s) not loaded because their module is not allowed: {listed}"
    return (
        f"{what}; allow it with "
        + " ".join(f"--allow-module {p}" for p in packages)
        + f" or {ENV_ALLOWED_MODULES}={','.join(packages)}, and make sure the package can be imported "
        "(install it, or add its parent folder to PYTHONPATH)"
    )


def require_tool(registry: ToolRegistry, ref: str) -> Any:
    """`registry.require(ref)`, saying so when the tool is stored but its module is not allowed."""
    from echo_tools.errors import ToolNotFoundError

    try:
        return registry.require(ref)
    except ToolNotFoundError as exc:
        hint = refused_hint(registry, ref)
        if hint is None:
            raise CliError(f"{exc.message} {where_looked(storage_folder(registry))}") from exc
        raise CliError(f"No tool matches {ref!r} in the loaded catalogue: {hint}") from exc


def storage_folder(registry: ToolRegistry) -> Any:
    """The storage folder of a registry (None: its catalogue is in a database)."""
    storage = registry.storage
    return storage.directory if storage is not None else None


def where_looked(folder: Any) -> str:
    """`(the catalogue at /abs/path, chosen as ...)`: where a command looked, for its "not found" errors."""
    from echo_tools.settings import find_storage

    if folder is None:
        return "(the catalogue in the database of --database-url)"
    chosen = find_storage()
    how = chosen.how if Path(folder).absolute() == chosen.path else "--storage"
    return f"(looked in the catalogue at {Path(folder).absolute()}: {how})"


def open_executor(
    registry: ToolRegistry, args: argparse.Namespace, *, strict_egress: bool = False
) -> ToolExecutor:
    from echo_tools.cli.history import feeds_history, run_history
    from echo_tools.egress import EgressPolicy
    from echo_tools.executor import ToolExecutor

    # every call is kept in the run history (`echo-tools events --run ID`, `GET /tools/events/history`)
    history = run_history(args, required=False)
    sinks: list[Any] = [history] if history is not None else []
    if getattr(args, "events", None):
        from echo_tools.events import JsonlEventLog

        sinks.append(JsonlEventLog(args.events))
    from echo_tools.governance.wiring import governance_stores

    executor = ToolExecutor(
        registry,
        sinks,
        egress=EgressPolicy() if strict_egress else EgressPolicy.local(),
        **governance_stores(history),  # approvals and quota counts beside the history (shared by processes)
    )
    if history is not None:
        feeds_history(args, executor.events)
    return executor
