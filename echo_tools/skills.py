"""Skills: declared pipelines of tool calls (RFC-2004 `Skill`), checked at registration, run by steps.

A skill's `execution_config` is `{"steps": [{id, tool, input, depends_on?, fallback?, when?}], "output"}`.
Step inputs (and `output`, and `when`) may hold references: strings `$.input...` into the skill's own
input and `$.steps.<id>.output...` into a finished step's output. A step may reference only the steps it
depends on, so the order is explicit and the steps whose dependencies are done can run at once.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from echo_tools.errors import ToolExecutionError, ToolRegistrationError
from echo_tools.models import ToolContext, ToolType

if TYPE_CHECKING:
    from echo_tools.lookup import ToolLookup
    from echo_tools.models import ToolDef, ToolPermission

MAX_SKILL_STEPS = 64
MAX_CALL_DEPTH = 8


def check_nesting(tool_id: str, context: ToolContext) -> None:
    """Refuse a composite call (skill, workflow, agent) that reaches itself or goes deeper than the limit.

    Raises:
        ToolExecutionError: the chain of calls, named.
    """
    if tool_id in context.call_path:
        chain = " -> ".join([*context.call_path, tool_id])
        raise ToolExecutionError(f"Tool {tool_id!r} calls itself: {chain}", tool_id=tool_id)
    if context.depth >= MAX_CALL_DEPTH:
        raise ToolExecutionError(
            f"Tool {tool_id!r}: nested calls are {context.depth} deep, the limit is {MAX_CALL_DEPTH} "
            f"({' -> '.join(context.call_path)})",
            tool_id=tool_id,
        )


STEP_ID_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
# `$.input`, `$.input.a.b[0]`, `$.steps.fetch.output.items[2].name`
_REF = re.compile(r"^\$\.(input|steps\.([A-Za-z_][A-Za-z0-9_-]*)\.output)((?:\.[^.\[\]]+|\[\d+\])*)$")
_PART = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


class SkillStep(BaseModel):
    """One step: the tool it calls (a ref), its input (values may be references), what it waits for."""

    model_config = ConfigDict(extra="forbid")

    id: str
    tool: str
    input: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)
    fallback: list[str] = Field(default_factory=list)
    when: str | None = None

    @field_validator("id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        if not STEP_ID_PATTERN.fullmatch(value):
            raise ValueError(f"step id {value!r} must match {STEP_ID_PATTERN.pattern}")
        return value


class SkillConfig(BaseModel):
    """A skill's `execution_config`."""

    model_config = ConfigDict(extra="forbid")

    steps: list[SkillStep] = Field(min_length=1, max_length=MAX_SKILL_STEPS)
    output: Any = None


def is_reference(value: Any) -> bool:
    """True for a string that reads as a `$.` reference."""
    return isinstance(value, str) and value.startswith("$.")


def references(value: Any) -> list[str]:
    """Every reference string inside `value` (nested dicts and lists included)."""
    if is_reference(value):
        return [value]
    if isinstance(value, dict):
        return [r for v in value.values() for r in references(v)]
    if isinstance(value, list):
        return [r for v in value for r in references(v)]
    return []


def referenced_step(ref: str) -> str | None:
    """The step id a reference reads from (`None` for `$.input...`); `ValueError` when malformed."""
    match = _REF.fullmatch(ref)
    if match is None:
        raise ValueError(
            f"reference {ref!r} is malformed; expected $.input[.path] or $.steps.<id>.output[.path] "
            "(path parts: .name or [index])"
        )
    return match.group(2)


Template = Callable[[dict[str, Any]], Any]  # a value with its references compiled: scope -> the value


def resolve_reference(ref: str, scope: dict[str, Any]) -> Any:
    """The value `ref` points at in `scope` (`{"input": ..., "steps": {id: {"output": ...}}}`).

    Raises:
        LookupError: a part of the path is missing (the message names the reference and the part).
    """
    return _compile_reference(ref)(scope)


