"""Turn file bytes into text plus structure: text, Markdown, JSON, CSV (with statistics), XML, PDF.

XML is parsed with the standard library only after refusing any DOCTYPE or ENTITY declaration, which is
what entity-expansion attacks (billion laughs, external entities) need; defusedxml is not required.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

MAX_CSV_COLUMNS = 500
MAX_PDF_PAGES = 2000


@dataclass
class Document:
    """What a parser found: the text, format details, and a table for tabular files."""

    text: str
    format: str
    details: dict[str, Any] = field(default_factory=dict)
    table: dict[str, Any] | None = None


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM), else UTF-16 with a BOM, else Latin-1 (never fails)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def parse_text(data: bytes) -> Document:
    text = decode_text(data)
    return Document(text, "text", {"lines": text.count("\n") + 1, "characters": len(text)})


def parse_markdown(data: bytes) -> Document:
    text = decode_text(data)
    headings = [
        {"level": len(m.group(1)), "title": m.group(2).strip()}
        for m in re.finditer(r"^(#{1,6})\s+(.+)$", text, re.MULTILINE)
    ]
    return Document(text, "markdown", {"lines": text.count("\n") + 1, "headings": headings[:200]})


def parse_json(data: bytes) -> Document:
    try:
        value = json.loads(decode_text(data))
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"content is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    details: dict[str, Any] = {"top_level_type": type(value).__name__}
    if isinstance(value, dict):
        details["keys"] = list(value)[:200]
    elif isinstance(value, list):
        details["items"] = len(value)
    return Document(json.dumps(value, indent=2, ensure_ascii=False), "json", details)


def parse_xml(data: bytes) -> Document:
    # Checked on decoded text and re-parsed as UTF-8 without its declaration, so that a declared
    # encoding (UTF-16 has a NUL in every ASCII character) cannot hide a DOCTYPE from the check.
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"XML content must be UTF-8 encoded: {exc}") from exc
    lowered = text.lower()
    if "\x00" in text or "<!doctype" in lowered or "<!entity" in lowered:
        raise ValueError(
            "XML with a DOCTYPE or ENTITY declaration is refused (entity expansion is how XML bombs and "
            "external-entity attacks work); remove the declaration"
        )
    import xml.etree.ElementTree as ET

    body = re.sub(r"^\s*<\?xml[^>]*\?>", "", text, count=1)
    try:
        root = ET.fromstring(body.encode("utf-8"))
    except ET.ParseError as exc:
        raise ValueError(f"content is not well-formed XML: {exc}") from exc
    lines, count = [], 0
    for element in root.iter():
        count += 1
        text = (element.text or "").strip()
        attrs = " ".join(f'{k}="{v}"' for k, v in element.attrib.items())
        if text or attrs:
            tag = element.tag.split("}")[-1]
            lines.append(f"{tag}{' [' + attrs + ']' if attrs else ''}: {text}".rstrip(": ").rstrip())
    return Document("\n".join(lines), "xml", {"root": root.tag.split("}")[-1], "elements": count})


def parse_pdf(data: bytes) -> Document:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ValueError("the PDF is encrypted with a password; give an unencrypted file")
        pages = reader.pages
        if len(pages) > MAX_PDF_PAGES:
            raise ValueError(f"the PDF has {len(pages)} pages; at most {MAX_PDF_PAGES} are read")
        texts = [(page.extract_text() or "").strip() for page in pages]
    except PdfReadError as exc:
        raise ValueError(f"content is not a readable PDF: {exc}") from exc
    text = "\n\n".join(f"[page {i + 1}]\n{t}" for i, t in enumerate(texts) if t)
    details: dict[str, Any] = {"pages": len(texts), "pages_with_text": sum(1 for t in texts if t)}
    if not details["pages_with_text"]:
        details["note"] = "no extractable text (a scanned PDF needs OCR, which this tool does not do)"
    return Document(text, "pdf", details)


def _numbers(values: list[str]) -> list[float] | None:
    """The column as floats when every present value is a finite number (thousands commas allowed)."""
    out = []
    for value in values:
        try:
            number = float(value)
        except ValueError:
            try:
                number = float(value.replace(",", ""))
            except ValueError:
                return None
        if number != number or number in (float("inf"), float("-inf")):
            return None
        out.append(number)
    return out


def column_stats(name: str, values: list[str]) -> dict[str, Any]:
    """Statistics of one CSV column: numeric (min, max, mean, median, stdev) or categorical (top values)."""
    present = [v.strip() for v in values if v and not v.isspace()]
    stats: dict[str, Any] = {"name": name, "count": len(present), "missing": len(values) - len(present)}
    # a sample decides cheaply that a column is text, so big text columns are never parsed as numbers
    numbers = _numbers(present) if present and _numbers(present[:200]) is not None else None
    if numbers:
        mean = math.fsum(numbers) / len(numbers)
        variance = math.fsum((x - mean) ** 2 for x in numbers) / len(numbers)
        stats.update(
            type="number",
            min=min(numbers),
            max=max(numbers),
            mean=round(mean, 6),
            median=statistics.median(numbers),
            stdev=round(math.sqrt(variance), 6),
            sum=round(math.fsum(numbers), 6),
        )
    else:
        counts = Counter(present)
        stats.update(
            type="text", unique=len(counts), top=[{"value": v, "count": c} for v, c in counts.most_common(5)]
        )
    return stats


def parse_csv(data: bytes, max_rows: int = 20) -> Document:
    # A 10 MB CSV has hundreds of thousands of rows: kept, each row list is scanned again by every full
    # collection of the cyclic collector (most of the time went there). The rows are read one at a time into
    # the columns (lists of strings, which the collector does not track) and dropped, and only the first
    # `max_rows` are kept: the collector stays on for the process.
    text = decode_text(data)
    sample = text[:65536]
    try:
        dialect: Any = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = (r for r in csv.reader(io.StringIO(text), dialect) if r)
    header = next(rows, None)
    if header is None:
        return Document(
            "", "csv", {"rows": 0, "columns": []}, {"columns": [], "rows": [], "row_count": 0, "stats": []}
        )
    if len(header) > MAX_CSV_COLUMNS:
        raise ValueError(f"the CSV has {len(header)} columns; at most {MAX_CSV_COLUMNS} are supported")
    columns: list[list[str]] = [[] for _ in header]
    first: list[list[str]] = []
    count = 0
    for row in rows:
        if count < max_rows:
            first.append(row)
        count += 1
        for i, column in enumerate(columns):  # a short row is padded with empty values
            column.append(row[i] if i < len(row) else "")
    stats = [column_stats(name, columns[i] if count else []) for i, name in enumerate(header)]
    table = {
        "columns": header,
        "rows": [dict(zip(header, r, strict=False)) for r in first],
        "row_count": count,
        "stats": stats,
    }
    delimiter = getattr(dialect, "delimiter", ",")
    details = {"rows": count, "columns": header, "delimiter": delimiter}
    return Document(text, "csv", details, table)


def describe_table(table: dict[str, Any]) -> str:
    """A plain-language summary of a CSV table's statistics."""
    lines = [f"The table has {table['row_count']} rows and {len(table['columns'])} columns."]
    for stat in table["stats"]:
        if stat["type"] == "number":
            lines.append(
                f"- {stat['name']} (number): min {stat['min']:g}, max {stat['max']:g}, mean {stat['mean']:g}, "
                f"median {stat['median']:g}; {stat['missing']} missing."
            )
        else:
            top = ", ".join(f"{t['value']} ({t['count']})" for t in stat["top"][:3])
            lines.append(
                f"- {stat['name']} (text): {stat['unique']} distinct values; most common: {top}; {stat['missing']} missing."
            )
    return "\n".join(lines)
