"""The catalogue at scale: load a folder of 10,000 tools, resolve names, register into it.

Baselines measured in the same run: EchoAI's load (glob, json.load, one model per file) and its name
lookup (`get_by_name`: a case-insensitive linear scan over every tool, first match wins).
Run: .venv/bin/python bench/bench_registry.py
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import measure, report  # noqa: E402

from echo_tools.models import ToolDef  # noqa: E402
from echo_tools.registry import ToolRegistry  # noqa: E402
from echo_tools.storage import ToolStorage  # noqa: E402

TOOLS = 10_000
LOADS = 7
TEMPLATE = {
    "description": "Performs web searches. Returns relevant web results with titles, URLs, and snippets",
    "tool_type": "local",
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Search query string"},
            "max_results": {"type": "integer", "default": 10, "minimum": 1, "maximum": 50},
            "safe_search": {"type": "boolean", "default": True},
        },
        "required": ["query"],
    },
    "output_schema": {"type": "object", "properties": {"results": {"type": "array"}}},
    "execution_config": {
        "module": "AgentTools.web_search.service",
        "class": "WebSearchService",
        "method": "search",
    },
    "version": "1.0",
    "tags": ["search", "web"],
    "status": "active",
    "metadata": {"author": "bench"},
    "_saved_at": "2026-01-28T08:11:06.331848",
}


def build_folder(folder: Path) -> list[dict[str, str]]:
    """10,000 EchoAI-shaped tool files (written directly: building is not what is measured) + the index."""
    names = []
    for i in range(TOOLS):
        tool_id, name = f"tool_search_{i:05d}", f"Search Engine {i:05d}"
        (folder / f"{tool_id}.json").write_text(
            json.dumps({"tool_id": tool_id, "name": name, **TEMPLATE}, indent=2)
        )
        names.append({"tool_id": tool_id, "name": name})
    ToolStorage(folder).rebuild_index()
    return names


def echoai_load(folder: Path) -> dict[str, ToolDef]:
    """EchoAI's ToolStorage.load_all + registry cache, with our model standing in for theirs."""
    cache = {}
    for path in folder.glob("*.json"):
        if path.name == "tool_index.json":
            continue
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        data.pop("_saved_at", None)
        tool = ToolDef(**data)
        cache[tool.tool_id] = tool
    return cache


def echoai_get_by_name(cache: dict[str, ToolDef], name: str) -> ToolDef | None:
    """EchoAI's registry.get_by_name: a linear case-insensitive scan."""
    for tool in cache.values():
        if tool.name.lower() == name.lower():
            return tool
    return None


def load_in_fresh_process(kind: str, folder: Path) -> tuple[float, float]:
    """Wall and CPU milliseconds of one load in a new interpreter (imports done before the clock starts).

    CPU time is reported too because the machine may be shared: it does not grow when others are busy.
    """
    code = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
        "from bench_registry import echoai_load\n"
        "from echo_tools.registry import ToolRegistry\n"
        "start, cpu = time.perf_counter(), time.process_time()\n"
        f"loaded = ToolRegistry(storage_dir={str(folder)!r}) if {kind!r} == 'ours' else echoai_load(__import__('pathlib').Path({str(folder)!r}))\n"
        "print((time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000)\n"
        "assert len(loaded) == 10_000\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall, cpu = done.stdout.split()
    return float(wall), float(cpu)


def timed(fn, runs: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
        del result  # freeing 10,000 models takes time too, but it is not loading
    return statistics.median(samples) * 1000


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-registry-") as tmp:
        folder = Path(tmp) / "tools"
        folder.mkdir()
        started = time.perf_counter()
        names = build_folder(folder)
        print(f"built {TOOLS} tools in {time.perf_counter() - started:.1f} s ({folder})")

        # Each load runs in a fresh process (as the CLI or a server start does), interleaved so that load
        # from other processes on the machine hits both alike; in one process each load would also pay
        # for collecting the previous one's garbage.
        ours, theirs = [], []
        for _ in range(LOADS):
            ours.append(load_in_fresh_process("ours", folder))
            theirs.append(load_in_fresh_process("echoai", folder))
        load_ms, echoai_ms = (statistics.median(w for w, _ in runs) for runs in (ours, theirs))
        load_cpu, echoai_cpu = (statistics.median(c for _, c in runs) for runs in (ours, theirs))
        registry = ToolRegistry(storage_dir=folder)
        assert len(registry) == TOOLS and registry.problems() == []
        cache = echoai_load(folder)

        rng = random.Random(7)
        picks = [rng.choice(names) for _ in range(1000)]
        refs = {
            "id (tool_search_01234)": [p["tool_id"] for p in picks],
            "exact name": [p["name"] for p in picks],
            "name, other case": [p["name"].upper() for p in picks],
            "slug (search_engine_01234)": [p["name"].lower().replace(" ", "_") for p in picks],
            "tool_<slug> of a renamed id": [f"Tool {p['name']}" for p in picks],
            "unknown name (miss)": [f"No Such Tool {i}" for i in range(1000)],
        }
        rows = []
        for label, values in refs.items():
            it = iter(values * 1000)
            us = measure(lambda it=it: registry.resolve(next(it)), n=20_000)
            rows.append([f"resolve() by {label}", us])
        it = iter([p["name"] for p in picks] * 100)
        baseline_us = measure(lambda: echoai_get_by_name(cache, next(it)), n=300, warmup=20)
        rows.append(["EchoAI get_by_name (linear scan), same names", baseline_us])
        exact_us = rows[1][1]

        counter = iter(range(10**6))
        new_ms = timed(
            lambda: registry.register(
                {
                    "name": f"Fresh Tool {next(counter)}",
                    **{k: v for k, v in TEMPLATE.items() if k != "_saved_at"},
                }
            ),
            5,
        )

        report(
            [
                [f"ToolRegistry(storage_dir=...) load, {TOOLS} tools (median of {LOADS})", load_ms, load_cpu],
                ["EchoAI-style load (json.load + model per file)", echoai_ms, echoai_cpu],
                ["register() one new tool into that folder (median of 5)", new_ms, "-"],
            ],
            title="\nLoading",
            headers=["", "wall ms", "cpu ms"],
        )
        report(rows, title="\nResolving (10,000 tools)", headers=["", "us/call"])
        print(
            f"\nload: {echoai_cpu / load_cpu:.1f}x less CPU than EchoAI-style; name lookup: "
            f"{baseline_us / exact_us:,.0f}x faster than EchoAI's linear scan"
        )


if __name__ == "__main__":
    main()
