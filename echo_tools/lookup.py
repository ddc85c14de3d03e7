"""`ToolLookup`: what the checks and helpers below the catalogue need from it, declared as a Protocol.

Skills, stored workflows and agents, planning, suggestions and tool search take any object with these
members (a `ToolRegistry` is one), so they never import the registry and the registry can import them.
"""

from __future__ import annotations

from typing import Any, Protocol

from echo_tools.models import ToolDef
from echo_tools.stores import AgentStore, WorkflowStore


class ToolLookup(Protocol):
    """The read side of a catalogue (what registration checks, planning and suggestions use)."""

    @property
    def workflows(self) -> WorkflowStore | None: ...

    @property
    def agents(self) -> AgentStore | None: ...

    def resolve(self, ref: str | ToolDef | None) -> ToolDef | None: ...

    def list_all(self) -> list[ToolDef]: ...


class SearchableLookup(ToolLookup, Protocol):
    """A `ToolLookup` that also searches and adds in-process tools (what `echo_tools.tool_search` uses)."""

    def search(self, query: str, k: int | None = None) -> list[ToolDef]: ...

    def add(self, obj: Any, **fields: Any) -> ToolDef: ...
