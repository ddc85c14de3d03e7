"""The small interface every tool type implements, and the registration-time config checks.

A backend runs one call of one tool: the executor has already resolved the tool, checked permissions and
validated the input, and it owns timeouts, retries and events. A backend raises `ToolError` subclasses
(foreign exceptions translated at its edge, chained with `from exc`) and returns the raw output, or a
`BackendOutput` when it has metadata to add (MCP content blocks, HTTP status).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from echo_tools.errors import ToolRegistrationError

if TYPE_CHECKING:
    from echo_tools.credentials.store import CredentialStore
    from echo_tools.egress import EgressPolicy
    from echo_tools.events import EventBus
    from echo_tools.in_process import InProcessTool
    from echo_tools.models import ToolContext, ToolDef, ToolResult

MODULE_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_DOTTED = MODULE_NAME_PATTERN
_PUBLIC_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")

# Modules no tool may name, whatever `allowed_modules` says: each hands out the process, the interpreter
# or the file system (EchoAI let `{"module": "os", "class": "abort"}` kill its server).
ALWAYS_DENIED_MODULES = frozenset(
    {
        "builtins", "code", "codeop", "ctypes", "importlib", "marshal", "multiprocessing", "nt", "os",
        "pickle", "posix", "pty", "runpy", "shutil", "signal", "socket", "subprocess", "sys",
    }
)  # fmt: skip


@dataclass
class BackendOutput:
    """A backend's output plus metadata for the `ToolResult`."""

    output: Any
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SyncCall:
    """A tool whose work is a plain sync function, offered by its backend as such (`ToolBackend.sync_call`).

    The executor then runs `fn(args)` itself: in the calling thread when `inline` (the tool opted in to
    `isolation: "inline"`), otherwise on a worker thread of `echo_tools.runtime`, which a sync caller can
    wait on directly instead of going through an event loop. `fn` raises `ToolError`s, the tool's own
    exceptions translated as the backend's `call` would.
    """

    fn: Callable[[dict[str, Any]], Any]
    inline: bool = False


class HostCatalogue(Protocol):
    """What a backend reads of the catalogue its executor resolves tools from (`echo_tools.Catalogue`)."""

    @property
    def allowed_modules(self) -> tuple[str, ...]: ...

    @property
    def credentials(self) -> CredentialStore: ...

    def in_process(self, tool: ToolDef) -> InProcessTool | None: ...


class BackendHost(Protocol):
    """What a backend uses of the executor that runs it (`echo_tools.ToolExecutor` is the one).

    Declared here, below the executor, so that backends (which the catalogue asks to check configs) never
    depend on the executor's module; a backend that needs more of it (the MCP backend registers the tools
    a server lists) declares its own `executor` type.
    """

    @property
    def registry(self) -> HostCatalogue: ...

    @property
    def events(self) -> EventBus: ...

    @property
    def egress(self) -> EgressPolicy: ...

    async def invoke(
        self, ref: str | ToolDef, input_data: dict[str, Any] | None = None, context: ToolContext | None = None
    ) -> ToolResult: ...


class ToolBackend(ABC):
    """Runs calls of one tool type. One instance per executor; it may pool connections.

    `nests`: the backend makes tool calls of its own (skills, workflows, agents); the executor then hands
    it a context whose `call_id` is the call's id, which its inner calls carry as `parent_call_id`.
    """

    nests: ClassVar[bool] = False

    def __init__(self, executor: BackendHost) -> None:
        self.executor = executor

    @classmethod  # noqa: B027 - most types take any config
    def check_config(
        cls, tool: ToolDef, allowed_modules: Sequence[str], egress: EgressPolicy | None = None
    ) -> None:
        """Raise `ToolRegistrationError` naming the field when `tool.execution_config` cannot run here.

        Called at registration and when stored files load: it imports nothing heavy and never the module
        a config names. The default accepts any config.

        Args:
            tool: the definition being registered (its `execution_config` is a dict).
            allowed_modules: packages that Python tools may name.
            egress: when given, literal hosts a config names must pass it.
        """

    @abstractmethod
    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        """Run one call and return its raw output (or a `BackendOutput`)."""

    def sync_call(self, tool: ToolDef) -> SyncCall | None:
        """`tool`'s work as a plain sync function, when it is one; None (the default): only `call` runs it.

        Asked once per tool version, in a worker thread (it may import the tool's module). Raises
        `ToolError` when the tool cannot be loaded (the executor then reports it through `call`).
        """
        return None

    async def aclose(self) -> None:  # noqa: B027 - most backends hold nothing to close
        """Release pooled sessions and clients."""

    def forget(self, tool_id: str | None = None) -> None:  # noqa: B027
        """Drop cached instances (of one tool, or all)."""


