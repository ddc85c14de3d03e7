"""The file reader: every format, the three modes, local paths inside allowed roots, and the size caps."""

from __future__ import annotations

import json

import pytest

from AgentTools.file_reader.service import FileReaderService
from AgentTools.file_reader.textops import bm25_rank, chunk_text, summarize
from tests.agent_tools._files import b64, make_csv, make_pdf
from tests.agent_tools._support import invoke

ARTICLE = (
    "Solar panels convert sunlight into electricity. Solar power is growing quickly in Europe. "
    "Wind turbines turn moving air into power. Offshore wind farms are large. "
    "Batteries store energy for the night. Grid operators balance supply and demand every second. "
    "Solar and wind together cut emissions. Hydro power is the oldest renewable source."
)


@pytest.fixture
def reader() -> FileReaderService:
    return FileReaderService()


def test_a_pdf_is_extracted_page_by_page_through_the_executor():
    pdf = make_pdf([["Quarterly report", "Revenue grew by 12 percent."], ["Costs fell in the second half."]])
    result = invoke(
        "tool_file_reader",
        {"content_base64": b64(pdf), "file_name": "q.pdf", "mime_type": "application/pdf", "query": None},
    )
    assert result.success, result.error
    out = result.output
    assert "Revenue grew by 12 percent." in out["content"]
    assert "[page 2]\nCosts fell in the second half." in out["content"]
    assert out["metadata"] == {
        **out["metadata"],
        "pages": 2,
        "format": "pdf",
        "mode": "extract",
        "size_bytes": len(pdf),
    }


def test_a_csv_gets_statistics_and_rows(reader):
    out = reader.process(b64(make_csv(200)), "t.csv", "text/csv", max_rows=3)
    table = out["table"]
    assert table["row_count"] == 200 and table["columns"] == ["id", "city", "temperature", "note"]
    assert len(table["rows"]) == 3 and table["rows"][1] == {
        "id": "1",
        "city": "Oslo",
        "temperature": "-4.5",
        "note": "reading 1",
    }
    stats = {s["name"]: s for s in table["stats"]}
    assert stats["id"] == {**stats["id"], "type": "number", "min": 0, "max": 199, "mean": 99.5}
    assert stats["city"]["type"] == "text" and stats["city"]["unique"] == 4
    assert stats["note"]["missing"] == 20


def test_summarize_on_a_csv_describes_its_columns(reader):
    out = reader.process(b64(make_csv(40)), "t.csv", "text/csv", mode="summarize")
    assert out["summary"].startswith("The table has 40 rows and 4 columns.")
    assert "- temperature (number): min -5.5, max 33.5" in out["summary"]
    assert out["content"] == out["summary"]


def test_a_semicolon_csv_is_sniffed(reader):
    out = reader.process(b64("a;b\n1;x\n2;y\n"), "s.csv", "text/csv")
    assert out["table"]["columns"] == ["a", "b"] and out["metadata"]["delimiter"] == ";"


def test_json_and_markdown_and_text_are_read(reader):
    out = reader.process(b64(json.dumps({"name": "echo", "tools": [1, 2]})), "d.json", "application/json")
    assert json.loads(out["content"]) == {"name": "echo", "tools": [1, 2]}
    assert out["metadata"]["keys"] == ["name", "tools"]
    md = reader.process(b64("# Title\n\nText.\n\n## Part\n"), "r.md", "text/markdown")
    assert md["metadata"]["headings"] == [{"level": 1, "title": "Title"}, {"level": 2, "title": "Part"}]
    text = reader.process(b64("plain words"), "notes.txt", None)
    assert text["content"] == "plain words" and text["metadata"]["format"] == "text"


def test_xml_is_flattened_to_text(reader):
    out = reader.process(
        b64("<r><item id='1'>alpha</item><item id='2'>beta</item></r>"), "x.xml", "application/xml"
    )
    assert out["content"] == 'item [id="1"]: alpha\nitem [id="2"]: beta'
    assert out["metadata"]["root"] == "r" and out["metadata"]["elements"] == 3


@pytest.mark.parametrize(
    "payload",
    [
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><a>&lol2;</a>',
        '<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><foo>&xxe;</foo>',
    ],
)
def test_xml_entity_declarations_are_refused(reader, payload):
    with pytest.raises(ValueError, match="DOCTYPE or ENTITY declaration is refused"):
        reader.process(b64(payload), "bomb.xml", "text/xml")


def test_utf16_xml_cannot_hide_a_doctype(reader):
    payload = '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>'.encode(
        "utf-16"
    )
    with pytest.raises(ValueError, match="must be UTF-8"):
        reader.process(b64(payload), "bomb.xml", "text/xml")


def test_query_mode_returns_the_most_relevant_chunks(reader):
    out = reader.process(
        b64(ARTICLE),
        "a.txt",
        "text/plain",
        mode="query",
        query="offshore wind",
        chunk_size=80,
        chunk_overlap=10,
        top_k=2,
    )
    assert "Offshore wind" in out["chunks"][0]
    assert out["matches"][0]["score"] >= out["matches"][-1]["score"] > 0
    assert out["metadata"]["chunk_count"] > 2


def test_summarize_mode_picks_sentences_in_document_order(reader):
    out = reader.process(b64(ARTICLE), "a.txt", "text/plain", mode="summarize", summary_sentences=2)
    picked = out["summary"]
    assert picked.count(".") == 2
    first, second = picked.split(". ")[:2]
    assert ARTICLE.index(first) < ARTICLE.index(second)


