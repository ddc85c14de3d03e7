"""Bad input, one test each: a clear error naming the field and the value, and nothing stored lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_tools.errors import ToolNameConflictError, ToolRegistrationError, ToolStorageError
from echo_tools.registry import ToolRegistry
from echo_tools.storage import INDEX_FILE, ToolStorage
from tests.conftest import TOOL_IDS, Corpus

from ._storage_support import (
    corpus_copy,
    folder_state,
    make_read_only,
    run_without_write_override,
    tool_dict,
    write_manifest,
)

CORPUS_IDS = list(TOOL_IDS)  # the same five ids in our fixtures and in the real corpus


@pytest.fixture
def store(corpus: Corpus, tmp_path: Path) -> Path:
    return corpus_copy(corpus, tmp_path / "store" / "tools")


@pytest.fixture
def registry(store: Path) -> ToolRegistry:
    return ToolRegistry(storage_dir=store)


def _refused(registry: ToolRegistry, store: Path, data: dict, error: type = ToolRegistrationError):  # type: ignore[no-untyped-def]
    """Register `data`, expect `error`, and check that the folder did not change."""
    before = folder_state(store)
    with pytest.raises(error) as caught:
        registry.register(data)
    assert folder_state(store) == before
    assert sorted(t.tool_id for t in ToolStorage(store).load_all()[0]) == CORPUS_IDS
    return caught.value


@pytest.mark.parametrize(
    "tool_id",
    [
        "../x",
        "../../etc/cron.d/x",
        "/etc/x",
        "a/b",
        "a\\b",
        "   ",
        "a" * 300,
        "tööl",
        "tool x",
        "..",
        "a..b",
        "UPPER",
        "x\x00y",
    ],
)
def test_a_path_like_or_unsafe_tool_id_is_refused_naming_it(
    registry: ToolRegistry, store: Path, tool_id: str
) -> None:
    error = _refused(registry, store, tool_dict("Sneaky", tool_id=tool_id))
    assert error.field == "tool_id"
    assert repr(tool_id)[:40] in str(error)
    assert not any(p.name.startswith("x") for p in store.parent.rglob("*.json"))


@pytest.mark.parametrize("tool_id", ["../x", "/etc/passwd", "", "a/b"])
def test_storage_never_turns_a_bad_id_into_a_path(store: Path, tool_id: str) -> None:
    storage = ToolStorage(store)
    with pytest.raises(ToolStorageError, match="is invalid") as caught:
        storage.path_for(tool_id)
    assert repr(tool_id) in str(caught.value)
    with pytest.raises(ToolStorageError):
        storage.delete(tool_id)
    with pytest.raises(ToolStorageError):
        storage.load(tool_id)


def test_the_index_name_cannot_be_used_as_a_tool_id(store: Path) -> None:
    with pytest.raises(ToolStorageError, match="names a reserved file"):
        ToolStorage(store).path_for("tool_index")


@pytest.mark.parametrize("name", ["WEB SEARCH", "web search", "web-search", "Web_Search", "  web   search!"])
def test_a_name_differing_only_in_case_or_punctuation_is_a_conflict(
    registry: ToolRegistry, store: Path, name: str
) -> None:
    error = _refused(registry, store, tool_dict(name, tool_id="my_search"), ToolNameConflictError)
    assert error.field == "name"
    assert (
        repr(name.strip()) in str(error)
        and "'Web Search'" in str(error)
        and "'tool_web_search'" in str(error)
    )
    assert registry.resolve("Web Search").tool_id == "tool_web_search"


def test_a_name_equal_to_another_tools_id_is_a_conflict(registry: ToolRegistry, store: Path) -> None:
    error = _refused(registry, store, tool_dict("tool_calculator", tool_id="calc2"), ToolNameConflictError)
    assert "'tool_calculator'" in str(error) and "'Calculator'" in str(error)


def test_an_id_equal_to_another_tools_name_is_a_conflict(registry: ToolRegistry, store: Path) -> None:
    error = _refused(
        registry, store, tool_dict("Something Else", tool_id="calculator"), ToolNameConflictError
    )
    assert "tool_id 'calculator' is already the name of tool 'Calculator'" in str(error)


@pytest.mark.parametrize("field", ["input_schema", "output_schema"])
@pytest.mark.parametrize(
    ("schema", "where", "shown"),
    [
        ({"type": "strin"}, "at type", "'strin'"),
        ({"type": "object", "properties": {"n": {"minimum": "zero"}}}, "at properties/n/minimum", "'zero'"),
        ({"type": "object", "required": [1]}, "at required/0", "1"),
    ],
)
def test_a_schema_that_is_not_valid_json_schema_is_refused(
    registry: ToolRegistry, store: Path, field: str, schema: dict, where: str, shown: str
) -> None:
    error = _refused(registry, store, tool_dict("Bad Schema", **{field: schema}))
    assert error.field == field
    assert f"{field} is not a valid JSON Schema {where}: {shown}" in str(error)


def test_a_schema_that_is_not_an_object_is_refused(registry: ToolRegistry, store: Path) -> None:
    error = _refused(registry, store, tool_dict("Bad Schema", input_schema=["string"]))
    assert error.field == "input_schema" and "['string']" in str(error)


@pytest.mark.parametrize(
    ("config", "field", "shown"),
    [
        ({"module": "os", "class": "getcwd", "method": "format_map"}, "execution_config.module", "'os'"),
        ({"module": "os", "function": "abort"}, "execution_config.module", "'os'"),
        ({"module": "os.path", "function": "join"}, "execution_config.module", "'os.path'"),
        ({"module": "subprocess", "function": "run"}, "execution_config.module", "'subprocess'"),
        ({"module": "builtins", "class": "dict", "method": "get"}, "execution_config.module", "'builtins'"),
        ({"module": "json", "function": "loads"}, "execution_config.module", "'json'"),
        ({"module": "AgentToolsEvil.x", "function": "run"}, "execution_config.module", "'AgentToolsEvil.x'"),
        (
            {"module": "AgentTools.__main__", "function": "run"},
            "execution_config.module",
            "'AgentTools.__main__'",
        ),
        ({"module": "../AgentTools", "function": "run"}, "execution_config.module", "'../AgentTools'"),
        (
            {"module": "AgentTools.x", "class": "Svc", "method": "__init_subclass__"},
            "execution_config.method",
            "'__init_subclass__'",
        ),
        (
            {"module": "AgentTools.x", "class": "__class__", "method": "run"},
            "execution_config.class",
            "'__class__'",
        ),
        ({"module": "AgentTools.x", "function": "_private"}, "execution_config.function", "'_private'"),
        ({"module": "AgentTools.x", "class": "Svc"}, "execution_config.method", "class needs"),
        ({"module": "AgentTools.x"}, "execution_config", "needs one of"),
        (
            {"module": "AgentTools.x", "function": "run", "isolation": "container"},
            "execution_config.isolation",
            "'container'",
        ),
        (
            {"module": "AgentTools.x", "function": "run", "max_concurrency": 0},
            "execution_config.max_concurrency",
            "0",
        ),
    ],
)
def test_execution_config_outside_the_allowed_modules_or_naming_private_attributes_is_refused(
    registry: ToolRegistry, store: Path, config: dict, field: str, shown: str
) -> None:
    error = _refused(registry, store, tool_dict("Dangerous", execution_config=config))
    assert error.field == field
    assert shown in str(error)


def test_os_is_refused_even_when_the_allow_list_names_it(store: Path) -> None:
    registry = ToolRegistry(storage_dir=store, allowed_modules=["os", "AgentTools"])
    error = _refused(
        registry, store, tool_dict("Abort", execution_config={"module": "os", "function": "abort"})
    )
    assert "execution_config.module 'os' is never allowed" in str(error)


@pytest.mark.parametrize("tool_type", ["crewai", "langchain"])
def test_framework_tools_are_held_to_the_same_allow_list(
    registry: ToolRegistry, store: Path, tool_type: str
) -> None:
    config = {"module": "crewai_tools", "class": "FileWriterTool"}
    error = _refused(registry, store, tool_dict("Writer", tool_type=tool_type, execution_config=config))
    assert error.field == "execution_config.module" and "'crewai_tools'" in str(error)


@pytest.mark.parametrize("tool_type", ["shell", "python", 5])
def test_an_unknown_tool_type_is_refused_naming_it(
    registry: ToolRegistry, store: Path, tool_type: object
) -> None:
    error = _refused(registry, store, tool_dict("Odd", tool_type=tool_type))
    assert error.field == "tool_type" and repr(tool_type) in str(error)


@pytest.mark.parametrize(
    ("config", "field", "shown"),
    [
        ({"url": "http://169.254.169.254/latest/meta-data/"}, "execution_config.url", "169.254.169.254"),
        ({"url": "http://10.0.0.1/internal"}, "execution_config.url", "10.0.0.1"),
        ({"url": "ftp://example.com/"}, "execution_config.url", "'ftp://example.com/'"),
        ({"url": "http://{host}/x"}, "execution_config.url", "may not template the host"),
        ({"url": "https://api.example.com", "method": "CONNECT"}, "execution_config.method", "'CONNECT'"),
        (
            {"url": "https://api.example.com", "headers": {"X": ["a"]}},
            "execution_config.headers",
            "map names",
        ),
        ({"url": "https://api.example.com", "timeout": -1}, "execution_config.timeout", "-1"),
    ],
)
def test_an_api_tool_with_an_unsafe_or_malformed_config_is_refused(
    registry: ToolRegistry, store: Path, config: dict, field: str, shown: str
) -> None:
    error = _refused(registry, store, {"name": "Fetcher", "tool_type": "api", "execution_config": config})
    assert error.field == field and shown in str(error)


def test_an_mcp_tool_needs_a_server_and_tool_or_a_connector(registry: ToolRegistry, store: Path) -> None:
    error = _refused(
        registry, store, {"name": "Remote", "tool_type": "mcp", "execution_config": {"server": "x"}}
    )
    assert error.field == "execution_config" and "{'server': 'x'}" in str(error)


def test_a_definition_that_is_not_an_object_is_refused(registry: ToolRegistry, store: Path) -> None:
    error = _refused(registry, store, ["name", "x"])  # type: ignore[arg-type]
    assert "must be a ToolDef or an object, got ['name', 'x']" in str(error)


def test_a_definition_without_a_name_is_refused_naming_the_field(registry: ToolRegistry, store: Path) -> None:
    error = _refused(registry, store, {"description": "nameless"})
    assert error.field == "name" and "name: Field required" in str(error)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"name": "Half', "manifest is not valid JSON"),
        ("", "manifest is not valid JSON"),
        ('["a", "b"]', "manifest must be a JSON object, got list"),
        ('"just text"', "manifest must be a JSON object, got str"),
        ('{"description": "no name"}', "manifest has no 'name' field"),
    ],
)
def test_a_bad_manifest_is_reported_with_its_path(
    registry: ToolRegistry, store: Path, tmp_path: Path, raw: str, message: str
) -> None:
    path = write_manifest(tmp_path / "AgentTools", "bad", None, raw=raw)
    before = folder_state(store)
    assert registry.discover_local_tools(dirs=[tmp_path / "AgentTools"]) == []
    (problem,) = registry.problems()
    assert problem.path == str(path) and message in problem.message
    assert folder_state(store) == before


def test_a_truncated_index_is_moved_aside_and_rebuilt_with_every_tool_intact(store: Path) -> None:
    index_path = store / INDEX_FILE
    truncated = index_path.read_text()[:250]
    index_path.write_text(truncated)
    tool_files = {name: data for name, data in folder_state(store).items() if name != INDEX_FILE}
    registry = ToolRegistry(storage_dir=store)
    assert len(registry) == 5 and registry.problems() == []
    index = json.loads(index_path.read_text())
    assert sorted(index["tools"]) == CORPUS_IDS and index["tool_count"] == 5
    (backup,) = store.glob("tool_index.json.corrupt-*")
    assert backup.read_text() == truncated
    assert {
        n: d
        for n, d in folder_state(store).items()
        if n.startswith("tool_") and n.endswith(".json") and n != INDEX_FILE
    } == tool_files


def test_a_hand_edited_file_naming_os_is_refused_at_load(store: Path) -> None:
    path = store / "tool_calculator.json"
    data = json.loads(path.read_text())
    data["execution_config"] = {"module": "os", "class": "getcwd", "method": "format_map"}
    path.write_text(json.dumps(data))
    registry = ToolRegistry(storage_dir=store)
    assert registry.resolve("Calculator") is None and len(registry) == 4
    (problem,) = registry.problems()
    assert problem.path == str(path)
    assert problem.message.startswith("refused: Tool 'tool_calculator': execution_config.module 'os'")
    data["execution_config"] = {
        "module": "AgentTools.calculator.service",
        "class": "C",
        "method": "calculate",
    }
    assert registry.register(data)["status"] == "updated"  # a fixed definition replaces the refused file
    assert registry.problems() == [] and registry.resolve("Calculator") is not None


def test_a_stored_file_with_a_path_like_id_is_a_problem(store: Path) -> None:
    (store / "evil.json").write_text(json.dumps(tool_dict("Evil", tool_id="../../evil")))
    registry = ToolRegistry(storage_dir=store)
    (problem,) = registry.problems()
    assert problem.path == str(store / "evil.json") and "tool_id '../../evil' is invalid" in problem.message


def test_two_stored_files_with_one_name_keep_the_first_and_report_the_second(store: Path) -> None:
    (store / "tool_zcalc.json").write_text(json.dumps(tool_dict("CALCULATOR", tool_id="tool_zcalc")))
    registry = ToolRegistry(storage_dir=store)
    assert registry.resolve("calculator").tool_id == "tool_calculator"
    (problem,) = registry.problems()
    assert (
        problem.path == str(store / "tool_zcalc.json") and "clashes with tool 'Calculator'" in problem.message
    )


def test_a_read_only_storage_folder_loads_and_refuses_writes_without_losing_anything(store: Path) -> None:
    registry = ToolRegistry(storage_dir=store)  # creates the lock file while the folder is writable
    assert len(registry) == 5
    make_read_only(store)
    before = folder_state(store)
    try:
        result = run_without_write_override("_readonly_child.py", str(store))
    finally:
        store.chmod(0o755)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["kernel_refuses_writes"] is True  # the child really could not write, even as root
    assert report["loaded"] == CORPUS_IDS and report["problems"] == []
    for action in ("register", "delete"):
        assert report[action]["error_type"] == "ToolStorageError", report[action]
        assert str(store) in report[action]["message"]
        assert "not writable" in report[action]["message"] or "Permission denied" in report[action]["message"]
    assert report["still_resolves_calculator"] is True and report["probe_in_memory"] is False
    assert folder_state(store) == before
