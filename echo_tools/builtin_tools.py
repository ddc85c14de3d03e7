"""Where the shipped tools live: the `AgentTools` package installed beside `echo_tools`.

Found from this package's own location, never from the current folder, so discovery of the shipped tools
works from any folder. A host with a package of the same name (EchoAI has its own `AgentTools`) would
make the shipped manifests run the host's code; `check_builtin_importable` refuses that, naming both.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from echo_tools.errors import ToolConfigError

PACKAGE = "AgentTools"


def builtin_tools_dir() -> Path:
    """The folder of the installed `AgentTools` (one subfolder per tool, each with `tool_manifest.json`).

    It sits beside the `echo_tools` package in a clone, a wheel install and an editable install alike.
    """
    return Path(__file__).resolve().parent.parent / PACKAGE


def importable_location() -> Path | None:
    """The folder `import AgentTools` loads from in this process, or None when it cannot be imported."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):  # ValueError: a module in sys.modules without a spec
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).resolve()
    return Path(spec.origin).resolve().parent if spec.origin else None


def check_builtin_importable() -> None:
    """Refuse to discover the shipped tools when `import AgentTools` would load another package.

    Raises:
        ToolConfigError: the importable `AgentTools` is not `builtin_tools_dir()` (both paths named, and
            what to do), or no `AgentTools` can be imported at all.
    """
    ours = builtin_tools_dir()
    found = importable_location()
    if found == ours:
        return
    if found is None:
        raise ToolConfigError(
            f"The shipped tools in {str(ours)!r} cannot be imported as {PACKAGE!r}: their calls would fail; "
            f"put {str(ours.parent)!r} on sys.path (PYTHONPATH) or install echo-tools",
            field="discovery_dirs",
        )
    raise ToolConfigError(
        f"'import {PACKAGE}' loads {str(found)!r}, not echo-tools' shipped tools in {str(ours)!r}: "
        "their manifests would run that package's code. Rename or remove the other "
        f"{PACKAGE!r} package (in EchoAI: echoAI/AgentTools, whose tools echo-tools replaces), or put "
        f"{str(ours.parent)!r} before {str(found.parent)!r} on sys.path",
        field="discovery_dirs",
    )
