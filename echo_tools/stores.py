"""EchoAI's stored workflows and agents, read and written in EchoAI's own layout.

`WorkflowStore(root)`: `root/draft/<id>.draft.json`, `root/temp/<id>.temp.json`,
`root/final/<id>.v<version>.json`, and the deployments a canvas's Subworkflow Deployment tool names,
`root/deployments/<deployment_id>.json` (per environment: a published final version, or a remote
endpoint). `AgentStore(root)`: `root/<agent_id>.json`. Ids are checked before they become paths, writes
are atomic, and a file that does not parse is reported, never overwritten.
"""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from echo_tools.errors import NotStoredError, ToolStorageError
from echo_tools.storage import atomic_write_json

STORE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
VERSION_PATTERN = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]{0,31}$")
ENVIRONMENT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DEFAULT_ENVIRONMENT = "production"
WORKFLOW_STATES = ("draft", "temp", "final")
MAX_STORED_FILE_BYTES = 16 * 1024 * 1024


def check_store_id(value: Any, field: str) -> str:
    """`value` when it is a safe workflow or agent id (never a path), else `ValueError` naming `field`."""
    if not isinstance(value, str) or not STORE_ID_PATTERN.fullmatch(value):
        raise ValueError(
            f"{field} {value!r} is invalid: it must match {STORE_ID_PATTERN.pattern} "
            "(letters, digits, '_', '-'; at most 128 characters; no path separators or dots)"
        )
    return value


