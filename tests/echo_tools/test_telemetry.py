"""Third-party telemetry is off by default wherever echo-tools is imported, and a user's choice stands."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from echo_tools._telemetry import TELEMETRY_DEFAULTS

CODE = "import os, json, {module}; print(json.dumps({{k: os.environ.get(k) for k in {keys!r}}}))"


def _env_after_import(module: str, **env: str) -> dict[str, str | None]:
    clean = {k: v for k, v in os.environ.items() if k not in TELEMETRY_DEFAULTS}
    code = CODE.format(module=module, keys=sorted(TELEMETRY_DEFAULTS))
    out = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_echo_tools_turns_every_telemetry_default_off():
    assert _env_after_import("echo_tools") == TELEMETRY_DEFAULTS


def test_importing_the_bridge_turns_telemetry_off_before_crewai_loads():
    assert _env_after_import("workflow_bridge")["CREWAI_DISABLE_TELEMETRY"] == "true"


def test_a_value_the_user_set_is_left_alone():
    seen = _env_after_import("echo_tools", OTEL_SDK_DISABLED="false")
    assert seen["OTEL_SDK_DISABLED"] == "false"
    assert seen["CREWAI_DISABLE_TELEMETRY"] == "true"
