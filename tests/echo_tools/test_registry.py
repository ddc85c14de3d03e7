"""ToolRegistry: registration, resolution, listing, events, and consistency for readers during writes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echo_tools.egress import EgressPolicy
from echo_tools.errors import (
    ToolConfigError,
    ToolNameConflictError,
    ToolNotFoundError,
    ToolRegistrationError,
    ToolValidationError,
)
from echo_tools.events import MemoryEventLog
from echo_tools.models import ToolDef, ToolStatus, ToolType
from echo_tools.registry import ToolRegistry
from echo_tools.storage import INDEX_FILE, ToolStorage
from tests.conftest import Corpus

from ._storage_support import corpus_copy, folder_state, tool_dict


@pytest.fixture
def registry(corpus: Corpus, tmp_path: Path) -> ToolRegistry:
    return ToolRegistry(storage_dir=corpus_copy(corpus, tmp_path / "tools"))


@pytest.mark.parametrize(
    "ref",
    [
        "tool_web_search",  # id
        "Web Search",  # exact name
        "web search",  # name, other case
        "WEB SEARCH",
        "web_search",  # slug
        "web-search",
        "  Web   Search ",
        "TOOL_WEB_SEARCH",  # id, other case
        "tool-web-search",
        "Tool Web Search",  # EchoAI's canvas round trip of the id
    ],
)
def test_resolve_finds_a_tool_by_every_name_a_canvas_or_llm_uses(registry: ToolRegistry, ref: str) -> None:
    tool = registry.resolve(ref)
    assert tool is not None and tool.tool_id == "tool_web_search"


def test_resolve_finds_a_tool_whose_id_is_not_derived_from_its_name(tmp_path: Path) -> None:
    registry = ToolRegistry(storage_dir=tmp_path)
    registry.register(tool_dict("Quarterly Report", tool_id="rpt.v2"))
    for ref in [
        "rpt.v2",
        "quarterly report",
        "quarterly_report",
        "tool_quarterly_report",
        "Quarterly-Report",
    ]:
        assert registry.resolve(ref).tool_id == "rpt.v2", ref


@pytest.mark.parametrize(
    "ref", ["", "nope", "Web", "web_searchx", None, 5, "../../etc/passwd", "!!!", "web search engine"]
)
def test_resolve_returns_none_for_what_it_does_not_know(registry: ToolRegistry, ref: object) -> None:
    assert registry.resolve(ref) is None  # type: ignore[arg-type]


def test_resolve_accepts_a_tool_def(registry: ToolRegistry) -> None:
    tool = registry.get("tool_calculator")
    assert registry.resolve(ToolDef.model_validate(tool.to_storage_dict())) is tool
    assert tool in registry and "Calculator" in registry and "nope" not in registry


def test_require_names_the_unknown_reference(registry: ToolRegistry) -> None:
    with pytest.raises(ToolNotFoundError, match="No tool matches 'Web Fetch'") as caught:
        registry.require("Web Fetch")
    assert caught.value.field == "tool"


def test_get_by_name_ignores_case(registry: ToolRegistry) -> None:
    assert registry.get_by_name("CALCULATOR").tool_id == "tool_calculator"
    assert registry.get_by_name("nope") is None and registry.get("nope") is None


def test_register_reports_registered_then_updated_and_emits_an_event_each_time(tmp_path: Path) -> None:
    log = MemoryEventLog()
    registry = ToolRegistry(storage_dir=tmp_path, event_sinks=[log])
    assert registry.register(tool_dict("Sample")) == {"tool_id": "tool_sample", "status": "registered"}
    changed = tool_dict("Sample", description="better words")
    assert registry.register(changed) == {"tool_id": "tool_sample", "status": "updated"}
    assert [(e.type, e.tool_id, e.metadata["status"]) for e in log.events] == [
        ("tool.registered", "tool_sample", "registered"),
        ("tool.registered", "tool_sample", "updated"),
    ]
    assert log.events[0].tool_type == "local" and log.events[0].tool_name == "Sample"
    assert registry.get("tool_sample").description == "better words"


def test_registering_an_unchanged_tool_writes_nothing_and_keeps_the_same_object(tmp_path: Path) -> None:
    log = MemoryEventLog()
    registry = ToolRegistry(storage_dir=tmp_path, event_sinks=[log])
    registry.register(tool_dict("Sample"))
    held = registry.get("tool_sample")
    before = folder_state(tmp_path)
    assert registry.register(tool_dict("Sample"))["status"] == "updated"
    assert registry.register(held)["status"] == "updated"
    assert folder_state(tmp_path) == before
    assert registry.get("tool_sample") is held
    assert len(log.events) == 1


def test_a_registered_tool_def_is_copied_so_later_edits_do_not_leak_in(tmp_path: Path) -> None:
    registry = ToolRegistry(storage_dir=tmp_path)
    tool = ToolDef.model_validate(tool_dict("Sample"))
    registry.register(tool)
    tool.description = "edited after registration"
    assert registry.get("tool_sample").description == "The Sample tool"


def test_a_tool_def_mutated_into_a_path_is_refused_at_registration(tmp_path: Path) -> None:
    tool = ToolDef.model_validate(tool_dict("Sample"))
    tool.tool_id = "../escape"  # assignment skips pydantic validation
    with pytest.raises(ToolRegistrationError, match=r"tool_id '\.\./escape' is invalid") as caught:
        ToolRegistry(storage_dir=tmp_path).register(tool)
    assert caught.value.field == "tool_id"
    assert not (tmp_path.parent / "escape.json").exists()


def test_a_tool_may_be_renamed_within_its_own_name_keys(tmp_path: Path) -> None:
    registry = ToolRegistry(storage_dir=tmp_path)
    registry.register(tool_dict("Web Search"))
    assert registry.register(tool_dict("web-search", tool_id="tool_web_search"))["status"] == "updated"
    assert registry.resolve("Web Search").name == "web-search"


def test_renaming_a_tool_frees_its_old_name(tmp_path: Path) -> None:
    registry = ToolRegistry(storage_dir=tmp_path)
    registry.register(tool_dict("Old Name", tool_id="t1"))
    registry.register(tool_dict("New Name", tool_id="t1"))
    assert registry.resolve("Old Name") is None
    assert registry.register(tool_dict("Old Name", tool_id="t2"))["status"] == "registered"


def test_delete_removes_the_tool_everywhere(registry: ToolRegistry) -> None:
    assert registry.delete("tool_web_search") is True
    assert registry.resolve("Web Search") is None and len(registry) == 4
    assert "tool_web_search" not in registry.storage.read_index()["tools"]
    assert registry.delete("tool_web_search") is False


def test_a_memory_only_registry_works_without_a_folder() -> None:
    registry = ToolRegistry()
    assert registry.storage is None
    registry.register(tool_dict("Sample"))
    assert registry.resolve("sample").tool_id == "tool_sample"
    assert registry.register(tool_dict("Sample", description="new"))["status"] == "updated"
    registry.reload()
    assert len(registry) == 1 and registry.delete("tool_sample") is True


def test_listing_sorts_by_id_and_filters_by_type_and_tags(registry: ToolRegistry) -> None:
    registry.register(
        {
            "name": "Weather",
            "tool_type": "API",
            "tags": ["Web"],
            "execution_config": {"url": "https://api.example.com/w"},
        }
    )
    assert [t.tool_id for t in registry.list_all()] == sorted(t.tool_id for t in registry.list_all())
    assert [t.tool_id for t in registry.list_by_type("api")] == ["tool_weather"]
    assert [t.tool_id for t in registry.list_by_type(ToolType.API)] == ["tool_weather"]
    assert len(registry.list_by_type("LOCAL")) == 5
    assert [t.tool_id for t in registry.list_by_tags(["web", "bing"], match_all=True)] == ["tool_web_search"]
    assert [t.tool_id for t in registry.list_by_tags(["WEB"])] == ["tool_weather", "tool_web_search"]


def test_list_by_type_names_an_unknown_type(registry: ToolRegistry) -> None:
    with pytest.raises(
        ToolValidationError, match="tool_type 'shell' is unknown; expected one of: local, mcp"
    ):
        registry.list_by_type("shell")


def test_search_needs_every_word_somewhere_in_id_name_description_or_tags(registry: ToolRegistry) -> None:
    assert [t.tool_id for t in registry.search("bing RESULTS")] == ["tool_web_search"]
    assert registry.search("bing matrix") == []


def test_get_tools_for_agent_keeps_active_tools_in_order_once(registry: ToolRegistry) -> None:
    registry.register(tool_dict("Retired", status="disabled"))
    registry.register(tool_dict("Old", status="deprecated"))
    tools = registry.get_tools_for_agent(
        ["Web Search", "tool_retired", "nope", "calculator", "tool_web_search", "Old"]
    )
    assert [t.tool_id for t in tools] == ["tool_web_search", "tool_calculator"]
    assert registry.get("tool_retired").status is ToolStatus.DISABLED


def test_input_is_validated_after_normalising(registry: ToolRegistry) -> None:
    assert (
        registry.validate_tool_input("Calculator", {"operation": "add", "values": [1], "vectors": None})
        is True
    )
    assert registry.validate_tool_input("tool_calculator", {"operation": "cube"}) is False
    assert registry.input_errors("tool_calculator", {"operation": "add", "values": ["x"]}) == [
        'input.values[0]: "x" is not of type "number"'
    ]
    with pytest.raises(ToolNotFoundError):
        registry.validate_tool_input("nope", {})


def test_a_registration_by_another_registry_is_seen_at_the_next_lookup(tmp_path: Path) -> None:
    here = ToolRegistry(storage_dir=tmp_path)
    there = ToolRegistry(storage_dir=tmp_path)  # stands for another process: its own storage object
    there.register(tool_dict("Elsewhere"))
    assert here.resolve("elsewhere").tool_id == "tool_elsewhere"
    there.register(tool_dict("Second"))
    assert [t.tool_id for t in here.list_all()] == ["tool_elsewhere", "tool_second"]
    there.delete("tool_second")
    here.reload()
    assert here.get("tool_second") is None


def test_a_name_taken_in_another_registry_is_refused(tmp_path: Path) -> None:
    here = ToolRegistry(storage_dir=tmp_path)
    ToolRegistry(storage_dir=tmp_path).register(tool_dict("Shared Name", tool_id="theirs"))
    with pytest.raises(
        ToolNameConflictError, match="clashes with stored tool 'Shared Name' \\(tool_id 'theirs'\\)"
    ):
        here.register(tool_dict("shared-name", tool_id="mine"))


def test_reload_repairs_an_index_that_lost_entries(registry: ToolRegistry) -> None:
    index_path = registry.storage.directory / INDEX_FILE
    index = json.loads(index_path.read_text())
    del index["tools"]["tool_calculator"]
    index_path.write_text(json.dumps(index))
    registry.reload()
    assert "tool_calculator" in json.loads(index_path.read_text())["tools"]


def test_lookups_do_not_wait_for_a_registration_in_progress(registry: ToolRegistry) -> None:
    storage = registry.storage
    entered, release = threading.Event(), threading.Event()
    real_save = storage.save

    def slow_save(tool: ToolDef, **kwargs: object) -> bool:
        entered.set()
        assert release.wait(10), "the test never released the writer"
        return real_save(tool, **kwargs)

    storage.save = slow_save  # type: ignore[method-assign]
    writer = threading.Thread(target=registry.register, args=(tool_dict("Slow One"),))
    writer.start()
    try:
        assert entered.wait(10)
        # the writer holds the registry's lock inside save(); lookups and listings must still answer
        assert registry.resolve("Web Search").tool_id == "tool_web_search"
        assert len(registry.list_all()) == 5 and registry.resolve("Slow One") is None
        # another process writes meanwhile: a miss still answers at once instead of waiting to reload
        ToolRegistry(storage_dir=storage.directory).register(tool_dict("Other Writer"))
        assert registry.resolve("Other Writer") is None
    finally:
        release.set()
        writer.join(10)
    assert registry.resolve("Slow One").tool_id == "tool_slow_one"
    assert registry.resolve("Other Writer").tool_id == "tool_other_writer"  # picked up once the lock was free


def test_readers_never_see_a_tool_missing_while_it_is_updated(tmp_path: Path) -> None:
    registry = ToolRegistry()  # memory only: the fastest writer, the most interleaving
    registry.register(tool_dict("Busy Tool", tool_id="busy"))
    misses: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            for ref in ("busy", "Busy Tool", "busy_tool"):
                if registry.resolve(ref) is None:
                    misses.append(ref)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for i in range(120):
            name = "Busy Tool" if i % 2 else "busy tool"
            registry.register(tool_dict(name, tool_id="busy", description=f"version {i}"))
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert misses == []


def test_threads_racing_for_one_name_leave_exactly_one_owner(tmp_path: Path) -> None:
    registry = ToolRegistry(storage_dir=tmp_path)
    outcomes: list[str] = []
    barrier = threading.Barrier(6)

    def contender(i: int) -> None:
        barrier.wait(10)
        try:
            registry.register(tool_dict("Contested", tool_id=f"contender_{i}"))
            outcomes.append("won")
        except ToolNameConflictError:
            outcomes.append("clash")

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["clash"] * 5 + ["won"]
    assert len(ToolStorage(tmp_path).load_all()[0]) == 1


def test_allowed_modules_may_be_one_string_and_must_be_module_names(tmp_path: Path) -> None:
    registry = ToolRegistry(allowed_modules="MyTools")
    assert registry.allowed_modules == ("MyTools",)
    registry.register(tool_dict("Mine", execution_config={"module": "MyTools.x", "function": "run"}))
    with pytest.raises(ToolConfigError, match="allowed_modules entry 'My Tools' is not a dotted module name"):
        ToolRegistry(allowed_modules=["My Tools"])


def test_an_api_tool_may_reach_private_addresses_only_when_the_policy_allows(tmp_path: Path) -> None:
    tool = {"name": "Intranet", "tool_type": "api", "execution_config": {"url": "http://10.0.0.1/api"}}
    with pytest.raises(ToolRegistrationError, match="private addresses are not allowed"):
        ToolRegistry().register(tool)
    assert ToolRegistry(egress=EgressPolicy(allow_private=True)).register(tool)["status"] == "registered"


def test_readers_never_see_a_tool_missing_while_the_folder_is_reloaded(registry: ToolRegistry) -> None:
    misses: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            for ref in ("Web Search", "calculator", "tool_file_reader"):
                if registry.resolve(ref) is None:
                    misses.append(ref)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(20):
            registry.reload()
    finally:
        stop.set()
        thread.join(10)
    assert misses == []


NAME_PARTS = st.sampled_from(["web", "Web", "WEB", "search", "Search", "tool", "Tool", "x", "2", "é"])
SEPARATORS = st.sampled_from([" ", "-", "_", "  ", ".", "!"])


@st.composite
def tool_names(draw: st.DrawFn) -> str:
    parts = draw(st.lists(NAME_PARTS, min_size=1, max_size=3))
    seps = [draw(SEPARATORS) for _ in parts]
    return "".join(p + s for p, s in zip(parts, seps, strict=True)).strip() or parts[0]


@settings(max_examples=60, deadline=None)
@given(names=st.lists(tool_names(), min_size=1, max_size=8))
def test_every_registered_tool_resolves_to_itself_by_id_name_and_slug(names: list[str]) -> None:
    registry = ToolRegistry()
    accepted = []
    for i, name in enumerate(names):
        try:
            registry.register({"tool_id": f"t{i}", "name": name})
            accepted.append((f"t{i}", name))
        except ToolNameConflictError:
            continue
        except ToolRegistrationError:
            continue  # a name without letters or digits cannot be slugged; tested elsewhere
    assert accepted, "the first name always registers"
    for tool_id, name in accepted:
        tool = registry.get(tool_id)
        for ref in (tool_id, name, name.upper(), name.lower(), tool.slug or name, tool.llm_name):
            assert registry.resolve(ref).tool_id == tool_id, (ref, accepted)
