"""The public surface: `echo_tools.__all__` is sorted and exactly the public names, and importing the
package stays light (no agent framework, no HTTP client, no web framework)."""

from __future__ import annotations

import json
import types

import echo_tools

from ._storage_support import run_python

# names the package module holds that are not API: typing helpers and the import machinery of __init__
NOT_API = {"annotations", "TYPE_CHECKING", "Any", "importlib"}
HEAVY = [
    "crewai",
    "langgraph",
    "langchain_core",
    "langchain",
    "mcp",
    "fastapi",
    "starlette",
    "uvicorn",
    "httpx",
    "litellm",
]


def _module_level_public_names() -> set[str]:
    return {
        name
        for name, value in vars(echo_tools).items()
        if not name.startswith("_") and name not in NOT_API and not isinstance(value, types.ModuleType)
    }


def test_all_is_sorted() -> None:
    assert echo_tools.__all__ == sorted(echo_tools.__all__)
    assert len(set(echo_tools.__all__)) == len(echo_tools.__all__)


def test_all_is_exactly_the_public_names() -> None:
    lazy = set(getattr(echo_tools, "_LAZY", {}))
    assert set(echo_tools.__all__) == _module_level_public_names() | lazy


def test_every_exported_name_resolves_to_an_object_of_that_name() -> None:
    for name in echo_tools.__all__:
        value = getattr(echo_tools, name)
        assert getattr(value, "__name__", name) == name, name


def test_the_catalogue_core_is_exported() -> None:
    for name in [
        "ToolDef",
        "ToolRegistry",
        "ToolStorage",
        "ToolStore",
        "ToolError",
        "ToolEvent",
        "EgressPolicy",
        "ToolResult",
        "builtin_tools_dir",
    ]:
        assert name in echo_tools.__all__


def test_the_gate_is_exported() -> None:
    for name in ["Budget", "BudgetMeter", "Grants", "Principal", "ToolBudgetError", "ToolOwnedError"]:
        assert name in echo_tools.__all__
    assert echo_tools.Principal is echo_tools.gate.Principal


def test_an_unknown_attribute_is_an_attribute_error_naming_it() -> None:
    try:
        echo_tools.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "'NoSuchThing'" in str(exc)
    else:
        raise AssertionError("echo_tools.NoSuchThing did not raise")


def test_importing_echo_tools_loads_no_framework_or_http_client() -> None:
    code = (
        "import json, sys\n"
        "import echo_tools\n"
        "from echo_tools import ToolRegistry, ToolDef\n"
        "ToolRegistry().register(ToolDef(name='Probe'))\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_opening_a_storage_folder_and_resolving_stays_framework_free(tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = (
        "import json, sys\n"
        "from echo_tools import ToolRegistry\n"
        f"r = ToolRegistry(storage_dir={str(tmp_path)!r})\n"
        "r.register({'name': 'Probe', 'execution_config': {'url': 'https://example.com'}, 'tool_type': 'api'})\n"
        "assert r.resolve('probe') is not None and r.validate_tool_input('probe', {})\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
