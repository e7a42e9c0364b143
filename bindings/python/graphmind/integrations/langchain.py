"""LangChain / LangGraph callback handlers: :class:`GraphMindCallbackHandler` (sync) and
:class:`AsyncGraphMindCallbackHandler` (async).

Every chain, LLM / chat model, tool and retriever run becomes a node (``<kind>:<name>``,
the LangChain run id as its instance id), under its parent run's node or the current
GraphMind run's ``agent:<name>``. The ``before`` gate is held at each ``*_start``, ``after``
at each ``*_end``, ``error`` at each ``*_error``. LangChain calls the sync handler inline on
the running thread (a held gate holds the chain) and awaits the async one.

Callbacks only observe: LangChain ignores what they return, so ``inject`` and ``retry``
cannot replace a result here; they are logged once and act as ``continue``. ``abort``
raises :class:`~graphmind.errors.GraphMindAbortError`, which ends the chain (the handlers
set ``raise_error``); nothing else ever escapes a handler.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from ..errors import GraphMindAbortError, error_parts
from ..gate import GateNode
from ..session import Session, _current_run
from .. import _native
from ._common import (
    agent_node_id,
    capture_tools,
    field,
    request_params,
    warn,
)

#: What the warning at a callback gate suggests instead (Python's own API).
_CALLBACK_HINT = "Wrap the tool with @gm.tool or the call site with gm.span to use it."

try:
    from langchain_core.callbacks.base import AsyncCallbackHandler as _AsyncBase
    from langchain_core.callbacks.base import BaseCallbackHandler as _SyncBase

    LANGCHAIN_AVAILABLE = True
except Exception:  # langchain-core is not installed: the classes exist, creating one raises
    LANGCHAIN_AVAILABLE = False

    class _SyncBase:  # type: ignore[no-redef]
        raise_error = False
        run_inline = False

    class _AsyncBase:  # type: ignore[no-redef]
        raise_error = False
        run_inline = False


_MISSING = (
    "GraphMind's LangChain handler needs `langchain-core`: pip install langchain-core"
)

#: How many LangChain runs in progress are remembered (oldest forgotten first).
MAX_TRACKED_RUNS = 4096

FRAMEWORK = {"framework": "langchain"}


class _Node:
    __slots__ = ("instance_id", "kind", "name", "node_id", "run_id", "started")

    def __init__(self, node_id: str, kind: str, name: str, instance_id: str, run_id: str | None) -> None:
        self.node_id = node_id
        self.kind = kind
        self.name = name
        self.instance_id = instance_id
        self.run_id = run_id
        self.started = time.perf_counter()

    def gate_node(self) -> GateNode:
        return GateNode(self.node_id, self.kind, self.name)


def _name_of(serialized: Any, kwargs: dict[str, Any], fallback: str) -> str:
    """The run's name: LangChain's ``name``, else the serialized ``name``, the last part
    of its ``id``, its model, else ``fallback``."""
    name = kwargs.get("name")
    if isinstance(name, str) and name:
        return name
    if isinstance(serialized, dict):
        candidate = serialized.get("name")
        if isinstance(candidate, str) and candidate:
            return candidate
        ident = serialized.get("id")
        if isinstance(ident, (list, tuple)) and ident and isinstance(ident[-1], str) and ident[-1]:
            return ident[-1]
        block = serialized.get("kwargs")
        if isinstance(block, dict):
            model = block.get("model") or block.get("model_name")
            if isinstance(model, str) and model:
                return model
    return fallback


def _llm_output(response: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """An LLM run's output (text, ``toolCalls``, finish reason, model) and its usage, as the
    core's LangChain codec reads the ``LLMResult``."""
    try:
        return _native.llm_decode("langchain", response)
    except Exception:
        return {}, None


def _documents_output(documents: Any) -> Any:
    try:
        return [
            {"pageContent": field(doc, "page_content"), "metadata": field(doc, "metadata")}
            for doc in documents or []
        ]
    except Exception:
        return documents


