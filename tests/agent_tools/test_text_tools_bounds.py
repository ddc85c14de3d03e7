"""text_tools under hostile input: patterns run in linear time (RE2), features RE2 lacks are refused by name,
and no result (replaced text, rendered template, extracted groups) is built past its bound."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import httpx
import pytest

from AgentTools.text_tools.patterns import InputError
from AgentTools.text_tools.service import MAX_RESULT_CHARS, TextToolsService
from tests.echo_tools._served import echo_tools_serve, peak_rss_kb

run = TextToolsService().run


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """One real `echo-tools serve` for the module's two server tests (a start costs about 1 s of CPU)."""
    with echo_tools_serve(tmp_path_factory.mktemp("text-tools-serve")) as url_and_pid:
        yield url_and_pid


def test_a_catastrophic_pattern_answers_at_once_through_a_real_server(served: tuple[str, int]) -> None:
    hostile = {"operation": "regex_extract", "text": "a" * 26, "pattern": "(a|a)*b"}
    nested = {
        "operation": "regex_replace",
        "text": "a" * 100_000 + "!",
        "pattern": "(a+)+b",
        "replacement": "x",
    }
    url, _pid = served
    with httpx.Client(base_url=url, timeout=60) as client:
        answer = client.post("/tools/invoke/tool_text_tools", json=hostile)
        assert answer.status_code == 200, answer.text
        assert answer.json()["output"]["count"] == 0
        replaced = client.post("/tools/invoke/tool_text_tools", json=nested).json()
        assert replaced["output"]["replacements"] == 0
        assert client.get("/tools/health").json()["status"] == "healthy"


def test_a_replacement_bomb_is_refused_through_a_real_server_before_it_is_built(
    served: tuple[str, int],
) -> None:
    bomb = {"operation": "regex_replace", "text": "a" * 100_000, "pattern": "a", "replacement": "b" * 4000}
    url, pid = served
    with httpx.Client(base_url=url, timeout=60) as client:
        before = peak_rss_kb(pid)
        refused = client.post("/tools/invoke/tool_text_tools", json=bomb)
        grown = peak_rss_kb(pid) - before
        assert refused.status_code in (422, 502), refused.text
        message = refused.json()["message"]
        assert f"at most {MAX_RESULT_CHARS} are allowed" in message and "replacement" in message
        assert grown < 100 * 1024  # 400 M characters were asked for; none were built


@pytest.mark.parametrize(
    ("pattern", "feature"),
    [
        (r"(a)\1", "a backreference '\\1'"),
        (r"(?P<x>a)(?P=x)", "a named backreference"),
        (r"a(?=b)", "a lookahead '(?=...)'"),
        (r"a(?!b)", "a negative lookahead"),
        (r"(?<=a)b", "a lookbehind '(?<=...)'"),
        (r"(?<!a)b", "a negative lookbehind"),
        (r"(?>a)", "an atomic group"),
        (r"a++", "a possessive quantifier"),
        (r"(a)?(?(1)b|c)", "a conditional group"),
        (r"a\Z", "'\\Z' (write '\\z'"),
    ],
)
def test_a_feature_the_engine_lacks_is_named_with_the_field_and_value(pattern: str, feature: str) -> None:
    with pytest.raises(InputError) as caught:
        run("regex_extract", text="ab", pattern=pattern)
    assert caught.value.field == "pattern"
    assert f"pattern {pattern!r} uses {feature}" in str(caught.value)
    assert "RE2" in str(caught.value)


def test_an_invalid_pattern_and_an_unknown_flag_name_their_field() -> None:
    with pytest.raises(InputError, match=r"pattern '\(unclosed' is not a valid regular expression") as bad:
        run("regex_extract", text="a", pattern="(unclosed")
    assert bad.value.field == "pattern"
    with pytest.raises(InputError, match="flags entry 'verbose' is unknown") as flag:
        run("regex_extract", text="a", pattern="a", flags=["verbose"])
    assert flag.value.field == "flags"


def test_a_template_bomb_is_refused_before_it_is_built() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as caught:
            run("template", template="$a" * 50_000, variables={"a": "x" * 8000})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.field == "template"
    assert "the rendered template would be 400000000 characters" in str(caught.value)
    assert peak < 20 * 1024 * 1024


def test_a_replacement_bomb_is_refused_before_it_is_built() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as caught:
            # 1000 matches of 100 characters, each replaced by 800 copies of itself: 80 M characters
            # asked for (the same as 100,000 one-character matches); refused after 26 matches, where
            # one-character matches took 2,500 (18 s of CPU under tracemalloc)
            run("regex_replace", text="a" * 100_000, pattern="a{100}", replacement=r"\g<0>" * 800)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.field == "replacement" and "the replaced text would be" in str(caught.value)
    assert peak < 20 * 1024 * 1024


def test_nested_groups_cannot_multiply_what_extract_copies() -> None:
    pattern = "".join(f"(?P<g{n}>" for n in range(40)) + ".*" + ")" * 40
    with pytest.raises(InputError) as caught:
        run("regex_extract", text="x" * 100_000, pattern=pattern)
    assert caught.value.field == "pattern" and "the extracted matches would be" in str(caught.value)


def test_results_just_under_the_bound_are_built() -> None:
    out = run("regex_replace", text="a" * 1000, pattern="a", replacement="b" * 2000)
    assert len(out["result"]) == 2_000_000 and out["replacements"] == 1000
    rendered = run("template", template="$a$a", variables={"a": "x" * 1_000_000})
    assert len(rendered["result"]) == MAX_RESULT_CHARS


def test_python_meanings_are_kept_unicode_classes_and_replacement_escapes() -> None:
    words = run("regex_extract", text="café naïve 42 ٣", pattern=r"\w+")["result"]
    assert words == ["café", "naïve", "42", "٣"]
    assert run("regex_extract", text="x-ü_1 !", pattern=r"[\w-]+")["result"] == ["x-ü_1"]
    assert run("regex_extract", text="a\u2003b", pattern=r"\s")["count"] == 1
    assert run("regex_extract", text="AbC", pattern="abc", flags=["ignorecase"])["result"] == ["AbC"]
    assert run("regex_extract", text=r"a\db", pattern=r"\\d")["result"] == ["\\d"]
    swapped = run(
        "regex_replace", text="bob@ex", pattern=r"(?P<user>\w+)@(\w+)", replacement=r"\2:\g<user>\n\0"
    )
    assert swapped["result"] == "ex:bob\n\x00"
    assert run("regex_replace", text="axb", pattern="x*", replacement="-")["result"] == "-a--b-"
    with pytest.raises(InputError, match="refers to group '3'") as caught:
        run("regex_replace", text="ab", pattern="(a)", replacement=r"\3")
    assert caught.value.field == "replacement"
