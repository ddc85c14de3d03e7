"""The canvas nodes that are not LLM agents: Start, End, Merge, API, Code, MCP, Conditional and HITL
(Loop and Map: `loop_nodes.py`; Failsafe and Self-Review: `guard_nodes.py`; Template: `template_node.py`).

EchoAI ran every one of them as a CrewAI agent role-playing its job. Here Start and End pass data through,
Merge joins branch results, API / Code / MCP nodes run their configured tool through the executor,
Conditional nodes evaluate their branches with `conditions.evaluate_condition`, and HITL nodes pause the
run with LangGraph's `interrupt` until `Command(resume=decision)`.
"""

from __future__ import annotations

import ast
import builtins
import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from workflow_bridge.conditions import ConditionVariableError, evaluate_condition, number_in
from workflow_bridge.crewai_adapter import (
    Node,
    ToolEventCapture,
    failed_output,
    format_parallel,
    node_context,
    now,
    original_request,
)
from workflow_bridge.text_arguments import build_arguments, json_objects_in

logger = logging.getLogger("workflow_bridge.nodes")

HTTP_TOOL = "tool_http_request"
CODE_TOOL = "tool_code_executor"
CONTINUE, REJECT = "__continue__", "__reject__"
_PAIR = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*[:=]\s*([^\n,;]+)")
_MAX_TEXT = 20_000


def _message(agent: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "agent": agent.get("agent_id"),
        "name": agent.get("name"),
        "role": agent.get("role"),
        "node_type": (agent.get("metadata") or {}).get("node_type"),
        **fields,
        "timestamp": now(),
    }


def scope_for(state: Mapping[str, Any]) -> dict[str, Any]:
    """Names a condition or a Code node can use: state keys, plus `name: value` pairs and JSON keys found
    in the previous agent's text (agents report values such as `risk_score: 75` as text)."""
    scope: dict[str, Any] = {}
    text = state.get("crew_result")
    if isinstance(text, str) and text:
        text = text[:_MAX_TEXT]
        for key, value in _PAIR.findall(text):
            scope.setdefault(key, value.strip().strip("\"'"))
            scope.setdefault(key.lower(), scope[key])
        for obj in json_objects_in(text):
            scope.update({k: v for k, v in obj.items() if isinstance(k, str)})
    scope.update({k: v for k, v in state.items() if v is not None})
    return scope


def passthrough_node(agent: Mapping[str, Any], reason: str = "pass-through") -> Node:
    """A node that only records that it ran (missing agents compiled with `missing_agents="passthrough"`)."""

    def passthrough(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [_message(agent, passthrough=True, note=reason)]}

    return passthrough


def start_node(agent: Mapping[str, Any]) -> Node:
    """Start: no LLM; carries the request forward and fills its input keys from a JSON request."""
    input_keys = [k for k in agent.get("input_schema") or [] if isinstance(k, str)]

    def start(state: dict[str, Any]) -> dict[str, Any]:
        request = original_request(state)
        delta: dict[str, Any] = {"original_user_input": request}
        found = next(iter(json_objects_in(request)), {}) if request.lstrip().startswith("{") else {}
        for key in input_keys:
            if state.get(key) is None:
                if key in found:
                    delta[key] = found[key]
                elif len(input_keys) == 1:
                    delta[key] = request
        inputs = {k: delta.get(k, state.get(k)) for k in input_keys}
        delta["messages"] = [_message(agent, inputs=inputs, original_request=request)]
        return delta

    return start


def end_node(agent: Mapping[str, Any]) -> Node:
    """End: no LLM; `crew_result` becomes `result` and every output key that no earlier node has set
    (a Code node may already have produced `final_price`; that value is kept)."""
    output_keys = [k for k in agent.get("output_schema") or [] if isinstance(k, str)]

    def end(state: dict[str, Any]) -> dict[str, Any]:
        text = state.get("crew_result")
        if text in (None, "") and state.get("parallel_output"):
            text = format_parallel(state["parallel_output"])
        text = "" if text is None else text
        delta: dict[str, Any] = {k: text for k in output_keys if state.get(k) in (None, "")}
        delta["result"] = text
        delta["messages"] = [_message(agent, output_preview=str(text)[:500])]
        return delta

    return end


