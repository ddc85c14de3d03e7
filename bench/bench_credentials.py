"""The per-call cost of a credential: one `api` tool called through the executor against a real HTTP
service on 127.0.0.1 (aiohttp, `tests/echo_tools/_thirdparty_support.py`), with no credential (the same
`Authorization` header as a fixed header), a bearer credential (decrypted once, then cached), and an
OAuth2 client-credentials credential whose token is cached (fetched once in the whole run). The cases
take turns; each keeps its best round's median. Ratios against the call without a credential.

Run: .venv/bin/python bench/bench_credentials.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import warnings
from pathlib import Path

warnings.simplefilter("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import ameasure, report  # noqa: E402

from echo_tools import EgressPolicy, ToolExecutor, ToolRegistry  # noqa: E402
from echo_tools.credentials import SECRET_KEY_ENV, new_key  # noqa: E402
from echo_tools.openapi import import_openapi  # noqa: E402
from tests.echo_tools._thirdparty_support import (  # noqa: E402
    BEARER,
    CREDENTIALS,
    ShopService,
    oauth_credential,
    shop_spec,
)

N = int(os.environ.get("BENCH_N", "2000"))
ROUNDS = 5


async def call_rows() -> list[list]:
    os.environ[SECRET_KEY_ENV] = new_key()
    shop = ShopService().start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            registry = ToolRegistry(storage_dir=folder, egress=EgressPolicy.local())
            registry.credentials.set("shop-oauth", oauth_credential(shop.base))
            registry.credentials.set("shop-bearer", CREDENTIALS["shop-bearer"])
            spec = shop_spec(shop.base)
            # the same endpoint three times: /reports accepts the bearer token and the OAuth2 tokens
            shop.tokens.add(BEARER)
            for provider, credential in (("plain", None), ("bearer", "shop-bearer"), ("oauth", "shop-oauth")):
                import_openapi(
                    registry, spec, provider=provider, credential=credential, operations=["listReports"]
                )
            executor = ToolExecutor(registry, egress=EgressPolicy.local())
            plain = registry.require("plain_list_reports")
            # without a credential the service refuses: the baseline sends the same header as a fixed one
            plain.execution_config["headers"] = {"Authorization": f"Bearer {BEARER}"}
            registry.register(plain)
            timings: dict[str, float] = {}
            calls = {}
            for provider in ("plain", "bearer", "oauth"):
                ref = f"{provider}_list_reports"
                result = await executor.invoke(ref, {})
                assert result.success, result.error

                async def call(ref: str = ref) -> None:
                    await executor.invoke(ref, {})

                calls[provider] = call
            store = registry.credentials
            for name in ("shop-bearer", "shop-oauth"):

                async def apply(name: str = name) -> None:
                    await store.apply(name, f"{shop.base}/reports")

                calls[f"apply {name}"] = apply
            # the machine is shared: the cases take turns, and each keeps its best round's median
            for _ in range(ROUNDS):
                for case, fn in calls.items():
                    n = N // ROUNDS * (10 if case.startswith("apply") else 1)
                    median = await ameasure(fn, n)
                    timings[case] = min(timings.get(case, median), median)
            await executor.aclose()
            assert shop.token_fetches == 1
    finally:
        shop.stop()
    base = timings["plain"]
    bearer, oauth = timings["apply shop-bearer"], timings["apply shop-oauth"]
    return [
        ["api call, fixed header (no credential)", base, "1.00x"],
        ["api call, bearer credential", timings["bearer"], f"{timings['bearer'] / base:.2f}x"],
        ["api call, oauth2 (token cached)", timings["oauth"], f"{timings['oauth'] / base:.2f}x"],
        # what the credential adds to a call, against the call without one (end-to-end ratios above
        # move more with the machine's load than with the credential)
        ["CredentialStore.apply alone, bearer", bearer, f"{(base + bearer) / base:.3f}x"],
        ["CredentialStore.apply alone, oauth2 (token cached)", oauth, f"{(base + oauth) / base:.3f}x"],
    ]


def main() -> None:
    title = f"credential cost per call (best of {ROUNDS} rounds' medians, us)"
    report(asyncio.run(call_rows()), title, ["case", "us", "ratio"])


if __name__ == "__main__":
    main()