class _Core:
    """What both handlers share, all but the waiting at gates."""

    def __init__(self, session: Session, capture_tokens: bool = True) -> None:
        self.session = session
        self.capture_tokens = capture_tokens
        self._runs: OrderedDict[str, _Node] = OrderedDict()

    def _input(self, kind: str, payload: Any, kwargs: dict[str, Any], run_id: str | None) -> Any:
        """An LLM run's prompt with the allow-listed ``invocation_params`` and its bound
        tools by name and hash; other runs' input as LangChain gave it."""
        if kind != "llm" or not isinstance(payload, dict):
            return payload
        out = dict(payload)
        invocation = kwargs.get("invocation_params")
        if isinstance(invocation, dict):
            out.update(request_params(invocation))
            tools = capture_tools(self.session, run_id, invocation.get("tools"))
            if tools:
                out.update(tools)
        return out

    def register(
        self, kind: str, serialized: Any, payload: Any, run_id: Any, parent_run_id: Any, kwargs: dict[str, Any], fallback: str
    ) -> _Node | None:
        if not self.session._active():
            return None
        ctx = _current_run.get()
        gm_run = ctx.run_id if ctx is not None else None
        name = _name_of(serialized, kwargs, fallback)
        key = str(run_id)
        node = _Node(f"{kind}:{name}", kind, name, key, gm_run)
        self._runs[key] = node
        while len(self._runs) > MAX_TRACKED_RUNS:
            self._runs.popitem(last=False)
        started: dict[str, Any] = {"nodeId": node.node_id, "kind": kind, "name": name, "instanceId": key}
        parent = self._parent(parent_run_id)
        if parent is not None:
            started["parentId"] = parent
        value = self._input(kind, payload, kwargs, gm_run)
        if value is not None:
            started["input"] = value
        started.update(FRAMEWORK)
        self.session._native.emit(gm_run, "node.started", started)
        return node

    def _parent(self, parent_run_id: Any) -> str | None:
        if parent_run_id is not None:
            parent = self._runs.get(str(parent_run_id))
            if parent is not None:
                return parent.node_id
        ctx = _current_run.get()
        return agent_node_id(ctx.name) if ctx is not None else None

    def pop(self, run_id: Any) -> _Node | None:
        return self._runs.pop(str(run_id), None)

    def finish(self, node: _Node, output: Any, status: str, reported: Any = None) -> None:
        if not self.session._active():
            return
        payload: dict[str, Any] = {
            "nodeId": node.node_id,
            "instanceId": node.instance_id,
            "durationMs": (time.perf_counter() - node.started) * 1000.0,
            "status": status,
        }
        if output is not None:
            payload["output"] = output
        if reported is not None:
            payload["usage"] = reported
        payload.update(FRAMEWORK)
        self.session._native.emit(node.run_id, "node.finished", payload)

    def error(self, node: _Node, error: Any) -> None:
        if not self.session._active():
            return
        name, message, stack = error_parts(error)
        info: dict[str, Any] = {"name": name, "message": message}
        if stack is not None:
            info["stack"] = stack
        self.session._native.emit(
            node.run_id,
            "node.error",
            {"nodeId": node.node_id, "instanceId": node.instance_id, "error": info, **FRAMEWORK},
        )

    def token(self, run_id: Any, token: Any) -> None:
        if not self.capture_tokens or not isinstance(token, str) or not token or not self.session._active():
            return
        node = self._runs.get(str(run_id))
        if node is not None:
            self.session._native.token(node.run_id, node.kind, node.name, node.node_id, node.instance_id, "text", token)

    def held(self, point: str, node: _Node) -> Any:
        if not self.session._active():
            return None
        return self.session._native.gate(node.run_id, point, node.node_id, node.kind, node.name)

    def apply(self, decision: Any, node: _Node) -> None:
        """What a callback gate does with a decision, as the core's watching gate says:
        ``abort`` ends the chain; ``inject`` and ``retry`` cannot be delivered and continue,
        with a warning."""
        code, warning = decision.at_watching_gate("langchain", "LangChain", _CALLBACK_HINT)
        if warning is not None:
            warn(self.session, *warning)
        if code == _native.NEXT_ABORT:
            self.finish(node, None, "aborted")
            raise GraphMindAbortError()


class _HandlerBase:
    #: Lets an ``abort`` end the chain; every handler body is guarded otherwise.
    raise_error = True
    run_inline = False

    _core: _Core

    @property
    def session(self) -> Session:
        return self._core.session

    def _setup(self, session: Session | None, capture_tokens: bool) -> None:
        if not LANGCHAIN_AVAILABLE:
            raise ImportError(_MISSING)
        if session is None:
            from ..api import instance

            session = instance().session
        self._core = _Core(session, capture_tokens)

    # -- the three moments, without waiting: each returns the node to gate, or None ----------

    def _started(self, kind: str, serialized: Any, payload: Any, run_id: Any, parent_run_id: Any, kwargs: dict[str, Any], fallback: str) -> _Node | None:
        try:
            return self._core.register(kind, serialized, payload, run_id, parent_run_id, kwargs, fallback)
        except Exception:
            return None

    def _ended(self, run_id: Any, output: Any, reported: Any = None) -> _Node | None:
        try:
            node = self._core.pop(run_id)
            if node is not None:
                self._core.finish(node, output, "ok", reported)
            return node
        except Exception:
            return None

    def _failed(self, run_id: Any, error: BaseException) -> _Node | None:
        try:
            node = self._core.pop(run_id)
            if node is not None:
                self._core.error(node, error)
                self._core.finish(node, None, "error")
            return node
        except Exception:
            return None

    def _wait(self, point: str, node: _Node | None) -> None:
        if node is None:
            return
        try:
            held = self._core.held(point, node)
            if held is None:
                return
            decision = held.wait()
        except Exception:
            return
        self._core.apply(decision, node)

    async def _await(self, point: str, node: _Node | None) -> None:
        if node is None:
            return
        from ..session import await_gate

        try:
            held = self._core.held(point, node)
            if held is None:
                return
            decision = await await_gate(held)
        except Exception:
            return
        self._core.apply(decision, node)


