"""Template nodes render in jinja2's sandbox without any model call; a template that reads outside its
variables or reaches for code is a compile error naming the node, and the sandbox refuses the rest."""

from __future__ import annotations

from typing import Any

import pytest

from tests.workflow_bridge._compiler_support import agent, make_executor, make_registry, run, workflow
from workflow_bridge.compiler import WorkflowCompileError, WorkflowCompiler
from workflow_bridge.llm_rehearsal import RehearsalLLM


def template_workflow(template: str, engine: str = "jinja2"):
    return workflow(
        [
            agent("start", "Start", input_schema=["customer"]),
            agent(
                "letter",
                "Template",
                name="Letter",
                output_schema=["letter"],
                metadata={"template_config": {"template": template, "engine": engine}, "canvas_node_id": 4},
            ),
            agent("end", "End", output_schema=["result"]),
        ],
        [("start", "letter"), ("letter", "end")],
        state_schema={"customer": "string", "letter": "string"},
    )


@pytest.fixture
def registry():
    return make_registry()


def compile_template(registry: Any, template: str, **kw: Any) -> tuple[Any, RehearsalLLM]:
    executor, _ = make_executor(registry)
    model = RehearsalLLM()
    wf, agents = template_workflow(template, **kw)
    return WorkflowCompiler(registry, executor, llm=model).compile(wf, agents), model


def test_a_template_renders_the_state_without_any_model_call(registry):
    graph, model = compile_template(
        registry, "Dear {{ customer }}, about {{ input }}:{% for x in previous %} {{ x }}{% endfor %}"
    )
    state = run(graph, "your order", customer="Ada", crew_result='["a", "b"]')
    assert state["letter"] == state["result"] == "Dear Ada, about your order: a b"
    assert model.calls == []  # no model was asked


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("{{ password }}", "reads 'password', which the run does not have"),
        ("{{ customer.__class__.__mro__ }}", "'__class__', '__mro__' reach(es) into Python objects"),
        ("{{ customer['__class__'] }}", "'__class__' reach(es) into Python objects"),
        ("{% include 'other.txt' %}", "include is not allowed"),
        ("{{ range(10) }}", "reads 'range'"),
        ("{{ customer ", "line 1"),
    ],
)
def test_a_template_that_reads_outside_its_variables_or_runs_code_is_a_compile_error(
    registry, template, said
):
    with pytest.raises(WorkflowCompileError) as caught:
        compile_template(registry, template)
    assert caught.value.node_id == "letter" and caught.value.field == "config.template"
    assert "Template node 'Letter' (canvas id 4, id letter)" in str(caught.value) and said in str(
        caught.value
    )


def test_an_engine_other_than_jinja2_is_a_compile_error(registry):
    with pytest.raises(WorkflowCompileError) as caught:
        compile_template(registry, "{{ customer }}", engine="handlebars")
    assert caught.value.field == "config.engine" and "'handlebars'" in str(caught.value)


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("{{ customer|attr('__class__') }}", "unsafe"),
        ("{{ 'x' * 100000000 }}", "passes"),
        ("{{ 2 ** 100000 }}", "exponent"),
    ],
)
def test_the_sandbox_refuses_at_run_time_what_the_compile_check_cannot_see(registry, template, said):
    graph, _ = compile_template(registry, template)
    state = run(graph, "go", customer="Ada")
    (failed,) = [m for m in state["messages"] if m.get("status") == "failed"]
    assert "'Letter'" in failed["error"] and said in failed["error"]
    assert state.get("letter") in (None, "")  # nothing rendered was kept
