"""What the LLM-client integrations share: one recorded model step (:class:`LlmCall`),
stream proxies that watch a provider stream while the app consumes it, and patching of a
client instance's bound methods.

Every capture rule (finish reasons, tool calls, usage per provider, the sampling-parameter
allow-list, tool-definition sanitising and hashing) is the core's, reached through
``graphmind._native``; this module only reads the client libraries' objects and hands
them over.
"""

from __future__ import annotations

import inspect
import itertools
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from .. import _native
from ..errors import error_parts
from ..gate import GateDecision
from ..session import Session, _current_run, await_gate

#: The node every provider-SDK model call is recorded under (the reference's ids).
LLM_NODE_ID = "llm:step"
LLM_NODE_NAME = "step"
LLM_KIND = "llm"

#: Marks a patched method (and keeps the original for :func:`unpatch_method`).
WRAPPED_FLAG = "__graphmind_wrapped__"
ORIGINAL_ATTR = "__graphmind_original__"


def agent_node_id(run_name: str) -> str:
    """The node id of a run's root node."""
    return f"agent:{run_name}"


# -- instance ids ------------------------------------------------------------------------

_id_lock = threading.Lock()
_id_base = uuid.uuid4().hex[:6]
_id_counter = itertools.count(1)


def next_id(prefix: str) -> str:
    """A compact id unique in this process (``step_<base>_<n>``)."""
    with _id_lock:
        return f"{prefix}_{_id_base}_{next(_id_counter)}"


def _reseed_ids() -> None:
    global _id_base, _id_counter, _id_lock
    _id_lock = threading.Lock()
    _id_base = uuid.uuid4().hex[:6]
    _id_counter = itertools.count(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed_ids)


# -- reading host objects ------------------------------------------------------------------


def field(source: Any, key: str) -> Any:
    """``source[key]`` for a mapping, ``source.key`` for an SDK object; never raises."""
    if source is None:
        return None
    try:
        if isinstance(source, Mapping):
            return source.get(key)
        return getattr(source, key, None)
    except Exception:
        return None


def given(value: Any) -> bool:
    """Whether a request argument was really given (not ``None`` nor a client library's
    ``NOT_GIVEN`` / ``omit`` sentinel)."""
    return value is not None and type(value).__name__ not in ("NotGiven", "Omit")