def _read(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > MAX_STORED_FILE_BYTES:
            raise ToolStorageError(f"{str(path)!r} is larger than {MAX_STORED_FILE_BYTES} bytes; not read")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ToolStorageError(f"cannot read {str(path)!r}: {exc}") from exc
    if not isinstance(data, dict):
        raise ToolStorageError(f"{str(path)!r} holds a JSON {type(data).__name__}, not an object")
    return data


def _version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    # "0.10" after "0.9"; non-numeric parts after numbers, compared as text
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[._-]", version))


class WorkflowStore:
    """EchoAI's workflow folders (`draft/`, `temp/`, `final/` under `root`)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()

    def _final_versions(self, workflow_id: str) -> dict[str, Path]:
        prefix = f"{workflow_id}.v"
        folder = self.root / "final"
        if not folder.is_dir():
            return {}
        return {
            p.name[len(prefix) : -len(".json")]: p
            for p in folder.glob(f"{workflow_id}.v*.json")
            if p.name.startswith(prefix)
        }

    def path_of(self, workflow_id: str, state: str, version: str | None = None) -> Path:
        """Where a workflow of `state` lives (`final` needs its `version`)."""
        check_store_id(workflow_id, "workflow_id")
        if state not in WORKFLOW_STATES:
            raise ValueError(f"state {state!r} is unknown; expected one of: {', '.join(WORKFLOW_STATES)}")
        if state == "final":
            if not isinstance(version, str) or not VERSION_PATTERN.fullmatch(version):
                raise ValueError(f"version {version!r} is invalid for a final workflow (e.g. '0.1')")
            return self.root / "final" / f"{workflow_id}.v{version}.json"
        return self.root / state / f"{workflow_id}.{state}.json"

    def get(self, workflow_id: str, version: str | None = None) -> dict[str, Any]:
        """The stored workflow: with `version`, that final version; without, the newest final, else the
        draft, else the temp.

        Raises:
            ValueError: `workflow_id` or `version` is not a safe id.
            NotStoredError: no such workflow (or version) is stored; the message names what was looked for.
            ToolStorageError: the file exists but cannot be read as a JSON object.
        """
        check_store_id(workflow_id, "workflow_id")
        finals = self._final_versions(workflow_id)
        if version is not None:
            path = self.path_of(workflow_id, "final", str(version))
            if not path.is_file():
                known = ", ".join(sorted(finals, key=_version_key)) or "none"
                raise NotStoredError(
                    f"workflow {workflow_id!r} has no final version {version!r} (final versions: {known})",
                    field="version",
                )
            return _read(path)
        if finals:
            return _read(finals[max(finals, key=_version_key)])
        for state in ("draft", "temp"):
            path = self.path_of(workflow_id, state)
            if path.is_file():
                return _read(path)
        raise NotStoredError(
            f"workflow_id {workflow_id!r} is not stored under {str(self.root)!r} (no final, draft or temp file)",
            field="workflow_id",
        )

    def list(self) -> list[dict[str, Any]]:
        """One summary per stored file: `{workflow_id, name, state, version, path}`, sorted by id.

        Files that cannot be read are left out (`get` reports them).
        """
        found: list[dict[str, Any]] = []
        for state in WORKFLOW_STATES:
            folder = self.root / state
            if not folder.is_dir():
                continue
            for path in sorted(folder.glob("*.json")):
                workflow_id = path.name.split(".", 1)[0]
                if not STORE_ID_PATTERN.fullmatch(workflow_id):
                    continue
                try:
                    data = _read(path)
                except ToolStorageError:
                    continue
                found.append(
                    {
                        "workflow_id": workflow_id,
                        "name": data.get("name", workflow_id),
                        "state": state,
                        "version": data.get("version"),
                        "path": str(path),
                    }
                )
        return sorted(found, key=lambda s: (s["workflow_id"], WORKFLOW_STATES.index(s["state"])))

    def save(self, workflow: dict[str, Any], state: str = "draft") -> Path:
        """Write `workflow` as `state` (`draft`, `temp`, or `final` with its `version`); returns the path."""
        if not isinstance(workflow, dict):
            raise ValueError(f"workflow must be a JSON object, got {type(workflow).__name__}")
        workflow_id = check_store_id(workflow.get("workflow_id"), "workflow_id")
        version = workflow.get("version")
        path = self.path_of(workflow_id, state, None if version is None else str(version))
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, workflow)
        return path

    # -- deployments ---------------------------------------------------------------------------------

    def _deployment_path(self, deployment_id: str) -> Path:
        return self.root / "deployments" / f"{check_store_id(deployment_id, 'deployment_id')}.json"

    def deploy(
        self,
        deployment_id: str,
        workflow_id: str | None = None,
        version: str | None = None,
        *,
        environment: str = DEFAULT_ENVIRONMENT,
        endpoint: str | None = None,
    ) -> dict[str, Any]:
        """Point `deployment_id` in `environment` at final `version` of `workflow_id` (it must be stored;
        without a version, the newest final one), or at a remote `endpoint` (an http(s) URL that runs the
        workflow: the input is POSTed as JSON through the one outbound client). A later `deploy` of the
        same id and environment replaces it (a redeploy); the calls that follow run the new target.

        Returns:
            The deployment as `deployment(deployment_id, environment)` gives it.

        Raises:
            ValueError: an id, version, environment or endpoint that is not valid, or both or neither of
                `workflow_id` and `endpoint`.
            NotStoredError: the workflow has no such final version (or none at all).
        """
        env = _check_environment(environment)
        if (workflow_id is None) == (endpoint is None):
            raise ValueError("deploy needs a workflow_id (and version) or an endpoint, not both or neither")
        target: dict[str, Any]
        if endpoint is not None:
            if not isinstance(endpoint, str) or not re.fullmatch(r"https?://[^\s/]+(/\S*)?", endpoint):
                raise ValueError(f"endpoint {endpoint!r} is not an http(s) URL (e.g. 'https://host/run')")
            target = {"endpoint": endpoint}
        else:
            finals = self._final_versions(check_store_id(workflow_id, "workflow_id"))
            if version is None:
                if not finals:
                    raise NotStoredError(
                        f"workflow {workflow_id!r} has no final version to deploy; save it as final first",
                        field="version",
                    )
                version = max(finals, key=_version_key)
            self.get(str(workflow_id), str(version))  # refuses a version that is not stored
            target = {"workflow_id": workflow_id, "version": str(version)}
        path = self._deployment_path(deployment_id)
        record = _read(path) if path.is_file() else {"deployment_id": deployment_id, "environments": {}}
        environments = record.get("environments")
        if not isinstance(environments, dict):
            raise ToolStorageError(f"{str(path)!r} has no environments object; not overwritten")
        environments[env] = {**target, "deployed_at": datetime.now(UTC).isoformat().replace("+00:00", "Z")}
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, record)
        return self.deployment(deployment_id, env)

    def deployment(self, deployment_id: str, environment: str | None = None) -> dict[str, Any]:
        """`{deployment_id, environment, workflow_id, version}` or `{deployment_id, environment, endpoint}`.

        Without `environment`: `production` when it is deployed there, else the only environment.

        Raises:
            ValueError: an id or environment that is not valid.
            NotStoredError: no such deployment, or not in that environment (the message lists what is).
        """
        path = self._deployment_path(deployment_id)
        if not path.is_file():
            known = ", ".join(repr(d["deployment_id"]) for d in self.deployments()) or "none"
            raise NotStoredError(
                f"deployment_id {deployment_id!r} is not deployed under {str(self.root)!r} (deployments: "
                f"{known}); deploy a final version with WorkflowStore.deploy({deployment_id!r}, workflow_id, "
                "version)",
                field="deployment_id",
            )
        environments = _read(path).get("environments")
        envs = environments if isinstance(environments, dict) else {}
        if environment in (None, ""):
            chosen = DEFAULT_ENVIRONMENT if DEFAULT_ENVIRONMENT in envs else next(iter(envs), None)
            if len(envs) > 1 and chosen != DEFAULT_ENVIRONMENT:
                chosen = None
        else:
            chosen = _check_environment(environment)
        if chosen not in envs or not isinstance(envs.get(chosen), dict):
            raise NotStoredError(
                f"deployment {deployment_id!r} has no environment {environment!r} (environments: "
                f"{', '.join(map(repr, envs)) or 'none'})",
                field="environment",
            )
        return {"deployment_id": deployment_id, "environment": chosen, **envs[chosen]}

    def deployments(self) -> builtins.list[dict[str, Any]]:
        """Every readable deployment record (`{deployment_id, environments}`), sorted by id."""
        folder = self.root / "deployments"
        found = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                found.append(_read(path))
            except ToolStorageError:
                continue
        return [d for d in found if isinstance(d.get("deployment_id"), str)]

    def for_tool(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The workflow a `workflow` tool runs: `{workflow_id, version?}` as `get`, or `{deployment_id,
        environment?}`: the final version that deployment names now (read at every call, so a redeploy
        takes effect at the next one).

        Raises:
            ValueError: a bad id; or the deployment is a remote endpoint (run by an `api` tool instead).
            NotStoredError: what it names is not stored.
        """
        if "deployment_id" in config and "workflow_id" not in config:
            found = self.deployment(config["deployment_id"], config.get("environment"))
            if "endpoint" in found:
                raise ValueError(
                    f"deployment {found['deployment_id']!r} ({found['environment']}) runs at the remote "
                    f"endpoint {found['endpoint']!r}, not from this store"
                )
            return self.get(str(found["workflow_id"]), str(found["version"]))
        return self.get(config["workflow_id"], config.get("version"))


def _check_environment(value: Any) -> str:
    if not isinstance(value, str) or not ENVIRONMENT_PATTERN.fullmatch(value):
        raise ValueError(
            f"environment {value!r} is invalid: it must match {ENVIRONMENT_PATTERN.pattern} (e.g. 'production')"
        )
    return value


class AgentStore:
    """EchoAI's agent folder: one `<agent_id>.json` per agent."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()

    def get(self, agent_id: str) -> dict[str, Any]:
        """The stored agent definition.

        Raises:
            ValueError: `agent_id` is not a safe id.
            NotStoredError: no file for that id.
            ToolStorageError: the file exists but cannot be read as a JSON object.
        """
        path = self.root / f"{check_store_id(agent_id, 'agent_id')}.json"
        if not path.is_file():
            raise NotStoredError(
                f"agent_id {agent_id!r} has no file {path.name!r} under {str(self.root)!r}", field="agent_id"
            )
        return _read(path)

    def list(self) -> list[dict[str, Any]]:
        """Every readable agent definition (`agt_*.json`), sorted by id."""
        agents = []
        for path in sorted(self.root.glob("agt_*.json")) if self.root.is_dir() else []:
            try:
                data = _read(path)
            except ToolStorageError:
                continue
            agents.append(data)
        return agents

    def save(self, agent: dict[str, Any]) -> Path:
        """Write `agent` as `<agent_id>.json`; returns the path."""
        if not isinstance(agent, dict):
            raise ValueError(f"agent must be a JSON object, got {type(agent).__name__}")
        agent_id = check_store_id(agent.get("agent_id"), "agent_id")
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{agent_id}.json"
        atomic_write_json(path, agent)
        return path
