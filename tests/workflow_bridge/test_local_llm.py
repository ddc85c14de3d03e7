"""The local model's files (no model needed): assembling the parts with the hash check, the reasons given
when something is missing, the template choice and the repository template's rendering of odd messages."""

from __future__ import annotations

import hashlib

import pytest

from workflow_bridge import local_llm
from workflow_bridge.local_llm import (
    LocalModelError,
    LocalModelServer,
    assemble_model,
    installed_model,
    missing_reason,
    template_text,
)


@pytest.fixture
def parts(tmp_path, monkeypatch):
    """Three small parts standing in for the 22 weight parts, and the sha256 of their join."""
    files = []
    for n, content in enumerate((b"GGUF", b"-middle-", b"end")):
        path = tmp_path / f"part{n}.bin"
        path.write_bytes(content)
        files.append(path)
    monkeypatch.setattr(local_llm, "part_paths", lambda: list(files))
    monkeypatch.setattr(local_llm, "MODEL_SHA256", hashlib.sha256(b"GGUF-middle-end").hexdigest())
    monkeypatch.setenv("ECHO_LLM_CACHE", str(tmp_path / "cache"))
    return files


def test_assembling_joins_the_parts_in_order_and_keeps_the_checked_file(parts, tmp_path):
    path = assemble_model()
    assert path == tmp_path / "cache" / local_llm.MODEL_FILE
    assert path.read_bytes() == b"GGUF-middle-end" and installed_model() == path
    for part in parts:
        part.unlink()  # a checked file is kept: nothing is read again
    assert assemble_model() == path


def test_a_join_with_the_wrong_hash_leaves_no_file_and_says_how_to_fix_it(parts, tmp_path, monkeypatch):
    monkeypatch.setattr(local_llm, "MODEL_SHA256", "0" * 64)
    with pytest.raises(LocalModelError, match="make install-llm") as caught:
        assemble_model()
    assert "expected " + "0" * 64 in str(caught.value)
    assert list((tmp_path / "cache").iterdir()) == [] and installed_model() is None


def test_a_changed_file_is_no_longer_taken_as_checked(parts):
    path = assemble_model()
    path.write_bytes(b"tampered weights")
    assert installed_model() is None
    assert assemble_model().read_bytes() == b"GGUF-middle-end"  # joined and checked again


def test_without_the_weights_the_reason_names_make_install_llm(tmp_path, monkeypatch):
    monkeypatch.setenv("ECHO_LLM_CACHE", str(tmp_path))
    reason = missing_reason()
    assert reason is not None and "make install-llm" in reason
    with pytest.raises(LocalModelError, match="make install-llm"):
        LocalModelServer().start()


def test_ECHO_LLM_local_without_the_weights_is_a_config_error_naming_make_install_llm(tmp_path, monkeypatch):
    from workflow_bridge.llm import LLMConfigError, resolve_llm

    monkeypatch.setenv("ECHO_LLM_CACHE", str(tmp_path))
    monkeypatch.setenv("ECHO_LLM", "local")
    with pytest.raises(LLMConfigError, match="ECHO_LLM=local: .*make install-llm"):
        resolve_llm(None)


def test_the_template_is_the_repository_file_the_weights_own_or_a_file(tmp_path, monkeypatch):
    assert "<tool_call>" in (template_text("repository") or "")
    assert template_text("model") is None
    mine = tmp_path / "mine.jinja"
    mine.write_text("{{ messages }}")
    assert template_text(str(mine)) == "{{ messages }}"
    monkeypatch.setenv("ECHO_LLM_TEMPLATE", "model")
    assert template_text() is None
    with pytest.raises(LocalModelError, match="nowhere.jinja"):
        template_text(str(tmp_path / "nowhere.jinja"))


def test_a_thread_count_that_is_not_a_number_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("ECHO_LLM_THREADS", "two")
    with pytest.raises(LocalModelError, match="ECHO_LLM_THREADS='two'"):
        LocalModelServer()


def test_the_repository_template_renders_odd_messages_without_failing():
    jinja2 = pytest.importorskip("jinja2")
    environment = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
    template = environment.from_string(template_text("repository") or "")
    tools = [{"type": "function", "function": {"name": "multiply", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "What is 17 times 23?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "multiply", "arguments": '{"a": 17, "b": 23}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "391"},
        {"role": "assistant", "content": "It is {391}."},
        {"role": "user", "content": None},
    ]
    text = template.render(messages=messages, tools=tools, add_generation_prompt=True)
    assert '<tool_call>\n{"name": "multiply", "arguments": {"a": 17, "b": 23}}\n</tool_call>' in text
    assert "<tool_response>\n391\n</tool_response>" in text and "It is {391}." in text
    assert "<tools>\n{" in text and text.endswith("<|im_start|>assistant\n")
    assert "You are a helpful assistant." in text
