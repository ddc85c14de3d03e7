"""Loop and Map nodes: a LangGraph cycle that runs a body once per item (or while a condition holds), and
a fan-out with LangGraph's `Send` that runs the next node on every item, `maxConcurrency` at a time.

Both are ordinary graph nodes whose route decides, each time they run, where the run goes: into the body
again (Loop), the next wave of `Send`s (Map), or on to the nodes after. Their progress lives in the state
(`_loops`, `_maps`, `_map_results`), so a checkpoint holds it. Every bound (`maxIterations`, the run's
budget) that stops one early is a failed message naming the node: the run ends `completed_with_errors`,
never silently short.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from workflow_bridge.conditions import evaluate_condition
from workflow_bridge.crewai_adapter import AgentNodeError, Node, failed_output, node_context, original_request
from workflow_bridge.flow_config import (
    MAX_MAP_ITEMS,
    LoopConfig,
    MapConfig,
    as_list,
    item_text,
    node_label,
    result_value,
)
from workflow_bridge.nodes import _message, scope_for
from workflow_bridge.topology import END_NODE, LoopPlan

BODY, EXIT, SEND = "body", "exit", "send"
FALSY_TEXT = frozenset({"", "false", "no", "0", "null", "none", "[]", "{}"})


def budget_left(agent: Mapping[str, Any], state: Mapping[str, Any], node_id: str) -> str | None:
    """Why the run's budget allows no more work (its calls or its deadline are spent), else None."""
    from echo_tools.gate import under_acting

    meter = under_acting(node_context(agent, state, node_id)).budget
    if meter is None:
        return None
    budget = meter.budget
    if meter.calls >= budget.max_calls:
        return f"the run's budget of {budget.max_calls} tool calls (max_calls) is spent"
    if meter.remaining_s() <= 0:
        return f"the run's deadline of {budget.deadline_s:g} s (deadline_s) has passed"
    return None


def _items(state: Mapping[str, Any], array: str | None) -> tuple[list[Any] | None, str]:
    """The list a node works on: the named variable, else the previous node's output; (None, why) if not."""
    source = array or "crew_result"
    value = state.get(source)
    items = as_list(value)
    if items is None:
        where = f"variable {array!r}" if array else "the previous node's output"
        shown = json.dumps(value, default=str)[:200] if value is not None else "nothing"
        return None, f"{where} is not a list (it holds {shown}); give it a JSON list"
    return items, ""


