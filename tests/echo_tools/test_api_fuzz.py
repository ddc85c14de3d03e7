"""Fuzz every /tools route from the app's own OpenAPI schema (schemathesis): no input answers 500.

The tool event stream is left out (it is endless by design; its own tests bound it); the workflow routes
are in. Examples are bounded per
route so the whole run stays in seconds. The app is built at import (schemathesis reads its schema while
collecting), over a storage folder removed when the module's tests finish.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.settings import ApiSettings
from tests.echo_tools._api_support import ADD, ECHO, EXPLODE, make_registry

# crewai 1.15's own import trips an ImportWarning (crewai.rag refuses the attribute for its child module
# 'embeddings'); the /workflows routes import it, so import the bridge once, quietly, before fuzzing them.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    import workflow_bridge.runner  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")

_TMP = tempfile.TemporaryDirectory(prefix="echo-tools-fuzz-")
_AGENTS = Path(_TMP.name) / "agents"
_AGENTS.mkdir()
(_AGENTS / "agt_0a1b.json").write_text('{"agent_id": "agt_0a1b", "tools": ["tool_echo"]}')
REGISTRY = make_registry(Path(_TMP.name) / "tools", ECHO, ADD, EXPLODE)
EXECUTOR = ToolExecutor(REGISTRY)
APP = create_app(REGISTRY, EXECUTOR, ApiSettings(agents_dir=_AGENTS))

# the keyless app answers loopback names only (DNS rebinding); the ASGI test client says "testserver"
LOOPBACK = {"Host": "127.0.0.1"}
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, headers=LOOPBACK).exclude(path="/tools/events")


@pytest.fixture(scope="module", autouse=True)
def _cleanup() -> Iterator[None]:
    yield
    EXECUTOR.close()
    _TMP.cleanup()


@schema.parametrize()
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_route_answers_a_server_error(case: Any) -> None:
    response = case.call(headers=LOOPBACK)
    assert response.status_code != 421, response.text[:300]  # the fuzzer reached the routes
    # 502 (the tool failed) and 504 (it timed out) are the error contract's answers for a tool call that
    # ran, and a fuzzer can make one happen (the exploding fixture tool, a tool it registered without an
    # execution_config); any other 5xx is the server's own fault.
    assert response.status_code < 500 or response.status_code in (502, 504), (
        case.method,
        case.formatted_path,
        response.status_code,
        response.text[:300],
    )
    if response.status_code in (502, 504):
        assert response.json()["error_type"] in ("execution", "timeout"), response.text[:300]
    content_type = (response.headers.get("content-type") or [""])[0]
    if response.status_code >= 400 and content_type.startswith("application/json"):
        body = response.json()
        assert {"error_type", "message", "tool_id", "field"} <= set(body), body
