"""workflow_bridge re-exports every public name of the bridge, lazily: mapping a canvas needs no CrewAI."""

from __future__ import annotations

import json
import subprocess
import sys

import tests.workflow_bridge._compiler_support  # noqa: F401  (imports crewai quietly first)
import workflow_bridge

DESIGN_NAMES = {
    "NodeMapper",
    "MappedWorkflow",
    "Diagnostic",
    "WorkflowCompiler",
    "CrewAIAdapter",
    "AgentFactory",
    "ToolBindingPlugin",
    "to_crewai_tool",
    "to_crewai_tools",
    "to_langchain_tool",
    "to_langchain_tools",
    "ExecutorToolNode",
    "make_tool_node",
}


def test_all_is_sorted_and_holds_every_name_the_design_promises():
    assert workflow_bridge.__all__ == sorted(workflow_bridge.__all__)
    assert DESIGN_NAMES <= set(workflow_bridge.__all__)


def test_every_exported_name_resolves_to_the_object_of_that_name():
    for name in workflow_bridge.__all__:
        value = getattr(workflow_bridge, name)
        assert getattr(value, "__name__", name) == name, name


def test_an_unknown_name_is_an_attribute_error_naming_it():
    try:
        workflow_bridge.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_mapping_a_canvas_through_the_package_imports_no_agent_framework():
    code = (
        "import sys, json; from workflow_bridge import NodeMapper; from echo_tools import ToolRegistry;"
        "m = NodeMapper(ToolRegistry()).map_canvas({'nodes': [], 'connections': []});"
        "print(json.dumps([n for n in ('crewai', 'langgraph') if n in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
