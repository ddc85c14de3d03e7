"""Where the shipped tools live: the `AgentTools` package installed beside `echo_tools`.

Found from this package's own location, never from the current folder, so discovery of the shipped tools
works from any folder. A host with a package of the same name (EchoAI has its own `AgentTools`, first on
sys.path when its gateway runs) would make the shipped manifests run the host's code: when the host's
package is not imported yet, `check_builtin_importable` binds the name `AgentTools` to the shipped folder
(`claim_builtin_package`), so nothing in the host needs renaming; when it is already imported, it refuses,
naming both.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path

from echo_tools.errors import ToolConfigError

PACKAGE = "AgentTools"
logger = logging.getLogger("echo_tools.builtin_tools")


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


def claim_builtin_package() -> bool:
    """Bind `import AgentTools` in this process to the shipped folder, whatever sys.path holds, unless a
    package of that name is already imported. Returns True when `AgentTools` is the shipped package."""
    ours = builtin_tools_dir()
    if PACKAGE in sys.modules:
        return importable_location() == ours
    spec = importlib.util.spec_from_file_location(
        PACKAGE, ours / "__init__.py", submodule_search_locations=[str(ours)]
    )
    if spec is None or spec.loader is None:  # pragma: no cover - the shipped folder has an __init__.py
        return False
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    spec.loader.exec_module(module)
    return True


def builtin_claimed() -> bool:
    """True when `AgentTools` is imported in this process and is the shipped package."""
    return PACKAGE in sys.modules and importable_location() == builtin_tools_dir()


def check_builtin_importable() -> None:
    """Make sure `import AgentTools` loads the shipped tools before they are discovered: another package
    of that name found first on sys.path (EchoAI's) is passed over (`claim_builtin_package`).

    Raises:
        ToolConfigError: another `AgentTools` is already imported in this process (both paths named, and
            what to do).
    """
    ours = builtin_tools_dir()
    found = importable_location()
    if found == ours:
        return
    if claim_builtin_package():
        if found is not None:
            logger.info("'import %s' loads the shipped tools in %s, not %s", PACKAGE, ours, found)
        return
    other = found if found is not None else Path(str(sys.modules.get(PACKAGE)))
    raise ToolConfigError(
        f"'import {PACKAGE}' already loaded {str(other)!r}, not echo-tools' shipped tools in {str(ours)!r}: "
        "their manifests would run that package's code. Discover the shipped tools before the other "
        f"{PACKAGE!r} package is imported, rename or remove it (in EchoAI: echoAI/AgentTools, whose tools "
        f"echo-tools replaces), or put {str(ours.parent)!r} before {str(other.parent)!r} on sys.path",
        field="discovery_dirs",
    )
