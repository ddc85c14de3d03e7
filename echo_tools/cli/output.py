"""How the CLI shows events: one line per tool or node event, plain or coloured with rich.

Used by `echo-tools events FILE` (a JSONL log) and by `echo-tools run` (events as they happen).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any

from echo_tools.api.shapes import event_dict as as_dict

TOKEN_COUNT_LOGGER = "crewai.llms.base_llm"
TOKEN_COUNT_MARKER = "approximate input token count"

_STYLES = {
    "tool.invoked": ("→", "cyan"),
    "tool.completed": ("✓", "green"),
    "tool.failed": ("✗", "red"),
    "tool.timeout": ("⏱", "red"),
    "tool.registered": ("+", "blue"),
    "tool.progress": ("…", "dim cyan"),
    "tool.log": ("i", "dim"),
    "tool.output.delta": ("…", "dim green"),
    "run.started": ("●", "bold"),
    "run.finished": ("●", "bold green"),
    "run.interrupted": ("‖", "bold yellow"),
    "node.started": ("▶", "bold magenta"),
    "node.finished": ("■", "magenta"),
    "node.completed": ("■", "magenta"),
    "node.failed": ("✗", "bold red"),
}


def short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def whole(value: Any) -> str:
    """An error message on one line, never shortened."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return " ".join(text.split())


def format_event_line(event: dict[str, Any]) -> str:
    """`12:00:01.123  tool.completed  tool_calculator  3.1 ms  run=r1  -> {...}` (plain text)."""
    stamp = str(event.get("timestamp", ""))
    clock = stamp[11:23] if len(stamp) >= 23 else stamp
    kind = str(event.get("type", "?"))
    subject = event.get("tool_id") or event.get("node_id") or event.get("node") or ""
    parts = [clock, kind.ljust(15), str(subject)]
    if event.get("duration_ms") is not None:
        parts.append(f"{float(event['duration_ms']):.1f} ms")
    if event.get("run_id"):
        parts.append(f"run={event['run_id']}")
    caller = event.get("agent_name") or event.get("agent_id")
    if caller and event.get("tool_id"):
        parts.append(f"by {caller}")
    if event.get("error"):
        # an error is shown whole: a message cut mid-sentence hides what to do
        parts.append(f"error[{event.get('error_type', '?')}]: {whole(event['error'])}")
    elif kind == "tool.invoked" and event.get("input") is not None:
        parts.append(f"<- {short(event['input'])}")
    elif event.get("output") is not None:
        parts.append(f"-> {short(event['output'])}")
    return "  ".join(p for p in parts if p)


class LivePrinter:
    """Prints run events as they happen (from any thread), coloured when stdout is a terminal."""

    def __init__(self, rich: bool) -> None:
        self.seen: list[str] = []  # event types, in order
        self.failures: list[str] = []  # one line per failed tool call or node
        self.interrupted = False
        self._lock = threading.Lock()
        self._console: Any = None
        self._depth: dict[str, int] = {}  # call id -> nesting depth, while the call is live
        if rich:
            from rich.console import Console

            self._console = Console()

    def __call__(self, event: Any) -> None:
        data = as_dict(event)
        kind = str(data.get("type", ""))
        self.seen.append(kind)
        if kind in ("tool.failed", "tool.timeout"):
            self.failures.append(f"tool {data.get('tool_name') or data.get('tool_id')}")
        elif kind == "node.failed" or (kind == "node.finished" and data.get("status") == "failed"):
            self.failures.append(f"node {data.get('name') or data.get('node_id')}")
        elif kind == "run.interrupted":
            self.interrupted = True
        if kind == "llm.rehearsal":
            self.note(str(data.get("message", "running the offline rehearsal model")))
            return
        symbol, style = _STYLES.get(kind, ("·", "dim"))
        with self._lock:
            indent = "    " * self._level(kind, data)
            if self._console is not None:
                from rich.markup import escape

                self._console.print(f"{indent}[{style}]{symbol}[/] {escape(describe(data))}")
            else:
                sys.stdout.write(f"{indent}{symbol} {describe(data)}\n")
                sys.stdout.flush()

    def _level(self, kind: str, data: dict[str, Any]) -> int:
        """How far a line is indented: tool calls one level under the run, a nested call (a sub-workflow's,
        a skill's step) one more per composite call above it, notifications one more under their call."""
        if not kind.startswith("tool.") or kind == "tool.registered":
            return 0
        call = str(data.get("call_id") or "")
        depth = self._depth.get(call)
        if depth is None:
            parent = data.get("parent_call_id")
            depth = self._depth.get(str(parent), 0) + 1 if parent else 0
            if call and kind == "tool.invoked":
                self._depth[call] = depth
        elif kind in ("tool.completed", "tool.failed", "tool.timeout"):
            del self._depth[call]  # its children have ended before it
        return depth + (2 if kind in ("tool.progress", "tool.log", "tool.output.delta") else 1)

    def panel(self, title: str, body: str) -> None:
        with self._lock:
            if self._console is not None:
                from rich.panel import Panel

                self._console.print(Panel(body, title=title))
            else:
                sys.stdout.write(f"== {title} ==\n{body}\n")

    def note(self, text: str) -> None:
        with self._lock:
            if self._console is not None:
                from rich.markup import escape

                self._console.print(f"[yellow]{escape(text)}[/]")
            else:
                sys.stdout.write(text + "\n")


