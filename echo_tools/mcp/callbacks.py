"""What echo-tools answers when an MCP server asks the client: sampling, elicitation and roots.

A server may send `sampling/createMessage`, `elicitation/create` and `roots/list` while one of its tools
runs. The session's callbacks (`SessionCallbacks`) find the call in flight on that session and answer
with what the caller bound to it (`CallHooks`, built by the backend from the caller's context):

- **Sampling**: the calling agent's model (`sampling_llm(llm)`, which the CrewAI adapter sets around each
  agent), a CrewAI `LLM` or a LangChain chat model, within the server's token budget
  (`sampling_max_tokens` in its config, default `DEFAULT_SAMPLING_MAX_TOKENS`, counted per call).
- **Elicitation**: the host's handler (`elicitation_handler(fn)`); inside a LangGraph run without one,
  a LangGraph `interrupt` carrying the request (see `ElicitationInterrupted`).
- **Roots**: the folders listed under `roots` in the server's config (declared only when configured).

Nothing bound: a refusal the server sees at once (an error for sampling, `decline` for elicitation),
never a wait. Each answer is a `tool.sampling` / `tool.elicitation` event of the call.

Over the 2026-07-28 revision the server does not ask while the call runs: it answers the call with an
`InputRequiredResult` whose requests the same handlers answer (`SessionCallbacks.answer_inputs`, for the
call they came back to); the request is then sent again with the answers. A LangGraph pause keeps the
server's request state (`pending_input`), so the resumed node sends the person's answer to the server
instead of calling the tool from its start.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from echo_tools.compat import mcp as compat
from echo_tools.errors import ToolConfigError, ToolExecutionError
from echo_tools.gate import BudgetMeter, estimate_tokens

if TYPE_CHECKING:
    from mcp import types

logger = logging.getLogger("echo_tools.mcp")

DEFAULT_SAMPLING_MAX_TOKENS = 1024
DEFAULT_ANSWER_TIMEOUT_S = 60.0
DECLINED_META = "echo-tools/reason"

# what a host's handler gets and returns: see `elicitation_handler`
ElicitationHandler = Callable[[dict[str, Any]], "dict[str, Any] | Awaitable[dict[str, Any]]"]
Listener = Callable[[str, dict[str, Any]], None]

_SAMPLING_LLM: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "echo_tools_mcp_sampling_llm", default=None
)
_ELICITATION: contextvars.ContextVar[ElicitationHandler | None] = contextvars.ContextVar(
    "echo_tools_mcp_elicitation", default=None
)
# set by `graph_pauses()`: the LangGraph node around the call turns an elicitation's interrupt into a pause
_PAUSABLE: contextvars.ContextVar[bool] = contextvars.ContextVar("echo_tools_mcp_pausable", default=False)


@contextmanager
def sampling_llm(llm: Any) -> Iterator[None]:
    """MCP tools called inside this block answer their servers' sampling requests with `llm`.

    `llm` is a CrewAI `LLM` (anything with `call(messages)`) or a LangChain chat model (`ainvoke`).
    """
    token = _SAMPLING_LLM.set(llm)
    try:
        yield
    finally:
        _SAMPLING_LLM.reset(token)


@contextmanager
def elicitation_handler(handler: ElicitationHandler | None) -> Iterator[None]:
    """MCP tools called inside this block ask `handler` when their server wants input from a person.

    The handler gets `{"server", "tool", "mode": "form"|"url", "message", "schema"` (form) or `"url"`
    (url)`}` and returns `{"action": "accept"|"decline"|"cancel", "content": {...}}` (`content` for an
    accepted form, checked against the server's schema), directly or as an awaitable.
    """
    token = _ELICITATION.set(handler)
    try:
        yield
    finally:
        _ELICITATION.reset(token)


class ElicitationInterrupted(BaseException):
    """A LangGraph `interrupt` raised while answering a server's elicitation; `signal` is LangGraph's.

    A `BaseException`, so the executor and the frameworks between the tool and the graph node pass it on as
    they pass a cancellation (the call gets no closing event: it is paused, and runs again on resume). The
    node re-raises `signal` (`graph_pauses()`), which LangGraph takes as the interrupt.
    """

    def __init__(self, signal: BaseException) -> None:
        super().__init__(str(signal))
        self.signal = signal


@contextmanager
def graph_pauses() -> Iterator[None]:
    """Around the code of a LangGraph node that calls MCP tools: a server's elicitation (without a host
    handler) pauses the run with a LangGraph `interrupt`. Elsewhere in a graph, it is declined."""
    token = _PAUSABLE.set(True)
    try:
        yield
    except ElicitationInterrupted as paused:
        raise paused.signal from None
    finally:
        _PAUSABLE.reset(token)


def client_options(server: str, config: Mapping[str, Any]) -> tuple[list[Path] | None, int]:
    """The server's `roots` (absolute folders, or None when not configured) and sampling token budget.

    Raises:
        ToolConfigError: `roots` is not a list of absolute paths or `file://` URIs, or
            `sampling_max_tokens` is not a positive integer; names the field and the value.
    """
    budget = config.get("sampling_max_tokens", DEFAULT_SAMPLING_MAX_TOKENS)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ToolConfigError(
            f"MCP server {server!r}: 'sampling_max_tokens' must be a positive integer, got {budget!r}",
            field=f"mcpServers.{server}.sampling_max_tokens",
        )
    raw = config.get("roots")
    if raw is None:
        return None, budget
    field_name = f"mcpServers.{server}.roots"
    if not isinstance(raw, list):
        raise ToolConfigError(
            f"MCP server {server!r}: 'roots' must be a list of folders, got {raw!r}", field=field_name
        )
    roots = []
    for item in raw:
        text = item.removeprefix("file://") if isinstance(item, str) else None
        if not text or not Path(text).is_absolute():
            raise ToolConfigError(
                f"MCP server {server!r}: each of 'roots' must be an absolute folder path or a file:// URI, "
                f"got {item!r}",
                field=field_name,
            )
        roots.append(Path(text))
    return roots, budget


@dataclass
class CallHooks:
    """What one call binds for its server's requests: the caller's model, handler and context, taken
    from the context the hooks are made in (`sampling_llm`, `elicitation_handler`) unless given."""

    server: str
    tool: str
    budget: int
    # how long the model or the handler may take: the call's own timeout (the SDK answers a server's request
    # inline, so the session hears nothing else meanwhile)
    timeout_s: float = DEFAULT_ANSWER_TIMEOUT_S
    llm: Any = field(default_factory=_SAMPLING_LLM.get)
    handler: ElicitationHandler | None = field(default_factory=_ELICITATION.get)
    listener: Listener | None = None
    caller: contextvars.Context = field(default_factory=contextvars.copy_context)
    interrupted: ElicitationInterrupted | None = None
    # the call's arguments (what a paused call's stored request state is found by on resume)
    arguments: dict[str, Any] | None = None
    # the request's budget (echo_tools.gate): sampling counts in calls and in tokens, shared with every
    # other call of the request; a call made without one gets a budget of its own
    meter: BudgetMeter = field(default_factory=BudgetMeter)

    def record(self, kind: str, entry: dict[str, Any]) -> None:
        if self.listener is None:
            logger.info("MCP server %r %s: %s", self.server, kind, entry)
            return
        try:
            self.listener(kind, entry)
        except Exception:  # boundary: an event sink's failure must not break the server's request
            logger.exception("MCP %s listener failed", kind)


def hooks_for_call(
    server: str,
    tool: str,
    config: Mapping[str, Any],
    listener: Listener | None,
    timeout_s: float,
    *,
    meter: BudgetMeter | None = None,
) -> CallHooks:
    """The hooks of a call starting now, from the caller's context (`sampling_llm`, `elicitation_handler`);
    `meter` is the request's budget (`ToolContext.budget`), which sampling counts against too."""
    _, budget = client_options(server, config)
    hooks = CallHooks(server, tool, budget, timeout_s, listener=listener)
    if meter is not None:
        hooks.meter = meter
    return hooks


