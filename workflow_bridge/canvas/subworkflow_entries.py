"""Canvas `subworkflow` / `subworkflow_deployment` tool entries: the `workflow` tool each one binds.

A `subworkflow {workflowId}` entry binds the registered `workflow` tool whose `execution_config.workflow_id`
is that id; when there is none and the registry's `WorkflowStore` holds the workflow, a `workflow` tool
(`subworkflow_<id slug>`) is registered for it. Otherwise the entry cannot bind, and the caller reports why
(an error diagnostic at map time, an error when an agent's tools are bound): never a silent drop.

A `subworkflow_deployment {deploymentId, environment}` entry names a deployment of the registry's
`WorkflowStore` (`WorkflowStore.deploy`). One deployed from a published final version binds a `workflow`
tool `{deployment_id, environment}` (`deployment_<id>_<environment>`), which reads the version the
deployment names at every call, so a redeploy takes effect at the next call without saving the canvas
again. One deployed at a remote endpoint binds an `api` tool POSTing the input there, through the one
outbound client and its egress policy. An id that is not deployed is an error naming it, with the
deployments there are.
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
        return deployment_tool(registry, config)
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


def deployment_tool(registry: ToolRegistry | None, config: Mapping[str, Any]) -> tuple[ToolDef | None, str]:
    """The tool a `subworkflow_deployment` entry binds (see the module docstring), or None and why."""
    deployment = config.get("deploymentId")
    environment = config.get("environment") or None
    if not isinstance(deployment, str) or not deployment.strip():
        return (
            None,
            f"the Subworkflow Deployment tool names no deploymentId (config.deploymentId is {deployment!r})",
        )
    store = registry.workflows if registry is not None else None
    if registry is None or store is None:
        return None, (
            f"deployment {deployment!r} cannot be bound: the registry has no workflow store to find "
            "deployments in (ToolRegistry(workflows=WorkflowStore(...)))"
        )
    try:
        found = store.deployment(deployment, environment)
    except (ToolError, ValueError) as exc:
        return None, f"deploymentId {deployment!r} (environment {environment!r}): {exc}"
    env = str(found["environment"])
    tool_id = f"deployment_{slugify(deployment)}_{slugify(env)}"[:128]
    remote = "endpoint" in found
    for tool in registry.list_by_type("api" if remote else "workflow"):
        exe = tool.execution_config
        if remote and tool.tool_id == tool_id and exe.get("url") == found["endpoint"]:
            return tool, ""
        if not remote and exe.get("deployment_id") == deployment and exe.get("environment") == env:
            return tool, ""
    if registry.get(tool_id) is not None:
        return None, f"the id {tool_id!r} the deployment's tool would be registered under is another tool's"
    definition = _deployment_definition(tool_id, deployment, env, found)
    try:
        registry.register(definition)
    except (ToolError, ValueError) as exc:
        return None, f"deployment {deployment!r} ({env}): registering its tool failed: {exc}"
    return registry.require(tool_id), ""


def _deployment_definition(
    tool_id: str, deployment: str, env: str, found: Mapping[str, Any]
) -> dict[str, Any]:
    base = {"tool_id": tool_id, "name": f"Deployment {deployment} ({env})"}
    if "endpoint" in found:
        return {
            **base,
            "description": f"Runs the workflow deployed as {deployment!r} ({env}) at its remote endpoint.",
            "tool_type": "api",
            "execution_config": {"url": found["endpoint"], "method": "POST"},
            "input_schema": {
                "type": "object",
                "properties": {
                    "user_input": {"type": "string", "description": "The request the workflow runs on."}
                },
                "required": ["user_input"],
            },
            "permissions": ["net:outbound"],
        }
    return {
        **base,
        "description": f"Runs the workflow version deployed as {deployment!r} ({env}).",
        "tool_type": "workflow",
        "execution_config": {"deployment_id": deployment, "environment": env},
    }


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
