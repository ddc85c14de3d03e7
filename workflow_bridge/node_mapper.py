"""NodeMapper: EchoAI canvas payloads -> workflow JSON + agent JSONs with tools resolved, and back again.

Reads the canvas save payload (`canvas_nodes`, `connections`, `workflow_name`, `workflow_id`, `save_as`,
`execution_model`) and canvas export files (`nodes`, `connections`, `name`/`title`), and writes EchoAI's
workflow and agent shapes (echoai-notes §1.4, §1.6), fixing what EchoAI's mapper got wrong:

* Agent ids are stable: `agt_` + sha256(namespace + ":" + canvas node id)[:32], the namespace being the
  workflow id; a node loaded back from the backend keeps its `backend_id` / `agentId` when that is an
  `agt_` id. A payload without `workflow_id` gets a fresh one that carries the digest of its nodes and
  connections, `wf_canvas_<digest>_<nonce>` (reported in `.workflow`; each save of an unsaved canvas is a
  new workflow, as in EchoAI), and its agent ids come from that digest: the same canvas always maps to the
  same agents (compiling it twice gives the same graph node names, so a run paused in one process resumes
  in another), and saved again under the returned id, after edits too, it keeps its first save's agents.
* Tool entries (all five shapes of §1.10) resolve through `registry.resolve`: `tool_id` first, then
  `name` (exact, any case, slug, the round-tripped "Tool Web Search"), then the entry's `id`. An unknown
  tool is an error diagnostic naming the node and the tool, never a placeholder id. `enabled: false`
  entries are kept as bindings but not bound; a tool disabled in the registry is not bound either.
  A Code tool with code binds a `code` tool made from it (`main`'s signature is its schema; code that
  does not parse or has no `main` is an error diagnostic), an empty one `builtin_code` (the generic code
  executor); an `mcp_server` entry binds its server's registered tool, the server added from `serverUrl`
  under the egress policy when it is not registered, else an error diagnostic. Both keep their config. A
  `subworkflow {workflowId}` entry binds the `workflow` tool running that workflow (registered from the
  registry's `WorkflowStore` when there is none yet); one that cannot, and every `subworkflow_deployment`
  (not supported yet), is an error diagnostic naming the node and the entry. `"*"` keeps `tools: ["*"]` plus `tools_exclude` (ids).
* Each agent carries `tool_bindings`: `[{tool_id, name, type, enabled, fixed, config, description?,
  entry_id?}]`. **Fixed parameters** (values the LLM must not change) are, merged in this order:
  `entry.fixed`, then `entry.config.fixed`, then, for a registered tool whose `entry.config` is not a JSON
  Schema (the IDE copies the tool's input schema there), every `entry.config` key that names a property
  of the tool's input schema. Fixed values are checked against that property's schema. `description` is
  an override, taken from `entry.description_override` (the entry's own `description` is the copy the IDE
  makes when a tool is added, not a choice) and kept only when it differs from the registry's description. `config` is what remains
  (code text and language of a Code tool, serverId/operationName of an MCP tool, template settings).
* Per-node-type config lands in `metadata` as EchoAI does (`node_type`, `ui_layout`, `branches`,
  `api_config`, `mcp_config`, `code_config`, `hitl_config`, ...), read from the keys the canvas really
  writes (MCP `serverId`/`operation`, HITL `reviewTitle`, API `authentication`); Conditional branches get
  `targetNodeId` remapped to the agent id, the canvas id kept as `canvasTargetNodeId`; `llm` keeps
  `provider` (and sets `model` only when the node names one, leaving the choice to `ECHO_LLM` otherwise).
  Unread config keys are kept in `metadata.canvas_extra` so `to_canvas` can give them back.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from workflow_bridge.agent_json import normalize_agent
from workflow_bridge.canvas.entries import (
    LOOK_BY_TYPE,
    ROLE_BY_TYPE,
    TOOL_NODE_TYPES,
    Diagnostic,
    Diagnostics,
    ToolResolution,
    as_dict,
    json_copy,
    resolve_tool_entries,
)
from workflow_bridge.canvas.graph import cycles, infer_execution_model
from workflow_bridge.canvas.node_config import check_flow_nodes, consumed_keys, type_metadata

if TYPE_CHECKING:
    from echo_tools.registry import ToolRegistry

__all__ = [
    "Diagnostic",
    "MappedWorkflow",
    "NodeMapper",
    "ToolResolution",
    "agent_id_for",
    "infer_execution_model",
    "normalize_agent",
]

_AGENT_ID = re.compile(r"^agt_[A-Za-z0-9_-]{1,64}$")
_WORKFLOW_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_STATUS_BY_SAVE_AS = {"draft": "draft", "temp": "testing", "test": "testing", "final": "final"}


def agent_id_for(workflow_id: str, node_id: Any) -> str:
    """The stable agent id of canvas node `node_id` in workflow `workflow_id`."""
    digest = hashlib.sha256(f"{workflow_id}:{node_id}".encode()).hexdigest()
    return f"agt_{digest[:32]}"


def _namespace(workflow_id: str) -> str:
    """What a workflow's agent ids are derived from: its id, or for an id minted from a canvas's content
    (`wf_canvas_<digest>_<nonce>`) that digest, as the canvas had when it was first saved."""
    minted = _MINTED.fullmatch(workflow_id)
    return minted.group(1) if minted else workflow_id


_MINTED = re.compile(r"wf_(canvas_[0-9a-f]{32})_[0-9a-f]{8}")


def _canvas_key(payload: Mapping[str, Any]) -> str:
    """What the agent ids of a canvas without `workflow_id` are derived from: a digest of its nodes and
    connections, so the same canvas always maps to the same agent ids (and graph node names)."""
    nodes = payload.get("canvas_nodes") if "canvas_nodes" in payload else payload.get("nodes")
    content = json.dumps(
        {"nodes": nodes, "connections": payload.get("connections")}, sort_keys=True, default=str
    )
    return "canvas_" + hashlib.sha256(content.encode()).hexdigest()[:32]


@dataclass
class MappedWorkflow:
    """The result of `NodeMapper.map_canvas`: EchoAI's workflow JSON, its agents, and what went wrong."""

    workflow: dict[str, Any]
    agents: dict[str, dict[str, Any]]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    node_ids: dict[str, str] = field(default_factory=dict)  # canvas node id (as text) -> agent id

    @property
    def ok(self) -> bool:
        """True when no diagnostic is an error."""
        return not self.errors

    @property
    def errors(self) -> list[Diagnostic]:
        """The error diagnostics."""
        return [d for d in self.diagnostics if d.level == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        """The warning diagnostics."""
        return [d for d in self.diagnostics if d.level == "warning"]

    @property
    def workflow_id(self) -> str:
        """The workflow's id (given in the payload, or minted)."""
        return str(self.workflow["workflow_id"])


class NodeMapper:
    """Canvas payload <-> EchoAI workflow JSON and agent JSONs, tool entries resolved through a registry.

    Args:
        tool_registry: where tool names and ids are resolved (None: every registered tool is unknown).
    """

    def __init__(self, tool_registry: ToolRegistry | None) -> None:
        self.registry = tool_registry

    # -- canvas -> workflow + agents -----------------------------------------------------------------

    def map_canvas(self, payload: Mapping[str, Any]) -> MappedWorkflow:
        """Map a canvas save payload or export file to EchoAI's workflow JSON and agent JSONs.

        Problems in the canvas (unknown tools, dangling connections, duplicate ids, bad node config)
        are reported in `.diagnostics`; only a payload that is not an object raises.

        Raises:
            TypeError: `payload` is not a mapping.
        """
        if not isinstance(payload, Mapping):
            raise TypeError(f"a canvas payload must be a JSON object, got {type(payload).__name__}")
        diags = Diagnostics()
        now = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        workflow_id, _ = self._workflow_id(payload.get("workflow_id"), diags, payload)
        nodes_key = "canvas_nodes" if "canvas_nodes" in payload else "nodes"
        raw_nodes = payload.get(nodes_key)
        if not isinstance(raw_nodes, list):
            diags.error(
                None, nodes_key, f"the payload needs a list of nodes in {nodes_key!r}, got {raw_nodes!r:.80}"
            )
            raw_nodes = []

        # the agent ids of a canvas come from its content until it has a workflow id, and that id is minted
        # from the same content (`wf_canvas_<digest>`): saved again under it, after edits too, the canvas
        # keeps the agent ids of its first save
        namespace = _namespace(workflow_id)
        nodes = self._collect_nodes(raw_nodes, nodes_key, namespace, diags)
        node_ids = {key: agent_id for key, (_, agent_id) in nodes.items()}
        edges = self._collect_edges(payload.get("connections"), node_ids, diags)
        types = {key: _node_type(node) for key, (node, _) in nodes.items()}

        agents: dict[str, dict[str, Any]] = {}
        for key, (node, agent_id) in nodes.items():
            agents[agent_id] = self._agent(node, key, agent_id, types[key], node_ids, edges, now, diags)

        self._check_graph(types, edges, diags)
        workflow = self._workflow(payload, workflow_id, nodes, types, edges, agents, now)
        check_flow_nodes(workflow, agents, {a: k for k, a in node_ids.items()}, diags)
        return MappedWorkflow(workflow, agents, list(diags), node_ids)

    def resolve_tools(self, entries: Any, *, node_id: str | None = None, exclude: Any = ()) -> ToolResolution:
        """Resolve one node's `config.tools` (what `ToolBindingPlugin.resolve_canvas_tools` builds on)."""
        return resolve_tool_entries(self.registry, entries, node_id=node_id, exclude=exclude or ())

    @staticmethod
    def _workflow_id(value: Any, diags: Diagnostics, payload: Mapping[str, Any]) -> tuple[str, bool]:
        """(the workflow id, True when it was minted here, from the canvas's content)."""
        if value in (None, ""):
            return f"wf_{_canvas_key(payload)}_{uuid.uuid4().hex[:8]}", True
        text = str(value)
        if not _WORKFLOW_ID.fullmatch(text) or ".." in text:
            diags.error(
                None,
                "workflow_id",
                f"workflow_id {value!r} is not a safe id (letters, digits, '_', '.', '-'); a new one was minted",
            )
            return f"wf_{_canvas_key(payload)}_{uuid.uuid4().hex[:8]}", True
        return text, False

    @staticmethod
    def _collect_nodes(
        raw_nodes: list[Any], nodes_key: str, workflow_id: str, diags: Diagnostics
    ) -> dict[str, tuple[dict[str, Any], str]]:
        nodes: dict[str, tuple[dict[str, Any], str]] = {}
        used: set[str] = set()
        for index, node in enumerate(raw_nodes):
            where = f"{nodes_key}[{index}]"
            if not isinstance(node, Mapping):
                diags.error(None, where, f"a node must be an object, got {node!r:.80}")
                continue
            if node.get("id") in (None, ""):
                diags.error(None, f"{where}.id", f"node {node.get('name')!r} at index {index} has no id")
                continue
            key = str(node["id"])
            if key in nodes:
                diags.error(key, f"{where}.id", f"node id {node['id']!r} is used by more than one node")
                continue
            agent_id = agent_id_for(workflow_id, key)
            for reused in (node.get("backend_id"), node.get("agentId")):
                if isinstance(reused, str) and _AGENT_ID.fullmatch(reused):
                    if reused in used:
                        diags.warning(
                            key, "backend_id", f"agent id {reused!r} is on two nodes; minted a new one"
                        )
                    else:
                        agent_id = reused
                    break
            used.add(agent_id)
            nodes[key] = (dict(node), agent_id)
        return nodes

    @staticmethod
    def _collect_edges(
        connections: Any, node_ids: Mapping[str, str], diags: Diagnostics
    ) -> list[tuple[str, str, Any]]:
        if connections is None:
            return []
        if not isinstance(connections, list):
            diags.error(None, "connections", f"connections must be a list, got {connections!r:.80}")
            return []
        edges: list[tuple[str, str, Any]] = []
        seen: set[tuple[str, str]] = set()
        for index, conn in enumerate(connections):
            where = f"connections[{index}]"
            if not isinstance(conn, Mapping):
                diags.error(None, where, f"a connection must be an object, got {conn!r:.80}")
                continue
            ends = []
            for side in ("from", "to"):
                ref = conn.get(side)
                if ref in (None, "") or str(ref) not in node_ids:
                    other = conn.get("to" if side == "from" else "from")
                    diags.error(
                        str(other) if other is not None and str(other) in node_ids else None,
                        f"{where}.{side}",
                        f"connection {conn.get('id', index)!r} {'comes from' if side == 'from' else 'goes to'} "
                        f"node {ref!r}, which is not on the canvas",
                    )
                    break
                ends.append(str(ref))
            if len(ends) != 2:
                continue
            if (ends[0], ends[1]) in seen:
                diags.warning(ends[0], where, f"connection {ends[0]} -> {ends[1]} is duplicated")
                continue
            seen.add((ends[0], ends[1]))
            edges.append((ends[0], ends[1], conn.get("condition")))
        return edges

    def _agent(
        self,
        node: dict[str, Any],
        key: str,
        agent_id: str,
        node_type: str,
        node_ids: Mapping[str, str],
        edges: list[tuple[str, str, Any]],
        now: str,
        diags: Diagnostics,
    ) -> dict[str, Any]:
        config = as_dict(node.get("config"))
        if node.get("type") in (None, ""):
            diags.warning(key, "type", f"node {key} has no type; it is mapped as an Agent")
        elif node_type not in ROLE_BY_TYPE:
            diags.warning(key, "type", f"node type {node_type!r} is not one the IDE offers")
        name = node.get("name") or node.get("label") or node_type
        agent: dict[str, Any] = {
            "agent_id": agent_id,
            "name": str(name),
            "role": str(config.get("role") or ROLE_BY_TYPE.get(node_type, "Workflow node")),
            "goal": str(config.get("goal") or ""),
            "prompt": str(config.get("prompt") or ""),
            "description": str(config.get("description") or f"{node_type} node"),
            "llm": self._llm(config, key, diags),
            "tools": [],
        }
        if node_type in TOOL_NODE_TYPES:
            exclude = config.get("tools_exclude") or config.get("toolsExclude") or ()
            res = resolve_tool_entries(
                self.registry, config.get("tools"), node_id=key, exclude=exclude, node_name=str(name)
            )
            diags.extend(res.diagnostics)
            agent["tools"] = res.tools
            if res.exclude:
                agent["tools_exclude"] = res.exclude
            agent["tool_bindings"] = res.bindings
        elif config.get("tools"):
            diags.warning(
                key, "config.tools", f"tools on a {node_type} node are not bound (only agents use tools)"
            )
        in_vars = _variables(config.get("inputVariables"), key, "config.inputVariables", diags)
        out_vars = _variables(config.get("outputVariables"), key, "config.outputVariables", diags)
        # EchoAI reads these only on Start and End; any node may declare them here (an API node's
        # outputVariables name the state keys its result lands in).
        agent["input_schema"] = [v["name"] for v in in_vars]
        agent["output_schema"] = [v["name"] for v in out_vars]
        agent["constraints"] = {
            "max_steps": config.get("maxIterations") or 5,
            "timeout_seconds": config.get("timeoutSeconds") or 60,
        }
        agent["permissions"] = {"can_call_agents": node_type == "Subagent"}
        icon, color = LOOK_BY_TYPE.get(node_type, ("⬜", "#94a3b8"))
        metadata: dict[str, Any] = {
            "node_type": node_type,
            "ui_layout": {
                "x": node.get("x", 0),
                "y": node.get("y", 0),
                "icon": node.get("icon") or icon,
                "color": node.get("color") or color,
            },
            "canvas_node_id": node["id"],
            "created_at": now,
        }
        if in_vars:
            metadata["input_variables"] = in_vars
        if out_vars:
            metadata["output_variables"] = out_vars
        if node_type == "Conditional":
            metadata["branches"] = _branches(config.get("branches"), key, node_ids, edges, diags)
        metadata.update(type_metadata(node_type, config, key, diags, self.registry))
        extra = {k: json_copy(v) for k, v in config.items() if k not in consumed_keys(node_type)}
        if extra:
            metadata["canvas_extra"] = extra
        agent["metadata"] = metadata
        return agent

    @staticmethod
    def _llm(config: Mapping[str, Any], key: str, diags: Diagnostics) -> dict[str, Any]:
        model = config.get("model")
        llm: dict[str, Any] = {}
        if isinstance(model, Mapping):
            if model.get("provider"):
                llm["provider"] = str(model["provider"])
            name = model.get("modelName") or model.get("model") or model.get("name")
            if name:
                llm["model"] = str(name)
            base_url = model.get("baseUrl") or model.get("base_url")
            if base_url:
                llm["base_url"] = str(base_url)
        elif isinstance(model, str) and model:
            llm["model"] = model
        if config.get("baseUrl") or config.get("base_url"):
            llm["base_url"] = str(config.get("baseUrl") or config.get("base_url"))
        temperature = config.get("temperature")
        llm["temperature"] = temperature if isinstance(temperature, (int, float)) else 0.7
        if not 0 <= llm["temperature"] <= 2:
            diags.error(
                key, "config.temperature", f"temperature must be between 0 and 2, got {temperature!r}"
            )
        max_tokens = config.get("maxTokens")
        llm["max_tokens"] = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else 4000
        if isinstance(config.get("topP"), (int, float)):
            llm["top_p"] = config["topP"]
        return llm

    @staticmethod
    def _check_graph(types: Mapping[str, str], edges: list[tuple[str, str, Any]], diags: Diagnostics) -> None:
        pairs = [(a, b) for a, b, _ in edges]
        for component in cycles(types, pairs):
            if not any(types[n] in ("Loop", "Map") for n in component):
                diags.warning(
                    component[0],
                    "connections",
                    f"nodes {', '.join(component)} form a cycle without a Loop node, so nothing bounds it (it "
                    "does not compile): put a Loop node in it, whose maxIterations bounds it",
                )
        starts = [k for k, t in types.items() if t == "Start"]
        if len(starts) > 1:
            diags.warning(starts[1], "type", f"the canvas has {len(starts)} Start nodes: {', '.join(starts)}")

    def _workflow(
        self,
        payload: Mapping[str, Any],
        workflow_id: str,
        nodes: Mapping[str, tuple[dict[str, Any], str]],
        types: Mapping[str, str],
        edges: list[tuple[str, str, Any]],
        agents: Mapping[str, dict[str, Any]],
        now: str,
    ) -> dict[str, Any]:
        ids = {key: agent_id for key, (_, agent_id) in nodes.items()}
        save_as = str(payload.get("save_as") or "draft").lower()
        model = infer_execution_model(types, [(a, b) for a, b, _ in edges])
        connections = []
        for src, dst, condition in edges:
            conn = {"from": ids[src], "to": ids[dst]}
            if condition:
                conn["condition"] = str(condition)
            connections.append(conn)
        state_schema: dict[str, str] = {}
        for key in types:
            agent_md = agents[ids[key]]["metadata"]
            for var in [*agent_md.get("input_variables", []), *agent_md.get("output_variables", [])]:
                state_schema.setdefault(var["name"], var["type"])
        name = (
            payload.get("workflow_name") or payload.get("name") or payload.get("title") or "Untitled Workflow"
        )
        metadata: dict[str, Any] = {
            "created_by": "workflow_builder",
            "created_at": now,
            "canvas_layout": {"width": 5000, "height": 5000},
            "source": "canvas_save" if "canvas_nodes" in payload else "canvas_export",
        }
        requested = payload.get("execution_model")
        if requested:
            metadata["requested_execution_model"] = requested
        if save_as == "temp":
            metadata["is_temp"] = True
        elif save_as == "final":
            metadata["immutable"] = True
        if isinstance(payload.get("metadata"), Mapping):  # e.g. a sample's default_input
            metadata.update({k: json_copy(v) for k, v in payload["metadata"].items() if k not in metadata})
        workflow: dict[str, Any] = {
            "workflow_id": workflow_id,
            "name": str(name),
            "description": str(payload.get("description") or f"Created from canvas on {now[:10]}"),
            "status": _STATUS_BY_SAVE_AS.get(save_as, "draft"),
            "version": "0.1",  # an export file's "version" is its format's, not the workflow's
            "execution_model": model,
            "agents": list(ids.values()),
            "connections": connections,
            "state_schema": state_schema,
            "metadata": metadata,
        }
        if model == "hierarchical":
            master = next((k for k, t in types.items() if t in ("Agent", "Subagent")), None)
            if master is not None:
                workflow["hierarchy"] = {
                    "master_agent": ids[master],
                    "delegation_order": [ids[b] for a, b, _ in edges if a == master],
                }
        review_points = [ids[k] for k, t in types.items() if t == "HITL"]
        if review_points:
            workflow["human_in_loop"] = {"enabled": True, "review_points": review_points}
        return workflow

    # -- workflow + agents -> canvas -----------------------------------------------------------------

    def to_canvas(
        self, workflow: Mapping[str, Any], agents: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Any]:
        """The canvas save payload for a stored workflow and its agents (the IDE's backend -> canvas path).

        Tool entries keep `tool_id` (EchoAI's reverse mapping lost it), canvas node ids come back from
        `metadata.canvas_node_id`, and each node carries `backend_id` so saving it again keeps agent ids.

        Raises:
            ValueError: the workflow names an agent that `agents` does not hold.
        """
        from workflow_bridge.canvas.reverse import workflow_to_canvas

        return workflow_to_canvas(self.registry, workflow, agents)


def _node_type(node: Mapping[str, Any]) -> str:
    value = node.get("type")
    return str(value) if value not in (None, "") else "Agent"


def _variables(value: Any, key: str, where: str, diags: Diagnostics) -> list[dict[str, Any]]:
    if value in (None, []):
        return []
    if not isinstance(value, list):
        diags.error(key, where, f"{where} must be a list of variables, got {value!r:.80}")
        return []
    out = []
    for index, var in enumerate(value):
        name = var.get("name") if isinstance(var, Mapping) else var if isinstance(var, str) else None
        if not isinstance(name, str) or not name.strip():
            diags.warning(key, f"{where}[{index}]", f"variable {var!r:.60} has no name; it is ignored")
            continue
        item = dict(var) if isinstance(var, Mapping) else {"name": name}
        item["name"] = name.strip()
        item["type"] = str(item.get("type") or "string")
        out.append(item)
    return out


def _branches(
    value: Any,
    key: str,
    node_ids: Mapping[str, str],
    edges: list[tuple[str, str, Any]],
    diags: Diagnostics,
) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        diags.error(key, "config.branches", "the Conditional node has no branches")
        return []
    targets = {b for a, b, _ in edges if a == key}
    out = []
    for index, branch in enumerate(value):
        where = f"config.branches[{index}]"
        if not isinstance(branch, Mapping):
            diags.error(key, where, f"a branch must be an object, got {branch!r:.80}")
            continue
        condition = str(branch.get("condition") or "")
        kind = str(branch.get("type") or ("if" if index == 0 else "elif" if condition else "else")).lower()
        if kind not in ("if", "elif", "else"):
            diags.error(key, f"{where}.type", f"branch type must be if, elif or else, got {kind!r}")
        if kind != "else" and not condition.strip():
            diags.error(key, f"{where}.condition", f"the {kind!r} branch has no condition")
        target = branch.get("targetNodeId")
        item: dict[str, Any] = {"type": kind, "condition": condition, "targetNodeId": None}
        item["canvasTargetNodeId"] = target
        if target in (None, "") or str(target) not in node_ids:
            diags.error(key, f"{where}.targetNodeId", f"branch target {target!r} is not a node on the canvas")
        else:
            item["targetNodeId"] = node_ids[str(target)]
            if str(target) not in targets:
                diags.warning(
                    key,
                    f"{where}.targetNodeId",
                    f"no connection leads from this node to branch target {target!r}",
                )
        out.append(item)
    return out
