"""The data model of the tool catalogue: tool definitions, call context and call results.

`ToolDef` reads EchoAI's stored tool files and `tool_manifest.json` files unchanged (unknown keys such as
`_saved_at` are ignored, `tool_type` in any case) and the legacy `{name, description}` form.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

TOOL_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,127}$")
# control, format (bidi overrides such as U+202E) and line/paragraph separators (U+2028, U+2029)
_UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
DEFAULT_MAX_OUTPUT_CHARS = 20_000


class ToolType(StrEnum):
    """How a tool runs: which backend the executor hands it to."""

    LOCAL = "local"
    MCP = "mcp"
    API = "api"
    CREWAI = "crewai"
    LANGCHAIN = "langchain"
    SKILL = "skill"
    WORKFLOW = "workflow"
    AGENT = "agent"
    CODE = "code"


_TOOL_TYPES = frozenset(t.value for t in ToolType)


class ToolStatus(StrEnum):
    """Lifecycle state; only `active` tools are bound to agents, `disabled` ones refuse to run."""

    ACTIVE = "active"
    DEPRECATED = "deprecated"  # still runs; a canvas binding it warns, `get_tools_for_agent` leaves it out
    DISABLED = "disabled"  # every call is refused (`error_type` "disabled")


class ToolSource(StrEnum):
    """Where a definition came from; decides what it may do (DESIGN.md, "Trust")."""

    BUILTIN = "builtin"
    MCP = "mcp"
    OPENAPI = "openapi"
    PYTHON = "python"
    REMOTE = "remote"


class Determinism(StrEnum):
    """Whether the same input always gives the same output (RFC-2003 §6); decides result caching."""

    DETERMINISTIC = "deterministic"
    NONDETERMINISTIC = "nondeterministic"


class SideEffect(StrEnum):
    """What a call does to the world; decides whether a failed call may be retried."""

    PURE = "pure"  # changes nothing outside the call: retried, and cached when also deterministic
    IDEMPOTENT = "idempotent"  # repeating it changes nothing more than doing it once: retried
    EXTERNAL = "external"  # changes the world each time (sends, buys, writes): never retried


class ToolPermission(StrEnum):
    """A capability a tool needs and a caller may grant."""

    FS_READ = "fs:read"
    FS_WRITE = "fs:write"
    NET_OUTBOUND = "net:outbound"
    SHELL_EXECUTE = "shell:execute"
    ENV_READ = "env:read"
    MCP_CONNECT = "mcp:connect"


class Approval(StrEnum):
    """Whether a call of the tool waits for a person's approval before it runs (`echo_tools.governance`)."""

    NEVER = "never"
    ALWAYS = "always"
    EXTERNAL = "external"  # only when the tool's `side_effect` is `external`


class QuotaScope(StrEnum):
    """What one quota counts separately: per tool, per principal, per end user, or per run."""

    TOOL = "tool"
    PRINCIPAL = "principal"
    USER = "user"
    RUN = "run"


class Quota(BaseModel):
    """At most `limit` calls in any `per_s` seconds, counted per `scope` (`echo_tools.governance.quotas`).

    On a `ToolDef` it counts that tool's calls; given to the executor (`ToolExecutor(quotas=[...])`) it
    counts every call. Over quota, a call fails with `error_type="quota"` and `metadata["retry_after_s"]`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: int = Field(gt=0, le=1_000_000_000)
    per_s: float = Field(gt=0, le=86_400 * 366)
    scope: QuotaScope = QuotaScope.TOOL


class RetryPolicy(BaseModel):
    """Retries for `pure` and `idempotent` tools: attempts after the first, exponential backoff."""

    model_config = ConfigDict(extra="ignore")

    max_retries: int = Field(default=0, ge=0, le=10)
    backoff_ms: int = Field(default=100, ge=0, le=60_000)


def slugify(text: str) -> str:
    """`"Web Search"` -> `"web_search"`: ASCII, lower case, runs of other characters become `_`."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "_", ascii_text.lower()).strip("_")


def name_keys(name: str) -> frozenset[str]:
    """The keys a display name is looked up by: case-folded, slugged and the 64-character LLM form.

    Two tools whose keys overlap cannot both be registered ("Web Search" and "web-search" clash).
    """
    slug = slugify(name)
    return frozenset(k for k in (name.casefold(), slug, slug[:64]) if k)