class LoopNode:
    """A Loop node: entered from before the loop it starts; entered again from the body's end it records
    the body's output and decides whether the body runs once more."""

    def __init__(self, agent: Mapping[str, Any], node_id: str, config: LoopConfig, plan: LoopPlan) -> None:
        self.agent = agent
        self.node_id = node_id
        self.config = config
        self.plan = plan
        self.label = node_label(agent)

    def __call__(self, state: dict[str, Any]) -> dict[str, Any]:
        info = (state.get("_loops") or {}).get(self.node_id) or {}
        if info.get("active"):
            items = info.get("items")
            results = [*info.get("results", []), result_value(state.get("crew_result"))]
            index = int(info.get("index", 0)) + 1
        else:
            items, results, index = None, [], 0
            if self.config.kind == "for-each":
                items, problem = _items(state, self.config.array)
                if items is None:
                    return self._exit(state, [], f"{self.label}: {problem}", items=None)
        stop, why = self._stop(state, index, items)
        if stop:
            return self._exit(state, results, why, items=items)
        delta: dict[str, Any] = {
            "_loops": {self.node_id: {"active": True, "index": index, "items": items, "results": results}},
            "_routes": {self.node_id: BODY},
            "original_user_input": original_request(state),
            "messages": [_message(self.agent, loop_iteration=index + 1, status="running")],
        }
        if items is not None:  # for-each: the item is the body's input
            delta[self.config.item] = items[index]
            delta["crew_result"] = item_text(items[index])
        else:  # for, while, until: the body works on the output before it; the item is the iteration's index
            delta[self.config.item] = index
        return delta

    def _stop(self, state: Mapping[str, Any], index: int, items: list[Any] | None) -> tuple[bool, str | None]:
        """(stop now, the bound that stopped it early or None when the loop is simply done)."""
        config = self.config
        if config.kind == "for-each":
            assert items is not None
            if index >= len(items):
                return True, None
        elif config.kind == "for" and index >= min(
            config.count or config.max_iterations, config.max_iterations
        ):
            if config.count is not None and config.count > config.max_iterations:
                return True, self._bound(f"count={config.count}")
            return True, None
        elif config.kind in ("while", "until") and (index > 0 or config.kind == "while"):
            holds = evaluate_condition(config.condition, scope_for(state))
            if holds != (config.kind == "while"):
                return True, None
        if index >= config.max_iterations:
            left = f"; {len(items) - index} of {len(items)} items were not processed" if items else ""
            still = (
                f" with its condition {config.condition!r} still asking for more" if config.condition else ""
            )
            return True, self._bound(f"maxIterations={config.max_iterations}{still}{left}")
        spent = budget_left(self.agent, state, self.node_id)
        if spent:
            return True, f"{self.label}: stopped after {index} iteration(s): {spent}"
        return False, None

    def _bound(self, what: str) -> str:
        return f"{self.label}: stopped at {what}"

    def _exit(self, state: Mapping[str, Any], results: list[Any], why: str | None, *, items: Any) -> dict:
        delta: dict[str, Any] = {
            "_loops": {self.node_id: {"active": False, "iterations": len(results)}},
            "_routes": {self.node_id: EXIT},
            "original_user_input": original_request(state),
        }
        if self.config.kind in ("for-each", "for") and (why is None or results):
            text = json.dumps(results, default=str)
            delta["crew_result"] = text
            for key in self.agent.get("output_schema") or []:
                delta[key] = results
        fields: dict[str, Any] = {"iterations": len(results), "status": "completed"}
        if why:
            fields.update(status="failed", error=why, error_type="bound")
        delta["messages"] = [_message(self.agent, **fields)]
        return delta


def loop_route(node_id: str, plan: LoopPlan) -> tuple[Callable[[Mapping[str, Any]], Any], list[str]]:
    """The Loop node's route: into the body, or on to the nodes after the loop (the end when none)."""
    after = plan.exits or [END_NODE]

    def route(state: Mapping[str, Any]) -> Any:
        return [plan.entry] if (state.get("_routes") or {}).get(node_id) == BODY else after

    return route, [plan.entry, *after]