class SessionCallbacks:
    """The `ClientSession` callbacks of one server's session; `calls()` names the calls in flight."""

    def __init__(self, server: str, config: Mapping[str, Any], calls: Callable[[], list[CallHooks]]) -> None:
        self.server = server
        self.roots, _ = client_options(server, config)
        self._calls = calls

    def session_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `ClientSession`: sampling and elicitation always (the server sees the
        capabilities and may offer the tools that need them), roots only when configured."""
        out: dict[str, Any] = {"sampling_callback": self.sampling, "elicitation_callback": self.elicitation}
        if self.roots is not None:
            out["list_roots_callback"] = self.list_roots
        return out

    def _caller(self, what: str) -> CallHooks | str:
        """The one call the request belongs to, or why none can be named."""
        calls = self._calls()
        if not calls:
            return f"the {what} request came while no tool call was in flight on this session"
        first = calls[0]
        if any(c.llm is not first.llm or c.handler is not first.handler for c in calls[1:]):
            return f"the {what} request came while {len(calls)} calls of different callers were in flight"
        return first

    # -- roots ---------------------------------------------------------------------------------------

    async def list_roots(self, context: Any) -> types.ListRootsResult:
        from mcp import types

        roots = [types.Root(uri=p.as_uri(), name=p.name or str(p)) for p in self.roots or []]  # type: ignore[arg-type]
        return types.ListRootsResult(roots=roots)

    # -- 2026-07-28: the requests of an InputRequiredResult ------------------------------------------

    async def answer_inputs(
        self, hooks: CallHooks | None, result: Any, known: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The answers to an `InputRequiredResult`'s requests, for the call they came back to (its hooks),
        keyed as the server keyed them; `known` holds answers given before a pause (not asked again).

        Raises:
            ToolExecutionError: a request was refused (no model bound, over the budget, roots not
                configured): over this revision the refusal cannot go to the server, so the call fails with it.
            ElicitationInterrupted: the run pauses for a person; the server's request state is kept
                (`pending_input`) for the resumed call.
        """
        from mcp import types

        if hooks is None:
            raise ToolExecutionError(
                f"MCP server {self.server!r} asked for input ({', '.join(result.input_requests)}) on a request "
                "that cannot answer any"
            )
        answers: dict[str, Any] = dict(known or {})
        for key, request in result.input_requests.items():  # one at a time: a person answers in turn
            if key in answers:
                continue
            if isinstance(request, types.CreateMessageRequest):
                answer: Any = await self.sampling(None, request.params, hooks)
            elif isinstance(request, types.ElicitRequest):
                state = {"request_state": result.request_state, "key": key}
                answer = await self.elicitation(None, request.params, hooks, state)
                if hooks.interrupted is not None:
                    remember_pending(hooks, result, answers)
                    raise hooks.interrupted
            elif self.roots is not None:
                answer = await self.list_roots(None)
            else:
                answer = _refuse(
                    self.server,
                    f"roots refused: no roots are configured for this server (mcpServers.{self.server}.roots)",
                )
            if isinstance(answer, types.ErrorData):
                raise ToolExecutionError(
                    f"MCP server {self.server!r} asked for {request.method} ({key!r}) during "
                    f"{hooks.tool!r}: {answer.message}"
                )
            answers[key] = answer
        return answers

    # -- sampling ------------------------------------------------------------------------------------

    async def sampling(
        self, context: Any, params: types.CreateMessageRequestParams, call: CallHooks | None = None
    ) -> types.CreateMessageResult | types.ErrorData:
        from mcp import types

        params = WireView(params)  # type: ignore[assignment]  # camelCase names under either SDK
        hooks = self._caller("sampling") if call is None else call
        if isinstance(hooks, str):
            return _refuse(self.server, f"sampling refused: {hooks}")
        entry: dict[str, Any] = {"mcp_server": self.server, "max_tokens": params.maxTokens}
        if hooks.llm is None:
            message = (
                f"sampling refused: no model is bound to this call of {hooks.tool!r} (the calling agent "
                "has none; a host binds one with echo_tools.mcp.callbacks.sampling_llm)"
            )
            hooks.record("sampling", {**entry, "outcome": "refused", "reason": message})
            return _refuse(self.server, message)
        # the prompt counts as the answer does: a server asking for 1 token of answer chooses the prompt
        prompt = sum(estimate_tokens(m["content"]) for m in _chat_messages(params))
        if params.maxTokens + prompt > hooks.budget:
            asked = f"maxTokens {params.maxTokens}"
            if params.maxTokens <= hooks.budget:  # the prompt made it too much
                asked += f" with a prompt of about {prompt} tokens"
            message = (
                f"sampling refused: {asked} exceeds the remaining token budget "
                f"{hooks.budget} of this call (mcpServers.{self.server}.sampling_max_tokens)"
            )
            hooks.record("sampling", {**entry, "outcome": "refused", "reason": message})
            return _refuse(self.server, message)
        spent = hooks.meter.sample(params.maxTokens, prompt)  # the request's total: calls and tokens
        if spent is not None:
            message = f"sampling refused: {spent.message}"
            hooks.record("sampling", {**entry, "outcome": "refused", "reason": message, "limit": spent.field})
            return _refuse(self.server, message)
        hooks.budget -= params.maxTokens + prompt
        try:
            text, model = await asyncio.wait_for(complete(hooks.llm, params), hooks.timeout_s)
        except TimeoutError:
            message = f"sampling failed: the model did not answer within {hooks.timeout_s:g} s"
            hooks.record("sampling", {**entry, "outcome": "failed", "reason": message})
            return _refuse(self.server, message)
        except Exception as exc:  # boundary: the model's failure is the server's error, not our crash
            message = f"sampling failed: the model raised {type(exc).__name__}: {exc}"
            hooks.record("sampling", {**entry, "outcome": "failed", "reason": message})
            return _refuse(self.server, message)
        # the answer counts what it holds (at most maxTokens, as reserved): the rest is given back
        unused = params.maxTokens - min(params.maxTokens, estimate_tokens(text))
        hooks.budget += unused
        hooks.meter.refund_tokens(unused)
        hooks.record("sampling", {**entry, "outcome": "answered", "model": model, "answer_chars": len(text)})
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=text),
            model=model,
            stopReason="endTurn",
        )

    # -- elicitation ---------------------------------------------------------------------------------

    async def elicitation(
        self,
        context: Any,
        params: types.ElicitRequestParams,
        call: CallHooks | None = None,
        state: dict[str, Any] | None = None,
    ) -> types.ElicitResult | types.ErrorData:
        from mcp import types

        hooks = self._caller("elicitation") if call is None else call
        if isinstance(hooks, str):
            return _decline(f"elicitation declined: {hooks}")
        request: dict[str, Any] = {"server": self.server, "tool": hooks.tool, "message": params.message}
        if isinstance(params, types.ElicitRequestURLParams):
            request.update(mode="url", url=params.url)
            schema: dict[str, Any] | None = None
        else:
            schema = dict(compat.field(params, "requestedSchema"))
            request.update(mode="form", schema=schema)
        if state is not None:  # 2026-07-28: the server's request state, kept in the pause
            request["request_state"] = state
        entry = {"mcp_server": self.server, "mode": request["mode"], "message": params.message}
        try:
            answer, reason = await self._ask(hooks, request)
        except ElicitationInterrupted as interrupted:
            hooks.interrupted = interrupted  # the backend raises it once the server has finished the call
            hooks.record("elicitation", {**entry, "outcome": "interrupted"})
            return types.ElicitResult(action="cancel")
        if reason is not None:
            hooks.record("elicitation", {**entry, "outcome": "declined", "reason": reason})
            return _decline(reason)
        problem = _check_answer(answer, schema)
        if problem is not None:
            hooks.record("elicitation", {**entry, "outcome": "invalid", "reason": problem})
            return _refuse(self.server, problem)
        hooks.record("elicitation", {**entry, "outcome": answer["action"]})
        return types.ElicitResult(action=answer["action"], content=answer.get("content"))

    async def _ask(self, hooks: CallHooks, request: dict[str, Any]) -> tuple[Any, str | None]:
        """(the handler's answer or LangGraph's resume value, None), or (None, why nobody answered)."""
        if hooks.handler is not None:
            try:
                answer = await asyncio.wait_for(_handler_answer(hooks, request), hooks.timeout_s)
            except TimeoutError:
                limit = f"{hooks.timeout_s:g} s"
                return None, f"elicitation declined: the handler did not answer within {limit}"
            except Exception as exc:  # boundary: a failing handler declines, named
                return None, f"elicitation declined: the handler raised {type(exc).__name__}: {exc}"
            return answer, None
        resumed = hooks.caller.run(_graph_interrupt, {"type": "mcp_elicitation", **request})
        if resumed is not None:
            return resumed, None
        return None, (
            f"elicitation declined: no person can answer for this call of {hooks.tool!r} (the host binds a "
            "handler with echo_tools.mcp.callbacks.elicitation_handler)"
        )


