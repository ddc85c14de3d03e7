"""How the CLI draws a skill's or a plan's steps: `echo-tools show ID --steps` and `echo-tools plan`.

One line per step, in the order they can start: the stage (steps of one stage run at once), the step id,
the tool it calls, what it waits for, then its fallback chain, its `when` and its references.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.cli.output import short

if TYPE_CHECKING:
    from echo_tools.registry import ToolRegistry

__all__ = ["cmd_plan", "render_steps", "stages"]


def stages(steps: list[Mapping[str, Any]]) -> dict[str, int]:
    """Step id -> stage (1 + the longest chain of dependencies before it); steps of one stage run at once.

    A step whose dependencies cannot be placed (unknown ids, a cycle: registration refuses both) gets 0.
    """
    after = {str(s.get("id")): [str(d) for d in s.get("depends_on") or []] for s in steps}
    placed: dict[str, int] = {}
    for _ in range(len(after)):
        for step, deps in after.items():
            if step not in placed and all(d in placed for d in deps):
                placed[step] = 1 + max((placed[d] for d in deps), default=0)
    return {step: placed.get(step, 0) for step in after}


def render_steps(
    title: str, config: Mapping[str, Any], tool_id_of: Callable[[str], str | None] | None = None
) -> str:
    """The drawing of `config`'s steps (a skill's `execution_config`, or a plan's) under `title`.

    Args:
        title: the first line (`stats_skill  Sum and mean  (skill)`).
        config: `{"steps": [...], "output": ...}`.
        tool_id_of: the registered id of a tool ref, shown when it differs from the ref.
    """
    steps = [s for s in config.get("steps") or [] if isinstance(s, Mapping)]
    stage_of = stages(steps)
    ordered = sorted(steps, key=lambda s: stage_of[str(s.get("id"))])
    width = max((len(str(s.get("id"))) for s in steps), default=0)
    count = len({n for n in stage_of.values()})
    lines = [f"{title}: {len(steps)} step{'s' * (len(steps) != 1)} in {count} stage{'s' * (count != 1)}"]
    for index, step in enumerate(ordered):
        last = index == len(ordered) - 1
        step_id = str(step.get("id"))
        line = f"{'└─' if last else '├─'} [{stage_of[step_id]}] {step_id.ljust(width)}  {_ref(step.get('tool'), tool_id_of)}"
        if step.get("depends_on"):
            line += f"  after {', '.join(str(d) for d in step['depends_on'])}"
        lines.append(line)
        bar = "   " if last else "│  "
        if step.get("fallback"):
            chain = " → ".join(_ref(f, tool_id_of) for f in step["fallback"])
            lines.append(f"{bar}   fallback → {chain}")
        if step.get("when"):
            lines.append(f"{bar}   when {step['when']}")
        if step.get("input"):
            lines.append(f"{bar}   input {short(step['input'], 100)}")
    if config.get("output") is not None:
        lines.append(f"output {short(config['output'], 110)}")
    return "\n".join(lines)


def _ref(ref: Any, tool_id_of: Callable[[str], str | None] | None) -> str:
    text = str(ref)
    found = tool_id_of(text) if tool_id_of is not None else None
    return f"{text} ({found})" if found and found != text else text


def cmd_plan(args: argparse.Namespace) -> int:
    """`echo-tools plan CAPABILITY... [--inputs JSON] [--json]`: the planner's steps, drawn (or as JSON)."""
    from echo_tools.cli.catalogue import open_registry
    from echo_tools.cli.common import CliError, print_json
    from echo_tools.planning import plan

    inputs: Any = {}
    if args.inputs:
        try:
            inputs = json.loads(args.inputs)
        except json.JSONDecodeError as exc:
            raise CliError(f"--inputs is not JSON: {exc.msg} at position {exc.pos}") from None
        if not isinstance(inputs, dict):
            raise CliError(f"--inputs must be a JSON object, got {type(inputs).__name__}")
    registry = open_registry(args)
    config = plan(registry, list(args.capabilities), inputs).execution_config()
    if args.json:
        print_json(config)
    else:
        print(render_steps(f"plan for {', '.join(args.capabilities)}", config, _ids(registry)))
    return 0


def _ids(registry: ToolRegistry) -> Callable[[str], str | None]:
    def tool_id_of(ref: str) -> str | None:
        tool = registry.resolve(ref)
        return tool.tool_id if tool is not None else None

    return tool_id_of


def show_steps(registry: ToolRegistry, tool: Any) -> str | None:
    """The drawing of a skill's steps (None for a tool without steps)."""
    if not isinstance(tool.execution_config.get("steps"), list):
        return None
    title = f"{tool.tool_id}  {tool.name}  ({tool.tool_type.value})"
    return render_steps(title, tool.execution_config, _ids(registry))
