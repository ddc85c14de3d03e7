"""The reverse mapping of NodeMapper: a stored workflow and its agents -> the canvas save payload.

Mapping the result again gives the same agents and tool bindings: canvas node ids come back from
`metadata.canvas_node_id`, tool entries keep `tool_id`, and unread canvas keys come back from
`metadata.canvas_extra`. Agents written by EchoAI itself (tools as bare ids) come back too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from workflow_bridge.canvas.entries import (
    BUILTIN_TOOL_TYPES,
    LOOK_BY_TYPE,
    ROLE_BY_TYPE,
    TOOL_NODE_TYPES,
    as_dict,
    json_copy,
)

if TYPE_CHECKING:
    from echo_tools.registry import ToolRegistry

_SAVE_AS_BY_STATUS = {"draft": "draft", "validated": "draft", "testing": "temp", "final": "final"}
_WORKFLOW_OWN_METADATA = frozenset(
    {
        "created_by",
        "created_at",
        "canvas_layout",
        "source",
        "requested_execution_model",
        "is_temp",
        "immutable",
    }
)


def workflow_to_canvas(
    registry: ToolRegistry | None, workflow: Mapping[str, Any], agents: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """See `NodeMapper.to_canvas`."""
    from workflow_bridge.agent_json import normalize_agent

    agent_ids = [str(a) for a in workflow.get("agents") or []]
    missing = [a for a in agent_ids if a not in agents]
    if missing:
        raise ValueError(
            f"Workflow {workflow.get('workflow_id')!r} names agents that were not given: {', '.join(missing[:5])}"
        )
    normalized = {a: normalize_agent(agents[a]) for a in agent_ids}
    canvas_ids = _canvas_ids(agent_ids, normalized)
    state_schema = as_dict(workflow.get("state_schema"))
    nodes = [_node(registry, normalized[a], canvas_ids, state_schema) for a in agent_ids]
    numeric = [c for c in canvas_ids.values() if isinstance(c, int)]
    first = max(numeric, default=0) + 1
    connections = []
    for index, conn in enumerate(workflow.get("connections") or []):
        src, dst = conn.get("from"), conn.get("to")
        item: dict[str, Any] = {
            "id": first + index,
            "from": canvas_ids.get(src, src),
            "to": canvas_ids.get(dst, dst),
        }
        if conn.get("condition"):
            item["condition"] = conn["condition"]
        connections.append(item)
    payload: dict[str, Any] = {
        "canvas_nodes": nodes,
        "connections": connections,
        "workflow_name": workflow.get("name") or "Untitled Workflow",
        "workflow_id": workflow.get("workflow_id"),
        "execution_model": workflow.get("execution_model") or "sequential",
        "save_as": _SAVE_AS_BY_STATUS.get(str(workflow.get("status")), "draft"),
    }
    if workflow.get("description"):
        payload["description"] = workflow["description"]
    metadata = as_dict(workflow.get("metadata"))
    extra = {k: json_copy(v) for k, v in metadata.items() if k not in _WORKFLOW_OWN_METADATA}
    if extra:
        payload["metadata"] = extra
    return payload


def _canvas_ids(agent_ids: list[str], agents: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    # Keep the canvas's own ids (Conditional branches point at them); EchoAI's agents have none, and get
    # index + 1 as the IDE gives nodes loaded from the backend, skipping ids already taken.
    given = {a: agents[a]["metadata"].get("canvas_node_id") for a in agent_ids}
    taken = {str(c) for c in given.values() if c is not None}
    out: dict[str, Any] = {}
    used: set[str] = set()
    counter = 0
    for index, agent_id in enumerate(agent_ids):
        cid = given[agent_id]
        if cid is None or str(cid) in used:
            counter = max(counter, index + 1)
            while str(counter) in taken or str(counter) in used:
                counter += 1
            cid = counter
        used.add(str(cid))
        out[agent_id] = cid
    return out


def _node(
    registry: ToolRegistry | None,
    agent: Mapping[str, Any],
    canvas_ids: Mapping[str, Any],
    state_schema: Mapping[str, Any],
) -> dict[str, Any]:
    md = agent["metadata"]
    node_type = str(md.get("node_type") or "Agent")
    layout = as_dict(md.get("ui_layout"))
    icon, color = LOOK_BY_TYPE.get(node_type, ("⬜", "#94a3b8"))
    config: dict[str, Any] = json_copy(dict(md.get("canvas_extra") or {}))
    is_agent = node_type in TOOL_NODE_TYPES
    if agent["role"] != ROLE_BY_TYPE.get(node_type, "Workflow node"):
        config["role"] = agent["role"]
    if agent["goal"]:
        config["goal"] = agent["goal"]
    if agent["description"] != f"{node_type} node":
        config["description"] = agent["description"]
    if is_agent or agent["prompt"]:
        config["prompt"] = agent["prompt"]
    config.update(_llm_config(agent["llm"], is_agent))
    constraints = agent["constraints"]
    if is_agent or constraints.get("max_steps", 5) != 5:
        config["maxIterations"] = constraints.get("max_steps", 5)
    if constraints.get("timeout_seconds", 60) != 60:
        config["timeoutSeconds"] = constraints["timeout_seconds"]
    if is_agent or agent["tools"]:
        config["tools"] = _tool_entries(registry, agent)
        if agent.get("tools_exclude"):
            config["tools_exclude"] = list(agent["tools_exclude"])
    config.update(_type_config(node_type, agent, md, canvas_ids, state_schema))
    return {
        "id": canvas_ids[agent["agent_id"]],
        "backend_id": agent["agent_id"],
        "type": node_type,
        "label": node_type,
        "name": agent["name"],
        "icon": layout.get("icon") or icon,
        "color": layout.get("color") or color,
        "description": ROLE_BY_TYPE.get(node_type, "Workflow node"),
        "x": layout.get("x", 0),
        "y": layout.get("y", 0),
        "status": "idle",
        "config": config,
    }


def _llm_config(llm: Mapping[str, Any], is_agent: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    model = {
        key: llm[src]
        for key, src in (("provider", "provider"), ("modelName", "model"), ("baseUrl", "base_url"))
        if llm.get(src)
    }
    if model:
        out["model"] = model
    temperature = llm.get("temperature", 0.7)
    if is_agent or temperature != 0.7:
        out["temperature"] = temperature
    max_tokens = llm.get("max_tokens", 4000)
    if is_agent or max_tokens != 4000:
        out["maxTokens"] = max_tokens
    if "top_p" in llm:
        out["topP"] = llm["top_p"]
    return out


def _tool_entries(registry: ToolRegistry | None, agent: Mapping[str, Any]) -> list[Any]:
    entries: list[Any] = []
    bound = set()
    for binding in agent.get("tool_bindings") or []:
        if isinstance(binding, Mapping) and binding.get("tool_id"):
            entries.append(_entry_from_binding(registry, binding))
            bound.add(binding["tool_id"])
    for tool_id in agent["tools"]:
        if not isinstance(tool_id, str):
            continue  # not a tool id: nothing the canvas could show
        if tool_id == "*":
            entries.insert(0, "*")
        elif tool_id not in bound:
            entries.append(_entry_from_binding(registry, {"tool_id": tool_id, "enabled": True}))
    return entries


def _entry_from_binding(registry: ToolRegistry | None, binding: Mapping[str, Any]) -> dict[str, Any]:
    tool_id = str(binding["tool_id"])
    tool = registry.get(tool_id) if registry is not None else None
    kind = binding.get("type") or (
        tool_id.removeprefix("builtin_") if tool_id.startswith("builtin_") else None
    )
    entry: dict[str, Any] = {}
    if binding.get("entry_id") is not None:
        entry["id"] = binding["entry_id"]
    if not tool_id.startswith("builtin_"):
        entry["tool_id"] = tool_id
    entry["name"] = binding.get("name") or (tool.name if tool is not None else tool_id)
    if kind is None:
        kind = tool.tool_type.value if tool is not None else "tools"
    entry["type"] = kind
    description = tool.description if tool is not None else binding.get("description")
    if description:
        entry["description"] = description  # what the IDE shows
    if binding.get("description") and tool is not None:
        entry["description_override"] = binding["description"]
    entry["enabled"] = binding.get("enabled", True) is not False
    if tool is not None and kind not in BUILTIN_TOOL_TYPES and kind != "tools":
        entry["version"] = tool.version
        entry["tags"] = list(tool.tags)
    config = json_copy(dict(binding.get("config") or {}))
    if not config and tool is not None and kind not in BUILTIN_TOOL_TYPES and kind != "tools":
        config = json_copy(tool.input_schema)  # what the IDE's addTool puts there
    entry["config"] = config
    if binding.get("fixed"):
        entry["fixed"] = json_copy(dict(binding["fixed"]))
    return entry


def _type_config(
    node_type: str,
    agent: Mapping[str, Any],
    md: Mapping[str, Any],
    canvas_ids: Mapping[str, Any],
    state_schema: Mapping[str, Any],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side, schema_key, md_key in (
        ("input", "input_schema", "input_variables"),
        ("output", "output_schema", "output_variables"),
    ):
        variables = md.get(md_key) or [
            {"name": n, "type": str(state_schema.get(n, "string"))} for n in agent[schema_key]
        ]
        if variables or (side, node_type) in (("input", "Start"), ("output", "End")):
            out[f"{side}Variables"] = json_copy(variables)
    return {**out, **_block_config(node_type, md, canvas_ids)}


def _block_config(node_type: str, md: Mapping[str, Any], canvas_ids: Mapping[str, Any]) -> dict[str, Any]:
    if node_type == "Conditional":
        branches = []
        for branch in md.get("branches") or []:
            target = branch.get("targetNodeId")
            canvas_target = canvas_ids.get(target) if isinstance(target, str) else None
            if canvas_target is None:
                canvas_target = branch.get("canvasTargetNodeId", target)
            branches.append(
                {
                    "type": branch.get("type"),
                    "condition": branch.get("condition", ""),
                    "targetNodeId": canvas_target,
                }
            )
        return {"branches": branches}
    if node_type == "HITL":
        hitl = dict(md.get("hitl_config") or {})
        return {k: json_copy(v) for k, v in hitl.items()}
    if node_type == "MCP":
        mcp = md.get("mcp_config") or {}
        out = {
            "serverId": mcp.get("serverId") or mcp.get("serverName") or "",
            "operation": mcp.get("operation") or mcp.get("toolName") or "",
        }
        for extra in ("customUrl", "arguments"):
            if extra in mcp:
                out[extra] = json_copy(mcp[extra])
        return out
    block = {
        "Start": "start_config",
        "API": "api_config",
        "Code": "code_config",
        "Self-Review": "review_config",
        "Loop": "loop_config",
        "Map": "map_config",
        "Template": "template_config",
        "Failsafe": "failsafe_config",
        "Merge": "merge_config",
        "Subagent": "subagent_config",
    }.get(node_type)
    return json_copy(dict(md.get(block) or {})) if block else {}
