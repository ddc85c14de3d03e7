"""EchoAI's agent JSON as the compiler reads it: `normalize_agent` fills in the keys a stored or mapped agent
may lack, so the compiler, the reverse mapper and the agent factory read one shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflow_bridge.canvas.entries import ROLE_BY_TYPE, json_copy


def normalize_agent(agent: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an EchoAI agent JSON with the keys the compiler reads filled in.

    Fills `tools`, `input_schema`, `output_schema` ([]), `llm`, `metadata` ({}), `name` (the agent id),
    `role` (EchoAI's role for the node type), `goal`, `prompt`, `description` (""), `tool_bindings` ([]),
    and `metadata.node_type` ("Agent" for legacy agents that have none). Present values are kept.

    Raises:
        TypeError: `agent` is not a mapping.
    """
    if not isinstance(agent, Mapping):
        raise TypeError(f"an agent must be a JSON object, got {type(agent).__name__}")
    out = json_copy(dict(agent))
    for key in ("tools", "input_schema", "output_schema", "tool_bindings"):
        if out.get(key) is None:
            out[key] = []
        elif isinstance(out[key], str):
            out[key] = [out[key]]
    for key in ("llm", "metadata", "constraints", "permissions"):
        if not isinstance(out.get(key), Mapping):
            out[key] = {}
    if isinstance(agent.get("permissions"), list):  # the permissions an agent grants its tools: kept
        out["permissions"] = json_copy(agent["permissions"])
    out["metadata"].setdefault("node_type", "Agent")
    out["name"] = out.get("name") or str(out.get("agent_id") or "agent")
    out["role"] = out.get("role") or ROLE_BY_TYPE.get(out["metadata"]["node_type"], "Autonomous AI agent")
    for key in ("goal", "prompt", "description"):
        if out.get(key) is None:
            out[key] = ""
    return out
