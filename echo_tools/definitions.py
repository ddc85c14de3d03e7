"""Checking a tool definition without a catalogue: its JSON depth, its model, the size of its stored text,
its name against a catalogue's.

The catalogue (`echo_tools.catalogue`) uses these before anything is stored; they hold no state.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from echo_tools.backends.base import MODULE_NAME_PATTERN
from echo_tools.errors import ToolConfigError, ToolNameConflictError, ToolRegistrationError
from echo_tools.models import ToolDef, ToolSource
from echo_tools.schema import check_depth
from echo_tools.storage import describe_validation_error
from echo_tools.trust import remote_definition, with_trust_tags

# the fields of a definition that hold free-form JSON, bounded in depth at registration
_JSON_FIELDS = ("input_schema", "output_schema", "execution_config", "metadata")
# stored text a listing, a search or a model's prompt reads, bounded at registration (whatever the source):
# a catalogue of 100 tools with 0.9 MB descriptions made every listing and search 90 MB of work
MAX_DESCRIPTION_CHARS = 16 * 1024
MAX_ANNOTATION_CHARS = 16 * 1024  # one `title`, `description` or `$comment` of a schema
MAX_SCHEMA_TEXT_CHARS = 64 * 1024  # every annotation of one schema together
MAX_LABELS = 64  # tags, capabilities
MAX_LABEL_CHARS = 128
MAX_VERSION_CHARS = 64


def module_list(allowed_modules: Sequence[str] | str) -> tuple[str, ...]:
    # a bare string is one package, not a sequence of one-letter packages
    modules = (allowed_modules,) if isinstance(allowed_modules, str) else tuple(allowed_modules)
    for module in modules:
        if not isinstance(module, str) or not MODULE_NAME_PATTERN.fullmatch(module):
            raise ToolConfigError(
                f"allowed_modules entry {module!r} is not a dotted module name", field="allowed_modules"
            )
    return modules


def clash_in(
    tool: ToolDef, keys: frozenset[str], tools: Mapping[str, ToolDef], owners: Mapping[str, str]
) -> str | None:
    """Why `tool` cannot join a catalogue (`tools` by id, `owners` by lookup key), or None.

    A name may not share a lookup key with another tool's name, nor equal another tool's id, and an id may
    not equal another tool's name: otherwise `resolve()` would have to pick one ("first match wins").
    """
    for key in sorted(keys):
        owner = owners.get(key)
        if owner is None and key in tools and key != tool.tool_id:
            owner = key
        if owner is not None and owner != tool.tool_id:
            other = tools[owner]
            return (
                f"Tool name {tool.name!r} (tool_id {tool.tool_id!r}) clashes with tool {other.name!r} "
                f"(tool_id {owner!r}): names must be unique ignoring case and punctuation; choose another "
                f"name, or register with tool_id {owner!r} to update that tool"
            )
    owner = owners.get(tool.tool_id)
    if owner is not None and owner != tool.tool_id:
        return (
            f"tool_id {tool.tool_id!r} is already the name of tool {tools[owner].name!r} "
            f"(tool_id {owner!r}); choose another tool_id"
        )
    return None


def coerce_definition(tool: ToolDef | Mapping[str, Any], source: ToolSource | None = None) -> ToolDef:
    """A definition (a `ToolDef` or a mapping) re-validated as a fresh `ToolDef`, with its trust tags."""
    if (isinstance(tool, ToolDef) and tool.ephemeral) or (
        isinstance(tool, Mapping) and tool.get("ephemeral")
    ):
        raise ToolRegistrationError(
            "an ephemeral tool cannot be registered or stored: in-process tools are added with "
            "registry.add(obj) in the process that runs them",
            field="ephemeral",
        )
    if isinstance(tool, ToolDef):
        check_depths(tool.tool_id, {name: getattr(tool, name) for name in _JSON_FIELDS})
        # re-validated from its dump: a ToolDef is mutable, and `tool.tool_id = "../x"` skips validation
        data: dict[str, Any] = tool.to_storage_dict()
    elif isinstance(tool, Mapping):
        data = dict(tool)
        data.pop("_saved_at", None)
        raw = data.get("tool_id")
        check_depths(raw if isinstance(raw, str) else None, data)
    else:
        raise ToolRegistrationError(f"A tool definition must be a ToolDef or an object, got {tool!r:.80}")
    if source is not None:
        data["source"] = source.value
    try:
        coerced = with_trust_tags(ToolDef.model_validate(data))
    except ValidationError as exc:
        errors = exc.errors()
        field = ".".join(str(p) for p in errors[0]["loc"]) if errors and errors[0]["loc"] else None
        raw_id = data.get("tool_id")
        raise ToolRegistrationError(
            f"Invalid tool definition {data.get('name')!r:.80}: {describe_validation_error(exc)}",
            tool_id=raw_id if isinstance(raw_id, str) else None,
            field=field,
        ) from exc
    check_text_sizes(coerced)
    return coerced


def check_text_sizes(tool: ToolDef) -> None:
    """Raise `ToolRegistrationError` naming the field, the bound and the size when a stored text of `tool` is
    over its bound: the description, each tag and capability and their number, the version, each schema
    annotation (`title`, `description`, `$comment`) and all of one schema's together."""

    def refuse(field: str, what: str, limit: int, size: int) -> None:
        raise ToolRegistrationError(
            f"Tool {tool.tool_id!r}: {field} must be at most {limit} {what}, got {size}",
            tool_id=tool.tool_id,
            field=field,
        )

    if len(tool.description) > MAX_DESCRIPTION_CHARS:
        refuse("description", "characters", MAX_DESCRIPTION_CHARS, len(tool.description))
    if len(tool.version) > MAX_VERSION_CHARS:
        refuse("version", "characters", MAX_VERSION_CHARS, len(tool.version))
    for name in ("tags", "capabilities"):
        labels: list[str] = getattr(tool, name)
        if len(labels) > MAX_LABELS:
            refuse(name, "entries", MAX_LABELS, len(labels))
        for index, label in enumerate(labels):
            if len(label) > MAX_LABEL_CHARS:
                refuse(f"{name}[{index}]", "characters", MAX_LABEL_CHARS, len(label))
    for name in ("input_schema", "output_schema"):
        total = 0
        for path, text in _annotations(getattr(tool, name), name):
            if len(text) > MAX_ANNOTATION_CHARS:
                refuse(path, "characters", MAX_ANNOTATION_CHARS, len(text))
            total += len(text)
        if total > MAX_SCHEMA_TEXT_CHARS:
            refuse(name, "characters of titles, descriptions and comments", MAX_SCHEMA_TEXT_CHARS, total)


