"""Run in a subprocess by test_bounded_body: fetch a compressed body the way the server would, and print
the outcome and how much the peak RSS grew, so the test measures one call and not the test process."""

from __future__ import annotations

import asyncio
import json
import resource
import sys


def _peak_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def _api(url: str) -> dict[str, object]:
    from echo_tools.egress import EgressPolicy
    from echo_tools.executor import ToolExecutor
    from echo_tools.registry import ToolRegistry

    registry = ToolRegistry(storage_dir=None, egress=EgressPolicy(allow_loopback=True))
    registry.register(
        {
            "name": "Bomb",
            "tool_type": "api",
            "input_schema": {"type": "object", "properties": {}},
            "execution_config": {"url": url, "method": "GET"},
        }
    )
    executor = ToolExecutor(registry, egress=EgressPolicy(allow_loopback=True, max_response_bytes=1_000_000))
    baseline = _peak_kb()
    result = await executor.invoke("Bomb", {})
    grown = _peak_kb() - baseline
    await executor.aclose()
    return {"success": result.success, "error": result.error, "grown_kb": grown}


async def _http_request(url: str) -> dict[str, object]:
    from AgentTools.http_request.service import HttpRequestService

    service = HttpRequestService()
    baseline = _peak_kb()
    out = await service.request(url, max_response_bytes=1_000_000)
    grown = _peak_kb() - baseline
    return {
        "truncated": out["truncated"],
        "note": out.get("note"),
        "size": len(out["body"]),
        "grown_kb": grown,
    }


def main() -> None:
    mode, url = sys.argv[1], sys.argv[2]
    import httpx  # noqa: F401  # imported before the baseline: its import is not the call's memory
    import httpx_aiohttp  # noqa: F401

    run = _api if mode == "api" else _http_request
    print(json.dumps(asyncio.run(run(url))))


if __name__ == "__main__":
    main()