def test_chunks_overlap_and_cover_the_text():
    text = " ".join(f"word{i}" for i in range(300))
    chunks = chunk_text(text, 100, 20)
    assert all(len(c) <= 100 for c in chunks)
    assert chunks[0].split()[-1] in chunks[1]  # overlap carries the boundary word
    assert chunks[-1].endswith("word299")
    assert bm25_rank(chunks, "word150", 1)[0][0] in range(len(chunks))
    assert summarize("One. Two.", 5) == "One. Two."


def test_a_local_path_is_refused_without_allowed_roots(reader, tmp_path, monkeypatch):
    monkeypatch.delenv("ECHO_TOOLS_FILE_ROOTS", raising=False)
    (tmp_path / "a.txt").write_text("hello")
    with pytest.raises(ValueError, match="no local folders are allowed; set ECHO_TOOLS_FILE_ROOTS"):
        reader.process(path=str(tmp_path / "a.txt"))


def test_a_local_path_inside_the_roots_is_read_and_outside_is_refused(reader, tmp_path, monkeypatch):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "a.md").write_text("# Hi\nthere")
    (tmp_path / "secret.txt").write_text("secret")
    (allowed / "link.txt").symlink_to(tmp_path / "secret.txt")
    monkeypatch.setenv("ECHO_TOOLS_FILE_ROOTS", str(allowed))
    out = reader.process(path=str(allowed / "a.md"))
    assert out["content"] == "# Hi\nthere" and out["metadata"]["file_name"] == "a.md"
    for bad in (tmp_path / "secret.txt", allowed / ".." / "secret.txt", allowed / "link.txt"):
        with pytest.raises(ValueError, match="is outside the allowed folders"):
            reader.process(path=str(bad))


def test_oversized_base64_is_refused_before_decoding(reader, monkeypatch):
    monkeypatch.setenv("ECHO_FILE_READER_MAX_BYTES", "1000")
    with pytest.raises(ValueError, match="content_base64 holds about 1500 bytes; at most 1000"):
        reader.process("!" * 2000, "a.txt", "text/plain")  # not even valid base64: never decoded


def test_an_oversized_local_file_is_refused_by_its_size(reader, tmp_path, monkeypatch):
    monkeypatch.setenv("ECHO_FILE_READER_MAX_BYTES", "10")
    monkeypatch.setenv("ECHO_TOOLS_FILE_ROOTS", str(tmp_path))
    (tmp_path / "big.txt").write_text("x" * 11)
    with pytest.raises(ValueError, match="is 11 bytes; at most 10"):
        reader.process(path=str(tmp_path / "big.txt"))


def test_extract_is_capped_by_max_chars(reader):
    out = reader.process(b64("abcdef" * 100), "a.txt", "text/plain", max_chars=10)
    assert out["content"] == "abcdefabcd" and out["metadata"]["truncated"] is True


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give the file as content_base64"),
        (
            {"content_base64": b64("x"), "file_name": "a.txt", "mode": "query"},
            "query is required when mode is 'query'",
        ),
        ({"content_base64": b64("x"), "file_name": "a.txt", "mode": "translate"}, "mode must be"),
        (
            {"content_base64": b64("x"), "file_name": "a.bin", "mime_type": "application/octet-stream"},
            "'application/octet-stream'",
        ),
        ({"content_base64": b64("x"), "file_name": "a.xlsx"}, "Excel workbook"),
        ({"content_base64": b64("{nope"), "file_name": "a.json"}, "not valid JSON"),
        ({"content_base64": b64("not a pdf"), "file_name": "a.pdf"}, "not a readable PDF"),
        ({"content_base64": b64("<a><b></a>"), "file_name": "a.xml"}, "not well-formed XML"),
        (
            {
                "content_base64": b64("x y z"),
                "file_name": "a.txt",
                "mode": "query",
                "query": "x",
                "chunk_size": 10,
            },
            "chunk_size must be at least 50",
        ),
    ],
)
def test_bad_input_names_the_field_and_value(reader, kwargs, message):
    with pytest.raises(ValueError) as info:
        reader.process(**kwargs)
    assert message in str(info.value)


def test_echoais_required_fields_still_work_and_bad_enum_values_are_refused_by_the_schema():
    ok = invoke(
        "File Reader",
        {
            "content_base64": b64("hello"),
            "file_name": "a.txt",
            "mime_type": "text/plain",
            "mode": "extract",
            "stream": False,
            "chunk_size": 1000,
            "chunk_overlap": 200,
        },
    )
    assert ok.success and ok.output["content"] == "hello"
    bad = invoke(
        "tool_file_reader", {"content_base64": b64("x"), "file_name": "a.txt", "mime_type": "image/png"}
    )
    assert not bad.success and bad.error_type == "validation" and "mime_type" in bad.error


def test_a_csv_is_read_row_by_row_into_its_columns_with_short_rows_padded() -> None:
    from AgentTools.file_reader.parsers import parse_csv

    doc = parse_csv(b"a,b,c\n1,2\n\n3,4,5,6\n7,8,9\n", max_rows=2)
    assert doc.table is not None
    assert doc.table["row_count"] == 3
    assert doc.table["rows"] == [{"a": "1", "b": "2"}, {"a": "3", "b": "4", "c": "5"}]
    stats = {s["name"]: s for s in doc.table["stats"]}
    assert stats["c"]["missing"] == 1  # the short row's padded value
    assert (stats["c"]["min"], stats["c"]["max"]) == (5, 9)  # the long row's extra value left out
    assert doc.details == {"rows": 3, "columns": ["a", "b", "c"], "delimiter": ","}
