"""Canvas `subworkflow` / `subworkflow_deployment` tool entries: the `workflow` tool each one binds.

A `subworkflow {workflowId}` entry binds the registered `workflow` tool whose `execution_config.workflow_id`
is that id; when there is none and the registry's `WorkflowStore` holds the workflow, a `workflow` tool
(`subworkflow_<id slug>`) is registered for it. Otherwise the entry cannot bind, and the caller reports why
(an error diagnostic at map time, an error when an agent's tools are bound): never a silent drop.
Deployments are not supported yet: EchoAI's store layout (draft/, temp/, final/) holds none to resolve.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.errors import ToolError
from echo_tools.models import ToolDef, ToolStatus, slugify

if TYPE_CHECKING:
    from echo_tools.registry import ToolRegistry

__all__ = ["SUBWORKFLOW_KINDS", "subworkflow_tool"]

SUBWORKFLOW_KINDS = frozenset({"subworkflow", "subworkflow_deployment"})


def subworkflow_tool(
    registry: ToolRegistry | None, kind: str, config: Mapping[str, Any]
) -> tuple[ToolDef | None, str]:
    """The `workflow` tool a `kind` entry with `config` binds, or None and why it cannot bind."""
    if kind == "subworkflow_deployment":
        deployment = config.get("deploymentId")
        environment = config.get("environment")
        return None, (
            f"deployment {deployment!r} (environment {environment!r}) cannot be bound: subworkflow "
            "deployments are not supported yet (EchoAI's workflow store holds draft, temp and final "
            "workflows, no deployments); use a Subworkflow tool naming the workflowId (and a final "
            "version with config.version) instead"
        )
    workflow_id = config.get("workflowId")
    if not isinstance(workflow_id, str) or not workflow_id.strip():
        return None, f"the Subworkflow tool names no workflowId (config.workflowId is {workflow_id!r})"
    if registry is None:
        return None, f"workflow {workflow_id!r} cannot be bound: there is no tool registry"
    version = config.get("version")
    version = str(version) if version not in (None, "") else None
    found = [
        t
        for t in registry.list_by_type("workflow")
        if t.execution_config.get("workflow_id") == workflow_id
        and (version is None or str(t.execution_config.get("version")) == version)
    ]
    if found:  # an active one first, then by id: the same choice every time
        return sorted(found, key=lambda t: (t.status is not ToolStatus.ACTIVE, t.tool_id))[0], ""
    return _register_from_store(registry, workflow_id, version)


def _register_from_store(
    registry: ToolRegistry, workflow_id: str, version: str | None
) -> tuple[ToolDef | None, str]:
    missing = f"no registered workflow tool runs workflow {workflow_id!r}"
    store = registry.workflows
    if store is None:
        return None, f"{missing}, and the registry has no workflow store to register one from " + (
            "(ToolRegistry(workflows=WorkflowStore(...)))"
        )
    try:
        workflow = store.get(workflow_id, version)
    except (ToolError, ValueError) as exc:
        return None, f"{missing}, and the workflow store does not hold it: {exc}"
    tool_id = f"subworkflow_{slugify(workflow_id)}"[:128]
    if registry.get(tool_id) is not None:
        return None, f"{missing}, and the id {tool_id!r} it would be registered under is another tool's"
    title = str(workflow.get("name") or workflow_id)
    config = {"workflow_id": workflow_id, **({"version": version} if version else {})}
    definition = {
        "tool_id": tool_id,
        "name": f"Subworkflow {title}",
        "description": str(workflow.get("description") or f"Runs the stored workflow {title!r}."),
        "tool_type": "workflow",
        "execution_config": config,
    }
    try:
        registry.register(definition)
    except (ToolError, ValueError) as exc:
        return None, f"{missing}, and registering one failed: {exc}"
    return registry.require(tool_id), ""
