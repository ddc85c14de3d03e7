"""Shared test set-up: no telemetry, no network, and EchoAI's formats at hand.

The suite reads EchoAI's storage formats from the project's own fixtures (`tests/fixtures/echoai`). Tests
that take the `corpus` fixture run once on those fixtures and once on the real EchoAI corpus, which stays
outside the repository: it is found through the `ECHOAI_CORPUS` variable or at
`../shared/reference/echoai-corpus` beside the checkout, and its variants are skipped when it is not there.
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Third-party telemetry tries the network, which does not exist here; turn it off before anything imports.
for _key, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
    "LANGCHAIN_TRACING_V2": "false",
    "ANONYMIZED_TELEMETRY": "False",
}.items():
    os.environ.setdefault(_key, _value)

REPO_ROOT = Path(__file__).resolve().parent.parent

# No test writes into the checkout: hypothesis keeps its examples and caches (./.hypothesis by default), and
# code that falls back to ./.echo_tools keeps its tools, in a folder of this run outside the checkout.
# Under pytest-xdist each worker is a process of its own with a folder of its own: a worker inherits the
# controller's environment, so a value the controller set here (named by ECHO_TOOLS_TEST_SCRATCH) is replaced.
_SCRATCH = tempfile.TemporaryDirectory(prefix="echo-tools-tests-")
_INHERITED = os.environ.get("ECHO_TOOLS_TEST_SCRATCH")
os.environ["ECHO_TOOLS_TEST_SCRATCH"] = _SCRATCH.name
for _key, _name in {"HYPOTHESIS_STORAGE_DIRECTORY": "hypothesis", "ECHO_TOOLS_HOME": "echo_tools"}.items():
    _given = os.environ.get(_key)
    if not _given or (_INHERITED and _given.startswith(_INHERITED + os.sep)):
        os.environ[_key] = os.path.join(_SCRATCH.name, _name)

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "echoai"
NO_CORPUS = (
    "the real EchoAI corpus is not here: set ECHOAI_CORPUS or place ../shared/reference/echoai-corpus "
    "beside the checkout"
)


def _find_corpus() -> Path | None:
    """The real corpus: `$ECHOAI_CORPUS`, else `../shared/reference/echoai-corpus` beside the checkout."""
    given = os.environ.get("ECHOAI_CORPUS")
    if given:
        path = Path(given)
        if not path.is_dir():
            raise pytest.UsageError(f"ECHOAI_CORPUS={given!r} is not a folder")
        return path.resolve()
    beside = REPO_ROOT.parent / "shared" / "reference" / "echoai-corpus"
    return beside if beside.is_dir() else None


@dataclass(frozen=True)
class Corpus:
    """A folder in EchoAI's storage layout, and the ids and names the tests look for in it.

    `corpus / "tools"` is a path inside the folder. The fields name what the tests need beyond the
    layout: which workflow runs end to end, which one lacks agents, which canvas holds which node.
    """

    kind: str  # "fixtures" or "echoai"
    root: Path | None  # None when the real corpus is not here
    tool_ids: tuple[str, ...]  # every tools/tool_*.json id, sorted
    manifests: tuple[str, ...]  # every manifests/<name>.json stem, sorted
    workflow_count: int  # files under workflows/*/
    web_search_workflow: str  # Start -> Agent with tool_web_search -> End, every agent in agents/
    web_search_agent: str
    branching_workflow: str  # a draft with a Conditional whose agents are only partly in agents/
    branching_missing_agent: str  # in that draft, not in agents/
    branching_present_agent: str  # in that draft and in agents/
    branching_conditional: str  # the Conditional agent
    branching_targets: frozenset[str]  # the agents its branches (canvas int ids) lead to
    canvases: tuple[str, ...]  # canvases/<stem>.json
    node_types_canvas: str  # its stored agents cover Agent, Conditional, API, Code, Self-Review, HITL
    gate_canvas: str  # a three-way Conditional, HITL and API nodes
    gate_name: str  # the Conditional (if, elif, else)
    hitl_name: str
    hitl_title: str
    hitl_decisions: tuple[str, ...]
    api_name: str  # an API node with bearer authentication and a JSON content type
    legacy_agent: str  # no prompt, no metadata.node_type, llm with a temperature only
    template: str  # the agent template whose tools include "Web Search"
    template_variable: str  # its first variable
    template_unknown_tools: tuple[str, ...]  # its tools that name no registered tool

    def __truediv__(self, part: str) -> Path:
        if self.root is None:
            raise RuntimeError(NO_CORPUS)
        return self.root / part

    def __str__(self) -> str:
        return str(self.root)


TOOL_IDS = (
    "tool_calculator",
    "tool_code_generator",
    "tool_code_reviewer",
    "tool_file_reader",
    "tool_web_search",
)
MANIFESTS = ("calculator", "code_generator", "code_reviewer", "file_reader", "web_search")

FIXTURE_CORPUS = Corpus(
    kind="fixtures",
    root=FIXTURES,
    tool_ids=TOOL_IDS,
    manifests=MANIFESTS,
    workflow_count=6,
    web_search_workflow="wf_fe0111c97ab4209b1f0a7b61d85b0526",
    web_search_agent="agt_8665ec80066e191e0950266049f27d3b",
    branching_workflow="wf_23b10adf6f3f556206a5895be2cca3fb",
    branching_missing_agent="agt_22285489c1def3c5ace41aee14030ac4",
    branching_present_agent="agt_b4d6ada708a376a4b74a67641af5d8a2",
    branching_conditional="agt_181bac8b79ac75bc81c9e1f67ae7f2f0",
    branching_targets=frozenset(
        {"agt_16b599c1deff70b9cb8977ee995d71ce", "agt_4244e535ce5ae472967e8be474e63a91"}
    ),
    canvases=("incidentTriage", "marketScan", "vendorOnboarding"),
    node_types_canvas="vendorOnboarding",
    gate_canvas="incidentTriage",
    gate_name="Severity Gate",
    hitl_name="On-call Lead Decision",
    hitl_title="Major incident - lead decision needed",
    hitl_decisions=("roll_back", "fix_forward", "page_more_people"),
    api_name="Post to Status Page",
    legacy_agent="agt_6f8d7595e68ffa9581f4f32b913e7554",
    template="Market Researcher",
    template_variable="market_question",
    template_unknown_tools=("Page Reader", "Citation Checker"),
)

ECHOAI_CORPUS = Corpus(
    kind="echoai",
    root=_find_corpus(),
    tool_ids=TOOL_IDS,
    manifests=MANIFESTS,
    workflow_count=9,
    web_search_workflow="wf_eacf4442245b4a559a17e0a6d50fcccf",
    web_search_agent="agt_451d4686e50b47a0944cf6a12a0d2e31",
    branching_workflow="wf_e13a8ea8e7cc484abc4366ecd0fbfdd4",
    branching_missing_agent="agt_d0541f764cd94d48b2f895082a3899db",
    branching_present_agent="agt_93d489831bb94ec8acac14d7d0b022bb",
    branching_conditional="agt_a3fe230d5eec4ed9831e407702518a4b",
    # branch 5004 (Decline & Notify, the API node) and 5005 (Solution Designer), in canvas order
    branching_targets=frozenset(
        {"agt_3e4e02e774cf447bbb3f0b11a7280221", "agt_a23c127cdd3f417cb3fe334b692fc99e"}
    ),
    canvases=("mnADueDiligence", "proposalGeneration", "researchreport", "talentaquisition"),
    node_types_canvas="proposalGeneration",
    gate_canvas="mnADueDiligence",
    gate_name="Risk Assessment Gate",
    hitl_name="Partner Escalation",
    hitl_title="High Risk Deal - Partner Review Required",
    hitl_decisions=("proceed_with_conditions", "request_more_info", "recommend_no_go"),
    api_name="Deliver to Client Portal",
    legacy_agent="agt_56a18d6df2b74af1a5f25e1509e39a26",
    template="Research Analyst",
    template_variable="research_topic",
    template_unknown_tools=("Web Fetch", "Document Analysis"),
)

CORPORA = {c.kind: c for c in (FIXTURE_CORPUS, ECHOAI_CORPUS)}


def use_corpus(kind: str) -> Corpus:
    """The corpus of that kind; skips the test, saying why, when the real corpus is not here."""
    corpus = CORPORA[kind]
    if corpus.root is None:
        pytest.skip(NO_CORPUS)
    return corpus


def corpus_cases(values: Callable[[Corpus], Iterable[Any]]) -> list[Any]:
    """`(kind, value)` parameters for each corpus and each of its values, for `indirect=["corpus"]`."""
    return [
        pytest.param(corpus.kind, value, id=f"{corpus.kind}-{value}")
        for corpus in CORPORA.values()
        for value in values(corpus)
    ]


@pytest.fixture(params=list(CORPORA))
def corpus(request: pytest.FixtureRequest) -> Corpus:
    """Our fixtures in EchoAI's formats, then the real EchoAI corpus (skipped when it is not here)."""
    return use_corpus(request.param)


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