class MapNode:
    """A Map node: on entry it reads the list and sends the first wave; back from a wave it sends the next,
    and when every item is done it gathers the results in the items' order."""

    def __init__(self, agent: Mapping[str, Any], node_id: str, config: MapConfig) -> None:
        self.agent = agent
        self.node_id = node_id
        self.config = config
        self.label = node_label(agent)

    def __call__(self, state: dict[str, Any]) -> dict[str, Any]:
        info = (state.get("_maps") or {}).get(self.node_id) or {}
        if not info.get("active"):
            items, problem = _items(state, self.config.array)
            if items is None:
                return self._exit(state, [], [], f"{self.label}: {problem}")
            if not items:  # nothing to send: a wave of no Sends would end the run here
                return self._exit(state, [], [], None)
            if len(items) > MAX_MAP_ITEMS:
                return self._exit(
                    state, [], [], f"{self.label}: {len(items)} items are more than {MAX_MAP_ITEMS}"
                )
            return self._wave(state, items, 0, reset=True)
        items = list(info.get("items") or [])
        sent = int(info.get("sent", 0))
        if sent < len(items):
            spent = budget_left(self.agent, state, self.node_id)
            if spent:
                done = self._results(state, sent)
                return self._exit(
                    state,
                    items[:sent],
                    done,
                    f"{self.label}: stopped after {sent} of {len(items)} items: {spent}",
                )
            return self._wave(state, items, sent)
        return self._exit(state, items, self._results(state, len(items)), None)

    def _results(self, state: Mapping[str, Any], count: int) -> list[Any]:
        found = (state.get("_map_results") or {}).get(self.node_id) or {}
        return [found.get(str(i)) for i in range(count)]

    def _wave(self, state: Mapping[str, Any], items: list[Any], start: int, *, reset: bool = False) -> dict:
        end = min(len(items), start + self.config.max_concurrency)
        delta: dict[str, Any] = {
            "_maps": {self.node_id: {"active": True, "items": items, "start": start, "sent": end}},
            "_routes": {self.node_id: SEND},
            "messages": [_message(self.agent, status="running", items=len(items), wave=[start, end])],
        }
        if reset:
            delta["_map_results"] = {self.node_id: None}
        return delta

    def _exit(self, state: Mapping[str, Any], items: list[Any], results: list[Any], why: str | None) -> dict:
        values = results
        if self.config.operation == "filter":
            values = [item for item, r in zip(items, results, strict=False) if _truthy(r)]
        delta: dict[str, Any] = {
            "_maps": {self.node_id: {"active": False, "items": len(items)}},
            "_routes": {self.node_id: EXIT},
            "original_user_input": original_request(state),
        }
        if why is None or values:
            delta["crew_result"] = json.dumps(values, default=str)
            for key in self.agent.get("output_schema") or []:
                delta[key] = values
        fields: dict[str, Any] = {"status": "completed", "items": len(items), "results": len(values)}
        if why:
            fields.update(status="failed", error=why, error_type="bound")
        delta["messages"] = [_message(self.agent, **fields)]
        return delta


def _truthy(result: Any) -> bool:
    if isinstance(result, str):
        return result.strip().lower() not in FALSY_TEXT and not result.startswith("[failed]")
    return bool(result)


def map_route(
    node_id: str, worker: str, config: MapConfig, exits: list[str]
) -> tuple[Callable[[Mapping[str, Any]], Any], list[str]]:
    """The Map node's route: one `Send` to the worker per item of the wave, or on to the nodes after."""
    from langgraph.types import Send

    after = exits or [END_NODE]
    hidden = {"messages", "tool_events", "_map_results"}

    def route(state: Mapping[str, Any]) -> Any:
        if (state.get("_routes") or {}).get(node_id) != SEND:
            return after
        info = (state.get("_maps") or {}).get(node_id) or {}
        items = info.get("items") or []
        base = {k: v for k, v in state.items() if k not in hidden}
        return [
            Send(
                worker,
                {
                    **base,
                    config.item: items[i],
                    "crew_result": item_text(items[i]),
                    "_map_item": {"node": node_id, "index": i},
                },
            )
            for i in range(int(info.get("start", 0)), int(info.get("sent", 0)))
        ]

    return route, [worker, *after]


class MapWorker:
    """The node a Map runs on each item: the node itself, its output filed under the item's index (and a
    failure kept as that item's result, marked, so the other items go on)."""

    def __init__(self, map_node: str, fn: Node, agent: Mapping[str, Any], node_id: str) -> None:
        self.map_node = map_node
        self.fn = fn
        self.agent = agent
        self.node_id = node_id

    def __call__(self, state: dict[str, Any]) -> dict[str, Any]:
        where = state.get("_map_item") or {}
        index = where.get("index")
        try:
            delta = dict(self.fn(state))
        except AgentNodeError as exc:
            delta = {
                "tool_events": exc.events,
                "messages": [_message(self.agent, status="failed", error=str(exc), error_type="execution")],
            }
        failed = [
            m for m in delta.get("messages") or [] if isinstance(m, Mapping) and m.get("status") == "failed"
        ]
        if failed:
            value: Any = failed_output(str(failed[-1].get("error")), failed[-1].get("error_type"))
        else:
            value = result_value(delta.get("crew_result"))
        for key in ["crew_result", *(self.agent.get("output_schema") or [])]:
            delta.pop(key, None)  # the items' outputs meet in the Map's list, not in one shared key
        delta["_map_results"] = {self.map_node: {str(index): value}}
        return delta
