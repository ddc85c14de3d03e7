"""A real third-party service with its own published spec: httpbin (from PyPI), started on 127.0.0.1 as its
own process, its Swagger 2.0 document fetched from `/spec.json`, imported, and called through the executor,
a CrewAI tool and a LangChain tool."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_tools import EgressPolicy, MemoryEventLog, ToolExecutor, ToolRegistry
from echo_tools.credentials import SECRET_KEY_ENV, new_key
from echo_tools.openapi import import_openapi_report

SERVE = (
    "import sys\n"
    "from werkzeug.serving import make_server\n"
    "from httpbin import app\n"
    "server = make_server('127.0.0.1', 0, app, threaded=True)\n"
    "print(server.port, flush=True)\n"
    "server.serve_forever()\n"
)


@pytest.fixture(scope="module")
def httpbin() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", SERVE],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the process prints its port once it listens
        assert line.strip().isdigit(), f"httpbin did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line)}"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def imported(httpbin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ToolRegistry:
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    registry = ToolRegistry(storage_dir=tmp_path, egress=EgressPolicy.local())
    registry.credentials.set("httpbin-bearer", {"type": "bearer", "token": "tok-123"})
    registry.credentials.set("httpbin-basic", {"type": "basic", "username": "ada", "password": "pw-456"})
    report = import_openapi_report(registry, f"{httpbin}/spec.json", provider="httpbin", base_url=httpbin)
    # httpbin's own document as published: `type: int`, form fields and TRACE all import
    assert len(report.tools) >= 70 and report.skipped == []
    warnings = dict(report.warnings)
    assert warnings["/paths/~1delay~1{delay}/get/properties/delay/type"] == (
        "type 'int' is not a JSON Schema type; read as 'integer'"
    )
    return registry


async def test_int_path_form_body_and_trace_operations_really_call_httpbin(
    imported: ToolRegistry, httpbin: str
) -> None:
    delay = imported.require("httpbin_get_delay_delay")
    assert delay.input_schema["properties"]["delay"]["type"] == "integer"
    redirect = imported.require("httpbin_post_redirect_to")
    assert redirect.execution_config["body_encoding"] == "application/x-www-form-urlencoded"
    executor = ToolExecutor(imported, egress=EgressPolicy.local())
    try:
        waited = await executor.invoke("httpbin_get_delay_delay", {"delay": 0})
        wrong = await executor.invoke("httpbin_get_delay_delay", {"delay": "soon"})
        traced = await executor.invoke("httpbin_trace_anything", {})
        # its form operation declares formData that httpbin itself reads from the query; the same
        # operation imported against httpbin's echo (/anything) shows the body as it arrived
        import_openapi_report(
            imported,
            f"{httpbin}/spec.json",
            provider="echo",
            base_url=f"{httpbin}/anything",
            operations=["post_redirect_to"],
        )
        echoed = await executor.invoke(
            "echo_post_redirect_to", {"url": "https://x.test/a b", "status_code": 303}
        )
    finally:
        await executor.aclose()
    assert waited.success and waited.output["url"].endswith("/delay/0")
    assert wrong.error_type == "validation" and wrong.error_field == "input.delay"
    assert traced.success and traced.output["method"] == "TRACE"
    assert echoed.output["form"] == {"url": "https://x.test/a b", "status_code": "303"}
    assert echoed.output["headers"]["Content-Type"] == "application/x-www-form-urlencoded"


async def test_urlencoded_and_multipart_request_bodies_reach_httpbin_encoded(
    httpbin: str, tmp_path: Path
) -> None:
    form = {"type": "object", "properties": {"name": {"type": "str"}, "count": {"type": "int"}}}
    document = {
        "openapi": "3.0.3",
        "info": {"title": "forms", "version": "1"},
        "paths": {
            "/post": {
                "post": {
                    "operationId": "sendForm",
                    "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": form}}},
                    "responses": {"200": {"description": "echo"}},
                }
            },
            "/anything": {
                "post": {
                    "operationId": "sendMultipart",
                    "requestBody": {"content": {"multipart/form-data; charset=utf-8": {"schema": form}}},
                    "responses": {"200": {"description": "echo"}},
                }
            },
        },
    }
    registry = ToolRegistry(storage_dir=tmp_path, egress=EgressPolicy.local())
    report = import_openapi_report(registry, document, provider="forms", base_url=httpbin)
    assert len(report.tools) == 2 and len(report.warnings) == 4  # str and int, in each operation
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        urlencoded = await executor.invoke("forms_send_form", {"name": "a b&c", "count": 3})
        multipart = await executor.invoke("forms_send_multipart", {"name": "ada", "count": 2})
    finally:
        await executor.aclose()
    assert urlencoded.output["form"] == {"name": "a b&c", "count": "3"}
    assert urlencoded.output["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
    assert multipart.output["form"] == {"name": "ada", "count": "2"}
    assert multipart.output["headers"]["Content-Type"].startswith("multipart/form-data; boundary=")


def test_the_published_swagger_2_spec_becomes_tools_named_from_method_and_path(
    imported: ToolRegistry,
) -> None:
    tool = imported.require("httpbin_get_status_codes")
    assert tool.source.value == "openapi" and tool.tool_type.value == "api"
    assert {"provider:httpbin", "source:openapi"} <= set(tool.tags)
    assert tool.metadata["provider"] == "httpbin" and tool.metadata["operation"] == "get_status_codes"
    assert tool.input_schema["required"] == ["codes"] and tool.input_schema["additionalProperties"] is False
    assert tool.side_effect.value == "idempotent"
    assert imported.require("httpbin_post_anything").side_effect.value == "external"
    # the Authorization header parameter of /bearer is the credential's job, not an argument
    assert imported.require("httpbin_get_bearer").input_schema["properties"] == {}


async def test_httpbin_operations_are_called_through_the_executor(imported: ToolRegistry) -> None:
    log = MemoryEventLog()
    executor = ToolExecutor(imported, [log], egress=EgressPolicy.local())
    try:
        decoded = await executor.invoke("httpbin_get_base64_value", {"value": "aGVsbG8gZWNobw=="})
        anything = await executor.invoke("httpbin_get_anything_anything", {"anything": "a b/c"})
        teapot = await executor.invoke("httpbin_get_status_codes", {"codes": "418"})
        extra = await executor.invoke("httpbin_get_get", {"undeclared": 1})
    finally:
        await executor.aclose()
    assert decoded.success and decoded.output == "hello echo"
    assert anything.success and anything.output["url"].endswith(
        "/anything/a%20b/c"
    )  # werkzeug shows %2F decoded
    assert not teapot.success and "HTTP 418" in teapot.error
    assert not extra.success and extra.error_type == "validation" and "undeclared" in extra.error
    assert [e.type for e in log.events].count("tool.completed") == 2


async def test_httpbin_auth_endpoints_accept_the_stored_credentials(
    imported: ToolRegistry, httpbin: str
) -> None:
    import_openapi_report(
        imported,
        f"{httpbin}/spec.json",
        provider="httpbin",
        base_url=httpbin,
        credential="httpbin-bearer",
        operations=["get_bearer"],
    )
    import_openapi_report(
        imported,
        f"{httpbin}/spec.json",
        provider="httpbin",
        base_url=httpbin,
        credential="httpbin-basic",
        operations=["get_basic_auth_user_passwd"],
    )
    executor = ToolExecutor(imported, egress=EgressPolicy.local())
    try:
        bearer = await executor.invoke("httpbin_get_bearer", {})
        basic = await executor.invoke(
            "httpbin_get_basic_auth_user_passwd", {"user": "ada", "passwd": "pw-456"}
        )
        wrong = await executor.invoke(
            "httpbin_get_basic_auth_user_passwd", {"user": "ada", "passwd": "other"}
        )
    finally:
        await executor.aclose()
    # httpbin echoes the token; the stored credential's value is hidden in what the call returns
    assert bearer.success and bearer.output == {"authenticated": True, "token": "***"}
    assert basic.success and basic.output == {"authenticated": True, "user": "ada"}
    assert not wrong.success and "HTTP 401" in wrong.error
    assert imported.require("httpbin_get_bearer").metadata["credential"] == "httpbin-bearer"


def test_httpbin_tools_run_as_crewai_and_langchain_tools(imported: ToolRegistry) -> None:
    from workflow_bridge import to_crewai_tool, to_langchain_tool

    log = MemoryEventLog()
    executor = ToolExecutor(imported, [log], egress=EgressPolicy.local())
    try:
        crew_tool = to_crewai_tool(imported.require("httpbin_get_base64_value"), executor)
        assert "value" in crew_tool.args_schema.model_fields
        assert "hello crew" in str(crew_tool.run(value="aGVsbG8gY3Jldw=="))
        lc_tool = to_langchain_tool(imported.require("httpbin_get_anything_anything"), executor)
        answer = lc_tool.invoke({"anything": "from-langchain"})
        assert "/anything/from-langchain" in str(answer)
    finally:
        executor.close()
    assert [e.tool_id for e in log.events if e.type == "tool.completed"] == [
        "httpbin_get_base64_value",
        "httpbin_get_anything_anything",
    ]
