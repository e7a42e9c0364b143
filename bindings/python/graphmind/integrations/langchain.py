"""LangChain / LangGraph callback handlers: :class:`GraphMindCallbackHandler` (sync) and
:class:`AsyncGraphMindCallbackHandler` (async).

Chains, tools and retrievers become nodes ``<kind>:<name>`` (the core's ``Step``); chat
models and LLMs the core's LLM step (``llm:step``, the request and the ``LLMResult`` read
through the core's ``langchain`` codec, grouped into invocations, the tools offered
announced in the run's ``graph.hint``), exactly as Node's LangGraph handler records them.
Each hangs under its parent run's node, or the current GraphMind run's ``agent:<name>``.
Instance ids are the core's. The ``before`` gate is held at each ``*_start``, ``after`` at
each ``*_end``, ``error`` at each ``*_error`` (at the innermost level a failure reaches
only). LangChain calls the sync handler inline on the running thread (a held gate holds the
chain) and awaits the async one.

The gates only watch (``_native.watch_node`` / ``watch_model``): LangChain ignores what a
callback returns, so ``inject`` and ``retry`` cannot replace a result; the core logs its
warning once and continues. ``abort`` raises :class:`~graphmind.errors.GraphMindAbortError`,
which ends the chain (the handlers set ``raise_error``); nothing else ever escapes a handler.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from .. import _native
from ..errors import GraphMindAbortError, error_parts, is_abort_error
from ..session import Session, _current_run
from ._common import agent_node_id, field

#: ``(integration, label, hint)``: how the core words the warning at a callback gate.
_WATCH = ("langchain", "LangChain", "Wrap the tool with @gm.tool or the call site with gm.span to use it.")

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

_WAIT = _native.NEXT_HELD
_ABORT = _native.NEXT_ABORT


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _serialized_name(serialized: Any) -> str | None:
    """A serialized runnable's ``name``, else the last part of its ``id``."""
    if not isinstance(serialized, dict):
        return None
    name = _text(serialized.get("name"))
    if name is not None:
        return name
    ident = serialized.get("id")
    if isinstance(ident, (list, tuple)) and ident:
        return _text(ident[-1])
    return None


def _name_of(serialized: Any, kwargs: dict[str, Any], fallback: str) -> str:
    """A run's name: LangChain's ``name``, else the serialized name, else ``fallback``."""
    return _text(kwargs.get("name")) or _serialized_name(serialized) or fallback