def check_tool_id(tool_id: str) -> str:
    """Return `tool_id` when it is a safe id, else raise `ValueError` naming it."""
    if not isinstance(tool_id, str) or not TOOL_ID_PATTERN.fullmatch(tool_id):
        raise ValueError(
            f"tool_id {tool_id!r} is invalid: it must match {TOOL_ID_PATTERN.pattern} "
            "(lower-case letters, digits, '_', '.', '-'; at most 128 characters; no path separators)"
        )
    if ".." in tool_id:
        raise ValueError(f"tool_id {tool_id!r} is invalid: it must not contain '..'")
    return tool_id


class ToolDef(BaseModel):
    """One tool of the catalogue, in EchoAI's stored shape plus optional execution limits."""

    model_config = ConfigDict(extra="ignore", use_enum_values=False, populate_by_name=True)

    tool_id: str = ""
    name: str
    description: str = ""
    tool_type: ToolType = ToolType.LOCAL
    input_schema: dict[str, Any] = Field(default_factory=dict)
    output_schema: dict[str, Any] = Field(default_factory=dict)
    execution_config: dict[str, Any] = Field(default_factory=dict)
    version: str = "1.0"
    tags: list[str] = Field(default_factory=list)
    status: ToolStatus = ToolStatus.ACTIVE
    metadata: dict[str, Any] = Field(default_factory=dict)
    timeout_ms: int = Field(default=30_000, gt=0, le=3_600_000)
    side_effect: SideEffect = SideEffect.EXTERNAL
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    permissions: list[ToolPermission] = Field(default_factory=list)
    source: ToolSource = ToolSource.PYTHON
    # what a language model is shown of one result, at most; the rest is cut with a marker saying how much
    max_output_chars: int = Field(default=DEFAULT_MAX_OUTPUT_CHARS, gt=0, le=10_000_000)
    # what the tool can do, for the planner's capability matching (`["search", "fetch_content"]`)
    capabilities: list[str] = Field(default_factory=list)
    # tool ids that must run before this one (the dependency graph, `registry.graph()`)
    dependencies: list[str] = Field(default_factory=list)
    determinism: Determinism = Determinism.NONDETERMINISTIC
    # a deterministic, pure tool's results are reused for this many seconds; None: never cached
    cache_ttl_s: float | None = Field(default=None, ge=0, le=86_400 * 30)
    # a person approves each call before it runs (`echo_tools.governance.approvals`); a pending approval
    # expires after this many seconds
    approval: Approval = Approval.NEVER
    approval_ttl_s: float = Field(default=86_400.0, gt=0, le=86_400 * 365)
    # limits on how often the tool runs (`echo_tools.governance.quotas`)
    quotas: list[Quota] = Field(default_factory=list)
    # the principal that registered or imported it over HTTP (`echo_tools.gate`); None: the operator's
    owner: str | None = None
    # added in-process (`ToolRegistry.add`): held in memory only, never stored, never creatable over HTTP
    ephemeral: bool = Field(default=False, exclude=True)

    # compiled validators by kind: (schema object, validator); filled by echo_tools.schema.compiled
    _validators: dict[str, Any] = PrivateAttr(default_factory=dict)
    _digest: str | None = PrivateAttr(default=None)

    @field_validator("tool_id", mode="before")
    @classmethod
    def _tool_id_safe(cls, value: Any) -> Any:
        if value is None:
            return ""
        if value != "":
            check_tool_id(value)
        return value

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("name must not be empty")
        if len(value) > 200:
            raise ValueError(f"name must be at most 200 characters, got {len(value)}")
        bad = next((c for c in value if unicodedata.category(c) in _UNPRINTABLE_CATEGORIES), None)
        if bad is not None:
            # a name is shown to people and language models; a newline or a bidi override in it could forge
            # prompt text or disguise what is shown
            raise ValueError(
                f"name {value!r} must not contain control, format or line-separator characters "
                f"(found U+{ord(bad):04X})"
            )
        return value

    @field_validator("tool_type", mode="before")
    @classmethod
    def _tool_type_any_case(cls, value: Any) -> Any:
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered not in _TOOL_TYPES:
                allowed = ", ".join(t.value for t in ToolType)
                raise ValueError(f"tool_type {value!r} is unknown; expected one of: {allowed}")
            return lowered
        return value

    @field_validator("status", "side_effect", "source", "determinism", "approval", mode="before")
    @classmethod
    def _enum_any_case(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("capabilities", "dependencies", "quotas", mode="before")
    @classmethod
    def _names_list(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) else value

    @field_validator("retry", mode="before")
    @classmethod
    def _retry_none(cls, value: Any) -> Any:
        return {} if value is None else value

    @model_validator(mode="after")
    def _fill_and_check_id(self) -> ToolDef:
        if not self.tool_id:
            slug = slugify(self.name)
            if not slug:
                raise ValueError(f"cannot derive a tool_id from name {self.name!r}; give tool_id explicitly")
            self.tool_id = slug[:128] if slug.startswith("tool_") else f"tool_{slug}"[:128]
        check_tool_id(self.tool_id)
        return self

    @property
    def slug(self) -> str:
        """The slug of the display name (`"Web Search"` -> `"web_search"`)."""
        return slugify(self.name)

    @property
    def llm_name(self) -> str:
        """The name a language model sees: `^[a-z0-9_-]{1,64}$`, derived from the display name."""
        return (self.slug or self.tool_id.replace(".", "_"))[:64]

    @property
    def digest(self) -> str:
        """The SHA-256 of this definition as stored (every field): what a reviewer approved. A definition
        changed in any way has another digest; one object is digested once."""
        if self._digest is None:
            text = json.dumps(self.to_storage_dict(), sort_keys=True, separators=(",", ":"), default=str)
            self._digest = hashlib.sha256(text.encode()).hexdigest()
        return self._digest

    def lookup_keys(self) -> frozenset[str]:
        """Every key besides the id that `ToolRegistry.resolve` finds this tool by (see `name_keys`)."""
        slug = slugify(self.name)
        keys = {self.name.casefold(), (slug or self.tool_id.replace(".", "_"))[:64]}
        if slug:
            keys.add(slug)
        return frozenset(keys)

    def to_storage_dict(self) -> dict[str, Any]:
        """The JSON-ready dict that storage writes (EchoAI's field names, enums as values)."""
        return self.model_dump(mode="json")


class ToolContext(BaseModel):
    """Who is calling and under which limits; carried into every event of the call."""

    model_config = ConfigDict(extra="ignore")

    agent_id: str | None = None
    agent_name: str | None = None  # the agent's name on the canvas: says which node made the call
    workflow_id: str | None = None
    run_id: str | None = None
    node_id: str | None = None
    tool_call_id: str | None = None
    granted_permissions: list[ToolPermission] | None = None
    timeout_ms: int | None = Field(default=None, gt=0)
    trace_id: str | None = None
    # nested calls (a skill's steps, a sub-workflow's tools): the calling call's id, how deep, and the chain
    # of composite tools above this call, which is how a cycle is found at run time
    call_id: str | None = None
    parent_call_id: str | None = None
    depth: int = Field(default=0, ge=0)
    call_path: list[str] = Field(default_factory=list)
    # the gate (`echo_tools.gate`): the `BudgetMeter` shared by the whole request or run (copies of the
    # context share it), the principal's name and the end user it acts for
    budget: Any = Field(default=None, exclude=True, repr=False)
    principal: str | None = None
    user_id: str | None = None

    def ids(self) -> dict[str, str | None]:
        """The context ids as a dict (what events carry)."""
        return {
            "agent_id": self.agent_id,
            "agent_name": self.agent_name,
            "workflow_id": self.workflow_id,
            "run_id": self.run_id,
            "node_id": self.node_id,
            "tool_call_id": self.tool_call_id,
            "trace_id": self.trace_id,
        }


ERROR_TYPES = (
    "not_found",
    "disabled",
    "permission_denied",
    "validation",
    "execution",
    "timeout",
    "output_validation",
    "denied",
    "approval_required",
    "rejected",
    "quota",
    "budget",
)


class ToolResult(BaseModel):
    """The outcome of one call. Tool failures are results (`success=False`), not exceptions."""

    model_config = ConfigDict(extra="ignore")

    tool_id: str
    name: str
    success: bool = True
    output: Any = None
    error: str | None = None
    error_type: str | None = None
    # the input field an error names (`"values[2]"`), as data; None when the error names no field
    error_field: str | None = None
    duration_ms: float = 0.0
    attempts: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)

    def raise_for_error(self) -> ToolResult:
        """Raise the `ToolError` subclass matching `error_type` when the call failed; else return self."""
        if self.success:
            return self
        from echo_tools.errors import error_for_result

        raise error_for_result(self)
