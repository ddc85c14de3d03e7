"""The Tasks extension of the 2026-07-28 revision (`io.modelcontextprotocol/tasks`) for long tools.

Under the SDK 2.x the client declares the extension in each request's capabilities; a server that offers
it (in its `server/discover` capabilities) may answer `tools/call` with a task handle (`resultType:
"task"`) instead of the result. The call then follows the task (`follow_task`): it polls `tasks/get` at
the server's `pollIntervalMs` (bounded to 10 ms .. 5 s), each new status message is a `tool.progress` event
of the call, an `input_required` task's requests are answered by the call's own handlers and sent with
`tasks/update`, and the task's result (`completed`) is the call's result. A `failed` or `cancelled` task
fails the call naming the server, the task and what it said. The call's deadline bounds the whole: when it
cancels the call, `tasks/cancel` is sent for the task (the extension forbids `notifications/cancelled`).
The SDK does not implement the extension: its requests are sent here with the session's public
`send_request`, and its results read as JSON.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from echo_tools.compat import mcp as compat
from echo_tools.errors import ToolExecutionError

if TYPE_CHECKING:
    from echo_tools.mcp.callbacks import CallHooks, SessionCallbacks

__all__ = ["TASKS", "TaskHandle", "follow_task", "offers_tasks"]

logger = logging.getLogger("echo_tools.mcp")

TASKS = "io.modelcontextprotocol/tasks"
_POLL_S = (0.01, 5.0)  # the server's pollIntervalMs, bounded
_DEFAULT_POLL_S = 0.5


class TaskHandle(dict[str, Any]):
    """A `tools/call` answered with a task (`resultType: "task"`): the task's fields, as sent."""


def offers_tasks(session: Any) -> bool:
    """Whether the session speaks 2026-07-28 with a server that offers the Tasks extension."""
    if compat.GENERATION < 2 or compat.protocol_version(session) not in compat.MODERN_VERSIONS:
        return False
    capabilities = compat.server_capabilities(session)
    return TASKS in (getattr(capabilities, "extensions", None) or {})


def _requests() -> tuple[type[Any], type[Any], type[Any]]:
    """The extension's three requests as SDK request models (built once, when first needed: 2.x only)."""
    if _MODELS:
        return _MODELS[0]
    from mcp import types

    class TaskParams(types.RequestParams):  # type: ignore[misc, unused-ignore]
        task_id: str = Field(alias="taskId")

    class UpdateParams(TaskParams):
        input_responses: dict[str, Any] = Field(alias="inputResponses")

    class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):  # type: ignore[misc, unused-ignore]
        method: Literal["tasks/get"] = "tasks/get"
        params: TaskParams

    class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):  # type: ignore[misc, unused-ignore]
        method: Literal["tasks/update"] = "tasks/update"
        params: UpdateParams

    class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):  # type: ignore[misc, unused-ignore]
        method: Literal["tasks/cancel"] = "tasks/cancel"
        params: TaskParams

    _MODELS.append((GetTask, UpdateTask, CancelTask))
    return _MODELS[0]


_MODELS: list[tuple[type[Any], type[Any], type[Any]]] = []


class _Asked:
    """An `input_required` task's requests, shaped as `SessionCallbacks.answer_inputs` reads them."""

    def __init__(self, input_requests: dict[str, Any]) -> None:
        self.input_requests = input_requests
        self.request_state = None


async def follow_task(
    server: str,
    session: Any,
    callbacks: SessionCallbacks,
    handle: TaskHandle,
    hooks: CallHooks | None,
    listener: Callable[[str, dict[str, Any]], None] | None,
    timeout_s: float,
    spawn: Callable[[Coroutine[Any, Any, Any]], None],
) -> Any:
    """The `CallToolResult` of the task `handle` names, followed until it ends (see the module docstring).

    Raises:
        ToolExecutionError: the task failed or was cancelled, or answered something that is not a task.
    """
    from mcp import types
    from pydantic import TypeAdapter

    get, update, cancel = _requests()
    input_request: Any = types.InputRequest  # type: ignore[attr-defined, unused-ignore]  # 2.x only
    task_id = str(handle.get("taskId") or "")
    if not task_id:
        raise ToolExecutionError(
            f"MCP server {server!r} answered with a task without a taskId: {dict(handle)!r:.200}"
        )
    as_json = TypeAdapter(dict[str, Any])
    task: dict[str, Any] = dict(handle)
    answered: set[str] = set()
    said: str | None = None
    polls = 0
    try:
        while True:
            status = task.get("status")
            message = task.get("statusMessage")
            if listener is not None and message and message != said:
                polls += 1
                entry = {
                    "progress": polls,
                    "total": None,
                    "message": message,
                    "task": task_id,
                    "status": status,
                }
                _hear(listener, entry)
            said = message or said
            if status == "completed":
                return types.CallToolResult.model_validate(task.get("result") or {}, by_name=False)
            if status in ("failed", "cancelled"):
                error = task.get("error") or {}
                why = error.get("message") or message or status
                code = f" (code {error['code']})" if "code" in error else ""
                raise ToolExecutionError(f"MCP server {server!r}: its task {task_id!r} {status}: {why}{code}")
            if status == "input_required":
                pending = {k: v for k, v in (task.get("inputRequests") or {}).items() if k not in answered}
                if pending:
                    parsed = {k: TypeAdapter(input_request).validate_python(v) for k, v in pending.items()}
                    answers = await callbacks.answer_inputs(hooks, _Asked(parsed))
                    responses = {
                        k: a.model_dump(by_alias=True, mode="json", exclude_none=True)
                        for k, a in answers.items()
                    }
                    params = {"taskId": task_id, "inputResponses": responses}
                    await session.send_request(update(params=params), as_json, compat.read_timeout(timeout_s))
                    answered.update(answers)
            elif status != "working":
                raise ToolExecutionError(
                    f"MCP server {server!r}: its task {task_id!r} has an unknown status {status!r}"
                )
            wait = task.get("pollIntervalMs")
            wait_s = wait / 1000 if isinstance(wait, int | float) else _DEFAULT_POLL_S
            await asyncio.sleep(min(max(wait_s, _POLL_S[0]), _POLL_S[1]))
            task = await session.send_request(
                get(params={"taskId": task_id}), as_json, compat.read_timeout(timeout_s)
            )
    except asyncio.CancelledError:  # the call's deadline: the task is cancelled on the server too
        spawn(_cancel(server, session, cancel, task_id))
        raise


async def _cancel(server: str, session: Any, cancel: type[Any], task_id: str) -> None:
    from pydantic import TypeAdapter

    try:
        await session.send_request(cancel(params={"taskId": task_id}), TypeAdapter(dict[str, Any]), 5.0)
    except Exception as exc:  # boundary: a server that cannot take the cancel has ended anyway
        logger.debug("MCP server %r: tasks/cancel of %s not answered: %s", server, task_id, exc)


def _hear(listener: Callable[[str, dict[str, Any]], None], entry: dict[str, Any]) -> None:
    try:
        listener("progress", entry)
    except Exception:  # boundary: a listener's failure must not stop the task being followed
        logger.exception("MCP progress listener failed")
