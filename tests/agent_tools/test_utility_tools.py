"""The built-in utilities: datetime, json_tools (JSONPath, schema validation) and text_tools."""

from __future__ import annotations

import pytest

from AgentTools.datetime_tools.service import DateTimeService
from AgentTools.json_tools.jsonpath import query
from AgentTools.json_tools.service import JsonToolsService
from AgentTools.text_tools.service import TextToolsService
from tests.agent_tools._support import invoke

STORE = {
    "store": {
        "book": [
            {"title": "A", "price": 8, "tags": ["x"]},
            {"title": "B", "price": 12},
            {"title": "C", "price": 5, "isbn": "1"},
        ],
        "bike": {"price": 20},
    }
}


# -- datetime -------------------------------------------------------------------------------------------


def test_convert_follows_daylight_saving_rules_of_the_zone():
    out = DateTimeService().run("convert", value="2025-03-30T01:30:00Z", to_timezone="Europe/Paris")
    assert out["result"] == "2025-03-30T03:30:00+02:00"  # the clocks went forward at 01:00 UTC
    assert out["weekday"] == "Sunday"


def test_diff_add_info_and_timestamps():
    service = DateTimeService()
    diff = service.run("diff", value="2025-01-01", end="2025-03-01T12:00:00")
    assert diff["days"] == 59.5 and diff["human"] == "59 days, 12 hours"
    added = service.run("add", value="2025-01-31T10:00:00+01:00", days=1, hours=2)
    assert added["result"] == "2025-02-01T12:00:00+01:00"
    info = service.run("info", value="2024-02-10")
    assert (info["is_leap_year"], info["days_in_month"], info["iso_week"], info["quarter"]) == (
        True,
        29,
        6,
        1,
    )
    assert service.run("parse", value=1700000000)["result"] == "2023-11-14T22:13:20+00:00"
    assert (
        service.run("parse", value="03/04/2025", format="%d/%m/%Y")["result"] == "2025-04-03T00:00:00+00:00"
    )
    assert service.run("format", value="2025-01-02", output_format="%d %B %Y")["result"] == "02 January 2025"


def test_now_through_the_executor_is_timezone_aware():
    result = invoke("tool_datetime", {"operation": "now", "timezone": "Asia/Tokyo"})
    assert result.success, result.error
    assert result.output["result"].endswith("+09:00") and result.output["timezone"] == "Asia/Tokyo"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"operation": "convert", "value": "2025-01-01", "to_timezone": "Mars/Olympus"},
            "to_timezone 'Mars/Olympus' is not a known IANA time zone",
        ),
        ({"operation": "parse", "value": "next tuesday"}, "value 'next tuesday' does not match ISO 8601"),
        ({"operation": "diff", "value": "2025-01-01"}, "needs end"),
        ({"operation": "add"}, "needs value"),
        ({"operation": "add", "value": "9999-12-31", "days": 10}, "leaves the supported date range"),
        ({"operation": "yesterday"}, "operation 'yesterday' is unknown"),
    ],
)
def test_datetime_errors_name_the_field_and_value(kwargs, message):
    with pytest.raises(ValueError) as info:
        DateTimeService().run(**kwargs)
    assert message in str(info.value)


# -- json_tools -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("$.store.book[0].title", ["A"]),
        ("$.store.book[*].price", [8, 12, 5]),
        ("$..price", [8, 12, 5, 20]),
        ("$.store.book[?(@.price < 10)].title", ["A", "C"]),
        ("$.store.book[?(@.isbn)].title", ["C"]),
        ("$.store.book[?(@.title == 'B')].price", [12]),
        ("$.store.book[-1:].title", ["C"]),
        ("$.store.book[0,2].title", ["A", "C"]),
        ("$['store']['bike'].price", [20]),
        ("$.store.book[5]", []),
        ("$", [STORE]),
    ],
)
def test_jsonpath_subset_selects_the_expected_values(path, expected):
    assert query(STORE, path) == expected


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("store.book", "must start with '$'"),
        ("$.store.book[?(@.price ~ 3)]", "filter"),
        ("$.store.book[0", "is not closed"),
        ("$.store.book[foo]", "is not an index"),
        ("$.store.book[::0]", "step must not be 0"),
    ],
)
def test_bad_jsonpath_is_a_value_error_naming_the_path(path, message):
    with pytest.raises(ValueError) as info:
        query(STORE, path)
    assert message in str(info.value)