async def _handler_answer(hooks: CallHooks, request: dict[str, Any]) -> Any:
    """The handler's answer: called in a worker thread (a person may take a while; the background loop
    serves every session), in the caller's context; an awaitable it returns is awaited here."""
    assert hooks.handler is not None
    answer = await asyncio.to_thread(hooks.caller.copy().run, hooks.handler, request)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


def _graph_interrupt(payload: dict[str, Any]) -> Any:
    """LangGraph's resume value for `payload` inside a graph run; None outside one.

    Raises:
        ElicitationInterrupted: the run pauses here (LangGraph's `GraphInterrupt` inside).
    """
    try:
        from langgraph.config import get_config
        from langgraph.errors import GraphInterrupt
        from langgraph.types import interrupt
    except ImportError:
        return None
    if not _PAUSABLE.get():
        return None  # no node around the call that turns the interrupt into a pause
    try:
        get_config()
    except RuntimeError:
        return None  # not inside a LangGraph run
    try:
        return interrupt(payload)
    except GraphInterrupt as exc:
        raise ElicitationInterrupted(exc) from None


def _check_answer(answer: Any, schema: dict[str, Any] | None) -> str | None:
    """Why an elicitation answer cannot go to the server (naming the field and the value), or None."""
    if not isinstance(answer, Mapping):
        return f"elicitation answer must be an object with 'action', got {answer!r:.200}"
    action = answer.get("action")
    if action not in ("accept", "decline", "cancel"):
        return f"elicitation answer: 'action' must be 'accept', 'decline' or 'cancel', got {action!r}"
    content = answer.get("content")
    if action != "accept" or schema is None:
        return None
    from echo_tools.schema import SchemaValidator

    if not isinstance(content, Mapping):
        return f"elicitation answer: 'content' must be an object for an accepted form, got {content!r:.200}"
    problems = SchemaValidator(schema, prefix="content").errors(dict(content))
    if problems:
        return f"elicitation answer does not match the server's schema: {'; '.join(problems)}"
    return None


