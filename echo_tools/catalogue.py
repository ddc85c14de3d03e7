"""Catalogue: the tools of a catalogue, persisted in a `ToolStore`, with registration and name resolution.

Registration checks everything a tool definition can get wrong before anything is written: the id (never
a path, never a reserved file), the name (unique case-insensitively and after slugging), both schemas
against the JSON Schema meta-schema, how deeply the definition nests, and the `execution_config` of its
type (Python targets only inside `allowed_modules`). `register_remote` and `delete_remote` add the trust
rules for definitions that arrived over HTTP (see `echo_tools.trust`). `echo_tools.registry.ToolRegistry`
wires the services (discovery, MCP servers, search) over it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from echo_tools.backends import check_execution_config
from echo_tools.definitions import (
    check_batch_names,
    clash_in,
    coerce_definition,
    module_list,
    remote_at_load,
    schema_shape,
    written_by_host,
)
from echo_tools.egress import EgressPolicy
from echo_tools.errors import (
    ToolNameConflictError,
    ToolNotFoundError,
    ToolRegistrationError,
    ToolStorageError,
    ToolValidationError,
)
from echo_tools.events import EventBus, EventSink, ToolEvent
from echo_tools.in_process import InProcessTool
from echo_tools.models import ToolDef, ToolSource, ToolType, slugify
from echo_tools.schema import check_schema
from echo_tools.skills import check_skill_tools
from echo_tools.storage import RESERVED_FILES, Guard, Problem, ToolStorage, gc_paused
from echo_tools.store import ToolStore
from echo_tools.stored_tools import check_stored_tool
from echo_tools.stores import AgentStore, WorkflowStore
from echo_tools.suggest import tool_hint
from echo_tools.trust import remote_definition, with_trust_tags, writable_remotely

logger = logging.getLogger("echo_tools.registry")

DEFAULT_ALLOWED_MODULES = ("AgentTools",)


class Catalogue:
    """The catalogue: register, add, look up, resolve, list, remove.

    Lookups read plain dicts without locking; writers (register, delete, reload, discovery) are serialised
    by one lock and update the dicts so that a reader never sees a tool missing halfway through an update.
    Writes by other processes are picked up by `reload()`, and automatically when a lookup misses or
    `list_all()` runs after the storage folder changed.

    Args:
        storage_dir: folder of stored tools (EchoAI layout). None keeps the catalogue in memory only.
        discovery_dirs: folders whose immediate subfolders hold `tool_manifest.json` files.
        allowed_modules: packages that `local`, `crewai` and `langchain` tools may name. Nothing can widen
            this list after construction.
        event_sinks: callables that receive `tool.registered` events.
        egress: the policy `api` tool URLs are checked against at registration (default: deny private).
        storage: a ready `ToolStore` (`ToolStorage` or `PgToolStorage`) instead of `storage_dir`.
        workflows: EchoAI's stored workflows, which `workflow` tools run (`WorkflowStore`).
        agents: EchoAI's stored agents, which `agent` tools and workflows use (`AgentStore`).
    """

    def __init__(
        self,
        storage_dir: str | Path | None = None,
        discovery_dirs: Iterable[str | Path] = (),
        allowed_modules: Sequence[str] = DEFAULT_ALLOWED_MODULES,
        *,
        event_sinks: Iterable[EventSink] = (),
        egress: EgressPolicy | None = None,
        storage: ToolStore | None = None,
        workflows: WorkflowStore | None = None,
        agents: AgentStore | None = None,
    ) -> None:
        self.storage: ToolStore | None = storage or (
            ToolStorage(storage_dir) if storage_dir is not None else None
        )
        self.workflows = workflows
        self.agents = agents
        self.discovery_dirs = [Path(d) for d in discovery_dirs]
        self._allowed_modules = module_list(allowed_modules)
        self.egress = egress or EgressPolicy()
        self.events = EventBus(event_sinks)
        self._lock = threading.RLock()  # serialises writers; readers never take it
        self._tools: dict[str, ToolDef] = {}
        self._keys: dict[str, str] = {}  # lookup key (casefolded name, slug, llm name) -> tool_id
        self._aliases: dict[str, frozenset[str]] = {}  # tool_id -> its lookup keys
        self._view = (self._tools, self._keys)
        self._problems: list[Problem] = []
        self._discovery_problems: list[Problem] = []
        self._adopted: dict[str, ToolDef] = {}  # manifests used over files the host wrote (discovery)
        self.mcp_servers: dict[str, dict[str, Any]] = {}
        self._in_process: dict[str, InProcessTool] = {}  # tools added by `add`: memory only
        self._generation = 0  # counts changes to `_tools` in place, for the search index
        self._index: tuple[Any, int, Any] | None = None  # (tools dict, generation, SearchIndex)
        self._credentials: Any = None  # a CredentialStore, made when first used (echo_tools.credentials)
        if self.storage is not None:
            self.reload()

    @property
    def credentials(self) -> Any:
        """The `CredentialStore` of this catalogue (`credentials.enc` in the storage folder)."""
        if self._credentials is None:
            from echo_tools.credentials import CredentialStore

            folder = self.storage.directory if self.storage is not None else None
            # with PostgreSQL (`PgToolStorage`) the encrypted store lives in the database's secret table
            secrets = self.storage.secrets if self.storage is not None else None
            self._credentials = CredentialStore(folder, egress=self.egress, secrets=secrets)
        return self._credentials

    @property
    def allowed_modules(self) -> tuple[str, ...]:
        """Packages that Python-backed tools may name (read-only)."""
        return self._allowed_modules

    # -- loading -------------------------------------------------------------------------------------

    def reload(self) -> None:
        """Re-read the storage folder (picks up other processes' writes) and repair a stale index.

        Files that cannot be used (unreadable, invalid, refused by the module allow-list, or clashing by
        name with a tool of a smaller id) are skipped and listed by `problems()`.
        """
        if self.storage is None:
            return
        with self._lock, gc_paused():
            tools, problems = self.storage.load_all()
            if self.storage.stale_temp_files or not self.storage.index_matches(t.tool_id for t in tools):
                self._repair_index()
            # the in-process tools (`add`) stand over the store: a stored file clashing with one is refused
            by_id: dict[str, ToolDef] = {i: e.tool for i, e in self._in_process.items()}
            aliases: dict[str, frozenset[str]] = {i: t.lookup_keys() for i, t in by_id.items()}
            keys: dict[str, str] = {key: i for i, found in aliases.items() for key in found}
            tools = [with_trust_tags(tool) for tool in tools]  # EchoAI's files carry no source tag
            if self._adopted:  # manifests used over a host's store (see `_adopt`) stand after a re-read
                stored = {t.tool_id for t in tools}
                tools = [self._adopted.get(t.tool_id, t) if written_by_host(t) else t for t in tools]
                tools += [t for tool_id, t in sorted(self._adopted.items()) if tool_id not in stored]
            for position, tool in enumerate(tools):
                if tool.source == ToolSource.REMOTE:
                    tool, refusal = remote_at_load(tool, tools)
                    tools[position] = tool
                else:
                    refusal = None
                tool_keys = tool.lookup_keys()
                refusal = refusal or self._load_time_refusal(tool) or clash_in(tool, tool_keys, by_id, keys)
                if refusal:
                    problems.append(Problem(self.storage.location(tool.tool_id), refusal))
                    continue
                by_id[tool.tool_id] = tool
                aliases[tool.tool_id] = tool_keys
                for key in tool_keys:
                    keys[key] = tool.tool_id
            # swap whole dicts: a concurrent reader sees the old catalogue or the new one, never half of
            # each (`_view` pairs them in one assignment for `_lookup`, which reads both; the executor's
            # hot path also reads `_view[0]` directly: `get()` costs it 0.3 us of a 5 us budget)
            self._view = (by_id, keys)
            self._tools, self._keys, self._aliases = by_id, keys, aliases
            self._problems = problems

    def _repair_index(self) -> None:
        assert self.storage is not None
        try:
            self.storage.repair_index()
        except ToolStorageError as exc:
            # a read-only folder can still be read; the index is only a summary for EchoAI
            logger.warning("tool index left as it is: %s", exc)

    def _refresh_if_changed(self) -> bool:
        if self.storage is None or not self.storage.changed_elsewhere():
            return False
        # A lookup never waits for a writer: when one of ours holds the lock, the change is (most likely)
        # its own, and the miss stands until the next lookup.
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if not self.storage.changed_elsewhere():
                return False
            self.reload()
            return True
        finally:
            self._lock.release()

    def _load_time_refusal(self, tool: ToolDef) -> str | None:
        # A stored file may have been edited by hand: apply the same module allow-list as registration.
        if tool.tool_id in self._in_process:
            return f"refused: tool_id {tool.tool_id!r} is an in-process tool of this registry (registry.add)"
        try:
            check_execution_config(tool, self._allowed_modules)
        except ToolRegistrationError as exc:
            return f"refused: {exc.message}"
        return None

    def problems(self) -> list[Problem]:
        """Files that could not be loaded or discovered, with the reason (latest load and discovery)."""
        return [*self._problems, *self._discovery_problems]

    # -- registration --------------------------------------------------------------------------------

    def add(self, obj: Any, **fields: Any) -> ToolDef:
        """Make a tool of a live Python object and add it to this catalogue, in memory only.

        `obj` is a function or closure (any module, `__main__` included), a bound method, an `@tool`
        function, a LangChain `BaseTool` instance or a CrewAI `BaseTool` instance. The tool's `source`
        is `python` and it is `ephemeral`: never written to the store, gone with this registry, never
        creatable or replaceable over HTTP. No `allowed_modules` applies: the host runs its own code.
        Adding an object of the same name again replaces the in-process tool.

        Args:
            obj: the object; its type hints and docstring (or the framework tool's schema) give the schema.
            **fields: `ToolDef` fields to set (`name`, `description`, `tags`, `timeout_ms`, `side_effect`...).

        Raises:
            ToolRegistrationError: `obj` cannot be a tool (what it got and what is accepted are named),
                or its schema is invalid.
            ToolNameConflictError: a stored tool has the same id or name.
        """
        from echo_tools.in_process import in_process_tool

        entry = in_process_tool(obj, **fields)
        tool = with_trust_tags(entry.tool)
        entry = dataclasses.replace(entry, tool=tool)
        for field in ("input_schema", "output_schema"):
            check_schema(getattr(tool, field), field=field, tool_id=tool.tool_id)
        with self._lock:
            current = self._tools.get(tool.tool_id)
            clash = self._clash(tool)
            if clash or (current is not None and not current.ephemeral):
                raise ToolNameConflictError(
                    clash or f"tool_id {tool.tool_id!r} is a stored tool; add this one under another name",
                    tool_id=tool.tool_id,
                    field="name",
                )
            self._in_process[tool.tool_id] = entry
            self._put(tool)
        self._announce(tool, "updated" if current is not None else "registered")
        return tool

    def in_process(self, tool: ToolDef) -> InProcessTool | None:
        """The object behind an in-process tool (`add`), for this very definition; None otherwise."""
        entry = self._in_process.get(tool.tool_id)
        return entry if entry is not None and entry.tool is tool else None

    def register(self, tool: ToolDef | Mapping[str, Any]) -> dict[str, str]:
        """Check and store a tool; returns `{"tool_id", "status": "registered" | "updated"}`.

        Re-registering an identical definition writes nothing and emits no event (status `updated`).

        Raises:
            ToolRegistrationError: the definition is invalid or unsafe (the field is named).
            ToolNameConflictError: another tool has the same name case-insensitively or after slugging,
                here or in the storage folder (another process).
            ToolStorageError: the storage folder cannot be written; nothing in memory changes.
        """
        tool = self._coerce(tool)
        self._check(tool)  # the JSON Schema meta-check is the slow part: done before taking the lock
        return self._store(tool, None)

    def register_remote(
        self, tool: ToolDef | Mapping[str, Any], *, allowed_env: Collection[str] = ()
    ) -> dict[str, str]:
        """Register a definition that arrived over HTTP: its source is `remote`, whatever it says.

        On top of `register`'s checks: a `local` / `crewai` / `langchain` tool must use an entry point a
        discovered manifest declares, and takes that manifest's permissions, isolation and limits; an
        `mcp` tool must be one a configured server listed; `${VAR}` references may name only
        `allowed_env`; and it may replace only another `remote` tool.

        Raises:
            ToolRegistrationError: as `register`, or a rule above is broken (the field is named).
            ToolReadOnlyError: a tool with this id exists and its source is not `remote`.
        """
        tool = self._coerce(tool, source=ToolSource.REMOTE)
        self._check(tool)
        tool = remote_definition(tool, list(self._tools.values()), allowed_env)
        current = self._tools.get(tool.tool_id)
        if current is not None:
            writable_remotely(current)
        return self._store(tool, writable_remotely)

    def register_many(
        self,
        tools: Iterable[ToolDef | Mapping[str, Any]],
        *,
        replaces: Guard | None = None,
    ) -> list[dict[str, str]]:
        """`register` for a batch (an OpenAPI import's operations): all are stored, or none.

        Every definition gets `register`'s checks first (a JSON Schema meta-check runs once per schema
        shape, see `_shape`); then one lock, one storage write and one index write. Checks see the
        catalogue as it was before the batch. With `PgToolStorage` each tool is its own transaction.

        Args:
            tools: the definitions; an id may appear once.
            replaces: called with the current copy of every tool the batch would replace (in memory and
                in storage), before anything is written; it raises to refuse.

        Raises:
            ToolRegistrationError: a definition is invalid, twice in the batch, or refused by `replaces`
                (its tool_id and field are named); nothing is stored.
            ToolNameConflictError: a name clashes with another tool's or another of the batch.
            ToolStorageError: the storage folder cannot be written; nothing changes.
        """
        batch: list[ToolDef] = []
        seen: set[str] = set()
        for item in tools:
            tool = self._coerce(item)
            if tool.tool_id in seen:
                raise ToolRegistrationError(
                    f"tool_id {tool.tool_id!r} appears twice in one batch",
                    tool_id=tool.tool_id,
                    field="tool_id",
                )
            seen.add(tool.tool_id)
            batch.append(tool)
        checked: set[str] = set()
        for tool in batch:
            self._check(tool, checked)
        with self._lock:
            currents = [self._tools.get(tool.tool_id) for tool in batch]
            for current in currents:
                if current is not None and current.ephemeral:
                    raise ToolNameConflictError(
                        f"tool_id {current.tool_id!r} is an in-process tool (registry.add); a batch cannot "
                        "replace it",
                        tool_id=current.tool_id,
                        field="tool_id",
                    )
            if replaces is not None:
                for current in currents:
                    if current is not None:
                        replaces(current)
            check_batch_names(batch, self._tools, self._keys)
            if self.storage is not None:
                existed = [self.storage.contains(tool.tool_id) for tool in batch]
                changed = self.storage.save_many(batch, replaces=replaces)
            else:
                existed = [False] * len(batch)
                changed = [True] * len(batch)
            statuses = []
            for position, (tool, current) in enumerate(zip(batch, currents, strict=True)):
                if current is None or current.to_storage_dict() != tool.to_storage_dict():
                    self._put(tool)
                else:
                    changed[position] = False  # keep the object we hand out, and its compiled validators
                self._forget_problem(tool.tool_id)
                statuses.append("updated" if current is not None or existed[position] else "registered")
        for tool, status, was_changed in zip(batch, statuses, changed, strict=True):
            if was_changed:
                self._announce(tool, status)
        return [{"tool_id": t.tool_id, "status": status} for t, status in zip(batch, statuses, strict=True)]

    def _store(self, tool: ToolDef, guard: Guard | None) -> dict[str, str]:
        with self._lock:
            clash = self._clash(tool)
            if clash:
                raise ToolNameConflictError(clash, tool_id=tool.tool_id, field="name")
            current = self._tools.get(tool.tool_id)
            if guard is not None and current is not None:
                guard(current)
            if current is not None and current.ephemeral:
                raise ToolNameConflictError(
                    f"tool_id {tool.tool_id!r} is an in-process tool (registry.add); it cannot be replaced "
                    "by a stored one: register under another tool_id",
                    tool_id=tool.tool_id,
                    field="tool_id",
                )
            existed = current is not None
            if self.storage is not None:
                existed = existed or self.storage.contains(tool.tool_id)
                changed = self.storage.save(tool, replaces=guard)
            else:
                changed = True
            if current is not None and current.to_storage_dict() == tool.to_storage_dict():
                changed = False  # keep the object we hand out, and its compiled validators
            else:
                self._put(tool)
            self._forget_problem(tool.tool_id)
        status = "updated" if existed else "registered"
        if changed:
            self._announce(tool, status)
        return {"tool_id": tool.tool_id, "status": status}

    def _announce(self, tool: ToolDef, status: str) -> None:
        # `status` is "registered" or "updated"; sent only when the stored definition changed
        self.events.emit(
            ToolEvent(
                type="tool.registered",
                tool_id=tool.tool_id,
                tool_name=tool.name,
                tool_type=tool.tool_type.value,
                metadata={"status": status, "version": tool.version},
            )
        )

    _coerce = staticmethod(coerce_definition)

    def _check(self, tool: ToolDef, checked: set[str] | None = None) -> None:
        """Everything `register` checks before taking the lock; `checked` (a batch's) holds the shapes of
        the schemas that already passed the meta-check, as canonical JSON (see `_shape`)."""
        if f"{tool.tool_id}.json" in RESERVED_FILES:
            raise ToolRegistrationError(
                f"tool_id {tool.tool_id!r} is reserved (the storage folder keeps its own "
                f"{tool.tool_id}.json); choose another tool_id",
                tool_id=tool.tool_id,
                field="tool_id",
            )
        for field in ("input_schema", "output_schema"):
            schema = getattr(tool, field)
            shape = json.dumps(schema_shape(schema), sort_keys=True) if checked is not None else ""
            if shape not in (checked or ()):
                check_schema(schema, field=field, tool_id=tool.tool_id)
                if checked is not None:
                    checked.add(shape)
        check_execution_config(tool, self._allowed_modules, self.egress)
        if tool.tool_type == ToolType.SKILL:
            # a composite needs what its inner tools need: a caller without it is refused before any step runs
            tool.permissions = check_skill_tools(tool, self)
        elif tool.tool_type in (ToolType.WORKFLOW, ToolType.AGENT):
            check_stored_tool(tool, self)  # stored ids, Start-node input schema, permissions, cycles
        if "credential" in tool.execution_config:  # a name only; an unknown one is a warning (see there)
            from echo_tools.credentials import check_tool_credential

            check_tool_credential(tool, self.credentials)

    def _clash(self, tool: ToolDef) -> str | None:
        return clash_in(tool, tool.lookup_keys(), self._tools, self._keys)

    def _put(self, tool: ToolDef) -> None:
        # Order matters for lock-free readers: the new object and keys go in before stale keys go out.
        tool_id = tool.tool_id
        old_keys = self._aliases.get(tool_id, frozenset())
        new_keys = tool.lookup_keys()
        self._tools[tool_id] = tool
        for key in new_keys:
            self._keys[key] = tool_id
        for key in old_keys - new_keys:
            if self._keys.get(key) == tool_id:
                del self._keys[key]
        self._aliases[tool_id] = new_keys
        self._generation += 1  # after the change: a search index built meanwhile is rebuilt

    def _drop(self, tool_id: str) -> None:
        self._in_process.pop(tool_id, None)
        self._tools.pop(tool_id, None)
        for key in self._aliases.pop(tool_id, frozenset()):
            if self._keys.get(key) == tool_id:
                del self._keys[key]
        self._generation += 1

    def delete(self, tool_id: str) -> bool:
        """Remove a tool from the catalogue and storage; False when it was not there."""
        return self._delete(tool_id, None)

    def delete_remote(self, tool_id: str) -> bool:
        """`delete` for a caller over HTTP: only `remote` tools may go.

        Raises:
            ToolReadOnlyError: the tool's source is not `remote` (nothing is deleted).
        """
        return self._delete(tool_id, writable_remotely)

    def _delete(self, tool_id: str, guard: Guard | None) -> bool:
        with self._lock:
            known = tool_id in self._tools
            if guard is not None and known:
                guard(self._tools[tool_id])
            stored = self.storage.delete(tool_id, removes=guard) if self.storage is not None else False
            self._drop(tool_id)
            self._forget_problem(tool_id)
        return known or stored

    def _forget_problem(self, tool_id: str) -> None:
        # the stored file that a load refused has just been replaced or removed
        if self.storage is not None and self._problems:
            path = self.storage.location(tool_id)
            self._problems = [p for p in self._problems if p.path != path]

    # -- lookup --------------------------------------------------------------------------------------

    def get(self, tool_id: str) -> ToolDef | None:
        """The tool with this id, or None."""
        found = self._tools.get(tool_id) if isinstance(tool_id, str) else None
        if found is None and isinstance(tool_id, str) and self._refresh_if_changed():
            found = self._tools.get(tool_id)
        return found

    def get_by_name(self, name: str) -> ToolDef | None:
        """The tool with this display name (case-insensitive, or its slug), or None."""
        if not isinstance(name, str):
            return None
        tool_id = self._keys.get(name.casefold())
        if tool_id is None and self._refresh_if_changed():
            tool_id = self._keys.get(name.casefold())
        return self._tools.get(tool_id) if tool_id else None

    def resolve(self, ref: str | ToolDef | None) -> ToolDef | None:
        """Whatever a canvas or an LLM calls a tool -> the tool, or None when unknown.

        Tried in order: the id; the name ignoring case (also the id ignoring case); the slug (`"Web Search"`
        -> `web_search`), also as an id, with the `tool_` prefix added (`tool_web_search`) or removed
        (EchoAI's round trip renames `tool_web_search` to "Tool Web Search"). Names are unique across
        all these forms (see `register`), so the order never picks between two tools.
        """
        if isinstance(ref, ToolDef):
            return self.get(ref.tool_id)
        if not isinstance(ref, str) or not ref:
            return None
        found = self._lookup(ref)
        if found is None and self._refresh_if_changed():
            found = self._lookup(ref)
        return found

    def _lookup(self, ref: str) -> ToolDef | None:
        tools, keys = self._view
        found = tools.get(ref)
        if found is not None:
            return found
        folded = ref.casefold()
        tool_id = keys.get(folded) or (folded if folded in tools else None)
        if tool_id is None:
            slug = slugify(ref)
            if not slug:
                return None
            tool_id = keys.get(slug)
            if tool_id is None:
                for candidate in (slug, f"tool_{slug}"):
                    if candidate in tools:
                        tool_id = candidate
                        break
            if tool_id is None and slug.startswith("tool_"):
                tool_id = keys.get(slug[5:])
        return tools.get(tool_id) if tool_id else None

    def require(self, ref: str | ToolDef) -> ToolDef:
        """`resolve`, raising `ToolNotFoundError` naming the reference when unknown."""
        tool = self.resolve(ref)
        if tool is None:
            shown = ref.tool_id if isinstance(ref, ToolDef) else ref
            raise ToolNotFoundError(f"No tool matches {shown!r}{tool_hint(self, shown)}", field="tool")
        return tool

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, (str, ToolDef)) and self.resolve(ref) is not None

    def __len__(self) -> int:
        return len(self._tools)

    # -- listing -------------------------------------------------------------------------------------

    def list_all(self) -> list[ToolDef]:
        """Every tool, sorted by id (re-reading the storage folder first when another process changed it)."""
        self._refresh_if_changed()
        snapshot = list(self._tools.items())
        snapshot.sort()
        return [tool for _, tool in snapshot]

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

    def _adopt(self, tool: ToolDef) -> None:
        """Use a manifest whose id a file the host wrote holds (EchoAI's own tool of that id), in memory only:
        the host's file stays byte for byte, and each discovery adopts the manifest again."""
        self._check(tool)
        with self._lock:
            clash = self._clash(tool)
            if clash:
                raise ToolNameConflictError(clash, tool_id=tool.tool_id, field="name")
            replaced = tool.tool_id in self._tools
            self._put(tool)
            self._adopted[tool.tool_id] = tool
        if replaced:
            logger.info("tool %s: manifest used over the host's stored file (left as it is)", tool.tool_id)
