"""The code generator: EchoAI workflow JSON in, Python out that compiles and builds the same graph."""

from __future__ import annotations

import ast
import json
import types

import pytest

from AgentTools.code_generator.service import CodeGeneratorService
from AgentTools.web_search.local_server import running_local_search
from tests.agent_tools._support import invoke
from tests.conftest import Corpus

# crewai 1.15's own import trips an ImportWarning (crewai.rag refuses an attribute for its child module
# 'embeddings'); the generated code imports crewai, so the warning is expected here and nowhere else.
pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")


def _web_search_workflow(corpus: Corpus) -> dict:
    """The stored Start -> web search Agent -> End workflow, every agent of it in agents/."""
    return json.loads((corpus / f"workflows/draft/{corpus.web_search_workflow}.draft.json").read_text())


def _web_search_input(corpus: Corpus) -> dict:
    workflow = _web_search_workflow(corpus)
    agents = [json.loads((corpus / "agents" / f"{a}.json").read_text()) for a in workflow["agents"]]
    return {**workflow, "agents": agents}


def _module(code: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(code, f"<{name}>", "exec"), module.__dict__)
    return module


def test_both_codes_compile_and_match_echoais_output_schema(corpus):
    import jsonschema

    result = invoke("tool_code_generator", {"workflow_json": _web_search_input(corpus)})
    assert result.success, result.error
    out = result.output
    echo_schema = json.loads((corpus / "manifests" / "code_generator.json").read_text())["output_schema"]
    jsonschema.validate(out, echo_schema)
    for key in ("langgraph_code", "crewai_code"):
        ast.parse(out[key])
        compile(out[key], key, "exec")
    assert out["metadata"]["agent_count"] == 3 and out["metadata"]["execution_mode"] == "sequential"
    assert "WorkflowCompiler(registry, executor, llm=llm).compile(WORKFLOW, AGENTS)" in out["langgraph_code"]


def test_the_generated_langgraph_code_builds_and_runs_the_workflow_offline(corpus, monkeypatch):
    code = CodeGeneratorService().generate_both_codes(_web_search_input(corpus), output_format="langgraph")[
        "langgraph_code"
    ]
    module = _module(code, "generated_langgraph")
    graph = module.build_graph(llm="rehearsal")
    assert set(module.WORKFLOW["agents"]) <= set(graph.get_graph().nodes)
    with running_local_search() as server:
        monkeypatch.setenv("ECHO_SEARXNG_URL", server.url)
        state = module.run("offshore wind turbines", graph=graph)
        assert server.requests, "the web_search tool was not called by the generated graph"
    assert state["original_user_input"] == "offshore wind turbines"
    assert state["crew_result"]


def test_the_generated_crewai_code_builds_a_crew_with_the_tools_bound(corpus):
    code = CodeGeneratorService().generate_both_codes(_web_search_input(corpus), output_format="crewai")[
        "crewai_code"
    ]
    module = _module(code, "generated_crewai")
    crew = module.build_crew(llm=None)
    assert len(crew.agents) == 1  # Start and End are not agents
    assert [t.name for t in crew.agents[0].tools] == ["web_search"]


def test_generation_is_deterministic_and_options_shape_the_code(corpus):
    service = CodeGeneratorService()
    data = _web_search_input(corpus)
    first = service.generate_both_codes(data)
    second = service.generate_both_codes(data)
    assert (
        first["langgraph_code"] == second["langgraph_code"] and first["crewai_code"] == second["crewai_code"]
    )
    bare = service.generate_both_codes(
        data, output_format="langgraph", include_imports=False, production_ready=False
    )
    assert "import " not in bare["langgraph_code"].split("WORKFLOW_NAME")[0].replace(
        "from __future__ import annotations", ""
    )
    assert "def main(" not in bare["langgraph_code"] and "crewai_code" not in bare
    plain = service.generate_both_codes(data, include_error_handling=False)
    assert "except Exception" not in plain["langgraph_code"] and "except Exception" in first["langgraph_code"]


def test_stored_workflow_shape_with_agent_ids_and_definitions_is_accepted(corpus):
    workflow = _web_search_workflow(corpus)
    definitions = {a: json.loads((corpus / "agents" / f"{a}.json").read_text()) for a in workflow["agents"]}
    out = CodeGeneratorService().generate_both_codes(workflow, agent_definitions=definitions)
    assert _module(out["langgraph_code"], "from_ids").WORKFLOW["agents"] == workflow["agents"]


def test_names_cannot_inject_code_into_the_generated_source():
    evil = 'x"""\nimport os; os.system("echo pwned")\n"""'
    data = {
        "name": evil,
        "execution_mode": "sequential",
        "agents": [{"agent_id": "a1", "name": evil, "role": evil}],
    }
    out = CodeGeneratorService().generate_both_codes(data)
    for key in ("langgraph_code", "crewai_code"):
        tree = ast.parse(out[key])
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "os.system"]
        assert calls == []
        assert _module(out[key], key).WORKFLOW_NAME == evil


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"workflow_json": {"name": "w", "execution_mode": "sequential", "agents": []}},
            "workflow_json.agents must be a non-empty list",
        ),
        (
            {"workflow_json": {"name": "w", "execution_mode": "circular", "agents": [{}]}},
            "execution_mode 'circular'",
        ),
        (
            {"workflow_json": {"name": "w", "execution_mode": "sequential", "agents": ["agt_x"]}},
            "agent_definitions has no such agent",
        ),
        (
            {
                "workflow_json": {"name": "w", "execution_mode": "sequential", "agents": [{}]},
                "output_format": "java",
            },
            "output_format must be",
        ),
    ],
)
def test_bad_input_names_the_field(kwargs, message):
    with pytest.raises(ValueError) as info:
        CodeGeneratorService().generate_both_codes(**kwargs)
    assert message in str(info.value)
