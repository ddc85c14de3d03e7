"""ToolRegistry: the catalogue of tools, persisted in EchoAI's layout, with name resolution and discovery.

Registration checks everything a tool definition can get wrong before anything is written: the id (never
a path), the name (unique case-insensitively and after slugging), both schemas against the JSON Schema
meta-schema, and the `execution_config` of its type (Python targets only inside `allowed_modules`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from echo_tools.backends import check_execution_config
from echo_tools.egress import EgressPolicy
from echo_tools.errors import (
    ToolError,
    ToolNameConflictError,
    ToolNotFoundError,
    ToolRegistrationError,
    ToolValidationError,
)
from echo_tools.events import EventBus, EventSink, ToolEvent
from echo_tools.models import ToolDef, ToolStatus, ToolType, slugify
from echo_tools.schema import check_schema, compiled, normalize_args
from echo_tools.storage import Problem, ToolStorage, describe_validation_error

logger = logging.getLogger("echo_tools.registry")

MANIFEST_NAME = "tool_manifest.json"
DEFAULT_ALLOWED_MODULES = ("AgentTools",)
_MAX_MANIFEST_BYTES = 1024 * 1024


class ToolRegistry:
    """The catalogue: register, look up, resolve, list, discover.

    Args:
        storage_dir: folder of stored tools (EchoAI layout). None keeps the catalogue in memory only.
        discovery_dirs: folders whose immediate subfolders hold `tool_manifest.json` files.
        allowed_modules: packages that `local`, `crewai` and `langchain` tools may name. Nothing can widen
            this list after construction.
        event_sinks: callables that receive `tool.registered` events.
        egress: the policy `api` tool URLs are checked against at registration (default: deny private).
        storage: a ready `ToolStorage` (instead of `storage_dir`).
    """

    def __init__(
        self,
        storage_dir: str | Path | None = None,
        discovery_dirs: Iterable[str | Path] = (),
        allowed_modules: Sequence[str] = DEFAULT_ALLOWED_MODULES,
        *,
        event_sinks: Iterable[EventSink] = (),
        egress: EgressPolicy | None = None,
        storage: ToolStorage | None = None,
    ) -> None:
        self.storage = storage or (ToolStorage(storage_dir) if storage_dir is not None else None)
        self.discovery_dirs = [Path(d) for d in discovery_dirs]
        self._allowed_modules: tuple[str, ...] = tuple(allowed_modules)
        self.egress = egress or EgressPolicy()
        self.events = EventBus(event_sinks)
        self._lock = threading.RLock()
        self._tools: dict[str, ToolDef] = {}
        self._keys: dict[str, str] = {}  # lookup key (casefolded name, slug, llm name) -> tool_id
        self._problems: list[Problem] = []
        self._discovery_problems: list[Problem] = []
        self.mcp_servers: dict[str, dict[str, Any]] = {}
        if self.storage is not None:
            self.reload()

    @property
    def allowed_modules(self) -> tuple[str, ...]:
        """Packages that Python-backed tools may name (read-only)."""
        return self._allowed_modules

    # -- loading -------------------------------------------------------------------------------------

    def reload(self) -> None:
        """Re-read the storage folder (picks up other processes' writes)."""
        if self.storage is None:
            return
        tools, problems = self.storage.load_all()
        with self._lock:
            self._tools.clear()
            self._keys.clear()
            self._problems = list(problems)
            for tool in tools:
                refusal = self._load_time_refusal(tool)
                if refusal:
                    self._problems.append(Problem(str(self.storage.path_for(tool.tool_id)), refusal))
                    continue
                clash = self._clash(tool)
                if clash:
                    self._problems.append(Problem(str(self.storage.path_for(tool.tool_id)), clash))
                    continue
                self._index(tool)

    def _load_time_refusal(self, tool: ToolDef) -> str | None:
        # A stored file may have been edited by hand: apply the same module allow-list as registration.
        try:
            check_execution_config(tool, self._allowed_modules)
        except ToolRegistrationError as exc:
            return f"refused: {exc.message}"
        return None

    def problems(self) -> list[Problem]:
        """Files that could not be loaded or discovered, with the reason (latest load and discovery)."""
        with self._lock:
            return [*self._problems, *self._discovery_problems]

    # -- registration --------------------------------------------------------------------------------

    def register(self, tool: ToolDef | Mapping[str, Any]) -> dict[str, str]:
        """Check and store a tool; returns `{"tool_id", "status": "registered" | "updated"}`.

        Raises:
            ToolRegistrationError: the definition is invalid or unsafe (the field is named).
            ToolNameConflictError: another tool has the same name case-insensitively.
            ToolStorageError: the storage folder cannot be written; nothing in memory changes.
        """
        tool = self._coerce(tool)
        self._check(tool)
        with self._lock:
            clash = self._clash(tool)
            if clash:
                raise ToolNameConflictError(clash, tool_id=tool.tool_id, field="name")
            existed = tool.tool_id in self._tools
            if self.storage is not None:
                self.storage.save(tool)
            self._unindex(tool.tool_id)
            self._index(tool)
        status = "updated" if existed else "registered"
        self.events.emit(
            ToolEvent(
                type="tool.registered",
                tool_id=tool.tool_id,
                tool_name=tool.name,
                tool_type=tool.tool_type.value,
                metadata={"status": status, "version": tool.version},
            )
        )
        return {"tool_id": tool.tool_id, "status": status}

    def _coerce(self, tool: ToolDef | Mapping[str, Any]) -> ToolDef:
        if isinstance(tool, ToolDef):
            return tool.model_copy(deep=True)
        if not isinstance(tool, Mapping):
            raise ToolRegistrationError(f"A tool definition must be a ToolDef or an object, got {tool!r:.80}")
        data = dict(tool)
        data.pop("_saved_at", None)
        try:
            return ToolDef.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            field = ".".join(str(p) for p in errors[0]["loc"]) if errors else None
            raise ToolRegistrationError(
                f"Invalid tool definition: {describe_validation_error(exc)}",
                tool_id=data.get("tool_id") if isinstance(data.get("tool_id"), str) else None,
                field=field,
            ) from exc

    def _check(self, tool: ToolDef) -> None:
        check_schema(tool.input_schema, field="input_schema", tool_id=tool.tool_id)
        check_schema(tool.output_schema, field="output_schema", tool_id=tool.tool_id)
        check_execution_config(tool, self._allowed_modules, self.egress)

    def _clash(self, tool: ToolDef) -> str | None:
        for key in self._keys_of(tool):
            owner = self._keys.get(key)
            if owner is not None and owner != tool.tool_id:
                other = self._tools[owner]
                return (
                    f"Tool name {tool.name!r} (tool_id {tool.tool_id!r}) clashes with tool {other.name!r} "
                    f"(tool_id {owner!r}): names must be unique ignoring case and punctuation"
                )
        if tool.tool_id in self._keys and self._keys[tool.tool_id] != tool.tool_id:
            return f"tool_id {tool.tool_id!r} is already the name of tool {self._keys[tool.tool_id]!r}"
        return None

    @staticmethod
    def _keys_of(tool: ToolDef) -> set[str]:
        keys = {tool.name.casefold(), tool.llm_name}
        if tool.slug:
            keys.add(tool.slug)
        return keys

    def _index(self, tool: ToolDef) -> None:
        self._tools[tool.tool_id] = tool
        for key in self._keys_of(tool):
            self._keys[key] = tool.tool_id

    def _unindex(self, tool_id: str) -> None:
        old = self._tools.pop(tool_id, None)
        if old is not None:
            for key in self._keys_of(old):
                if self._keys.get(key) == tool_id:
                    del self._keys[key]

    def delete(self, tool_id: str) -> bool:
        """Remove a tool from the catalogue and storage; False when it was not there."""
        with self._lock:
            known = tool_id in self._tools
            stored = self.storage.delete(tool_id) if self.storage is not None else False
            self._unindex(tool_id)
        return known or stored

    # -- lookup --------------------------------------------------------------------------------------

    def get(self, tool_id: str) -> ToolDef | None:
        """The tool with this id, or None."""
        return self._tools.get(tool_id)

    def get_by_name(self, name: str) -> ToolDef | None:
        """The tool with this display name (case-insensitive), or None."""
        tool_id = self._keys.get(name.casefold()) if isinstance(name, str) else None
        return self._tools.get(tool_id) if tool_id else None

    def resolve(self, ref: str | ToolDef | None) -> ToolDef | None:
        """Whatever a canvas or an LLM calls a tool -> the tool, or None when unknown.

        Accepted: the id, the exact or case-insensitive name, the slug (`"Web Search"` -> `web_search`,
        also `tool_web_search`), and the LLM-facing name.
        """
        if isinstance(ref, ToolDef):
            return self._tools.get(ref.tool_id)
        if not isinstance(ref, str) or not ref:
            return None
        found = self._tools.get(ref)
        if found is not None:
            return found
        tool_id = self._keys.get(ref.casefold())
        if tool_id is None:
            slug = slugify(ref)
            if slug:
                tool_id = self._keys.get(slug) or (f"tool_{slug}" if f"tool_{slug}" in self._tools else None)
                if tool_id is None and slug.startswith("tool_"):
                    tool_id = self._keys.get(slug[5:])
        return self._tools.get(tool_id) if tool_id else None

    def require(self, ref: str | ToolDef) -> ToolDef:
        """`resolve`, raising `ToolNotFoundError` naming the reference when unknown."""
        tool = self.resolve(ref)
        if tool is None:
            raise ToolNotFoundError(f"No tool matches {ref!r}", field="tool")
        return tool

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, str) and self.resolve(ref) is not None

    def __len__(self) -> int:
        return len(self._tools)

    # -- listing -------------------------------------------------------------------------------------

    def list_all(self) -> list[ToolDef]:
        """Every tool, sorted by id."""
        return [self._tools[k] for k in sorted(self._tools)]

    def list_by_type(self, tool_type: ToolType | str) -> list[ToolDef]:
        """Tools of one type (`local`, `mcp`, `api`, `crewai`, `langchain`; any case)."""
        try:
            wanted = ToolType(tool_type.lower() if isinstance(tool_type, str) else tool_type)
        except ValueError as exc:
            allowed = ", ".join(t.value for t in ToolType)
            raise ToolValidationError(
                f"tool_type {tool_type!r} is unknown; expected one of: {allowed}"
            ) from exc
        return [t for t in self.list_all() if t.tool_type == wanted]

    def list_by_tags(self, tags: Iterable[str], *, match_all: bool = False) -> list[ToolDef]:
        """Tools carrying any (or, with `match_all`, every) of `tags`."""
        wanted = {t.casefold() for t in tags}
        out = []
        for tool in self.list_all():
            have = {t.casefold() for t in tool.tags}
            if (wanted <= have) if match_all else (wanted & have):
                out.append(tool)
        return out

    def search(self, query: str) -> list[ToolDef]:
        """Tools whose id, name, description or tags contain every word of `query` (case-insensitive)."""
        words = query.casefold().split()
        out = []
        for tool in self.list_all():
            text = " ".join([tool.tool_id, tool.name, tool.description, *tool.tags]).casefold()
            if all(w in text for w in words):
                out.append(tool)
        return out

    def get_tools_for_agent(self, refs: Iterable[str]) -> list[ToolDef]:
        """The active tools among `refs` (ids or names), in order, unknown and inactive ones left out."""
        out: list[ToolDef] = []
        for ref in refs:
            tool = self.resolve(ref)
            if tool is not None and tool.status == ToolStatus.ACTIVE and tool not in out:
                out.append(tool)
        return out

    def validate_tool_input(self, tool_id: str, data: Any) -> bool:
        """True when `data` (after normalising) is valid input for the tool.

        Raises:
            ToolNotFoundError: no such tool.
        """
        tool = self.require(tool_id)
        return compiled(tool, "input").is_valid(normalize_args(tool.input_schema, data))

    def input_errors(self, tool_id: str, data: Any) -> list[str]:
        """Readable reasons why `data` is not valid input (empty when it is)."""
        tool = self.require(tool_id)
        return compiled(tool, "input").errors(normalize_args(tool.input_schema, data))

    # -- discovery -----------------------------------------------------------------------------------

    def discover_local_tools(self, dirs: Iterable[str | Path] | None = None) -> list[ToolDef]:
        """Scan `discovery_dirs` (or `dirs`) for `*/tool_manifest.json` and register what changed.

        New tools are registered, changed manifests update the stored copy, unchanged ones are left as
        they are. A bad manifest is reported through `problems()` and does not stop the scan.

        Returns:
            Every tool whose manifest was valid, registered or not.
        """
        found: list[ToolDef] = []
        problems: list[Problem] = []
        for base in [Path(d) for d in dirs] if dirs is not None else self.discovery_dirs:
            if not base.is_dir():
                problems.append(Problem(str(base), "discovery folder does not exist"))
                continue
            for folder in sorted(p for p in base.iterdir() if p.is_dir()):
                manifest = folder / MANIFEST_NAME
                if not manifest.is_file():
                    continue
                try:
                    tool = self._read_manifest(manifest)
                    current = self._tools.get(tool.tool_id)
                    if current is None or current.to_storage_dict() != tool.to_storage_dict():
                        self.register(tool)
                    found.append(self._tools[tool.tool_id])
                except ToolError as exc:
                    logger.warning("manifest %s skipped: %s", manifest, exc)
                    problems.append(Problem(str(manifest), str(exc)))
        with self._lock:
            self._discovery_problems = problems
        return found

    def _read_manifest(self, path: Path) -> ToolDef:
        if path.stat().st_size > _MAX_MANIFEST_BYTES:
            raise ToolRegistrationError(f"manifest is larger than {_MAX_MANIFEST_BYTES} bytes")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ToolRegistrationError(f"manifest is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ToolRegistrationError(f"manifest must be a JSON object, got {type(data).__name__}")
        tool = self._coerce(data)
        self._check(tool)
        return tool

    # -- MCP servers (implemented in echo_tools.mcp_config) ------------------------------------------

    def add_mcp_server(self, name: str, config: Mapping[str, Any]) -> list[ToolDef]:
        """Store an MCP server config (`mcpServers` entry shape), discover its tools and register them."""
        from echo_tools.mcp_config import add_mcp_server

        return add_mcp_server(self, name, config)

    def load_mcp_config(self, path: str | Path) -> dict[str, list[ToolDef]]:
        """Add every server of an `{"mcpServers": {...}}` JSON file; returns the tools per server."""
        from echo_tools.mcp_config import load_mcp_config

        return load_mcp_config(self, path)

    def refresh_mcp_server(self, name: str) -> list[ToolDef]:
        """Re-list one server's tools: new ones registered, changed ones updated, vanished ones disabled."""
        from echo_tools.mcp_config import refresh_mcp_server

        return refresh_mcp_server(self, name)
