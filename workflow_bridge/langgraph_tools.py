"""Every catalogue tool as a LangChain `StructuredTool`, and a LangGraph tool node running calls directly.

`to_langchain_tool` fits LangChain's `create_agent`, LangGraph's own `ToolNode` and `create_react_agent`:
sync and async paths, the `ToolResult` as the message artifact, the call id in the executor's context,
failures as `status="error"` messages. `ExecutorToolNode` is a `ToolNode` that hands the calls of the
last AI message straight to the executor, concurrently. Both write the tool events to
`stream_mode="custom"` as they happen when they run inside a graph.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, cast

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolArg, StructuredTool, ToolException
from langgraph.config import get_stream_writer
from langgraph.prebuilt import ToolNode

from echo_tools.events import ToolEvent
from echo_tools.gate import under_acting
from echo_tools.llm_text import content_blocks, text_for_llm
from echo_tools.mcp.callbacks import graph_pauses
from echo_tools.models import ToolContext, ToolDef, ToolResult
from echo_tools.runtime import run_sync
from echo_tools.suggest import did_you_mean
from workflow_bridge.tool_view import ToolView, as_context, resolve_bindings

if TYPE_CHECKING:
    from echo_tools.executor import ToolExecutor
    from echo_tools.registry import ToolRegistry

__all__ = ["ExecutorToolNode", "make_tool_node", "to_langchain_tool", "to_langchain_tools"]

ContextLike = ToolContext | Mapping[str, Any] | None
Ref = str | ToolDef | Mapping[str, Any] | tuple[str | ToolDef, Mapping[str, Any] | None]


def _call_blocking(
    executor: ToolExecutor,
    tool_id: str,
    args: dict[str, Any],
    ctx: ToolContext,
    writer: Callable[[Any], None] | None = None,
) -> ToolResult:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop in this thread: wait here; the pipeline (and its events) runs here too
        token = _WRITER.set(writer)
        try:
            return executor.invoke_sync(tool_id, args, ctx)
        finally:
            _WRITER.reset(token)
    # a loop is running in this thread: never block it re-entrantly; use the shared background loop
    return run_sync(_streamed(writer, executor.invoke(tool_id, args, ctx)))


_INJECTED_RUNTIME = {"runtime": Annotated[Any, InjectedToolArg()], "kwargs": Any, "return": tuple[Any, Any]}


def _with_call_id(ctx: ToolContext, call_id: str | None) -> ToolContext:
    # a graph run for a principal (a request's, `/workflows/run`'s): its ceiling, budget and name
    ctx = under_acting(ctx)
    if not call_id:
        return ctx
    return ctx.model_copy(update={"tool_call_id": call_id})


# -- the custom stream ---------------------------------------------------------------------------------

_WRITER: contextvars.ContextVar[Callable[[Any], None] | None] = contextvars.ContextVar(
    "echo_tools_stream_writer", default=None
)
_FORWARDING: weakref.WeakSet[Any] = weakref.WeakSet()


def _forward_to_stream(event: ToolEvent) -> None:
    """Executor sink: hand each event to the LangGraph stream writer of the node running the call."""
    writer = _WRITER.get()
    if writer is not None:
        writer(event.to_dict())


def _forward_events(executor: ToolExecutor) -> None:
    """Give `executor` the forwarding sink once (it is a no-op for calls made outside a graph)."""
    if executor not in _FORWARDING:
        _FORWARDING.add(executor)
        # inline: it needs the calling node's context (its stream writer), and it never blocks
        executor.add_sink(_forward_to_stream, inline=True)


def _stream_writer() -> Callable[[Any], None] | None:
    """The custom-stream writer of the graph run calling the node; None outside a graph run."""
    try:
        return get_stream_writer()
    except (RuntimeError, KeyError):  # called directly, not as a node of a running graph
        return None


async def _streamed(writer: Callable[[Any], None] | None, work: Coroutine[Any, Any, Any]) -> Any:
    """Await `work` with `writer` as the events' destination, in whichever task or loop runs it.

    `run_sync` runs coroutines on the background loop, whose tasks do not inherit the caller's context
    variables: the writer is set here, inside the coroutine, so it travels with it.
    """
    token = _WRITER.set(writer)
    try:
        return await work
    finally:
        _WRITER.reset(token)


# -- StructuredTool ------------------------------------------------------------------------------------


def to_langchain_tool(
    tool: ToolDef,
    executor: ToolExecutor,
    context: ContextLike = None,
    *,
    binding: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> StructuredTool:
    """Wrap one catalogue tool as a `StructuredTool` whose calls go through `executor`.

    The tool returns `(content, ToolResult)` (`response_format="content_and_artifact"`); the content is
    the text a model reads, or LangChain content blocks (text, then base64 image blocks) when an MCP tool
    returned images. Under a
    `ToolNode` (or `create_react_agent`) the call's `tool_call_id` reaches the executor's context and a
    failure becomes a `ToolMessage(status="error")` that keeps the `ToolResult` as its artifact; called
    directly, a failure is a handled `ToolException` whose text tells the model what to fix. Run inside
    a graph (by `create_agent`, `ToolNode` or a node of your own), the call's tool events are written to
    the graph's `stream_mode="custom"`.

    Args:
        tool: the catalogue entry; its JSON Schema is the `args_schema` (a parameter named `runtime` would
            clash with LangGraph's injected runtime).
        executor: runs the calls.
        context: ids of the agent the tool is bound to, carried into every event.
        binding: the canvas binding (`fixed` parameters hidden and merged, `description` override).
        name: the LLM-facing name (default `tool.llm_name`).

    Raises:
        ValueError: the binding fixes a parameter the tool does not have.
    """
    view = ToolView(tool, binding)
    ctx = as_context(context)
    tool_id = tool.tool_id
    tool_name = name or view.name

    def respond(result: ToolResult, call_id: str | None) -> tuple[Any, Any]:
        if result.success:  # text, or text and image blocks when an MCP tool returned images
            return content_blocks(result, tool, name=tool_name), result
        text = text_for_llm(result, tool, name=tool_name)
        if call_id is None:
            raise ToolException(text)
        # a returned error message keeps the ToolResult; a raised ToolException would drop the artifact
        message = ToolMessage(text, tool_call_id=call_id, name=tool_name, status="error", artifact=result)
        return message, None

    def func(runtime: Annotated[Any, InjectedToolArg()] = None, **kwargs: Any) -> tuple[Any, Any]:
        call_id = getattr(runtime, "tool_call_id", None)
        args, call_ctx = view.call_args(kwargs), _with_call_id(ctx, call_id)
        # inside a graph run the events go to its custom stream; an approval or an MCP server's question
        # pauses the run (LangGraph interrupt), as in our own tool node
        with graph_pauses():
            result = _call_blocking(executor, tool_id, args, call_ctx, _stream_writer())
        return respond(result, call_id)

    async def coroutine(runtime: Annotated[Any, InjectedToolArg()] = None, **kwargs: Any) -> tuple[Any, Any]:
        call_id = getattr(runtime, "tool_call_id", None)
        work = executor.invoke(tool_id, view.call_args(kwargs), _with_call_id(ctx, call_id))
        with graph_pauses():
            result = await _streamed(_stream_writer(), work)
        return respond(result, call_id)

    _forward_events(executor)
    # Real annotation objects, not `from __future__` strings: LangChain inspects `func`'s type hints on
    # every call, and re-evaluating string annotations costs more than the tool call itself.
    func.__annotations__ = coroutine.__annotations__ = _INJECTED_RUNTIME
    return StructuredTool(
        name=tool_name,
        description=view.description,
        args_schema=view.input_schema,
        func=func,
        coroutine=coroutine,
        response_format="content_and_artifact",
        handle_tool_error=True,
        metadata={"tool_id": tool_id, "tool_type": tool.tool_type.value},
    )


def to_langchain_tools(
    refs: Iterable[Ref], registry: ToolRegistry, executor: ToolExecutor, context: ContextLike = None
) -> list[StructuredTool]:
    """`StructuredTool`s for the tools `refs` name (ids, names, `ToolDef`s or canvas bindings), in order.

    Disabled bindings and disabled tools are left out; `tool.metadata["tool_id"]` maps each back.

    Raises:
        ToolNotFoundError: a ref names no tool.
    """
    ctx = as_context(context)
    return [to_langchain_tool(t, executor, ctx, binding=b) for t, b in resolve_bindings(refs, registry)]


# -- ExecutorToolNode ----------------------------------------------------------------------------------


class ExecutorToolNode(ToolNode):
    """A LangGraph `ToolNode` running the tool calls of the last AI message through the `ToolExecutor`.

    Use it where `ToolNode` goes (`builder.add_node("tools", node)`, routed by `tools_condition`, or
    `create_react_agent(model, node)`). The calls run concurrently (at most `max_concurrency` at once)
    and come back as `ToolMessage`s in call order, each with its `ToolResult` as the artifact; failures
    and unknown tool names are `status="error"` messages telling the model what to fix. Tool events go to
    `stream_mode="custom"`. `tools_by_name` (and iterating the node) gives the tools as `StructuredTool`s,
    for `model.bind_tools` and for LangChain's `create_agent(model, tools=node)`.

    Args:
        registry: where tool names are resolved.
        executor: runs the calls.
        refs: the tools the model may call (ids, names, `ToolDef`s, canvas bindings or `(tool, binding)`
            pairs); None allows every tool in the registry, resolved by name at call time.
        context: ids of the agent the node serves, carried into every event.
        name: the node name.
        messages_key: the state key holding the messages.
        max_concurrency: calls of one message running at once.
        search: bind tools on demand: the node offers a `search_tools` tool (`search_tools_tool`) and
            every tool a search of it found, on top of `refs` (None then means none). A model that
            re-binds `list(node)` each turn sees a handful of tools out of thousands.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        executor: ToolExecutor,
        refs: Iterable[Ref] | None = None,
        context: ContextLike = None,
        *,
        name: str = "tools",
        messages_key: str = "messages",
        max_concurrency: int = 8,
        tags: Sequence[str] | None = None,
        search: bool = False,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency!r}")
        # the tools are given lazily (`tools_by_name`): calls never go through ToolNode's own path
        super().__init__([], name=name, tags=list(tags) if tags else None, messages_key=messages_key)
        self.registry = registry
        self.executor = executor
        self.context = as_context(context)
        self.messages_key = messages_key
        self.max_concurrency = max_concurrency
        self._views: dict[str, ToolView] | None = None
        self._bound: list[tuple[ToolDef, Mapping[str, Any] | None]] | None = None
        self._structured: dict[str, BaseTool] | None = None
        self._search_id: str | None = None
        if refs is not None or search:
            self._views, self._bound = {}, resolve_bindings(refs or (), registry)
            for tool, binding in self._bound:
                self._bind(tool, binding)
        if search:
            from echo_tools.tool_search import search_tools_tool

            found = registry.get("tool_search_tools") or search_tools_tool(registry)
            self._search_id = found.tool_id
            self._bind(found, None)
        _forward_events(executor)

    def _bind(self, tool: ToolDef, binding: Mapping[str, Any] | None) -> None:
        assert self._views is not None and self._bound is not None
        view = ToolView(tool, binding)
        if view.name not in self._views:
            self._views[view.name] = view
            self._views.setdefault(tool.tool_id, view)
            if (tool, binding) not in self._bound:
                self._bound.append((tool, binding))
            self._structured = None  # rebuilt with the new tool

    def _bind_found(self, result: ToolResult) -> None:
        """The tools a `search_tools` call found become callable through this node (search=True)."""
        for item in result.output if isinstance(result.output, list) else ():
            tool = self.registry.get(str(item.get("tool_id"))) if isinstance(item, dict) else None
            if tool is not None:
                self._bind(tool, None)

    @property
    def tools_by_name(self) -> dict[str, BaseTool]:
        """The node's tools as `StructuredTool`s by LLM-facing name (what `create_react_agent` binds).

        Built once for a node given refs; a node without refs builds them from the registry's tools of
        the moment on every read.
        """
        if self._structured is not None:
            return self._structured
        bound = self._bound if self._bound is not None else [(t, None) for t in self.registry.list_all()]
        tools: dict[str, BaseTool] = {
            t.name: t for t in to_langchain_tools(bound, self.registry, self.executor, self.context)
        }
        if self._bound is not None:
            self._structured = tools
        return tools

    def __iter__(self) -> Iterator[BaseTool]:
        """The node's tools, so `create_agent(model, tools=node)` takes them (run by its own `ToolNode`)."""
        return iter(list(self.tools_by_name.values()))

    @property
    def tool_names(self) -> list[str]:
        """The names the model may call (None-refs nodes: every registry tool's LLM-facing name)."""
        if self._views is None:
            return [t.llm_name for t in self.registry.list_all()]
        return sorted({v.name for v in self._views.values()})

    def _view(self, name: str) -> ToolView | None:
        if self._views is not None:
            return self._views.get(name)
        tool = self.registry.resolve(name)
        return ToolView(tool) if tool is not None else None

    def _parse(self, input: Any) -> tuple[list[dict[str, Any]], bool]:
        if isinstance(input, list) and input and isinstance(input[-1], dict) and "args" in input[-1]:
            return list(input), False  # raw tool calls
        if isinstance(input, Mapping) and input.get("__type") == "tool_call_with_context":
            return [dict(input["tool_call"])], True  # one call sent by create_react_agent (`Send`)
        if isinstance(input, list):
            messages, as_dict = input, False
        elif isinstance(input, Mapping):
            messages, as_dict = input.get(self.messages_key, []), True
        else:
            messages, as_dict = getattr(input, self.messages_key, []), True
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                return cast("list[dict[str, Any]]", list(message.tool_calls)), as_dict
        raise ValueError(f"ExecutorToolNode {self.name!r} found no AI message in the input")

    def _output(self, messages: list[ToolMessage], as_dict: bool) -> Any:
        return {self.messages_key: messages} if as_dict else messages

    def _unknown(self, call: dict[str, Any]) -> ToolMessage:
        names = ", ".join(self.tool_names)
        hint = did_you_mean(str(call["name"]), self.tool_names)
        text = f"Error: {call['name']!r} is not a valid tool, try one of [{names}].{hint}"
        writer = _WRITER.get()
        if writer is not None:
            # the executor never sees this call, so the node reports it in the events' shape itself
            ids = {k: v for k, v in self.context.ids().items() if v is not None}
            event = {"type": "tool.failed", "tool_name": call["name"], **ids, "tool_call_id": call.get("id")}
            writer(event | {"error": text, "error_type": "not_found"})
        return ToolMessage(text, tool_call_id=call.get("id") or "", name=call["name"], status="error")

    def _message(self, call: dict[str, Any], view: ToolView, result: ToolResult) -> ToolMessage:
        if self._search_id is not None and view.tool.tool_id == self._search_id and result.success:
            self._bind_found(result)
        if result.success:
            content: str | list[Any] = content_blocks(result, view.tool, name=view.name)
        else:
            content = text_for_llm(result, view.tool, name=view.name)
        status = "success" if result.success else "error"
        return ToolMessage(
            content, tool_call_id=call.get("id") or "", name=call["name"], status=status, artifact=result
        )

    # `invoke` / `ainvoke` replace ToolNode's: a node's calls need no callback run of their own (LangGraph
    # traces the node), and the executor emits the events; LangGraph's own ToolNode skips it likewise.
    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the tool calls of the last AI message (sync callers)."""
        with graph_pauses():  # an MCP server's elicitation pauses the run (LangGraph interrupt)
            return self._run_input_sync(input)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the tool calls of the last AI message, concurrently."""
        with graph_pauses():
            return await self._run_input(input)

    def _run_input_sync(self, input: Any) -> Any:
        calls, as_dict = self._parse(input)
        token = _WRITER.set(_stream_writer())
        try:
            ctx = under_acting(self.context)  # read here: the background loop does not see this context
            if len(calls) == 1:
                try:
                    asyncio.get_running_loop()
                except RuntimeError:  # no loop in this thread: run the one call here
                    return self._output([self._call_one_sync(calls[0], ctx)], as_dict)
            return self._output(run_sync(_streamed(_WRITER.get(), self._call_all(calls, ctx))), as_dict)
        finally:
            _WRITER.reset(token)

    async def _run_input(self, input: Any) -> Any:
        calls, as_dict = self._parse(input)
        token = _WRITER.set(_stream_writer())
        try:
            return self._output(await self._call_all(calls, under_acting(self.context)), as_dict)
        finally:
            _WRITER.reset(token)

    def _may_ask(self, calls: list[dict[str, Any]]) -> bool:
        """Whether any of `calls` may pause the run for an approval (`echo_tools.governance`)."""
        if self.executor.governance.approval_policy is not None:
            return True
        views = (self._view(c["name"]) for c in calls)
        return any(v is not None and v.tool.approval != "never" for v in views)

    def _call_one_sync(self, call: dict[str, Any], context: ToolContext) -> ToolMessage:
        view = self._view(call["name"])
        if view is None:
            return self._unknown(call)
        ctx = _with_call_id(context, call.get("id"))
        result = self.executor.invoke_sync(view.tool.tool_id, view.call_args(call.get("args")), ctx)
        return self._message(call, view, result)

    async def _call_one(self, call: dict[str, Any], context: ToolContext) -> ToolMessage:
        view = self._view(call["name"])
        if view is None:
            return self._unknown(call)
        ctx = _with_call_id(context, call.get("id"))
        result = await self.executor.invoke(view.tool.tool_id, view.call_args(call.get("args")), ctx)
        return self._message(call, view, result)

    async def _call_all(self, calls: list[dict[str, Any]], context: ToolContext) -> list[ToolMessage]:
        """Run `calls` with `context` (the node's, under the acting principal's ceiling and budget)."""
        if len(calls) == 1:
            return [await self._call_one(calls[0], context)]
        if self._may_ask(calls):
            # calls that may wait for a person's approval run one after the other: each pause happens in
            # call order (a resume answers the pause it was given for) and none is left running behind it
            return [await self._call_one(c, context) for c in calls]
        if len(calls) <= self.max_concurrency:  # within the bound: no semaphore needed
            return list(await asyncio.gather(*(self._call_one(c, context) for c in calls)))
        limit = asyncio.Semaphore(self.max_concurrency)

        async def bounded(call: dict[str, Any]) -> ToolMessage:
            async with limit:
                return await self._call_one(call, context)

        return list(await asyncio.gather(*(bounded(c) for c in calls)))


def make_tool_node(
    registry: ToolRegistry,
    executor: ToolExecutor,
    refs: Iterable[Ref] | None,
    context: ContextLike = None,
    **kwargs: Any,
) -> ExecutorToolNode:
    """An `ExecutorToolNode` for the tools `refs` name; keyword arguments go to `ExecutorToolNode`."""
    return ExecutorToolNode(registry, executor, refs, context, **kwargs)
