"""A module inside the allowed modules that imports callables defined elsewhere, as real modules do.

None of these may become a tool by naming this module: they are not code of the allowed packages.
"""

from __future__ import annotations

from pathlib import Path  # noqa: F401  (re-exported on purpose: a foreign class)
from shutil import rmtree  # noqa: F401  (a foreign function that must never be reachable)

from tests.echo_tools.fixture_tools.basic import add  # noqa: F401  (defined inside the allowed modules)

REACHED: list[str] = []


def own(text: str) -> str:
    """A function defined here, which may be a tool."""
    return text.upper()
