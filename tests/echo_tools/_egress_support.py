"""A real `echo-tools serve` (loopback egress allowed, a credential key set) and the measure of an attack on
it: its resident memory during the attack, against its idle size before it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
from cryptography.fernet import Fernet

from tests.echo_tools._served import echo_tools_serve, peak_rss_kb, rss_kb

BOUND_KB = 64 * 1024  # the bound: within 64 MiB of the idle size


@contextlib.contextmanager
def attack_server(storage: Path) -> Iterator[tuple[str, int]]:
    """`(base_url, pid)` of an `echo-tools serve --allow-loopback-egress` with a credential key."""
    os.environ["ECHO_TOOLS_SECRET_KEY"] = Fernet.generate_key().decode()
    try:
        with echo_tools_serve(storage, "--allow-loopback-egress") as url_and_pid:
            yield url_and_pid
    finally:
        os.environ.pop("ECHO_TOOLS_SECRET_KEY", None)


def attack(
    served: tuple[str, int], *requests: tuple[str, str, dict], warm_up: tuple[str, str, dict] | None = None
) -> list[httpx.Response]:
    """The answers to `requests`, asserting the server's peak memory stayed within `BOUND_KB` of idle."""
    url, pid = served
    with httpx.Client(base_url=url, timeout=120) as client:
        if warm_up is not None:  # the same route once without the bomb: its imports are not the attack's
            client.request(warm_up[0], warm_up[1], json=warm_up[2])
        idle = rss_kb(pid)
        answers = [client.request(method, path, json=body) for method, path, body in requests]
        grown = peak_rss_kb(pid) - idle
    assert grown < BOUND_KB, f"the server grew by {grown} KiB over its idle size (bound: {BOUND_KB} KiB)"
    return answers