def merge_node(agent: Mapping[str, Any]) -> Node:
    """Merge: no LLM; the branches' `parallel_output` becomes `crew_result` for what follows."""

    def merge(state: dict[str, Any]) -> dict[str, Any]:
        combined = format_parallel(state.get("parallel_output"))
        delta: dict[str, Any] = {
            "messages": [_message(agent, merged=list(state.get("individual_outputs") or {}))]
        }
        if combined:
            delta["crew_result"] = combined
        return delta

    return merge


def tool_node(
    registry: Any, executor: Any, agent: Mapping[str, Any], node_id: str, *, branch: bool = False
) -> Node:
    """API, Code and MCP nodes: run the configured tool through the executor, no LLM.

    The tool's output (as text) becomes `crew_result`; a failed call is recorded in `messages` and leaves
    `crew_result` as it was, so the run goes on.

    Args:
        registry: the `ToolRegistry` the node's tool is found in.
        executor: the `ToolExecutor` the call goes through (the compiler's own).
    """
    node_type = (agent.get("metadata") or {}).get("node_type")
    tool_ref, make_args = _tool_plan(registry, agent, node_type)
    capture = ToolEventCapture.of(executor)

    def run_tool(state: dict[str, Any]) -> dict[str, Any]:
        ctx = node_context(agent, state, node_id)  # inherits a composite caller's grants and deadline
        capture.open(ctx.run_id, node_id)
        try:
            result = executor.invoke_sync(tool_ref, make_args(state), ctx)
        finally:
            events = capture.close(ctx.run_id, node_id)
        delta: dict[str, Any] = {"tool_events": events, "original_user_input": original_request(state)}
        text, error = _node_output(node_type, result)
        if error is None:
            delta["crew_result"] = text
            for key in agent.get("output_schema") or []:
                delta[key] = _output_value(result.output, key, text)
            if branch:  # one arm of a fan-out: the join reads the arms from these merged keys
                delta["parallel_output"] = {str(agent.get("name") or node_id): text}
                delta["individual_outputs"] = {node_id: text}
            delta["messages"] = [
                _message(agent, tool_id=result.tool_id, status="completed", output_preview=text[:500])
            ]
        else:
            error_type = result.error_type if not result.success else "execution"
            if branch:  # a failed arm stays in the join's results, marked failed
                marked = failed_output(error, error_type)
                delta["parallel_output"] = {str(agent.get("name") or node_id): marked}
                delta["individual_outputs"] = {node_id: marked}
            delta["messages"] = [
                _message(agent, tool_id=result.tool_id, status="failed", error=error, error_type=error_type)
            ]
        return delta

    return run_tool


def _output_value(output: Any, key: str, text: str) -> Any:
    """The value an output key gets: the key of the same name in the tool's output (or in an HTTP
    response's parsed `json` body) when there is one, else the whole output as text. Taking the whole text
    would hand a condition like `risk_score > 70` the first number in it, an HTTP status code."""
    if isinstance(output, Mapping):
        if key in output:
            return output[key]
        body = output.get("json")
        if isinstance(body, Mapping) and key in body:
            return body[key]
    return text


def _node_output(node_type: str | None, result: Any) -> tuple[str, str | None]:
    """(text for crew_result, error or None). A Code node's result is what the program printed; a
    program that exits non-zero failed, and an API node answered with an HTTP error status failed,
    whatever the executor says about the tool call itself."""
    if not result.success:
        return "", result.error or "the tool failed"
    output = result.output
    if node_type == "API" and isinstance(output, Mapping) and output.get("ok") is False:
        # an HTTP error status is the API node's failure (a Failsafe retries it), as an exit code is Code's
        body = str(output.get("body") or "").strip()
        return "", f"the API answered HTTP {output.get('status_code')!r}: {body[:300]}"
    if node_type == "Code" and isinstance(output, Mapping) and "exit_code" in output:
        if output.get("exit_code") != 0 or output.get("timed_out"):
            stderr = str(output.get("stderr") or "").strip()
            return "", f"the code exited with {output.get('exit_code')!r}: {stderr[-1000:]}"
        return str(output.get("stdout") or "").strip(), None
    return (output if isinstance(output, str) else json.dumps(output, default=str)), None