def _refuse(server: str, message: str) -> types.ErrorData:
    from mcp import types

    logger.info("MCP server %r: %s", server, message)
    return types.ErrorData(code=types.INVALID_REQUEST, message=message)


def _decline(reason: str) -> types.ElicitResult:
    from mcp import types

    return types.ElicitResult(action="decline", _meta={DECLINED_META: reason})


# -- the model ------------------------------------------------------------------------------------------


async def complete(llm: Any, params: types.CreateMessageRequestParams) -> tuple[str, str]:
    """Ask `llm` (a LangChain chat model or a CrewAI `LLM`) for the answer; returns (text, model name)."""
    params = WireView(params)  # type: ignore[assignment]
    messages = _chat_messages(params)
    cap = params.maxTokens
    model = str(getattr(llm, "model_name", None) or getattr(llm, "model", None) or type(llm).__name__)
    if hasattr(llm, "ainvoke"):  # LangChain chat model
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
        chat = [kinds[m["role"]](content=m["content"]) for m in messages]
        reply = await llm.ainvoke(chat, max_tokens=cap)
        content = reply.content
        text = content if isinstance(content, str) else "".join(_block_text(b) for b in content)
        return text, model
    if hasattr(llm, "call"):  # CrewAI LLM: its max_tokens field caps the answer; a copy leaves the agent's
        capped = llm.model_copy(update={"max_tokens": cap}) if hasattr(llm, "model_copy") else llm
        answer = await asyncio.to_thread(capped.call, messages)
        return str(answer), model
    raise TypeError(f"{type(llm).__name__} is neither a LangChain chat model nor a CrewAI LLM")


