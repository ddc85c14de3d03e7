"""Registration of `workflow` and `agent` tools against the stored workflows and agents they run.

With the registry's `WorkflowStore` / `AgentStore` configured, what can be known at registration is checked
there: the workflow (and version) is stored, the agent has a file, an agent's `permissions` list names known
permissions, and the tool does not reach itself through its agents' tools. The input schema is filled from
the workflow's Start node when the definition gives none, and the tool's `permissions` become the union of
what its agents' tools need. Without a store the check waits for the first call (the backend says why).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.errors import NotStoredError, ToolRegistrationError, ToolStorageError
from echo_tools.models import ToolPermission, ToolType, slugify
from echo_tools.skills import MAX_CALL_DEPTH

if TYPE_CHECKING:
    from echo_tools.lookup import ToolLookup
    from echo_tools.models import ToolDef

_JSON_TYPES = {"string", "number", "integer", "boolean", "array", "object"}
_TYPE_ALIASES = {"str": "string", "text": "string", "int": "integer", "float": "number", "bool": "boolean",
                 "list": "array", "dict": "object", "json": "object"}  # fmt: skip
AGENT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "What the agent is asked to do."},
        "context": {"type": "string", "description": "Background the agent may use (optional)."},
    },
    "required": ["task"],
}
USER_INPUT = {"type": "string", "description": "The request the workflow runs on (its user input)."}


def agent_permissions(agent: Mapping[str, Any]) -> list[ToolPermission] | None:
    """The permissions an agent JSON grants its tools: a `permissions` list of values, or None when it
    grants no list (EchoAI's `{can_call_agents, allowed_agents}` object is about calling agents, not tools).

    Raises:
        ValueError: an entry is not a known permission (the message names `permissions[i]` and the value).
    """
    raw = agent.get("permissions")
    if not isinstance(raw, list):
        return None
    known = [p.value for p in ToolPermission]
    granted: list[ToolPermission] = []
    for i, value in enumerate(raw):
        if value not in known:
            raise ValueError(f"permissions[{i}] {value!r} is not a permission (known: {', '.join(known)})")
        granted.append(ToolPermission(value))
    return granted


def start_node(
    workflow: Mapping[str, Any], agents: Mapping[str, Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The workflow's Start node (agent JSON with `metadata.node_type == "Start"`), if it has one."""
    for agent_id in workflow.get("agents") or []:
        agent = agents.get(str(agent_id))
        meta = agent.get("metadata") if agent else None
        if isinstance(meta, Mapping) and meta.get("node_type") == "Start":
            return agent
    return None


def workflow_input_schema(start: Mapping[str, Any] | None) -> dict[str, Any]:
    """The input schema of a workflow tool: `user_input` plus the Start node's variables
    (`metadata.input_variables: [{name, type, defaultValue}]`, else `input_schema: [names]`)."""
    meta = start.get("metadata") if start else None
    variables: list[Any] = []
    if isinstance(meta, Mapping) and isinstance(meta.get("input_variables"), list):
        variables = meta["input_variables"]
    elif start is not None and isinstance(start.get("input_schema"), list):
        variables = [{"name": n} for n in start["input_schema"]]
    properties: dict[str, Any] = {"user_input": dict(USER_INPUT)}
    for var in variables:
        name = var.get("name") if isinstance(var, Mapping) else None
        if not isinstance(name, str) or not name.isidentifier() or name == "user_input":
            continue
        kind = str(var.get("type") or "string").lower()
        prop: dict[str, Any] = {"type": _TYPE_ALIASES.get(kind, kind if kind in _JSON_TYPES else "string")}
        default = var.get("defaultValue")
        if default not in (None, ""):
            prop["default"] = default
        properties[name] = prop
    required = ["user_input"] if len(properties) == 1 else []
    return {"type": "object", "properties": properties, "required": required}


def check_stored_tool(tool: ToolDef, registry: ToolLookup) -> None:
    """Check a `workflow` or `agent` tool against the registry's stores; fill its input schema and
    permissions.

    Raises:
        ToolRegistrationError: the workflow id (or version) is not stored, the agent id has no file, an agent
            grants an unknown permission, or the tool reaches itself through its agents' tools (the chain).
    """
    config = tool.execution_config
    if tool.tool_type == ToolType.AGENT:
        if not tool.input_schema:
            tool.input_schema = dict(AGENT_INPUT_SCHEMA)
        if registry.agents is None:
            return
        agents = {
            config["agent_id"]: _stored_agent(tool, registry, config["agent_id"], "execution_config.agent_id")
        }
    else:
        if registry.workflows is None:
            if not tool.input_schema:
                tool.input_schema = workflow_input_schema(None)
            return
        try:
            workflow = registry.workflows.for_tool(config)  # a deployment: the version it names now
        except (NotStoredError, ToolStorageError, ValueError) as exc:
            named = getattr(exc, "field", None)
            field = (
                f"execution_config.{named}"
                if named in ("version", "deployment_id", "environment")
                else ("execution_config.workflow_id")
            )
            raise _fail(tool, field, f"{field}: {exc}") from None
        agents = {}
        if registry.agents is not None:
            for i, agent_id in enumerate(workflow.get("agents") or []):
                agents[str(agent_id)] = _stored_agent(
                    tool, registry, str(agent_id), "execution_config.workflow_id", f" (its agents[{i}])"
                )
        if not tool.input_schema:
            tool.input_schema = workflow_input_schema(start_node(workflow, agents))
    needed = set(tool.permissions)
    for agent in agents.values():
        needed.update(_agent_needs(tool, registry, agent, [tool.tool_id]))
    tool.permissions = sorted(needed, key=lambda p: p.value)


def _fail(tool: ToolDef, field: str, message: str) -> ToolRegistrationError:
    return ToolRegistrationError(f"Tool {tool.tool_id!r}: {message}", tool_id=tool.tool_id, field=field)


def _stored_agent(
    tool: ToolDef, registry: ToolLookup, agent_id: str, field: str, where: str = ""
) -> dict[str, Any]:
    assert registry.agents is not None
    try:
        return registry.agents.get(agent_id)
    except (NotStoredError, ToolStorageError, ValueError) as exc:
        raise _fail(tool, field, f"{field}{where}: {exc}") from None


def _agent_needs(
    tool: ToolDef, registry: ToolLookup, agent: Mapping[str, Any], path: list[str]
) -> set[ToolPermission]:
    """What an agent's tools need (narrowed to what the agent grants); refuses a chain back to `tool`."""
    try:
        granted = agent_permissions(agent)
    except ValueError as exc:
        raise _fail(tool, "permissions", f"agent {agent.get('agent_id')!r}: {exc}") from None
    needed: set[ToolPermission] = set()
    refs = agent.get("tools") or []
    keys = tool.lookup_keys()
    inner_tools = (
        registry.list_all()
        if "*" in refs
        else [  # the tool being registered is not in the registry yet: a ref to it is found here
            tool if r == tool.tool_id or r.casefold() in keys or slugify(r) in keys else registry.resolve(r)
            for r in refs
            if isinstance(r, str)
        ]
    )
    for inner in inner_tools:
        if inner is None:
            continue  # an unknown tool is the compiler's error, at the first call, naming the agent
        if inner.tool_id == tool.tool_id or inner.tool_id in path[1:]:
            chain = " -> ".join([*path, inner.tool_id])
            raise _fail(
                tool, "execution_config", f"the tool reaches itself through its agents' tools: {chain}"
            )
        if inner.tool_type in (ToolType.WORKFLOW, ToolType.AGENT) and len(path) <= MAX_CALL_DEPTH:
            for nested in _nested_agents(inner, registry):
                _agent_needs(tool, registry, nested, [*path, inner.tool_id])
        needed.update(inner.permissions)
    return needed if granted is None else needed & set(granted)


def _nested_agents(tool: ToolDef, registry: ToolLookup) -> list[dict[str, Any]]:
    """The stored agents a registered composite tool runs (empty when they cannot be read now)."""
    config = tool.execution_config
    try:
        if tool.tool_type == ToolType.AGENT:
            return [registry.agents.get(config["agent_id"])] if registry.agents is not None else []
        if registry.workflows is None or registry.agents is None:
            return []
        workflow = registry.workflows.for_tool(config)
        return [registry.agents.get(str(a)) for a in workflow.get("agents") or []]
    except (NotStoredError, ToolStorageError, ValueError, KeyError):
        return []