def _annotations(schema: Any, field: str) -> Iterator[tuple[str, str]]:
    """`(path, text)` of every `title`, `description` and `$comment` string in a schema (depth-bounded
    already, walked without recursion)."""
    stack: list[tuple[str, Any]] = [(field, schema)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                if key in _ANNOTATIONS and isinstance(child, str):
                    yield f"{path}.{key}", child
                elif isinstance(child, (dict, list)):
                    stack.append((f"{path}.{key}", child))
        elif isinstance(value, list):
            stack.extend(
                (f"{path}[{i}]", child) for i, child in enumerate(value) if isinstance(child, (dict, list))
            )


def written_by_host(tool: ToolDef) -> bool:
    # every file this package writes names its source; EchoAI's files never do
    return "source" not in tool.model_fields_set


_ANNOTATIONS = frozenset({"description", "title", "$comment"})


def schema_shape(value: Any) -> Any:
    """`value` with the strings under `description`, `title` and `$comment` blanked: a JSON Schema is valid
    exactly when its shape is (the meta-schema asks only that they be strings, and compiling ignores them),
    so schemas that differ only in wording share one meta-check."""
    if isinstance(value, dict):
        return {
            k: "" if k in _ANNOTATIONS and isinstance(v, str) else schema_shape(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [schema_shape(item) for item in value]
    return value


def check_depths(tool_id: str | None, data: Mapping[str, Any]) -> None:
    for name in _JSON_FIELDS:
        if name in data:
            check_depth(data[name], field=name, tool_id=tool_id)


def remote_at_load(tool: ToolDef, tools: Sequence[ToolDef]) -> tuple[ToolDef, str | None]:
    """A stored remote tool with the permissions and limits its manifest declares now, or the refusal
    when no manifest declares its entry point any more."""
    try:
        return remote_definition(tool, tools, allowed_env=None), None
    except ToolRegistrationError as exc:
        return tool, f"refused: {exc.message}"


def check_batch_names(
    batch: Sequence[ToolDef], tools: Mapping[str, ToolDef], keys: Mapping[str, str]
) -> None:
    """Refuse a batch whose names clash, with the catalogue (`tools` by id, `keys` by lookup key) as the
    batch leaves it: its tools replace their old versions' ids and keys."""
    ids = {tool.tool_id for tool in batch}
    after = {**tools, **{tool.tool_id: tool for tool in batch}}
    owners = {key: owner for key, owner in keys.items() if owner not in ids}
    for tool in batch:
        tool_keys = tool.lookup_keys()
        clash = clash_in(tool, tool_keys, after, owners)
        if clash:
            raise ToolNameConflictError(clash, tool_id=tool.tool_id, field="name")
        owners.update(dict.fromkeys(tool_keys, tool.tool_id))
