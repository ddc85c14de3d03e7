"""The declared storage interface of a catalogue: `ToolStore`, and the MCP config and secret stores it carries.

Two implementations conform: `ToolStorage` (a folder of JSON files in EchoAI's layout) and
`echo_tools.pg.PgToolStorage` (PostgreSQL). The registry and its services use only what is declared here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from echo_tools.models import ToolDef
from echo_tools.storage import Guard, Problem


class McpConfigStore(Protocol):
    """The stored MCP server configs (`mcpServers` entries by server name)."""

    def load(self) -> dict[str, dict[str, Any]]: ...

    def put(self, name: str, config: dict[str, Any]) -> None: ...

    def remove(self, name: str) -> bool: ...


class SecretStore(Protocol):
    """Encrypted blobs by name (the credential store keeps its file in one)."""

    def get(self, name: str) -> bytes | None: ...

    def put(self, name: str, value: bytes) -> None: ...

    def delete(self, name: str) -> bool: ...

    def names(self) -> list[str]: ...


class ToolStore(Protocol):
    """Where a catalogue's tools, MCP server configs and secrets are kept."""

    @property
    def directory(self) -> Path | None:
        """The folder of the store (the credential and run files live in it), or None (a database)."""
        ...

    @property
    def mcp_configs(self) -> McpConfigStore:
        """The MCP server configs stored with the tools."""
        ...

    @property
    def secrets(self) -> SecretStore | None:
        """Where the encrypted credential store lives; None keeps it as a file in `directory`."""
        ...

    @property
    def stale_temp_files(self) -> int:
        """Temp files that writers which died left behind (the index is repaired when there are any)."""
        ...

    def location(self, tool_id: str) -> str:
        """Where the tool is stored, as problems name it (a file path or `postgresql:echo_tools/<id>`)."""
        ...

    def contains(self, tool_id: str) -> bool:
        """True when `tool_id` is stored."""
        ...

    def changed_elsewhere(self) -> bool: ...

    def index_matches(self, tool_ids: Iterable[str]) -> bool: ...

    def repair_index(self) -> bool: ...

    def save(self, tool: ToolDef, *, check_names: bool = True, replaces: Guard | None = None) -> bool: ...

    def save_many(
        self, tools: Sequence[ToolDef], *, check_names: bool = True, replaces: Guard | None = None
    ) -> list[bool]: ...

    def delete(self, tool_id: str, *, removes: Guard | None = None) -> bool: ...

    def load(self, tool_id: str) -> ToolDef | None: ...

    def load_all(self) -> tuple[list[ToolDef], list[Problem]]: ...