def test_json_tools_parse_query_validate_and_format_through_the_executor():
    parsed = invoke(
        "tool_json_tools", {"operation": "query", "text": '{"a": [{"b": 1}, {"b": 2}]}', "path": "$.a[*].b"}
    )
    assert parsed.success, parsed.error
    assert parsed.output["result"] == [1, 2] and parsed.output["count"] == 2
    schema = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}, "required": ["age"]}
    bad = invoke("JSON Tools", {"operation": "validate", "data": {"age": -3}, "schema": schema})
    assert bad.output["valid"] is False and bad.output["errors"][0].startswith("data.age:")
    good = invoke("JSON Tools", {"operation": "validate", "data": {"age": 3}, "schema": schema})
    assert good.output["valid"] is True and good.output["errors"] == []
    minified = JsonToolsService().run("minify", data={"b": 1, "a": [1, 2]}, sort_keys=True)
    assert minified["result"] == '{"a":[1,2],"b":1}'


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"operation": "parse", "text": "{bad"}, "text is not valid JSON: Expecting property name"),
        (
            {"operation": "validate", "data": 1, "schema": {"type": "nonsense"}},
            "schema is not a valid JSON Schema",
        ),
        ({"operation": "query", "data": {}}, "needs path"),
        ({"operation": "keys", "data": [1]}, "needs an object, got array"),
        ({"operation": "parse"}, "needs data"),
    ],
)
def test_json_tools_errors_name_the_field(kwargs, message):
    with pytest.raises(ValueError) as info:
        JsonToolsService().run(**kwargs)
    assert message in str(info.value)


# -- text_tools -----------------------------------------------------------------------------------------


def test_length_split_and_case():
    service = TextToolsService()
    length = service.run("length", text="Hello world. How are you?\nFine!")
    assert (length["words"], length["lines"], length["sentences"]) == (6, 2, 3)
    assert service.run("split", text="a,b,,c", separator=",")["result"] == ["a", "b", "", "c"]
    assert service.run("split", text="One. Two! Three?", mode="sentences")["result"] == [
        "One.",
        "Two!",
        "Three?",
    ]
    assert service.run("case", text="HelloWorld foo-bar", case="kebab")["result"] == "hello-world-foo-bar"
    assert service.run("truncate", text="the quick brown fox", max_length=12)["result"] == "the quick…"


def test_regex_extract_returns_groups_and_spans_through_the_executor():
    result = invoke(
        "tool_text_tools",
        {"operation": "regex_extract", "text": "a1 b22", "pattern": r"(?P<l>[a-z])(?P<n>\d+)", "group": "n"},
    )
    assert result.success, result.error
    assert result.output["result"] == ["1", "22"]
    assert result.output["groups"] == [{"l": "a", "n": "1"}, {"l": "b", "n": "22"}]
    assert result.output["spans"] == [[0, 2], [3, 6]]


def test_regex_replace_and_template_render_without_eval():
    service = TextToolsService()
    assert (
        service.run(
            "regex_replace", text="2025-01-02", pattern=r"(\d+)-(\d+)-(\d+)", replacement=r"\3/\2/\1"
        )["result"]
        == "02/01/2025"
    )
    rendered = service.run(
        "template", template="Hi $name, ${n} items; $$5", variables={"name": "Ann", "n": 3}
    )
    assert rendered["result"] == "Hi Ann, 3 items; $5"
    loose = service.run("template", template="Hi $name {__import__('os')}", strict=False)
    assert loose["result"] == "Hi $name {__import__('os')}" and loose["missing"] == ["name"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"operation": "regex_extract", "text": "aaaa", "pattern": "a(?=b)"},
            "pattern 'a(?=b)' uses a lookahead",
        ),
        ({"operation": "regex_extract", "text": "a", "pattern": "x" * 501}, "pattern is 501 characters long"),
        (
            {"operation": "regex_extract", "text": "a", "pattern": "(unclosed"},
            "not a valid regular expression",
        ),
        ({"operation": "regex_extract", "text": "a", "pattern": "a", "group": 2}, "group 2 does not exist"),
        (
            {"operation": "regex_extract", "text": "a", "pattern": "a", "flags": ["verbose"]},
            "flags entry 'verbose' is unknown",
        ),
        ({"operation": "template", "template": "Hi $name"}, "variables ['name'] that are not in variables"),
        ({"operation": "length", "text": "x" * 1_000_001}, "text is 1000001 characters long"),
        ({"operation": "split", "text": "a", "separator": ""}, "separator must not be empty"),
    ],
)
def test_text_tools_errors_name_the_field_and_value(kwargs, message):
    with pytest.raises(ValueError) as info:
        TextToolsService().run(**kwargs)
    assert message in str(info.value)
