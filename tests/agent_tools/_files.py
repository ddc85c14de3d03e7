"""Test files made on the fly: a real multi-page PDF with text (written by hand), CSV and XML samples."""

from __future__ import annotations

import base64


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[list[str]]) -> bytes:
    """A valid PDF 1.4 with one page per entry, each line drawn in Helvetica (text extractable by pypdf)."""
    objects: list[bytes] = []
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, lines in enumerate(pages):
        body = "BT /F1 11 Tf 72 740 Td 14 TL " + " ".join(f"({_escape(line)}) '" for line in lines) + " ET"
        content = body.encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def b64(data: bytes | str) -> str:
    """Base64 text of `data` (str is UTF-8 encoded)."""
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def make_csv(rows: int) -> str:
    """A CSV with a numeric, a text and a partly missing column."""
    lines = ["id,city,temperature,note"]
    cities = ["Paris", "Oslo", "Lima", "Cairo"]
    for i in range(rows):
        note = "" if i % 10 == 0 else f"reading {i}"
        lines.append(f"{i},{cities[i % 4]},{(i % 40) - 5.5},{note}")
    return "\n".join(lines) + "\n"
