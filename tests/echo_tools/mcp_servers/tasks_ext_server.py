"""A JSON-RPC program on stdio (no SDK: the SDK does not implement the Tasks extension yet) that speaks the
2026-07-28 revision with the Tasks extension (`io.modelcontextprotocol/tasks`), and the 2025 revision's
handshake for older clients. Its tools, when the request's per-request capabilities name the extension:

- `long_job(steps)`: answers a task handle (`resultType: "task"`); each `tasks/get` advances one step
  (status message "step k of n") and the last answers `completed` with the tool's result;
- `ask_then_finish()`: the task goes `input_required` with an elicitation, `tasks/update` answers it, then
  the task completes with the answer;
- `failing_job()`: the task ends `failed` with a JSON-RPC error;
- `never_done()`: the task stays `working` for ever;
- `cancels()`: how many `tasks/cancel` requests it got (a plain result);
- `bad_result()`: a result no revision allows (`content` is not a list).

Without the extension in the request (a 2025-revision client) the same tools answer at once.
"""

from __future__ import annotations

import itertools
import json
import sys
from datetime import UTC, datetime
from typing import Any

TASKS = "io.modelcontextprotocol/tasks"
CAPS = "io.modelcontextprotocol/clientCapabilities"
NOW = datetime.now(UTC).isoformat()
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"steps": {"type": "integer"}}}
TOOLS = [
    {"name": name, "inputSchema": SCHEMA, "description": f"{name} (a task when the client speaks Tasks)"}
    for name in ("long_job", "ask_then_finish", "failing_job", "never_done", "cancels", "bad_result")
]
tasks: dict[str, dict[str, Any]] = {}
cancelled: list[str] = []
ids = itertools.count(1)


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": False, "resultType": "complete"}


def task_view(task: dict[str, Any], **extra: Any) -> dict[str, Any]:
    view = {"taskId": task["id"], "status": task["status"], "createdAt": NOW, "lastUpdatedAt": NOW}
    view.update(ttlMs=60000, pollIntervalMs=20, **extra)
    if task.get("message"):
        view["statusMessage"] = task["message"]
    return view


def call(params: dict[str, Any]) -> dict[str, Any]:
    name, args = params.get("name"), params.get("arguments") or {}
    if name == "cancels":
        return text(str(len(cancelled)))
    if name == "bad_result":  # content must be a list of blocks
        return {"content": "not a list", "resultType": "complete"}
    extensions = ((params.get("_meta") or {}).get(CAPS) or {}).get("extensions") or {}
    if TASKS not in extensions:  # a client without the extension: answered at once
        return text(f"{name} ran at once")
    task = {
        "id": f"t{next(ids)}",
        "tool": name,
        "status": "working",
        "step": 0,
        "steps": int(args.get("steps") or 3),
    }
    tasks[task["id"]] = task
    return {"resultType": "task", **task_view(task)}


def get(params: dict[str, Any]) -> dict[str, Any]:
    task = tasks[params["taskId"]]
    if task["status"] in ("completed", "failed", "cancelled"):
        pass
    elif task["tool"] == "long_job":
        task["step"] += 1
        task["message"] = f"step {task['step']} of {task['steps']}"
        if task["step"] >= task["steps"]:
            task["status"], task["result"] = "completed", text(f"long job done in {task['steps']} steps")
    elif task["tool"] == "ask_then_finish" and "answer" not in task:
        task["status"] = "input_required"
        ask = {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "Which colour?", "requestedSchema": {
                "type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}},
        }  # fmt: skip
        return {"resultType": "complete", **task_view(task, inputRequests={"colour": ask})}
    elif task["tool"] == "ask_then_finish":
        task["status"], task["result"] = "completed", text(f"colour {task['answer']}")
    elif task["tool"] == "failing_job":
        task["status"], task["error"] = "failed", {"code": -32603, "message": "the job's disk is full"}
    extra = {key: task[key] for key in ("result", "error") if key in task}
    return {"resultType": "complete", **task_view(task, **extra)}


def update(params: dict[str, Any]) -> dict[str, Any]:
    task = tasks[params["taskId"]]
    answer = (params.get("inputResponses") or {}).get("colour") or {}
    task["answer"] = (answer.get("content") or {}).get("colour", answer.get("action"))
    task["status"] = "working"
    return {"resultType": "complete"}


def cancel(params: dict[str, Any]) -> dict[str, Any]:
    cancelled.append(params["taskId"])
    tasks[params["taskId"]]["status"] = "cancelled"
    return {"resultType": "complete"}


def answer(message: dict[str, Any]) -> dict[str, Any]:
    method, params = message.get("method"), message.get("params") or {}
    if method == "server/discover":
        capabilities = {"tools": {}, "extensions": {TASKS: {}}}
        return {"supportedVersions": ["2026-07-28"], "capabilities": capabilities, "resultType": "complete"}
    if method == "initialize":
        return {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "tasks-ext", "version": "1"}}  # fmt: skip
    if method == "tools/list":
        return {"tools": TOOLS, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    handlers = {"tools/call": call, "tasks/get": get, "tasks/update": update, "tasks/cancel": cancel}
    if method in handlers:
        return handlers[method](params)
    raise LookupError(method)


for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if "id" not in message:
        continue  # a notification
    try:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
    except LookupError as exc:
        reply = {
            "jsonrpc": "2.0",
            "id": message["id"],
            "error": {"code": -32601, "message": f"Method not found: {exc}"},
        }
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
