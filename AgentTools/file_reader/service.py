"""The file_reader tool: read text, Markdown, JSON, CSV, XML and PDF files, then extract, summarize or query.

Keeps EchoAI's `FileReaderService.process` entry point and input fields (`content_base64`, `file_name`,
`mime_type`, `mode`, `query`, `chunk_size`, `chunk_overlap`, `stream`), adds a local `path` inside the
roots named by `ECHO_TOOLS_FILE_ROOTS`, and needs no model: the summary is extractive and queries are
answered by BM25 keyword retrieval over chunks. Sizes are checked before anything is decoded or read.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from AgentTools.file_reader import parsers
from AgentTools.file_reader.textops import bm25_rank, chunk_text, summarize

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_MAX_CHARS = 200_000

_BY_MIME: dict[str, str] = {
    "application/pdf": "pdf",
    "application/json": "json",
    "application/xml": "xml",
    "text/xml": "xml",
    "text/csv": "csv",
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "application/vnd.ms-excel": "excel",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "excel",
}
_BY_EXTENSION = {
    ".pdf": "pdf", ".json": "json", ".xml": "xml", ".csv": "csv", ".tsv": "csv", ".txt": "text", ".log": "text",
    ".md": "markdown", ".markdown": "markdown", ".xls": "excel", ".xlsx": "excel",
}  # fmt: skip
_PARSERS: dict[str, Callable[[bytes], parsers.Document]] = {
    "pdf": parsers.parse_pdf,
    "json": parsers.parse_json,
    "xml": parsers.parse_xml,
    "text": parsers.parse_text,
    "markdown": parsers.parse_markdown,
}


def max_bytes() -> int:
    """The size cap: `ECHO_FILE_READER_MAX_BYTES`, default 20 MB."""
    value = os.environ.get("ECHO_FILE_READER_MAX_BYTES", "")
    return int(value) if value.isdigit() else DEFAULT_MAX_BYTES


def allowed_roots() -> list[Path]:
    """Folders a local `path` may be in: `ECHO_TOOLS_FILE_ROOTS` (os.pathsep-separated); none by default."""
    raw = os.environ.get("ECHO_TOOLS_FILE_ROOTS", "")
    return [Path(p).resolve() for p in raw.split(os.pathsep) if p.strip()]


def read_local(path: str, limit: int) -> bytes:
    """The bytes of `path` when it resolves (symlinks followed) inside an allowed root and fits `limit`."""
    roots = allowed_roots()
    if not roots:
        raise ValueError(
            f"path {path!r} cannot be read: no local folders are allowed; set ECHO_TOOLS_FILE_ROOTS to the "
            "folders this tool may read, or send the file as content_base64"
        )
    resolved = Path(path).resolve()
    _check_inside(path, resolved, roots)
    if not resolved.is_file():
        raise ValueError(f"path {path!r} is not a readable file")
    fd = os.open(resolved, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        # the folder could have been swapped for a symlink since the check: check what was really opened
        opened = Path(f"/proc/self/fd/{fd}")
        if opened.exists():
            _check_inside(path, Path(os.readlink(opened)), roots)
        size = os.fstat(fd).st_size
        if size > limit:
            raise ValueError(f"path {path!r} is {size} bytes; at most {limit} bytes are read")
        return handle.read(limit + 1)[:limit]


def _check_inside(path: str, resolved: Path, roots: list[Path]) -> None:
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise ValueError(f"path {path!r} is outside the allowed folders {[str(r) for r in roots]!r}")


def decode_base64(content_base64: str, limit: int) -> bytes:
    """Decode `content_base64`, refusing it by its length before decoding when it exceeds `limit`."""
    approx = (len(content_base64) * 3) // 4
    if approx > limit + 3:
        raise ValueError(f"content_base64 holds about {approx} bytes; at most {limit} bytes are accepted")
    try:
        return base64.b64decode(content_base64, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"content_base64 is not valid base64: {exc}") from exc


def detect_format(mime_type: str | None, file_name: str | None) -> str:
    """The parser to use, from the MIME type, else the file name's extension."""
    if mime_type:
        found = _BY_MIME.get(mime_type.split(";")[0].strip().lower())
        if found:
            return found
    suffix = Path(file_name or "").suffix.lower()
    if suffix in _BY_EXTENSION:
        return _BY_EXTENSION[suffix]
    if mime_type and mime_type.startswith("text/"):
        return "text"
    raise ValueError(
        f"mime_type {mime_type!r} / file_name {file_name!r} is not a supported format; supported: PDF, JSON, "
        "XML, CSV, plain text and Markdown"
    )


class FileReaderService:
    """EchoAI's file reader entry point, working offline."""

    def process(
        self,
        content_base64: str | None = None,
        file_name: str | None = None,
        mime_type: str | None = None,
        mode: str = "extract",
        query: str | None = None,
        chunk_size: int = 1000,
        chunk_overlap: int = 200,
        stream: bool = False,
        path: str | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        top_k: int = 3,
        max_rows: int = 20,
        summary_sentences: int = 5,
        **_ignored: Any,
    ) -> dict[str, Any]:
        """Read the file and return `content` and `metadata` (plus `summary`, `chunks`, `matches`, `table`).

        Raises:
            ValueError: no or too much content, a path outside the allowed roots, an unsupported or
                malformed format, `mode="query"` without a query.
        """
        if mode not in ("extract", "summarize", "query"):
            raise ValueError(f"mode must be 'extract', 'summarize' or 'query', got {mode!r}")
        if mode == "query" and not (query and query.strip()):
            raise ValueError("query is required when mode is 'query'")
        limit = max_bytes()
        if content_base64:
            data = decode_base64(content_base64, limit)
        elif path:
            data = read_local(path, limit)
            file_name = file_name or Path(path).name
        else:
            raise ValueError(
                "give the file as content_base64 (with file_name and mime_type) or as a local path"
            )
        kind = detect_format(mime_type, file_name)
        if kind == "excel":
            raise ValueError(
                f"file {file_name!r} is an Excel workbook, which this tool does not read; export it as CSV"
            )
        document = parsers.parse_csv(data, max_rows) if kind == "csv" else _PARSERS[kind](data)
        metadata: dict[str, Any] = {
            "file_name": file_name or "",
            "mime_type": mime_type or "",
            "mode": mode,
            "size_bytes": len(data),
            "format": kind,
            **document.details,
        }
        out: dict[str, Any] = {"metadata": metadata}
        if document.table is not None:
            out["table"] = document.table
        if mode == "extract":
            out["content"] = document.text[:max_chars]
        elif mode == "summarize":
            if document.table is not None:
                out["summary"] = parsers.describe_table(document.table)
            else:
                out["summary"] = summarize(document.text, summary_sentences)
            out["content"] = out["summary"]
        else:
            chunks = chunk_text(document.text, chunk_size, chunk_overlap)
            ranked = bm25_rank(chunks, query or "", top_k)
            out["chunks"] = [chunks[i] for i, _ in ranked]
            out["matches"] = [{"chunk_index": i, "score": score, "text": chunks[i]} for i, score in ranked]
            out["content"] = "\n\n---\n\n".join(out["chunks"]) if ranked else ""
            metadata["chunk_count"] = len(chunks)
            if not ranked:
                metadata["note"] = f"no chunk mentions any word of the query {query!r}"
        metadata["truncated"] = len(out["content"]) < len(document.text) if mode == "extract" else False
        return out