class WireView:
    """An SDK model read by its wire (camelCase) names under either SDK generation (`params.maxTokens`)."""

    _model: Any

    def __init__(self, model: Any) -> None:
        self._model = model._model if isinstance(model, WireView) else model

    def __getattr__(self, name: str) -> Any:
        return compat.field(self._model, name)


# -- a paused call's request state (2026-07-28) ---------------------------------------------------------

_PENDING: dict[tuple[Any, ...], tuple[Any, dict[str, Any]]] = {}
_PENDING_LIMIT = 1024


def _pending_key(hooks: CallHooks) -> tuple[Any, ...] | None:
    """A paused call's identity: its graph thread and task, its tool and its arguments (None outside a
    LangGraph run)."""
    import json

    def where() -> Any:
        try:
            from langgraph.config import get_config
        except ImportError:
            return None
        try:
            configurable = get_config().get("configurable") or {}
        except RuntimeError:
            return None
        return (configurable.get("thread_id"), configurable.get("checkpoint_ns"))

    place = hooks.caller.run(where)
    if place is None or place[0] is None:
        return None
    arguments = json.dumps(hooks.arguments or {}, sort_keys=True, default=str)
    return (*place, hooks.server, hooks.tool, arguments)


def remember_pending(hooks: CallHooks, result: Any, answered: dict[str, Any]) -> None:
    """Keep the server's request state of a call paused for a person (and what was answered already)."""
    key = _pending_key(hooks)
    if key is None:
        return
    if len(_PENDING) >= _PENDING_LIMIT:
        _PENDING.pop(next(iter(_PENDING)))
    _PENDING[key] = (result, dict(answered))


def pending_input(hooks: CallHooks | None) -> tuple[Any, dict[str, Any]] | None:
    """The `InputRequiredResult` a paused call of the same graph task, tool and arguments stopped at (taken:
    a resumed call answers it instead of calling the tool again), or None."""
    if hooks is None or not _PENDING:
        return None
    key = _pending_key(hooks)
    return None if key is None else _PENDING.pop(key, None)


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    return str(block.get("text", "")) if isinstance(block, Mapping) else ""


def _chat_messages(params: types.CreateMessageRequestParams) -> list[dict[str, str]]:
    """The request as chat messages (`role`, `content` text); non-text blocks are named, not sent."""
    out = [{"role": "system", "content": params.systemPrompt}] if params.systemPrompt else []
    for message in params.messages:
        parts = []
        for block in message.content_as_list:
            text = getattr(block, "text", None)
            parts.append(text if isinstance(text, str) else f"[{block.type} content omitted]")
        out.append({"role": message.role, "content": "\n".join(parts)})
    return out
