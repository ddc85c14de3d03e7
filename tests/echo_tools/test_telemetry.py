"""`import echo_tools` changes nothing in the process; CrewAI's telemetry is off by default where echo-tools
uses CrewAI (the bridge, the crewai backend), a user's choice stands, and the host's own tracing switches
are never touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

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


IMPORT_ONLY = """
import gc, json, os
before = dict(os.environ)
import echo_tools, echo_tools.executor, echo_tools.registry, echo_tools.cli
changed = sorted(k for k in {*before, *os.environ} if before.get(k) != os.environ.get(k))
print(json.dumps({"changed": changed, "gc": gc.isenabled()}))
"""


def test_importing_echo_tools_sets_no_environment_variable_and_leaves_the_garbage_collector_on():
    out = subprocess.run([sys.executable, "-c", IMPORT_ONLY], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"changed": [], "gc": True}


def test_importing_echo_tools_leaves_crewai_telemetry_to_the_user():
    seen = _env_after_import("echo_tools")
    assert {k: seen[k] for k in TELEMETRY_DEFAULTS} == dict.fromkeys(TELEMETRY_DEFAULTS)


@pytest.mark.slow  # imports CrewAI
def test_the_crewai_backend_turns_crewai_telemetry_off_before_crewai_loads():
    module = "echo_tools.backends.crewai as b; b.CrewAIBackend.__new__(b.CrewAIBackend).base_class()"
    seen = _env_after_import(module)
    assert {k: seen[k] for k in TELEMETRY_DEFAULTS} == TELEMETRY_DEFAULTS


def test_importing_echo_tools_or_the_bridge_leaves_the_hosts_tracing_alone():
    for module in ("echo_tools", "workflow_bridge"):
        seen = _env_after_import(module)
        assert {k: seen[k] for k in HOST_TRACING_VARIABLES} == dict.fromkeys(HOST_TRACING_VARIABLES)


def test_importing_the_bridge_turns_telemetry_off_before_crewai_loads():
    assert _env_after_import("workflow_bridge")["CREWAI_DISABLE_TELEMETRY"] == "true"


def test_a_value_the_user_set_is_left_alone():
    seen = _env_after_import("workflow_bridge", CREWAI_DISABLE_TELEMETRY="false")
    assert seen["CREWAI_DISABLE_TELEMETRY"] == "false"
    assert seen["CREWAI_DISABLE_TRACKING"] == "true"
