"""AgentTools: the code_executor sandbox round trip and file_reader on a 10 MB CSV and a 100-page PDF.

Baselines measured in the same run: starting a bare interpreter (`python -c pass`, and `-I -S`, the flags
the sandbox uses), and reading the same CSV with only the csv module (no statistics).
Run: .venv/bin/python bench/bench_agent_tools.py
"""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import report  # noqa: E402

from AgentTools.file_reader.service import FileReaderService  # noqa: E402
from echo_tools.registry import ToolRegistry  # noqa: E402
from echo_tools.sandbox import interpreter, run_python  # noqa: E402
from tests.agent_tools._files import make_pdf  # noqa: E402

RUNS = 15


def _median_ms(fn, runs: int = RUNS) -> float:
    fn()  # warm-up: page cache, imports
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def bench_sandbox() -> list[list[object]]:
    python, _ = interpreter()
    bare = _median_ms(lambda: subprocess.run([python, "-c", "pass"], check=True))
    isolated = _median_ms(lambda: subprocess.run([python, "-I", "-S", "-c", "pass"], check=True))

    async def sandboxed() -> float:
        samples = []
        for _ in range(RUNS + 1):
            start = time.perf_counter()
            run = await run_python("print(sum(range(1000)))")
            samples.append(time.perf_counter() - start)
            assert run.stdout == "499500\n", run
        return statistics.median(samples[1:]) * 1000

    sandbox = asyncio.run(sandboxed())
    registry = ToolRegistry(discovery_dirs=[Path("AgentTools")])
    registry.discover_local_tools()
    from echo_tools.executor import ToolExecutor

    executor = ToolExecutor(registry)

    def through_executor() -> None:
        result = executor.invoke_sync("tool_code_executor", {"code": "print(sum(range(1000)))"})
        assert result.success and result.output["stdout"] == "499500\n", result

    executed = _median_ms(through_executor)
    executor.close()
    run = asyncio.run(run_python("pass"))
    isolation = (
        f"user: {run.isolation['user'].split(' (')[0]}; network: {run.isolation['network'].split(':')[0]}"
    )
    return [
        [f"bare `{Path(python).name} -c pass` process start", bare, 1.0],
        ["`-I -S -c pass` (the sandbox's flags)", isolated, isolated / bare],
        [f"sandbox run_python round trip ({isolation})", sandbox, sandbox / bare],
        ["code_executor through ToolExecutor.invoke_sync", executed, executed / bare],
    ]


def _csv_bytes(target_mb: int = 10) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "region", "product", "units", "price", "note"])
    regions = ["north", "south", "east", "west"]
    i = 0
    while out.tell() < target_mb * 1024 * 1024:
        writer.writerow(
            [i, regions[i % 4], f"product-{i % 97}", i % 50, round(1 + (i % 1000) / 7, 2), f"order {i} ok"]
        )
        i += 1
    return out.getvalue().encode()


def bench_file_reader() -> list[list[object]]:
    reader = FileReaderService()
    data = _csv_bytes()
    encoded = base64.b64encode(data).decode()
    rows: list[list[object]] = []
    baseline = _median_ms(lambda: sum(1 for _ in csv.reader(io.StringIO(data.decode()))), 5)
    rows.append([f"csv module only, {len(data) / 1e6:.1f} MB, no statistics (baseline)", baseline, 1.0])
    summary = _median_ms(lambda: reader.process(encoded, "sales.csv", "text/csv", mode="summarize"), 3)
    rows.append(["file_reader CSV summarize (stats for 6 columns, base64 in)", summary, summary / baseline])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sales.csv"
        path.write_bytes(data)
        import os

        os.environ["ECHO_TOOLS_FILE_ROOTS"] = folder
        by_path = _median_ms(lambda: reader.process(path=str(path), mode="extract", max_rows=20), 3)
        rows.append(["file_reader CSV extract from a local path", by_path, by_path / baseline])
        pages = [[f"Page {p + 1} of the annual report.", f"Section {p % 7} discusses solar, wind and storage costs."]
                 + [f"Line {n}: revenue in region {n % 4} grew by {n % 9} percent." for n in range(30)] for p in range(100)]  # fmt: skip
        pdf = make_pdf(pages)
        pdf_path = Path(folder) / "report.pdf"
        pdf_path.write_bytes(pdf)
        pdf_b64 = base64.b64encode(pdf).decode()
        extract = _median_ms(lambda: reader.process(pdf_b64, "report.pdf", "application/pdf"), 3)
        out = reader.process(pdf_b64, "report.pdf", "application/pdf")
        assert out["metadata"]["pages"] == 100, out["metadata"]
        query = _median_ms(
            lambda: reader.process(
                pdf_b64, "report.pdf", "application/pdf", mode="query", query="storage costs"
            ),
            3,
        )
        rows.append([f"file_reader PDF extract, 100 pages ({len(pdf) / 1e3:.0f} kB)", extract, None])
        rows.append(["file_reader PDF query (BM25 over 1000-char chunks)", query, query / extract])
    return rows


def main() -> None:
    report(
        bench_sandbox(),
        title="code_executor (median ms; ratio to a bare interpreter start)",
        headers=["case", "ms", "ratio"],
    )
    print()
    rows = bench_file_reader()
    report(
        [[c, ms, "-" if r is None else r] for c, ms, r in rows],
        title="file_reader (median ms; ratio to the baseline above it)",
        headers=["case", "ms", "ratio"],
    )


if __name__ == "__main__":
    main()
