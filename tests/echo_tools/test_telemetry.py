"""CrewAI's telemetry is off by default wherever echo-tools is imported, a user's choice stands, and the
host's own tracing switches are never touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from echo_tools._telemetry import HOST_TRACING_VARIABLES, TELEMETRY_DEFAULTS

CODE = "import os, json, {module}; print(json.dumps({{k: os.environ.get(k) for k in {keys!r}}}))"


def _env_after_import(module: str, **env: str) -> dict[str, str | None]:
    watched = sorted({*TELEMETRY_DEFAULTS, *HOST_TRACING_VARIABLES})
    clean = {k: v for k, v in os.environ.items() if k not in watched}
    code = CODE.format(module=module, keys=watched)
    out = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_echo_tools_turns_crewai_telemetry_off():
    seen = _env_after_import("echo_tools")
    assert {k: seen[k] for k in TELEMETRY_DEFAULTS} == TELEMETRY_DEFAULTS


def test_importing_echo_tools_or_the_bridge_leaves_the_hosts_tracing_alone():
    for module in ("echo_tools", "workflow_bridge"):
        seen = _env_after_import(module)
        assert {k: seen[k] for k in HOST_TRACING_VARIABLES} == dict.fromkeys(HOST_TRACING_VARIABLES)


def test_importing_the_bridge_turns_telemetry_off_before_crewai_loads():
    assert _env_after_import("workflow_bridge")["CREWAI_DISABLE_TELEMETRY"] == "true"


def test_a_value_the_user_set_is_left_alone():
    seen = _env_after_import("echo_tools", CREWAI_DISABLE_TELEMETRY="false")
    assert seen["CREWAI_DISABLE_TELEMETRY"] == "false"
    assert seen["CREWAI_DISABLE_TRACKING"] == "true"
