"""The Template node: its `template` rendered with the run's state, in jinja2's sandbox, no model call.

The template sees the workflow's state variables by name, `previous` (the previous node's output, parsed
when it is JSON) and `input` (the user's request). It cannot reach anything else: attributes starting
with `_`, `{% include %}` / `{% import %}` / `{% extends %}`, and the generator globals (`range`,
`lipsum`, ...) are refused when the workflow compiles, and the sandbox refuses at render time what slips
past (a template that asks for code is a `SecurityError`). Repetition (`'x' * n`, `n ** m`) and the
rendered text are bounded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from workflow_bridge.flow_config import NodeConfigError, node_label, result_value

ENGINES = frozenset({"jinja2", "jinja", ""})
MAX_OUTPUT_CHARS = 1_000_000
MAX_POWER = 64
HIDDEN_KEYS = frozenset({"messages", "tool_events"})
OWN_VARIABLES = ("previous", "input")


def _environment() -> Any:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    class BoundedSandbox(ImmutableSandboxedEnvironment):
        """The sandbox, with `*` and `**` bounded (`'x' * 10**9` would fill the memory)."""

        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**" and isinstance(right, (int, float)) and abs(right) > MAX_POWER:
                raise SecurityError(f"the exponent {right!r} is above {MAX_POWER}")
            if operator == "*":
                for seq, times in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(times, int):
                        if len(seq) * times > MAX_OUTPUT_CHARS:
                            raise SecurityError(
                                f"repeating a value {times!r} times passes {MAX_OUTPUT_CHARS}"
                            )
            return super().call_binop(context, operator, left, right)

    env = BoundedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    for name in ("range", "lipsum", "cycler", "joiner", "namespace", "dict"):
        env.globals.pop(name, None)
    return env


_ENV: Any = None


def environment() -> Any:
    """The one sandboxed environment every Template node renders in."""
    global _ENV
    if _ENV is None:
        _ENV = _environment()
    return _ENV


def check_template(agent: Mapping[str, Any], known: Iterable[str]) -> tuple[Any, str]:
    """The compiled template of a Template node and its text, checked against the variables it may read.

    Raises:
        NodeConfigError: an engine other than jinja2, a syntax error, a variable that is not one the run
            has, or a construct that reaches outside the template (attributes starting with `_`,
            include/import/extends, generator globals).
    """
    from jinja2 import TemplateSyntaxError, meta
    from jinja2 import nodes as jnodes

    block = (agent.get("metadata") or {}).get("template_config") or {}
    label = node_label(agent)
    node_id = str(agent.get("agent_id"))

    def fail(field: str, problem: str, unknown: tuple[str, ...] = ()) -> NodeConfigError:
        return NodeConfigError(f"{label}: {field}: {problem}", node_id, field, unknown)

    engine = str(block.get("engine") or "").strip().lower()
    if engine not in ENGINES:
        raise fail("config.engine", f"{block.get('engine')!r} is not supported; use 'jinja2'")
    text = block.get("template")
    if not isinstance(text, str) or not text.strip():
        raise fail("config.template", f"is {text!r}: write the text to render (e.g. 'Dear {{{{ name }}}}')")
    env = environment()
    try:
        tree = env.parse(text)
    except TemplateSyntaxError as exc:
        raise fail("config.template", f"line {exc.lineno}: {exc.message}") from None
    for found in tree.find_all((jnodes.Extends, jnodes.Include, jnodes.Import, jnodes.FromImport)):
        raise fail(
            "config.template",
            f"{type(found).__name__.lower()} is not allowed: a template renders the run's variables only",
        )
    reached = []
    for attr in tree.find_all((jnodes.Getattr, jnodes.Getitem)):
        name = attr.attr if isinstance(attr, jnodes.Getattr) else getattr(attr.arg, "value", None)
        if isinstance(name, str) and name.startswith("_") and name not in reached:
            reached.append(name)
    if reached:
        raise fail(
            "config.template",
            f"{', '.join(repr(r) for r in sorted(reached))} reach(es) into Python objects (it would run code); "
            "read the variables' values only",
        )
    allowed = {k for k in known if not k.startswith("_") and k not in HIDDEN_KEYS} | set(OWN_VARIABLES)
    unknown = sorted(meta.find_undeclared_variables(tree) - allowed)
    if unknown:
        shown = ", ".join(sorted(allowed)[:30])
        raise fail(
            "config.template",
            f"reads {', '.join(repr(u) for u in unknown)}, which the run does not have; it can read: {shown} "
            "(declare a variable on the Start node or as an earlier node's output variable)",
            tuple(unknown),
        )
    return env.from_string(text), text


def template_scope(state: Mapping[str, Any]) -> dict[str, Any]:
    """What a template sees: the state's variables, `previous` and `input`."""
    from workflow_bridge.crewai_adapter import original_request

    scope = {k: v for k, v in state.items() if not k.startswith("_") and k not in HIDDEN_KEYS}
    scope["previous"] = result_value(state.get("crew_result"))
    scope["input"] = original_request(state)
    return scope


def render_bounded(template: Any, scope: Mapping[str, Any]) -> str:
    """The rendered text, stopped once it passes `MAX_OUTPUT_CHARS`."""
    from jinja2.sandbox import SecurityError

    parts: list[str] = []
    size = 0
    for chunk in template.generate(scope):
        size += len(chunk)
        if size > MAX_OUTPUT_CHARS:
            raise SecurityError(f"the rendered text passes {MAX_OUTPUT_CHARS} characters")
        parts.append(chunk)
    return "".join(parts)


def template_node(
    agent: Mapping[str, Any], node_id: str, known: Iterable[str]
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A Template node: renders without a model; the text becomes `crew_result` and its output keys. A
    render that fails (a variable with no value yet, a refused construct) is a failed message naming the
    node, and `crew_result` stays as it was."""
    from jinja2 import TemplateError

    from workflow_bridge.crewai_adapter import original_request
    from workflow_bridge.nodes import _message

    template, _ = check_template(agent, known)
    output_keys = [k for k in agent.get("output_schema") or [] if isinstance(k, str)]
    label = node_label(agent)

    def render(state: dict[str, Any]) -> dict[str, Any]:
        try:
            text = render_bounded(template, template_scope(state))
        except TemplateError as exc:  # includes the sandbox's SecurityError and StrictUndefined's errors
            error = f"{label}: the template did not render: {exc}"
            return {"messages": [_message(agent, status="failed", error=error, error_type="template")]}
        delta: dict[str, Any] = {k: text for k in output_keys}
        delta["crew_result"] = text
        delta["original_user_input"] = original_request(state)
        delta["messages"] = [_message(agent, status="completed", output_preview=text[:500])]
        return delta

    return render