def compile_template(value: Any) -> Template:
    """`value` as a function of the scope that rebuilds it with every reference resolved (raising
    `LookupError` as `resolve_reference` does). Parsed once, so running a skill does no matching."""
    if is_reference(value):
        return _compile_reference(value)
    if isinstance(value, dict):
        # scalar constants come with one copy of the dict (keys in their order); the rest are computed
        computed = [
            (key, compile_template(item))
            for key, item in value.items()
            if is_reference(item) or isinstance(item, (dict, list))
        ]
        if len(computed) == len(value):
            return lambda scope: {key: item(scope) for key, item in computed}

        def build(scope: dict[str, Any]) -> dict[str, Any]:
            out = value.copy()
            for key, item in computed:
                out[key] = item(scope)
            return out

        return build
    if isinstance(value, list):
        parts = [compile_template(item) for item in value]
        return lambda scope: [part(scope) for part in parts]
    return lambda scope: value


def _compile_reference(ref: str) -> Template:
    match = _REF.fullmatch(ref)
    if match is None:

        def malformed(scope: dict[str, Any]) -> Any:
            raise LookupError(f"reference {ref!r} is malformed")

        return malformed
    step = match.group(2)
    path = [(name, int(index) if index else None) for name, index in _PART.findall(match.group(3))]

    def resolve(scope: dict[str, Any]) -> Any:
        value: Any = scope["input"] if step is None else scope["steps"][step]["output"]
        for name, index in path:
            try:
                value = value[name] if index is None else value[index]
            except (KeyError, IndexError, TypeError):
                part = f".{name}" if index is None else f"[{index}]"
                raise LookupError(f"reference {ref!r}: {part} is not there") from None
        return value

    return resolve


@dataclass(frozen=True)
class StepPlan:
    """One step, ready to run: its input and `when` compiled, the steps that wait for it, and the tools
    it tries in order (its tool, then its fallbacks)."""

    step: SkillStep
    input: Template
    when: Template | None
    dependents: list[str]
    refs: tuple[str, ...]


@dataclass(frozen=True)
class SkillPlan:
    """A parsed skill, ready to run many times: steps by id, the ones that start at once, the output."""

    steps: dict[str, StepPlan]
    roots: list[str]  # steps without dependencies
    output: Template | None  # None: the outputs of all steps by id
    waits: dict[str, tuple[str, ...]]  # the steps with dependencies -> their dependencies


def plan_skill(skill: SkillConfig) -> SkillPlan:
    """Compile a parsed skill's references and dependency graph once."""
    dependents: dict[str, list[str]] = {step.id: [] for step in skill.steps}
    for step in skill.steps:
        for dep in step.depends_on:
            dependents[dep].append(step.id)
    steps = {
        step.id: StepPlan(
            step,
            compile_template(step.input),
            None if step.when is None else _compile_reference(step.when),
            dependents[step.id],
            (step.tool, *step.fallback),
        )
        for step in skill.steps
    }
    roots = [step.id for step in skill.steps if not step.depends_on]
    waits = {step.id: tuple(step.depends_on) for step in skill.steps if step.depends_on}
    output = None if skill.output is None else compile_template(skill.output)
    return SkillPlan(steps, roots, output, waits)


def parse_skill(tool_id: str, config: Any) -> SkillConfig:
    """Check a skill's `execution_config` on its own (no registry needed) and return it parsed.

    Refused, naming the field and the value: an unknown key, duplicate step ids, `depends_on` naming a step
    that does not exist or forming a cycle, a reference that is malformed or reads a step that is not a
    (direct or indirect) dependency of the step that reads it.
    """

    def fail(field: str, message: str) -> ToolRegistrationError:
        return ToolRegistrationError(f"Tool {tool_id!r}: {message}", tool_id=tool_id, field=field)

    try:
        skill = SkillConfig.model_validate(config)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise fail(
            f"execution_config.{where}",
            f"execution_config.{where}: {first['msg']} (got {first.get('input')!r})",
        ) from exc
    ids = [s.id for s in skill.steps]
    seen: set[str] = set()
    for i, step in enumerate(skill.steps):
        if step.id in seen:
            raise fail(f"execution_config.steps[{i}].id", f"step id {step.id!r} is used twice")
        seen.add(step.id)
    for i, step in enumerate(skill.steps):
        for dep in step.depends_on:
            if dep not in ids:
                raise fail(
                    f"execution_config.steps[{i}].depends_on",
                    f"step {step.id!r} depends on {dep!r}, which is not a step (steps: {', '.join(ids)})",
                )
    order = _topological(skill, fail)
    ancestors: dict[str, set[str]] = {}
    by_id = {s.id: s for s in skill.steps}
    for step_id in order:
        step = by_id[step_id]
        ancestors[step_id] = set(step.depends_on).union(*(ancestors[d] for d in step.depends_on))
    for i, step in enumerate(skill.steps):
        refs = [*references(step.input), *([step.when] if step.when else [])]
        _check_refs(refs, ancestors[step.id], ids, f"execution_config.steps[{i}]", f"step {step.id!r}", fail)
    _check_refs(references(skill.output), set(ids), ids, "execution_config.output", "the output", fail)
    return skill


