"""The first hour with `echo-tools` (issue 17), in-process through `main(argv)`: usage errors exit 2 and
list the allowed values, a stored tool refused for its module says how to allow it, `run` exits non-zero
when tool calls or nodes fail and 0 when it pauses, errors are never cut, a bad model fails in one line
naming its URL, the model is shown first, and CrewAI's token-count warning is shown once."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path

import pytest

from echo_tools.cli import main
from tests.workflow_bridge._compiler_support import agent, chain, workflow


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path: Path) -> str:
    return str(tmp_path / "store")


def write(path: Path, data: dict) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


# -- usage errors and the allowed modules -------------------------------------------------------------


def test_list_with_an_unknown_type_exits_2_naming_the_value_and_the_allowed_ones(capsys, store):
    code, _, err = run_cli(capsys, "--storage", store, "list", "--type", "bogus")
    assert code == 2
    assert "'bogus'" in err and "local, mcp, api, crewai, langchain" in err


@pytest.fixture
def refused_tool(tmp_path: Path, store: str, capsys, monkeypatch) -> str:
    """A tool of package `fh_words` stored with `--allow-module fh_words`; later runs do not allow it."""
    package = tmp_path / "src" / "fh_words"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "stats.py").write_text(
        "def word_stats(text: str) -> dict:\n    return {'words': len(text.split())}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    manifests = tmp_path / "manifests" / "word_stats"
    manifests.mkdir(parents=True)
    manifest = {
        "tool_id": "word_stats",
        "name": "Word Stats",
        "description": "Counts words.",
        "tool_type": "local",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "execution_config": {"module": "fh_words.stats", "function": "word_stats"},
    }
    write(manifests / "tool_manifest.json", manifest)
    code, _, err = run_cli(
        capsys, "--storage", store, "--allow-module", "fh_words", "discover", str(manifests.parent)
    )
    assert code == 0, err
    monkeypatch.delenv("ECHO_TOOLS_ALLOWED_MODULES", raising=False)
    return store


def test_a_stored_tool_whose_module_is_not_allowed_says_so_and_how_to_allow_it(capsys, refused_tool):
    code, _, err = run_cli(capsys, "--storage", refused_tool, "show", "word_stats")
    assert code == 1
    assert "'word_stats' is stored" in err and "'fh_words.stats' is not allowed" in err
    assert "--allow-module fh_words" in err and "ECHO_TOOLS_ALLOWED_MODULES=fh_words" in err
    assert "PYTHONPATH" in err

    code, _, err = run_cli(
        capsys, "--storage", refused_tool, "invoke", "word_stats", "--input", '{"text": "a"}'
    )
    assert code == 1 and "--allow-module fh_words" in err

    code, _, err = run_cli(capsys, "--storage", refused_tool, "list")
    assert code == 0 and "'word_stats' (fh_words.stats)" in err and "--allow-module fh_words" in err


def test_allow_module_is_accepted_after_the_command(capsys, refused_tool):
    code, out, err = run_cli(
        capsys,
        "--storage",
        refused_tool,
        "invoke",
        "word_stats",
        "--input",
        '{"text": "a b c"}',
        "--allow-module",
        "fh_words",
    )
    assert code == 0, err
    assert json.loads(out)["output"] == {"words": 3}


def test_allow_module_before_and_after_the_command_add_up(capsys, refused_tool):
    code, out, err = run_cli(
        capsys,
        "--storage",
        refused_tool,
        "--allow-module",
        "other_pkg",
        "show",
        "word_stats",
        "--allow-module",
        "fh_words",
    )
    assert code == 0, err
    assert json.loads(out)["tool_id"] == "word_stats"


@pytest.mark.parametrize("separator", [",", ":"])
def test_the_allowed_modules_environment_variable_allows_the_stored_tool(
    capsys, refused_tool, monkeypatch, separator
):
    monkeypatch.setenv("ECHO_TOOLS_ALLOWED_MODULES", f"other_pkg{separator}fh_words")
    code, out, err = run_cli(capsys, "--storage", refused_tool, "show", "word_stats")
    assert code == 0, err
    assert json.loads(out)["execution_config"]["module"] == "fh_words.stats"


def test_a_run_whose_agent_names_a_refused_tool_says_how_to_allow_it(capsys, refused_tool, tmp_path):
    wf, agents = chain(agent("count", name="Counter", tools=["word_stats"], role="Counter"))
    source = write(tmp_path / "wf.json", {"workflow": wf, "agents": agents})
    code, _, err = run_cli(capsys, "--storage", refused_tool, "run", source, "--input", "a b")
    assert code == 1
    (line,) = err.strip().splitlines()
    assert "'word_stats'" in line and "--allow-module fh_words" in line


# -- run: exit codes, failures shown whole, names, the model ----------------------------------------


def workflow_file(tmp_path: Path, wf: dict, agents: dict) -> str:
    return write(tmp_path / "workflow.json", {"workflow": wf, "agents": agents})


def test_a_run_whose_code_node_fails_exits_1_and_shows_the_node_failed(capsys, tmp_path, store):
    wf, agents = chain(
        agent("calc", "Code", name="Extract Score", metadata={"code_config": {"code": "1/0"}}),
        agent("end", "End", output_schema=["result"]),
    )
    code, out, err = run_cli(
        capsys, "--storage", store, "run", workflow_file(tmp_path, wf, agents), "--input", "x"
    )
    assert code == 1, err
    (failed,) = [line for line in out.splitlines() if "node.finished Extract Score" in line]
    assert "(failed)" in failed and "ZeroDivisionError: division by zero" in failed
    assert "1 failure(s): node Extract Score" in out


def test_a_run_whose_tool_call_fails_exits_1_and_names_the_calling_node(capsys, tmp_path, store):
    wf, agents = chain(agent("calc", name="Sum It", tools=["tool_calculator"], role="Sum It"))
    request = '{"operation": "divide", "values": [1, 0]}'
    code, out, _ = run_cli(
        capsys,
        "--storage",
        store,
        "run",
        workflow_file(tmp_path, wf, agents),
        "--input",
        request,
        "--llm",
        "rehearsal",
        "--events",
        str(tmp_path / "events.jsonl"),
    )
    assert code == 1
    (line,) = [line for line in out.splitlines() if "failed    Calculator" in line]
    assert "by Sum It" in line
    events = [json.loads(e) for e in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert {e["agent_name"] for e in events} == {"Sum It"} and {e["agent_id"] for e in events} == {"calc"}


def test_a_run_that_completes_shows_the_model_first_and_exits_0(capsys, tmp_path, store):
    wf, agents = chain(agent("calc", name="Sum It", tools=["tool_calculator"], role="Sum It"))
    code, out, err = run_cli(
        capsys,
        "--storage",
        store,
        "run",
        workflow_file(tmp_path, wf, agents),
        "--input",
        '{"operation": "add", "values": [2, 3]}',
        "--llm",
        "rehearsal",
    )
    assert code == 0, err
    assert out.splitlines()[0].endswith("(model: rehearsal (offline))")


def test_a_run_that_pauses_prints_the_run_id_and_interrupted_and_exits_0(capsys, tmp_path, store):
    wf, agents = chain(agent("start", "Start"), agent("review", "HITL", name="Review"), agent("end", "End"))
    code, out, err = run_cli(
        capsys,
        "--storage",
        store,
        "run",
        workflow_file(tmp_path, wf, agents),
        "--input",
        "x",
        "--run-id",
        "run_pause_1",
    )
    assert code == 0, err
    assert "run run_pause_1 interrupted" in out


def test_a_conditional_whose_variable_is_missing_fails_the_run_naming_node_and_variable(
    capsys, tmp_path, store
):
    branches = [
        {"type": "if", "condition": "risk_score > 70", "targetNodeId": "high"},
        {"type": "else", "targetNodeId": "low"},
    ]
    wf, agents = workflow(
        [
            agent("start", "Start"),
            agent("gate", "Conditional", name="High Risk?", metadata={"branches": branches}),
            agent("high", "End"),
            agent("low", "End"),
        ],
        [("start", "gate"), ("gate", "high"), ("gate", "low")],
        model="hybrid",
    )
    code, _, err = run_cli(
        capsys, "--storage", store, "run", workflow_file(tmp_path, wf, agents), "--input", "x"
    )
    assert code == 1
    (line,) = err.strip().splitlines()
    assert "'High Risk?' (gate)" in line and "'risk_score'" in line
    assert line.endswith("in the run's input")  # whole, not cut


def test_a_bad_model_url_fails_before_the_run_in_one_line_naming_the_url(
    capsys, tmp_path, store, monkeypatch
):
    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("ECHO_LLM", f"http://127.0.0.1:{port}/v1#llama3")
    wf, agents = chain(agent("writer", name="Writer", role="Writer"))
    code, out, err = run_cli(
        capsys, "--storage", store, "run", workflow_file(tmp_path, wf, agents), "--input", "x"
    )
    assert code == 1
    (line,) = err.strip().splitlines()
    assert f"http://127.0.0.1:{port}/v1" in line and "llama3" in line and "ECHO_LLM" in line
    assert "node.started" not in out  # failed before any node ran


def test_a_missing_provider_key_fails_before_the_run_naming_the_variable(
    capsys, tmp_path, store, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    wf, agents = chain(agent("writer", name="Writer", role="Writer"))
    code, _, err = run_cli(
        capsys,
        "--storage",
        store,
        "run",
        workflow_file(tmp_path, wf, agents),
        "--input",
        "x",
        "--llm",
        "openai/gpt-4o-mini",
    )
    assert code == 1
    assert "openai/gpt-4o-mini" in err and "OPENAI_API_KEY is not set" in err


def test_events_shows_a_long_error_whole(capsys, tmp_path):
    error = (
        "Egress to 10.0.0.5 is denied: " + "private addresses are not allowed by the policy; " * 6 + "END."
    )
    event = {
        "type": "tool.failed",
        "tool_id": "tool_http_request",
        "error": error,
        "error_type": "execution",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "agent_id": "agt_1",
        "agent_name": "Fetch Score",
    }
    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps(event) + "\n")
    code, out, _ = run_cli(capsys, "events", str(log))
    assert code == 0
    assert error.strip() in out and "by Fetch Score" in out


def test_the_token_count_warning_is_shown_once_per_model(caplog):
    from echo_tools.cli.output import TOKEN_COUNT_LOGGER, quiet_framework_logs

    quiet_framework_logs()
    quiet_framework_logs()  # installing twice adds one filter
    crewai_logger = logging.getLogger(TOKEN_COUNT_LOGGER)
    text = "Using an approximate input token count for model %r: assuming one token per four characters"
    with caplog.at_level(logging.WARNING, logger=TOKEN_COUNT_LOGGER):
        for _ in range(9):
            crewai_logger.warning(text, "fh-model-a")
        crewai_logger.warning(text, "fh-model-b")
        crewai_logger.warning("something else")
        crewai_logger.warning("something else")
    messages = [r.getMessage() for r in caplog.records]
    assert sum("fh-model-a" in m for m in messages) == 1 and sum("fh-model-b" in m for m in messages) == 1
    assert messages.count("something else") == 2  # only that warning is deduplicated


def test_compile_names_the_nodes_beside_their_ids(capsys, tmp_path, store):
    wf, agents = chain(agent("agt_5f3a", name="Fetch Score"), agent("agt_9c1d", "End", name="Done"))
    code, out, err = run_cli(capsys, "--storage", store, "compile", workflow_file(tmp_path, wf, agents))
    assert code == 0, err
    assert "'Fetch Score' (agt_5f3a) ---> 'Done' (agt_9c1d)" in out


def test_the_parser_builds_again_and_again_in_one_process_and_mcp_actions_take_allow_module():
    import gc

    from echo_tools.cli import build_parser

    for _ in range(30):  # parsers of earlier builds are collected; nothing of theirs may leak into a new one
        build_parser()
        gc.collect()
    args = build_parser().parse_args(["--allow-module", "a", "mcp", "list", "--allow-module", "b"])
    assert (args.allow_module, args.allow_module_late) == (["a"], ["b"])