def _model_request(serialized: Any, prompt_key: str, prompt: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The model request as the ``langchain`` codec reads it: the invocation parameters,
    the model (``ls_model_name``, else the parameters' ``model``, else the serialized
    name) and the prompt (``messages`` or ``prompts``), as Node's handler hands it over."""
    params = kwargs.get("invocation_params")
    request = dict(params) if isinstance(params, dict) else {}
    metadata = kwargs.get("metadata")
    model = (_text(metadata.get("ls_model_name")) if isinstance(metadata, dict) else None) or request.get("model") or _serialized_name(serialized)
    request["model"] = model
    request[prompt_key] = prompt
    return request


def _documents_output(documents: Any) -> Any:
    try:
        return [
            {"pageContent": field(doc, "page_content"), "metadata": field(doc, "metadata")}
            for doc in documents or []
        ]
    except Exception:
        return documents


class _Core:
    """What both handlers share, all but the waiting at gates: LangChain run id -> the
    watched step and its node id (children hang under it)."""

    def __init__(self, session: Session, capture_tokens: bool = True) -> None:
        self.session = session
        self.capture_tokens = capture_tokens
        self._runs: OrderedDict[str, tuple[Any, str]] = OrderedDict()

    def start(self, kind: str, serialized: Any, payload: Any, run_id: Any, parent_run_id: Any, kwargs: dict[str, Any], fallback: str) -> Any:
        """``node.started`` of a LangChain run (a model's through the LLM step)."""
        if not self.session._active():
            return None
        ctx = _current_run.get()
        gm_run = ctx.run_id if ctx is not None else None
        native = self.session._native
        if kind == "llm":
            prompt_key, prompt = payload
            step = _native.watch_model(
                native, gm_run, ctx.name if ctx is not None else None, "langchain",
                _model_request(serialized, prompt_key, prompt, kwargs), self._parent(parent_run_id, False), "langchain", _WATCH,
            )
        else:
            name = _name_of(serialized, kwargs, fallback)
            step = _native.watch_node(native, gm_run, kind, name, self._parent(parent_run_id, True), payload, _WATCH)
        self._runs[str(run_id)] = (step, step.node_id)
        while len(self._runs) > MAX_TRACKED_RUNS:
            self._runs.popitem(last=False)
        return step

    def _parent(self, parent_run_id: Any, agent: bool) -> str | None:
        """The parent run's node, else (``agent``) the current run's agent node; a model
        call's ``None`` is the run's agent node too (the core's LLM step hints it)."""
        if parent_run_id is not None:
            parent = self._runs.get(str(parent_run_id))
            if parent is not None:
                return parent[1]
        ctx = _current_run.get()
        return agent_node_id(ctx.name) if agent and ctx is not None else None

    def pop(self, run_id: Any) -> Any:
        entry = self._runs.pop(str(run_id), None)
        return entry[0] if entry is not None else None

    def chunk(self, run_id: Any, token: Any, chunk: Any) -> None:
        if not self.capture_tokens or not self.session._active():
            return
        entry = self._runs.get(str(run_id))
        if entry is not None:
            entry[0].chunk(chunk if chunk is not None else token)

    def failed(self, step: Any, error: BaseException) -> Any:
        """``node.error`` and the ``error`` gate; an abort is never held."""
        if is_abort_error(error) or not isinstance(error, Exception):
            step.ungated(True)
            return None
        return step.error(error, *error_parts(error))


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

    # -- the three moments, without waiting: each returns `(step, (code, gate))` or None ----

    def _started(self, kind: str, serialized: Any, payload: Any, run_id: Any, parent_run_id: Any, kwargs: dict[str, Any], fallback: str) -> Any:
        try:
            step = self._core.start(kind, serialized, payload, run_id, parent_run_id, kwargs, fallback)
            return None if step is None else (step, step.before())
        except Exception:
            return None

    def _ended(self, run_id: Any, output: Any) -> Any:
        try:
            step = self._core.pop(run_id)
            return None if step is None else (step, step.after(output))
        except Exception:
            return None

    def _failed(self, run_id: Any, error: BaseException) -> Any:
        try:
            step = self._core.pop(run_id)
            if step is None:
                return None
            answer = self._core.failed(step, error)
            return None if answer is None else (step, answer)
        except Exception:
            return None

    # -- waiting: a held gate's decision goes back to its step; an abort raises -----------

    def _wait(self, pending: Any) -> None:
        if pending is None:
            return
        step, (code, gate) = pending
        if code == _WAIT:
            try:
                code = step.resume(gate.wait())
            except BaseException as exc:
                return _gave_up(step, exc)
        _go_on(code)

    async def _await(self, pending: Any) -> None:
        if pending is None:
            return
        from ..session import await_gate

        step, (code, gate) = pending
        if code == _WAIT:
            try:
                code = step.resume(await await_gate(gate))
            except BaseException as exc:
                return _gave_up(step, exc)
        _go_on(code)


def _gave_up(step: Any, exc: BaseException) -> None:
    """A wait that raised: the node ends aborted; an interrupt or a cancellation goes on."""
    step.ungated(True)
    if not isinstance(exc, Exception):
        raise exc


def _go_on(code: int) -> None:
    """What the step said after its gate: an abort ends the chain."""
    if code == _ABORT:
        raise GraphMindAbortError()


class GraphMindCallbackHandler(_HandlerBase, _SyncBase):  # type: ignore[misc]
    """The sync handler: pass it in ``config={"callbacks": [handler]}``."""

    def __init__(self, session: Session | None = None, capture_tokens: bool = True) -> None:
        self._setup(session, capture_tokens)

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._started("chain", serialized, inputs, run_id, parent_run_id, kwargs, "chain"))

    def on_chain_end(self, outputs: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._ended(run_id, outputs))

    def on_chain_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._failed(run_id, error))

    def on_llm_start(self, serialized: Any, prompts: Sequence[str], *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._started("llm", serialized, ("prompts", list(prompts)), run_id, parent_run_id, kwargs, "llm"))

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._started("llm", serialized, ("messages", messages), run_id, parent_run_id, kwargs, "chat-model"))

    def on_llm_new_token(self, token: str, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        try:
            self._core.chunk(run_id, token, kwargs.get("chunk"))
        except Exception:
            pass

    def on_llm_end(self, response: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._ended(run_id, response))

    def on_llm_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._failed(run_id, error))

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, inputs: Any = None, **kwargs: Any) -> None:
        payload = inputs if inputs is not None else input_str
        self._wait(self._started("tool", serialized, payload, run_id, parent_run_id, kwargs, "tool"))

    def on_tool_end(self, output: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._ended(run_id, output))

    def on_tool_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._failed(run_id, error))

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._started("retriever", serialized, {"query": query}, run_id, parent_run_id, kwargs, "retriever"))

    def on_retriever_end(self, documents: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._ended(run_id, _documents_output(documents)))

    def on_retriever_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        self._wait(self._failed(run_id, error))


class AsyncGraphMindCallbackHandler(_HandlerBase, _AsyncBase):  # type: ignore[misc]
    """The async handler: LangChain awaits it, so a held gate holds the chain without
    occupying a thread. Prefer it with ``ainvoke`` / ``astream`` and async LangGraph."""

    def __init__(self, session: Session | None = None, capture_tokens: bool = True) -> None:
        self._setup(session, capture_tokens)

    async def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._started("chain", serialized, inputs, run_id, parent_run_id, kwargs, "chain"))

    async def on_chain_end(self, outputs: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._ended(run_id, outputs))

    async def on_chain_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._failed(run_id, error))

    async def on_llm_start(self, serialized: Any, prompts: Sequence[str], *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._started("llm", serialized, ("prompts", list(prompts)), run_id, parent_run_id, kwargs, "llm"))

    async def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._started("llm", serialized, ("messages", messages), run_id, parent_run_id, kwargs, "chat-model"))

    async def on_llm_new_token(self, token: str, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        try:
            self._core.chunk(run_id, token, kwargs.get("chunk"))
        except Exception:
            pass

    async def on_llm_end(self, response: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._ended(run_id, response))

    async def on_llm_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._failed(run_id, error))

    async def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, inputs: Any = None, **kwargs: Any) -> None:
        payload = inputs if inputs is not None else input_str
        await self._await(self._started("tool", serialized, payload, run_id, parent_run_id, kwargs, "tool"))

    async def on_tool_end(self, output: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._ended(run_id, output))

    async def on_tool_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._failed(run_id, error))

    async def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID | None = None, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._started("retriever", serialized, {"query": query}, run_id, parent_run_id, kwargs, "retriever"))

    async def on_retriever_end(self, documents: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._ended(run_id, _documents_output(documents)))

    async def on_retriever_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        await self._await(self._failed(run_id, error))


__all__ = ["LANGCHAIN_AVAILABLE", "AsyncGraphMindCallbackHandler", "GraphMindCallbackHandler"]