def _tool_plan(registry: Any, agent: Mapping[str, Any], node_type: str | None) -> tuple[str, Any]:
    # A node whose tool is not registered still compiles: at run time the executor reports not_found
    # (a tool.failed event and a failed message), and the run goes on, as for any failing tool.
    meta = agent.get("metadata") or {}
    if node_type in ("API", "Code"):
        key, ref = ("api_config", HTTP_TOOL) if node_type == "API" else ("code_config", CODE_TOOL)
        config = dict(meta.get(key) or {})
        tool = registry.resolve(ref)
        if tool is None:
            logger.warning(
                "%s node %s: tool %r is not registered; the node will fail when it runs",
                node_type,
                agent.get("agent_id"),
                ref,
            )
        schema = tool.input_schema if tool is not None else {}
        build = _api_arguments if node_type == "API" else _code_arguments
        return ref, lambda state: build(config, schema, state)
    config = dict(meta.get("mcp_config") or {})
    tool = _mcp_tool(registry, config)
    fixed = dict(config.get("arguments") or {})
    if tool is None:
        logger.warning(
            "MCP node %s: no registered MCP tool serves %r; the node will fail when it runs",
            agent.get("agent_id"),
            config,
        )
    ref = tool.tool_id if tool is not None else f"{config.get('serverName')}_{config.get('toolName')}"

    def mcp_arguments(state: dict[str, Any]) -> dict[str, Any]:
        text = f"ORIGINAL USER REQUEST:\n{original_request(state)}\n\nPREVIOUS AGENT OUTPUT:\n{state.get('crew_result') or ''}"
        return {**build_arguments(tool.input_schema if tool else {}, text), **fixed}

    return ref, mcp_arguments


def _mcp_tool(registry: Any, config: Mapping[str, Any]) -> Any:
    if config.get("tool_id"):
        return registry.resolve(config["tool_id"])
    server = config.get("serverName") or config.get("serverId")
    operation = config.get("toolName") or config.get("operation")
    for tool in registry.list_by_type("mcp"):
        exe = tool.execution_config
        if exe.get("server") == server and exe.get("tool") == operation:
            return tool
    return registry.resolve(f"{server}_{operation}") if server and operation else None


def _pick(schema: Mapping[str, Any], *names: str) -> str | None:
    props = schema.get("properties") or {}
    return next((n for n in names if n in props), None)


def _api_arguments(config: Mapping[str, Any], schema: Mapping[str, Any], state: Mapping[str, Any]) -> dict:
    method = str(config.get("method") or "GET").upper()
    args: dict[str, Any] = {"url": config.get("url"), "method": method}
    if config.get("headers"):
        args[_pick(schema, "headers") or "headers"] = dict(config["headers"])
    if config.get("query"):
        args[_pick(schema, "query", "params") or "query"] = config["query"]
    if config.get("timeout") and _pick(schema, "timeout", "timeout_seconds"):
        args[_pick(schema, "timeout", "timeout_seconds") or "timeout"] = config["timeout"]
    if method in ("POST", "PUT", "PATCH"):
        body = config.get("body")
        if body is None:
            body = {"input": original_request(state), "previous_output": state.get("crew_result")}
        args[_pick(schema, "json", "body", "data") or "json"] = body
    return args


def _code_arguments(config: Mapping[str, Any], schema: Mapping[str, Any], state: Mapping[str, Any]) -> dict:
    code = str(config.get("code") or "")
    args: dict[str, Any] = {"code": _preamble(code, scope_for(state)) + code}
    if config.get("language") and _pick(schema, "language"):
        args["language"] = str(config["language"]).lower()
    if _pick(schema, "stdin"):
        payload = {"user_input": original_request(state), "crew_result": state.get("crew_result")}
        args["stdin"] = json.dumps(payload, default=str)
    return args


def _preamble(code: str, scope: Mapping[str, Any]) -> str:
    # Canvas code reads workflow values by bare name (`win_probability`); define the ones it reads but
    # never assigns, from state and the previous agent's text, as literals (never code).
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ""
    loaded: set[str] = set()
    stored: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else stored).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, ast.arg):
            stored.add(node.arg)
    lines = []
    for name in sorted(loaded - stored - set(dir(builtins))):
        if name in scope:
            value = scope[name]
            number = number_in(value) if isinstance(value, str) else None
            literal = value if number is None else (int(number) if number.is_integer() else number)
            if isinstance(literal, (int, float, str, bool, list, dict)) or literal is None:
                lines.append(f"{name} = {literal!r}")
    return "\n".join(lines) + "\n" if lines else ""


