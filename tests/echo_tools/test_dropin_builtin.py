"""`builtin_tools_dir()`: the shipped tools are found from echo_tools' own location, from any folder; a host
package also named `AgentTools` (EchoAI has one) is passed over (the name is bound to the shipped folder), or
refused by name when the host imported it already, instead of silently running its code."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from echo_tools import ToolConfigError, ToolExecutor, ToolRegistry, builtin_tools_dir

from ._storage_support import REPO_ROOT, child_env

SHIPPED = {
    "tool_calculator",
    "tool_code_executor",
    "tool_http_request",
    "tool_web_search",
    "tool_file_reader",
}


def _run(code: str, cwd: Path, *extra_path: Path) -> subprocess.CompletedProcess[str]:
    env = child_env()
    env["PYTHONPATH"] = ":".join([*(str(p) for p in extra_path), env["PYTHONPATH"]])
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _python_blocks(doc: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)


def test_builtin_tools_dir_is_the_agenttools_beside_echo_tools() -> None:
    folder = builtin_tools_dir()
    assert folder == (REPO_ROOT / "AgentTools").resolve()
    assert (folder / "calculator" / "tool_manifest.json").is_file()


def test_the_shipped_tools_are_discovered_from_another_folder(tmp_path: Path) -> None:
    code = (
        "import json; from echo_tools import ToolRegistry, builtin_tools_dir\n"
        "r = ToolRegistry(discovery_dirs=[builtin_tools_dir()])\n"
        "print(json.dumps(sorted(t.tool_id for t in r.discover_local_tools())))\n"
    )
    result = _run(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert SHIPPED <= set(json.loads(result.stdout))


def _host_with_its_own_agenttools(tmp_path: Path) -> Path:
    host = tmp_path / "echoAI"
    package = host / "AgentTools" / "calculator"
    package.mkdir(parents=True)
    (host / "AgentTools" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "service.py").write_text(
        "class CalculatorService:\n    def calculate(self, data): return 'host'\n"
    )
    return host


_CALL_BOTH = (
    "import base64, json, sys\n"
    "from echo_tools import ToolExecutor, ToolRegistry, builtin_tools_dir\n"
    "r = ToolRegistry(discovery_dirs=[builtin_tools_dir()])\n"
    "r.discover_local_tools()\n"
    "x = ToolExecutor(r)\n"
    "calc = x.invoke_sync('tool_calculator', {'operation': 'add', 'values': [2, 3]})\n"
    "text = base64.b64encode(b'hello from a file').decode()\n"
    "read = x.invoke_sync('tool_file_reader', {'content_base64': text, 'file_name': 'a.txt'})\n"
    "print(json.dumps([sys.modules['AgentTools'].__file__, calc.output, read.success, str(read.output)[:200]]))\n"
)


def test_a_host_package_named_agenttools_is_passed_over_for_the_shipped_tools(tmp_path: Path) -> None:
    host = _host_with_its_own_agenttools(tmp_path)
    result = _run(_CALL_BOTH, host)  # the host's folder first on sys.path, as EchoAI's gateway runs
    assert result.returncode == 0, result.stderr
    where, calc, read_ok, read = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(where).parent == builtin_tools_dir()
    assert calc["result"] == 5  # the shipped calculator, not the host's ("host")
    assert read_ok and "hello from a file" in read  # a process-isolated tool: the child binds it too


def test_the_host_package_first_on_pythonpath_is_passed_over_too(tmp_path: Path) -> None:
    host = _host_with_its_own_agenttools(tmp_path)
    code = (
        "import json\n"
        "from echo_tools import ToolExecutor, ToolRegistry, builtin_tools_dir\n"
        "r = ToolRegistry(discovery_dirs=[builtin_tools_dir()])\n"
        "r.discover_local_tools()\n"
        "print(json.dumps(ToolExecutor(r).invoke_sync('Calculator', {'operation': 'add', 'values': [2, 3]}).output))\n"
    )
    result = _run(code, tmp_path, host)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["result"] == 5


def test_a_host_package_already_imported_is_refused_naming_both_folders(tmp_path: Path) -> None:
    host = _host_with_its_own_agenttools(tmp_path)
    code = (
        "import json\n"
        "import AgentTools  # the host imported its own package first\n"
        "from echo_tools import ToolConfigError, ToolExecutor, ToolRegistry, builtin_tools_dir\n"
        "r = ToolRegistry()\n"
        "try:\n"
        "    r.discover_local_tools([builtin_tools_dir()])\n"
        "except ToolConfigError as exc:\n"
        "    print(json.dumps({'field': exc.field, 'message': exc.message, 'tools': len(r)}))\n"
    )
    result = _run(code, host)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["field"] == "discovery_dirs"
    assert str(host / "AgentTools") in out["message"]
    assert str(builtin_tools_dir()) in out["message"]
    assert "already loaded" in out["message"]
    assert out["tools"] == 0  # nothing of the host's was registered


def test_in_process_a_shadowing_agenttools_raises_before_anything_is_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import echo_tools.builtin_tools as builtin

    monkeypatch.setattr(builtin, "importable_location", lambda: tmp_path / "AgentTools")
    monkeypatch.setattr(builtin, "claim_builtin_package", lambda: False)  # the other one is imported
    registry = ToolRegistry()
    with pytest.raises(ToolConfigError) as caught:
        registry.discover_local_tools([builtin_tools_dir()])
    assert caught.value.field == "discovery_dirs"
    assert str(tmp_path / "AgentTools") in caught.value.message
    assert len(registry) == 0


def test_a_missing_relative_discovery_folder_is_reported_with_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    registry = ToolRegistry(discovery_dirs=["AgentTools"])
    with caplog.at_level(logging.WARNING):
        found = registry.discover_local_tools()
    assert found == []
    assert [p.path for p in registry.problems()] == [str(tmp_path / "AgentTools")]
    assert "discovery folder" in caplog.text  # logged as a warning, not only kept in problems()


def test_the_readme_python_example_runs_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # in this process, from another folder (a fresh interpreter would import CrewAI again for
    # to_crewai_tool: about 5 s of CPU; the tests above start their own processes); the first example
    # defines its tool in the script itself, in `__main__`
    first = _python_blocks(REPO_ROOT / "README.md")[0]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__main__"}
    try:
        exec(compile(first, str(REPO_ROOT / "README.md"), "exec"), namespace)
        executor = namespace["executor"]
        assert isinstance(executor, ToolExecutor)
        try:
            added = executor.invoke_sync("add", {"a": 2, "b": 3}).output
            mean = executor.invoke_sync("Calculator", {"operation": "mean", "values": [1, 2, 6]}).output
        finally:
            executor.close()
    finally:
        sys.modules.pop("my_tools", None)
    assert added == 5
    assert mean["result"] == 3
    assert type(namespace["node"]).__name__ == "ExecutorToolNode"
    assert (tmp_path / ".echo_tools").is_dir()  # its storage_dir, relative to the folder it runs from
    assert not (tmp_path / ".echo_tools" / "tool_add.json").exists()  # added in-process: never stored


def test_the_http_api_mount_example_runs_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # in this process, from a fresh folder (tests/test_docs_examples.py runs the page in an interpreter
    # of its own); here the mounted routes answer with the discovered tools
    from fastapi.testclient import TestClient

    block = next(b for b in _python_blocks(REPO_ROOT / "docs" / "http-api.md") if "builtin_tools_dir" in b)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(block, str(REPO_ROOT / "docs" / "http-api.md"), "exec"), namespace)
    try:
        health = TestClient(namespace["gateway"]).get("/tools/health").json()
    finally:
        namespace["executor"].close()
    assert len(namespace["registry"]) == health["tool_count"] >= len(SHIPPED)
    assert (tmp_path / "apps" / "storage" / "tools").is_dir()  # its storage_dir, relative to the folder
