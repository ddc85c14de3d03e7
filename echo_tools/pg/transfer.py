"""Copy a catalogue between a JSON store and PostgreSQL, both ways (`echo-tools migrate --to URL`).

Tools travel as `ToolDef.to_storage_dict()` (the same meaning on both sides; the JSON side adds its own
`_saved_at`), MCP server configs as the `mcpServers` object. A tool that cannot be read on the source side,
or whose name clashes on the target side, is reported in `Transfer.problems` and the rest is copied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from echo_tools.errors import ToolNameConflictError, ToolStorageError
from echo_tools.pg.database import PgDatabase, open_database
from echo_tools.pg.tool_store import PgToolStorage
from echo_tools.storage import Problem, ToolStorage, atomic_write_json

MCP_FILE = "mcp_servers.json"


@dataclass
class Transfer:
    """What a copy did: tools written, tools already identical, MCP servers copied, problems met."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    mcp_servers: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "written": self.written,
            "unchanged": self.unchanged,
            "mcp_servers": self.mcp_servers,
            "problems": [str(p) for p in self.problems],
        }


def is_database_url(target: str | Path) -> bool:
    """True for `postgresql://...` and `postgres://...` (anything else is a folder)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def migrate(source: str | Path, target: str | Path) -> Transfer:
    """Copy the catalogue from `source` to `target`: one is a JSON store folder, the other a database URL.

    Raises:
        ToolStorageError: both or neither are database URLs, or either side cannot be opened.
    """
    if is_database_url(source) == is_database_url(target):
        raise ToolStorageError(
            f"migrate needs one JSON store folder and one postgresql:// URL, got source {str(source)!r} "
            f"and target {str(target)!r}"
        )
    if is_database_url(target):
        return json_to_postgres(source, str(target))
    return postgres_to_json(str(source), target)


def json_to_postgres(json_dir: str | Path, database: str | PgDatabase) -> Transfer:
    """Copy every readable tool and the MCP server configs of a JSON store into PostgreSQL."""
    folder = Path(json_dir)
    if not folder.is_dir():
        raise ToolStorageError(f"JSON store {str(folder)!r} is not a folder")
    source = ToolStorage(folder)
    tools, problems = source.load_all()
    db, owned = open_database(database)
    report = Transfer(problems=list(problems))
    target = PgToolStorage(db, listen=False)
    try:
        for tool in tools:
            try:
                (report.written if target.save(tool) else report.unchanged).append(tool.tool_id)
            except ToolNameConflictError as exc:
                report.problems.append(Problem(source.location(tool.tool_id), exc.message))
        mcp_path = folder / MCP_FILE
        if mcp_path.is_file():
            for name, config in _read_mcp(mcp_path).items():
                target.mcp_configs.put(name, config)
                report.mcp_servers.append(name)
    finally:
        target.close()
        if owned:
            db.close()
    return report


def postgres_to_json(database: str | PgDatabase, json_dir: str | Path) -> Transfer:
    """Copy every valid tool and the MCP server configs from PostgreSQL into a JSON store folder."""
    db, owned = open_database(database)
    source = PgToolStorage(db, listen=False)
    target = ToolStorage(json_dir)
    try:
        tools, problems = source.load_all()
        servers = source.mcp_configs.load()
    finally:
        source.close()
        if owned:
            db.close()
    report = Transfer(problems=list(problems))
    for tool in tools:
        try:
            (report.written if target.save(tool) else report.unchanged).append(tool.tool_id)
        except ToolNameConflictError as exc:
            report.problems.append(Problem(source.location(tool.tool_id), exc.message))
    if servers:
        mcp_path = target.directory / MCP_FILE
        with target.locked():
            stored = _read_mcp(mcp_path) if mcp_path.is_file() else {}
            atomic_write_json(mcp_path, {"mcpServers": {**stored, **servers}})
        report.mcp_servers = sorted(servers)
    return report


def _read_mcp(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ToolStorageError(f"MCP server config {str(path)!r} cannot be read: {exc}") from exc
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ToolStorageError(f"MCP server config {str(path)!r} has no 'mcpServers' object")
    return servers