def conditional_node(agent: Mapping[str, Any], branches: list[tuple[str, str | None]], node_id: str) -> Node:
    """Conditional: the first branch whose condition holds names the next node (`_routes[node_id]`).

    Args:
        branches: (condition, target node id or None for END) in order; an empty condition is `else`.
    """

    def conditional(state: dict[str, Any]) -> dict[str, Any]:
        scope = scope_for(state)
        for key, value in state.items():  # a key set to None is there (None), not missing
            scope.setdefault(key, value)
        chosen, condition = None, None
        for condition_text, target in branches:
            try:
                holds = evaluate_condition(condition_text, scope, strict=True)
            except ConditionVariableError as exc:
                # EchoAI took the else branch silently here; a missing variable is a broken workflow
                raise ConditionVariableError(
                    f"Conditional node {agent.get('name')!r} ({node_id}): condition {exc.expression!r} "
                    f"names {exc.variable!r}, which is not in the workflow state (it has: "
                    f"{_known_keys(scope)}); set it in an earlier node's output variables or in the run's input",
                    exc.variable,
                    exc.expression,
                ) from exc
            if holds:
                chosen, condition = target, condition_text
                break
        route = chosen or "__end__"
        return {
            "_conditional_route": route,
            "_conditional_node": node_id,
            "_routes": {node_id: route},
            "messages": [_message(agent, route=route, condition=condition or "")],
        }

    return conditional


def _known_keys(scope: Mapping[str, Any], limit: int = 20) -> str:
    hidden = {"messages", "tool_events", "_routes", "_conditional_route", "_conditional_node"}
    keys = sorted(k for k, v in scope.items() if k not in hidden and v is not None)
    shown = ", ".join(keys[:limit]) or "no keys"
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def hitl_node(agent: Mapping[str, Any], node_id: str) -> Node:
    """HITL: pauses with `interrupt(request)`; resume with `Command(resume=decision)`.

    A decision is `"approve"`, `"reject"` or a dict `{"decision": "approve"|"reject"|"edit",
    "edited_output": text, "comment": text}`; `edit` replaces `crew_result`, `reject` ends the run.
    """
    config = dict((agent.get("metadata") or {}).get("hitl_config") or {})

    def hitl(state: dict[str, Any]) -> dict[str, Any]:
        from langgraph.types import interrupt

        raw = interrupt(
            {
                "type": "hitl",
                "node_id": node_id,
                "agent_id": agent.get("agent_id"),
                "title": config.get("title") or agent.get("name"),
                "message": config.get("message") or "",
                "priority": config.get("priority") or "medium",
                "allow_edit": bool(config.get("allowEdit", True)),
                "decisions": config.get("allowedDecisions") or ["approve", "reject", "edit"],
                "crew_result": state.get("crew_result"),
                "run_id": state.get("run_id"),
            }
        )
        decision = _decision(raw)
        kind = decision["decision"]
        delta: dict[str, Any] = {
            "hitl_decision": decision,
            "_routes": {node_id: REJECT if kind == "reject" else CONTINUE},
            "messages": [_message(agent, decision=kind, comment=decision.get("comment"))],
        }
        if kind == "edit" and decision.get("edited_output") is not None:
            delta["crew_result"] = decision["edited_output"]
        if kind == "reject":
            delta["result"] = f"Rejected at {agent.get('name')!r}: {decision.get('comment') or 'no comment'}"
        return delta

    return hitl


def _decision(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        raw = {"decision": raw}
    if not isinstance(raw, Mapping):
        raise ValueError(
            f"a HITL decision must be 'approve', 'reject' or a dict with 'decision', got {raw!r}"
        )
    decision = dict(raw)
    kind = str(decision.get("decision") or decision.get("action") or "").lower()
    aliases = {"approved": "approve", "rejected": "reject", "request_revisions": "reject", "edited": "edit"}
    kind = aliases.get(kind, kind)
    if kind not in ("approve", "reject", "edit"):
        raise ValueError(f"HITL decision must be approve, reject or edit, got {decision.get('decision')!r}")
    decision["decision"] = kind
    if kind == "edit" and decision.get("edited_output") is None:
        decision["edited_output"] = decision.get("crew_result") or decision.get("output")
    return decision