def request_params(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling parameters of a request, as the core's allow-list picks them."""
    subset = {k: kwargs[k] for k in _sampling_keys() if k in kwargs and given(kwargs[k])}
    if not subset:
        return {}
    try:
        return _native.pick_params(subset)
    except Exception:
        return {}


_SAMPLING_KEYS: tuple[str, ...] | None = None


def _sampling_keys() -> tuple[str, ...]:
    global _SAMPLING_KEYS
    if _SAMPLING_KEYS is None:
        _SAMPLING_KEYS = tuple(_native.sampling_param_keys())
    return _SAMPLING_KEYS


def finish_fields(raw: Any, has_tool_calls: bool) -> dict[str, str]:
    """``finishReason`` (the core's normalisation) and ``rawFinishReason`` (as reported)."""
    out: dict[str, str] = {}
    if not isinstance(raw, str):
        return out
    try:
        normalized = _native.finish_reason(raw, has_tool_calls)
    except Exception:
        normalized = None
    if normalized is not None:
        out["finishReason"] = normalized
    if raw:
        out["rawFinishReason"] = str(raw)
    return out


def tool_call(call_id: Any, name: Any, args: Any) -> dict[str, Any] | None:
    """One requested tool call as the core records it (``None`` without a name)."""
    try:
        return _native.tool_call(call_id, name, args)
    except Exception:
        try:  # arguments the converter cannot read: record the call without them
            return _native.tool_call(call_id, name, None)
        except Exception:
            return None


def usage(provider: str, raw: Any) -> dict[str, Any] | None:
    """A provider's reported usage as the wire ``TokenUsage`` (``None``: not reported)."""
    if raw is None:
        return None
    try:
        return _native.provider_usage(provider, raw)
    except Exception:
        return None


# -- tool definitions, remembered per session and run --------------------------------------

_schemas: weakref.WeakKeyDictionary[Session, Any] = weakref.WeakKeyDictionary()
_schemas_lock = threading.Lock()


def capture_tools(session: Session, run_id: str | None, tools: Any) -> dict[str, Any] | None:
    """``{tools: [{name, schemaHash}], toolSchemas?}`` for one step's tool definitions."""
    if not given(tools) or not isinstance(tools, (list, tuple)) or not tools:
        return None
    with _schemas_lock:
        memory = _schemas.get(session)
        if memory is None:
            memory = _native.ToolSchemas()
            _schemas[session] = memory
    try:
        return memory.capture(run_id if run_id is not None else "implicit", list(tools))
    except Exception:
        return None


def tool_names(tools: Any) -> list[str]:
    """The names in a list of tool definitions of any provider's shape."""
    names: list[str] = []
    if not isinstance(tools, (list, tuple)):
        return names
    for entry in tools:
        name = field(entry, "name")
        if not (isinstance(name, str) and name):
            name = field(field(entry, "function"), "name")
        if isinstance(name, str) and name:
            names.append(name)
    return names


# -- warnings ------------------------------------------------------------------------------


def warn(session: Session, key: str, message: str) -> None:
    """A rate-limited warning through the session's logger."""
    try:
        session._native.warn(key, message)
    except Exception:
        pass


# -- one recorded model step ---------------------------------------------------------------


class GraphHinter:
    """``graph.hint`` once per run: the run's agent node, the llm node, the tools offered."""

    MAX_RUNS = 256

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def hint(self, session: Session, tools: Any) -> None:
        try:
            ctx = _current_run.get()
            key = ctx.run_id if ctx is not None else "-"
            with self._lock:
                if key in self._seen:
                    return
                if len(self._seen) >= self.MAX_RUNS:
                    self._seen.clear()
                self._seen.add(key)
            nodes: list[dict[str, Any]] = []
            llm: dict[str, Any] = {"nodeId": LLM_NODE_ID, "kind": LLM_KIND, "name": LLM_NODE_NAME}
            if ctx is not None:
                parent = agent_node_id(ctx.name)
                nodes.append({"nodeId": parent, "kind": "agent", "name": ctx.name})
                llm["parentId"] = parent
            nodes.append(llm)
            for name in tool_names(tools):
                nodes.append({"nodeId": f"tool:{name}", "kind": "tool", "name": name, "parentId": LLM_NODE_ID})
            session._native.graph_hint(ctx.run_id if ctx is not None else None, nodes)
        except Exception:
            pass


class LlmCall:
    """One model call recorded as an ``llm:step`` node: ``node.started``, its gates,
    streamed deltas, ``node.error`` and one ``node.finished``. The run is the one current
    when the call began, so a stream consumed elsewhere still lands in it."""

    __slots__ = ("_run_id", "finished", "instance_id", "sdk", "session", "started")

    def __init__(self, session: Session, sdk: str) -> None:
        self.session = session
        self.sdk = sdk
        self.instance_id = next_id("step")
        ctx = _current_run.get()
        self._run_id = ctx.run_id if ctx is not None else None
        self.started = time.perf_counter()
        self.finished = False

    @property
    def run_id(self) -> str | None:
        return self._run_id

    def begin(self, input: dict[str, Any]) -> None:
        ctx = _current_run.get()
        payload: dict[str, Any] = {
            "nodeId": LLM_NODE_ID,
            "kind": LLM_KIND,
            "name": LLM_NODE_NAME,
            "instanceId": self.instance_id,
        }
        if ctx is not None:
            payload["parentId"] = agent_node_id(ctx.name)
        payload["input"] = input
        payload["sdk"] = self.sdk
        self._emit("node.started", payload)
        self.started = time.perf_counter()

    def _emit(self, event_type: str, payload: dict[str, Any]) -> None:
        if self.session._active():
            self.session._native.emit(self._run_id, event_type, payload)

    def token(self, channel: str, text: Any) -> None:
        """One streamed delta (``text``, ``reasoning``, ``tool-args``)."""
        if not isinstance(text, str) or not text or not self.session._active():
            return
        try:
            self.session._native.token(
                self._run_id, LLM_KIND, LLM_NODE_NAME, LLM_NODE_ID, self.instance_id, channel, text
            )
        except Exception:
            pass

    def error(self, exc: BaseException) -> None:
        name, message, stack = error_parts(exc)
        info: dict[str, Any] = {"name": name, "message": message}
        if stack is not None:
            info["stack"] = stack
        self._emit("node.error", {"nodeId": LLM_NODE_ID, "instanceId": self.instance_id, "error": info})

    def finish(
        self,
        output: Any,
        status: str,
        usage: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """``node.finished``, once (a stream may end by exhaustion and by ``close``)."""
        if self.finished:
            return
        self.finished = True
        payload: dict[str, Any] = {
            "nodeId": LLM_NODE_ID,
            "instanceId": self.instance_id,
            "durationMs": (time.perf_counter() - self.started) * 1000.0,
            "status": status,
        }
        if output is not None:
            payload["output"] = output
        if usage is not None:
            payload["usage"] = usage
        if extra:
            payload.update(extra)
        self._emit("node.finished", payload)

    # -- gates ---------------------------------------------------------------------------

    def _held(self, point: str) -> Any:
        if not self.session._active():
            return None
        return self.session._native.gate(self._run_id, point, LLM_NODE_ID, LLM_KIND, LLM_NODE_NAME)

    def gate(self, point: str) -> GateDecision:
        """The gate at ``point``, waited for on this thread (GIL released)."""
        held = self._held(point)
        if held is None:
            return GateDecision.CONTINUE
        return GateDecision._from_native(held.wait())

    async def gate_async(self, point: str) -> GateDecision:
        """The gate at ``point``, awaited on the running loop."""
        held = self._held(point)
        if held is None:
            return GateDecision.CONTINUE
        return GateDecision._from_native(await await_gate(held))

    def abort_error(self) -> BaseException:
        return self.session.abort_error(_current_run.get())

    def injected(self, value: Any, recovered: bool = False) -> Any:
        """Ends the node with the debugger's value and returns it to the app."""
        extra: dict[str, Any] = {"injected": True}
        if recovered:
            extra["recoveredFromError"] = True
        self.finish(value, "ok", None, extra)
        return value


# -- the gate-call-gate loop, written once per colour --------------------------------------


class CallPlan:
    """What one provider method does around the shared gate loop: ``begin`` records the
    request, ``stream`` says whether a result is a stream (then ``tee`` wraps it and the
    node ends with the stream), ``finish`` records a complete result."""

    def begin(self, call: LlmCall, kwargs: dict[str, Any]) -> None:  # pragma: no cover
        raise NotImplementedError

    def stream(self, result: Any, kwargs: dict[str, Any], is_async: bool) -> bool:  # pragma: no cover
        raise NotImplementedError

    def tee(self, call: LlmCall, result: Any, is_async: bool) -> Any:  # pragma: no cover
        raise NotImplementedError

    def finish(self, call: LlmCall, result: Any) -> None:  # pragma: no cover
        raise NotImplementedError


def _start(session: Session, plan: CallPlan, sdk: str, kwargs: dict[str, Any]) -> LlmCall | None:
    call = LlmCall(session, sdk)
    try:
        plan.begin(call, kwargs)
    except Exception:
        warn(session, f"{sdk}-begin", f"failed to record a {sdk} call; it runs unrecorded")
        return None
    return call


def sync_caller(session: Session, plan: CallPlan, sdk: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """The patched sync method: ``before`` gate, the request, ``after`` or ``error`` gate."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not session._active():
            return original(*args, **kwargs)
        call = _start(session, plan, sdk, kwargs)
        if call is None:
            return original(*args, **kwargs)
        while True:
            pre = call.gate("before")
            if pre.action == "abort":
                call.finish(None, "aborted")
                raise call.abort_error()
            if pre.action == "inject":
                return call.injected(pre.output)
            try:
                result = original(*args, **kwargs)
            except Exception as exc:
                call.error(exc)
                decision = call.gate("error")
                if decision.action == "inject":
                    return call.injected(decision.output, recovered=True)
                if decision.action == "retry":
                    continue
                if decision.action == "abort":
                    call.finish(None, "aborted")
                    raise call.abort_error() from exc
                call.finish(None, "error")
                raise
            except BaseException:
                call.finish(None, "aborted")
                raise
            if plan.stream(result, kwargs, False):
                return plan.tee(call, result, False)
            post = call.gate("after")
            if post.action == "inject":
                return call.injected(post.output)
            if post.action == "retry":
                continue
            if post.action == "abort":
                call.finish(None, "aborted")
                raise call.abort_error()
            plan.finish(call, result)
            return result

    return _mark(wrapper, original)


def async_caller(session: Session, plan: CallPlan, sdk: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """The patched ``async`` method: the same loop, gates awaited on the app's loop."""

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not session._active():
            return await original(*args, **kwargs)
        call = _start(session, plan, sdk, kwargs)
        if call is None:
            return await original(*args, **kwargs)
        while True:
            pre = await call.gate_async("before")
            if pre.action == "abort":
                call.finish(None, "aborted")
                raise call.abort_error()
            if pre.action == "inject":
                return call.injected(pre.output)
            try:
                result = await original(*args, **kwargs)
            except Exception as exc:
                call.error(exc)
                decision = await call.gate_async("error")
                if decision.action == "inject":
                    return call.injected(decision.output, recovered=True)
                if decision.action == "retry":
                    continue
                if decision.action == "abort":
                    call.finish(None, "aborted")
                    raise call.abort_error() from exc
                call.finish(None, "error")
                raise
            except BaseException:
                call.finish(None, "aborted")
                raise
            if plan.stream(result, kwargs, True):
                return plan.tee(call, result, True)
            post = await call.gate_async("after")
            if post.action == "inject":
                return call.injected(post.output)
            if post.action == "retry":
                continue
            if post.action == "abort":
                call.finish(None, "aborted")
                raise call.abort_error()
            plan.finish(call, result)
            return result

    return _mark(wrapper, original)


def _mark(wrapper: Any, original: Any) -> Any:
    try:
        wrapper.__name__ = getattr(original, "__name__", "create")
        wrapper.__qualname__ = getattr(original, "__qualname__", wrapper.__name__)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        wrapper.__wrapped__ = original
    except Exception:
        pass
    return wrapper


# -- stream proxies ------------------------------------------------------------------------


class StreamWatch:
    """What a stream proxy reports: each item as it passes, then the end (``None`` or the
    error that ended it), once."""

    def chunk(self, item: Any) -> None:  # pragma: no cover
        raise NotImplementedError

    def end(self, error: BaseException | None) -> None:  # pragma: no cover
        raise NotImplementedError


class SyncStreamProxy:
    """Stands in for a provider's sync stream: iterating it iterates the real one (the app
    gets every item unchanged), context-manager use and ``close()`` reach the real one, any
    other attribute is the real one's."""

    def __init__(self, inner: Any, watch: StreamWatch) -> None:
        self._inner = inner
        self._watch = watch
        self._iterator: Any = None
        self._ended = False

    def __iter__(self) -> SyncStreamProxy:
        return self

    def __next__(self) -> Any:
        if self._iterator is None:
            self._iterator = iter(self._inner)
        try:
            item = next(self._iterator)
        except StopIteration:
            self._end(None)
            raise
        except BaseException as exc:
            self._end(exc)
            raise
        try:
            self._watch.chunk(item)
        except Exception:
            pass
        return item

    def __enter__(self) -> SyncStreamProxy:
        enter = getattr(self._inner, "__enter__", None)
        if enter is not None:
            enter()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        self._end(exc)
        exit_ = getattr(self._inner, "__exit__", None)
        if exit_ is not None:
            return exit_(exc_type, exc, tb)
        return None

    def close(self) -> None:
        self._end(None)
        closer = getattr(self._inner, "close", None)
        if closer is not None:
            closer()

    def _end(self, error: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            self._watch.end(error)
        except Exception:
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class AsyncStreamProxy:
    """The ``async for`` twin of :class:`SyncStreamProxy`."""

    def __init__(self, inner: Any, watch: StreamWatch) -> None:
        self._inner = inner
        self._watch = watch
        self._iterator: Any = None
        self._ended = False

    def __aiter__(self) -> AsyncStreamProxy:
        return self

    async def __anext__(self) -> Any:
        if self._iterator is None:
            self._iterator = self._inner.__aiter__()
        try:
            item = await self._iterator.__anext__()
        except StopAsyncIteration:
            self._end(None)
            raise
        except BaseException as exc:
            self._end(exc)
            raise
        try:
            self._watch.chunk(item)
        except Exception:
            pass
        return item

    async def __aenter__(self) -> AsyncStreamProxy:
        enter = getattr(self._inner, "__aenter__", None)
        if enter is not None:
            await enter()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        self._end(exc)
        exit_ = getattr(self._inner, "__aexit__", None)
        if exit_ is not None:
            return await exit_(exc_type, exc, tb)
        return None

    async def close(self) -> None:
        self._end(None)
        closer = getattr(self._inner, "close", None)
        if closer is not None:
            result = closer()
            if inspect.isawaitable(result):
                await result

    def _end(self, error: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            self._watch.end(error)
        except Exception:
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def end_stream(call: LlmCall, output: dict[str, Any], usage: dict[str, Any] | None, error: BaseException | None) -> None:
    """A streamed call's end: ``node.error`` first when it failed, then ``node.finished``
    with ``streaming: true``."""
    if call.finished:
        return
    if error is not None and not isinstance(error, (GeneratorExit,)):
        call.error(error)
        call.finish(output, "error", usage, {"streaming": True})
    else:
        call.finish(output, "ok", usage, {"streaming": True})


# -- async detection and patching -------------------------------------------------------------


def is_async_callable(fn: Any) -> bool:
    """``async def`` methods, also behind the client libraries' sync-looking decorators
    (followed through ``__func__`` / ``__wrapped__``)."""
    target = fn
    for _ in range(10):
        if target is None:
            return False
        if inspect.iscoroutinefunction(target):
            return True
        nxt = getattr(target, "__func__", None)
        if nxt is None or nxt is target:
            nxt = getattr(target, "__wrapped__", None)
        if nxt is None or nxt is target:
            return False
        target = nxt
    return False


def is_async_client(client: Any) -> bool:
    """The client talks through an async HTTP client (``AsyncOpenAI``, ``AsyncAnthropic``)."""
    inner = getattr(client, "_client", None)
    return inner is not None and "Async" in type(inner).__name__


def _resolve(root: Any, path: tuple[str, ...]) -> Any:
    target = root
    for part in path:
        target = getattr(target, part, None)
        if target is None:
            return None
    return target


def patch_method(
    session: Session,
    root: Any,
    path: tuple[str, ...],
    attr: str,
    make: Callable[[Callable[..., Any]], Callable[..., Any]],
    label: str,
) -> bool:
    """Replaces ``root.<path>.<attr>`` on the instance with ``make(original)``. Already
    patched: nothing (idempotent). Never raises; ``False`` when it did not stick."""
    try:
        target = _resolve(root, path)
        if target is None:
            return False
        original = getattr(target, attr, None)
        if original is None or not callable(original):
            return False
        if getattr(original, WRAPPED_FLAG, False):
            return True
        wrapper = make(original)
        setattr(wrapper, WRAPPED_FLAG, True)
        setattr(wrapper, ORIGINAL_ATTR, original)
        setattr(target, attr, wrapper)
        again = _resolve(root, path)
        if not getattr(getattr(again, attr, None), WRAPPED_FLAG, False):
            warn(
                session,
                f"patch-unstable:{label}",
                f"could not instrument {label}: the client builds this resource anew on every "
                "access. Wrap the call site with gm.span or @gm.tool instead.",
            )
            return False
        return True
    except Exception:
        warn(session, f"patch-failed:{label}", f"could not instrument {label}; continuing without it")
        return False


def unpatch_method(root: Any, path: tuple[str, ...], attr: str) -> bool:
    """Puts an instrumented method's original back."""
    try:
        target = _resolve(root, path)
        original = getattr(getattr(target, attr, None), ORIGINAL_ATTR, None)
        if target is None or original is None:
            return False
        setattr(target, attr, original)
        return True
    except Exception:
        return False


def default_session(session: Session | None) -> Session:
    if session is not None:
        return session
    from ..api import instance

    return instance().session