class GraphMindCallbackHandler(_HandlerBase, _SyncBase):  # type: ignore[misc]
    """The sync handler: pass it in ``config={"callbacks": [handler]}``."""

    def __init__(self, session: Session | None = None, capture_tokens: bool = True) -> None:
        self._setup(session, capture_tokens)

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait("before", self._started("chain", serialized, inputs, run_id, parent_run_id, kwargs, "chain"))

    def on_chain_end(self, outputs: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait("after", self._ended(run_id, outputs))

    def on_chain_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait("error", self._failed(run_id, error))

    def on_llm_start(self, serialized: Any, prompts: Sequence[str], *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait("before", self._started("llm", serialized, {"prompts": list(prompts)}, run_id, parent_run_id, kwargs, "llm"))

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait("before", self._started("llm", serialized, {"messages": messages}, run_id, parent_run_id, kwargs, "chat-model"))

    def on_llm_new_token(self, token: str, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        try:
            self._core.token(run_id, token)
        except Exception:
            pass

    def on_llm_end(self, response: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        output, reported = _llm_output(response)
        self._wait("after", self._ended(run_id, output, reported))

    def on_llm_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait("error", self._failed(run_id, error))

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, inputs: Any = None, **kwargs: Any) -> None:
        payload = inputs if inputs is not None else input_str
        self._wait("before", self._started("tool", serialized, payload, run_id, parent_run_id, kwargs, "tool"))

    def on_tool_end(self, output: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait("after", self._ended(run_id, output))

    def on_tool_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait("error", self._failed(run_id, error))

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait("before", self._started("retriever", serialized, {"query": query}, run_id, parent_run_id, kwargs, "retriever"))

    def on_retriever_end(self, documents: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait("after", self._ended(run_id, _documents_output(documents)))

    def on_retriever_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait("error", self._failed(run_id, error))


class AsyncGraphMindCallbackHandler(_HandlerBase, _AsyncBase):  # type: ignore[misc]
    """The async handler: LangChain awaits it, so a held gate holds the chain without
    occupying a thread. Prefer it with ``ainvoke`` / ``astream`` and async LangGraph."""

    def __init__(self, session: Session | None = None, capture_tokens: bool = True) -> None:
        self._setup(session, capture_tokens)

    async def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await("before", self._started("chain", serialized, inputs, run_id, parent_run_id, kwargs, "chain"))

    async def on_chain_end(self, outputs: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await("after", self._ended(run_id, outputs))

    async def on_chain_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await("error", self._failed(run_id, error))

    async def on_llm_start(self, serialized: Any, prompts: Sequence[str], *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await("before", self._started("llm", serialized, {"prompts": list(prompts)}, run_id, parent_run_id, kwargs, "llm"))

    async def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await("before", self._started("llm", serialized, {"messages": messages}, run_id, parent_run_id, kwargs, "chat-model"))

    async def on_llm_new_token(self, token: str, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        try:
            self._core.token(run_id, token)
        except Exception:
            pass

    async def on_llm_end(self, response: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        output, reported = _llm_output(response)
        await self._await("after", self._ended(run_id, output, reported))

    async def on_llm_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await("error", self._failed(run_id, error))

    async def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, inputs: Any = None, **kwargs: Any) -> None:
        payload = inputs if inputs is not None else input_str
        await self._await("before", self._started("tool", serialized, payload, run_id, parent_run_id, kwargs, "tool"))

    async def on_tool_end(self, output: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await("after", self._ended(run_id, output))

    async def on_tool_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await("error", self._failed(run_id, error))

    async def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await("before", self._started("retriever", serialized, {"query": query}, run_id, parent_run_id, kwargs, "retriever"))

    async def on_retriever_end(self, documents: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await("after", self._ended(run_id, _documents_output(documents)))

    async def on_retriever_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await("error", self._failed(run_id, error))


__all__ = ["LANGCHAIN_AVAILABLE", "AsyncGraphMindCallbackHandler", "GraphMindCallbackHandler"]