def config_error(tool: ToolDef, field: str, message: str) -> ToolRegistrationError:
    """The registration error of `tool` naming `field` (`message` says what is wrong with it)."""
    return ToolRegistrationError(f"Tool {tool.tool_id!r}: {message}", tool_id=tool.tool_id, field=field)


def forget_entries(entries: dict[str, Any], tool_id: str | None) -> None:
    """Drop `tool_id`'s entry from a per-tool cache, or every entry when None (what `forget` means)."""
    if tool_id is None:
        entries.clear()
    else:
        entries.pop(tool_id, None)


def module_allowed(module: str, allowed_modules: Sequence[str]) -> bool:
    """True when `module` is one of `allowed_modules` or inside one of them (and not always denied)."""
    if module.split(".", 1)[0] in ALWAYS_DENIED_MODULES:
        return False
    if any(part.startswith("__") for part in module.split(".")):
        return False  # `pkg.__main__`, `pkg.__init__`: never a tool's home
    return any(root and (module == root or module.startswith(root + ".")) for root in allowed_modules)


def check_python_target(tool: ToolDef, allowed_modules: Sequence[str], *, kinds: Sequence[str]) -> None:
    """Check a `{module, class, method}` / `{module, function}` / `{module, factory}` config.

    The module must be inside `allowed_modules`, and every attribute name must be a public identifier:
    this is what stops a registration from naming `os`, `builtins` or a dunder method. Nothing is imported.
    """
    config = tool.execution_config
    module = config.get("module")
    if not isinstance(module, str) or not _DOTTED.fullmatch(module):
        raise ToolRegistrationError(
            f"Tool {tool.tool_id!r}: execution_config.module must be a dotted module name, got {module!r}",
            tool_id=tool.tool_id,
            field="execution_config.module",
        )
    if not module_allowed(module, allowed_modules):
        if any(root and (module == root or module.startswith(root + ".")) for root in allowed_modules):
            why = "is never allowed (standard-library module with process or interpreter access, or a dunder)"
        else:
            why = (
                f"is outside the allowed modules {list(allowed_modules)!r}; "
                "only tools under those packages may be registered"
            )
        raise ToolRegistrationError(
            f"Tool {tool.tool_id!r}: execution_config.module {module!r} {why}",
            tool_id=tool.tool_id,
            field="execution_config.module",
        )
    present = [k for k in kinds if k in config]
    if not present:
        raise ToolRegistrationError(
            f"Tool {tool.tool_id!r}: execution_config needs one of {list(kinds)!r} besides 'module'",
            tool_id=tool.tool_id,
            field="execution_config",
        )
    for key in ("class", "method", "function", "factory"):
        if key in config:
            value = config[key]
            if not isinstance(value, str) or not _PUBLIC_NAME.fullmatch(value):
                raise ToolRegistrationError(
                    f"Tool {tool.tool_id!r}: execution_config.{key} must be a public Python name, got {value!r}",
                    tool_id=tool.tool_id,
                    field=f"execution_config.{key}",
                )
    if "method" in config and "class" not in config:
        raise ToolRegistrationError(
            f"Tool {tool.tool_id!r}: execution_config.method needs execution_config.class",
            tool_id=tool.tool_id,
            field="execution_config.class",
        )
    isolation = config.get("isolation", "thread")
    if isolation not in ("thread", "process", "inline"):
        raise ToolRegistrationError(
            f"Tool {tool.tool_id!r}: execution_config.isolation must be 'thread', 'process' or 'inline', got {isolation!r}",
            tool_id=tool.tool_id,
            field="execution_config.isolation",
        )
    limit = config.get("max_concurrency")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ToolRegistrationError(
            f"Tool {tool.tool_id!r}: execution_config.max_concurrency must be a positive integer, got {limit!r}",
            tool_id=tool.tool_id,
            field="execution_config.max_concurrency",
        )