def describe(event: dict[str, Any]) -> str:
    """The text of a live line (no timestamp)."""
    kind = str(event.get("type", "?"))
    if kind in ("tool.progress", "tool.log"):
        return _notification(kind, event)
    if kind.startswith("tool."):
        line = f"{kind[5:]:<9} {event.get('tool_name') or event.get('tool_id')}"
        if event.get("agent_name"):
            line += f"  by {event['agent_name']}"
        if event.get("duration_ms") is not None:
            line += f"  {float(event['duration_ms']):.0f} ms"
        if event.get("error"):
            return line + f"  {whole(event['error'])}"
        if kind == "tool.invoked" and event.get("input") is not None:
            return line + f"  {short(event['input'])}"
        if event.get("output") is not None:
            return line + f"  -> {short(event['output'])}"
        return line
    name = event.get("node_name") or event.get("name") or event.get("node_id") or event.get("node") or ""
    line = f"{kind} {name}".strip()
    if kind == "run.started" and event.get("models"):
        line += f"  (model: {', '.join(str(m) for m in event['models'])})"
    if event.get("status"):
        line += f"  ({event['status']})"
    if event.get("duration_ms") is not None:
        line += f"  {float(event['duration_ms']):.0f} ms"
    if event.get("error"):
        line += f"  {whole(event['error'])}"
    return line


def _notification(kind: str, event: dict[str, Any]) -> str:
    """An MCP progress or log notification of a live call: `progress 2/3 step 2 of 3`, `log [info] ...`."""
    raw = event.get("metadata")
    meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if kind == "tool.progress":
        done, total = meta.get("progress"), meta.get("total")
        line = f"progress {done:g}" if isinstance(done, (int, float)) else "progress"
        if isinstance(total, (int, float)):
            line += f"/{total:g}"
        return line + (f"  {short(meta['message'])}" if meta.get("message") else "")
    data = meta.get("data")
    return f"log [{meta.get('level') or 'info'}] {short(data, 160) if data is not None else ''}".rstrip()


class _OncePerMessage(logging.Filter):
    """Lets the first record of each distinct message through and drops its repeats."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker
        self.seen: set[str] = set()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self.marker not in text:
            return True
        with self._lock:
            if text in self.seen:
                return False
            self.seen.add(text)
            return True


def quiet_framework_logs() -> None:
    """What `echo-tools run` does to CrewAI's logging (the command owns its process; the library never
    touches logging): CrewAI's "approximate input token count" warning, logged before every model call,
    is shown once per model (a filter on that one logger); and the root logger gets one plain stderr
    handler when it has none, so CrewAI's `logging.error(...)` calls do not install `basicConfig`'s
    format halfway through the run."""
    token_logger = logging.getLogger(TOKEN_COUNT_LOGGER)
    if not any(isinstance(f, _OncePerMessage) for f in token_logger.filters):
        token_logger.addFilter(_OncePerMessage(TOKEN_COUNT_MARKER))
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)


def quiet_rehearsal_log() -> None:
    """Drop the runner's log record of the rehearsal notice (the CLI prints the notice from its event)."""

    class _DropNotice(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "REHEARSAL" not in str(record.msg)

    logging.getLogger("workflow_bridge.runner").addFilter(_DropNotice())