# `make test` runs the suite in worker processes (pytest-xdist, `-n 2 --dist loadfile`, pyproject's addopts):
# a work unit is a test file, so a module's fixtures start once, and the local model's tests, one file, get
# one model server at a time. (`--dist loadgroup` cannot group: with pytest 9.2 xdist 3.8 can no longer
# tag node ids with groups, pytest-dev/pytest-xdist#1386.) The files with a test marked slow go first,
# so that no long file starts last while the other worker is idle.
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    model_files = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("real_model")}
    if len(model_files) > 1:  # one unit of work, so one model server at a time
        raise pytest.UsageError(f"the tests marked real_model belong in one file, not {sorted(model_files)}")
    slow_files = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("slow")}
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a stable sort: each file's tests keep their order
        items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in slow_files)


# The garbage collector's full passes walk every tracked object: after CrewAI, LiteLLM and LangGraph are
# imported that is millions of objects, and each full pass (automatic, or a test's own `gc.collect()`)
# walks them all again: tests/workflow_bridge spent 8.0 s of CPU in 43 full passes (1.8 s with the freeze
# below), 44 other files 12.6 s in 53 (1.4 s), a test calling gc.collect() 30 times 14 s (1 s). Whatever
# is still alive once the imports and a test module are done (modules, classes, session fixtures) is moved
# to the permanent generation, after a collection has freed that module's garbage; later passes then walk
# only what later tests create.
# Nothing a test creates is frozen while the test runs, so its own garbage is collected as before.
def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    # after the whole protocol: the module's fixtures are finalised and the last test's values released
    result = yield
    if nextitem is not None and getattr(nextitem, "module", None) is not getattr(item, "module", None):
        gc.collect()
        gc.freeze()
    return result


@pytest.fixture(scope="session")
def pg_server() -> Any:
    """The PostgreSQL server the PostgreSQL tests share (tests/echo_tools/_pg_support.py): started on first
    use, stopped when the session ends."""
    from tests.echo_tools._pg_support import shared_server

    return shared_server()


@pytest.fixture
def dsn(pg_server: Any) -> str:
    """A new, empty database on the shared server: each test its own."""
    return str(pg_server.new_database())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the PostgreSQL server the PostgreSQL test modules shared, if one was started."""
    pg_support = sys.modules.get("tests.echo_tools._pg_support")
    if pg_support is not None:
        pg_support.stop_session_server()