def _topological(skill: SkillConfig, fail: Callable[[str, str], ToolRegistrationError]) -> list[str]:
    deps = {s.id: list(s.depends_on) for s in skill.steps}
    order: list[str] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(step_id: str, path: list[str]) -> None:
        if state.get(step_id) == 2:
            return
        if state.get(step_id) == 1:
            cycle = " -> ".join([*path[path.index(step_id) :], step_id])
            raise fail("execution_config.steps", f"depends_on forms a cycle: {cycle}")
        state[step_id] = 1
        for dep in deps[step_id]:
            visit(dep, [*path, step_id])
        state[step_id] = 2
        order.append(step_id)

    for step in skill.steps:
        visit(step.id, [])
    return order


def _check_refs(
    refs: list[str],
    readable: set[str],
    ids: list[str],
    field: str,
    who: str,
    fail: Callable[[str, str], ToolRegistrationError],
) -> None:
    for ref in refs:
        try:
            step = referenced_step(ref)
        except ValueError as exc:
            raise fail(field, str(exc)) from None
        if step is None or step in readable:
            continue
        if step not in ids:
            raise fail(field, f"{who} reads {ref!r}, but there is no step {step!r} (steps: {', '.join(ids)})")
        raise fail(
            field,
            f"{who} reads {ref!r}, but step {step!r} is not among its dependencies (add it to depends_on)",
        )


def check_skill_tools(tool: ToolDef, registry: ToolLookup) -> list[ToolPermission]:
    """Check that every step's tool and fallback is registered and that the skill never reaches itself;
    return the union of the permissions its inner tools need (the skill's own included).

    Raises:
        ToolRegistrationError: a step names an unknown tool (the field, the value and a close name), or the
            skill reaches itself through nested skills (the chain in the message).
    """
    skill = parse_skill(tool.tool_id, tool.execution_config)
    needed = set(tool.permissions)
    names = sorted(t.tool_id for t in registry.list_all())
    for i, step in enumerate(skill.steps):
        for j, ref in enumerate([step.tool, *step.fallback]):
            field = (
                f"execution_config.steps[{i}].tool"
                if j == 0
                else f"execution_config.steps[{i}].fallback[{j - 1}]"
            )
            inner = tool if ref == tool.tool_id else registry.resolve(ref)
            if inner is None:
                close = difflib.get_close_matches(ref, names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ToolRegistrationError(
                    f"Tool {tool.tool_id!r}: step {step.id!r} names tool {ref!r}, which is not registered{hint}",
                    tool_id=tool.tool_id,
                    field=field,
                )
            chain = _reaches(inner, tool.tool_id, registry, [tool.tool_id])
            if chain:
                raise ToolRegistrationError(
                    f"Tool {tool.tool_id!r}: step {step.id!r} makes the skill call itself: {' -> '.join(chain)}",
                    tool_id=tool.tool_id,
                    field=field,
                )
            if inner is not tool:
                needed.update(inner.permissions)
    return sorted(needed, key=lambda p: p.value)


def _reaches(tool: ToolDef, target: str, registry: ToolLookup, path: list[str]) -> list[str] | None:
    """The chain from `path` through `tool` back to `target`, if composite steps lead there."""
    path = [*path, tool.tool_id]
    if tool.tool_id == target:
        return path
    if tool.tool_type != ToolType.SKILL or len(path) > MAX_CALL_DEPTH + 1:
        return None
    steps = tool.execution_config.get("steps") or []
    for step in steps if isinstance(steps, list) else []:
        refs = [step.get("tool"), *(step.get("fallback") or [])] if isinstance(step, dict) else []
        for ref in refs:
            inner = registry.resolve(ref) if isinstance(ref, str) else None
            if inner is not None and inner.tool_id not in path[1:]:
                chain = _reaches(inner, target, registry, path)
                if chain:
                    return chain
    return None
