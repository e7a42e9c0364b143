"""What the LLM-client integrations share: one model call driven by the core's LLM step
through the same gated-call loop as a tool (``wrap._run_sync`` / ``_run_async`` with a
:class:`_CallPlan`), stream proxies that hand each chunk to the step
while the app consumes the stream, and patching of a client instance's bound methods.

Every rule of a model call (the gates and what each decision means, instance ids and
invocations, the request / answer / stream mapping of each provider, usage, injected
replies) is the core's, reached through ``graphmind._native.llm_step``; this module only
reads the client libraries' objects and hands them over.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from .. import _native
from ..errors import error_parts, is_abort_error
from ..session import Session, _current_run
from ..wrap import ABORT, WAIT, ModelPlan, _run_async, _run_sync

#: Marks a patched method (and keeps the original for :func:`unpatch_method`).
WRAPPED_FLAG = "__graphmind_wrapped__"
ORIGINAL_ATTR = "__graphmind_original__"


def agent_node_id(run_name: str) -> str:
    """The node id of a run's root node."""
    return f"agent:{run_name}"


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


# -- stream proxies ------------------------------------------------------------------------


class StreamWatch:
    """What a stream proxy reports: each item as it passes, then the end (``None`` or the
    error that ended it), once."""

    def chunk(self, item: Any) -> None:  # pragma: no cover
        raise NotImplementedError

    def end(self, error: BaseException | None) -> None:  # pragma: no cover
        raise NotImplementedError


class _StreamProxy:
    """What the sync and async stream proxies share: the real stream, the watch told of each
    item and, once, of the end; any other attribute is the real stream's."""

    def __init__(self, inner: Any, watch: StreamWatch) -> None:
        self._inner = inner
        self._watch = watch
        self._iterator: Any = None
        self._ended = False

    def _seen(self, item: Any) -> Any:
        """An item the app gets unchanged, shown to the watch first."""
        try:
            self._watch.chunk(item)
        except Exception:
            pass
        return item

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


class SyncStreamProxy(_StreamProxy):
    """Stands in for a provider's sync stream: iterating it iterates the real one (the app
    gets every item unchanged), context-manager use and ``close()`` reach the real one, any
    other attribute is the real one's."""

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
        return self._seen(item)

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


class AsyncStreamProxy(_StreamProxy):
    """The ``async for`` twin of :class:`SyncStreamProxy`."""

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
        return self._seen(item)

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


# -- warnings ------------------------------------------------------------------------------


def warn(session: Session, key: str, message: str) -> None:
    """A rate-limited warning through the session's logger."""
    try:
        session._native.warn(key, message)
    except Exception:
        pass


# -- one model call, driven by the core's LLM step -----------------------------------------------


class ModelMethod:
    """One instrumented client method: the wire format it speaks (the core's codec name),
    the integration's name, and how its results look to Python: whether a result is a
    stream, and which of the client library's types an injected reply becomes."""

    __slots__ = ("api", "chunk_type", "reply_type", "sdk", "stream_only")

    def __init__(self, api: str, sdk: str, reply_type: str, stream_only: bool = False, chunk_type: str | None = None) -> None:
        self.api = api
        self.sdk = sdk
        self.reply_type = reply_type  # "package.module:Class"
        self.stream_only = stream_only
        self.chunk_type = chunk_type  # the stream's chunk type, same spelling

    def reply(self, value: Any) -> Any:
        """The core's provider-shaped reply as the client library's own type (a value that
        is not a reply object is handed back as it is)."""
        return _as_type(self.reply_type, value)

    def stream(self, chunks: list[Any], is_async: bool) -> Any:
        """A replayed stream: each chunk the core rebuilt as the library's chunk type."""
        items = [_as_type(self.chunk_type, c) if self.chunk_type else c for c in chunks]
        return AsyncReplayedStream(items) if is_async else ReplayedStream(items)


def _as_type(type_name: str, value: Any) -> Any:
    """``value`` (plain data) as the client library's ``package.module:Class``, by its
    pydantic ``model_validate`` (else ``model_construct``); handed back as it is when that
    fails or it is not a mapping."""
    if not isinstance(value, dict):
        return value
    try:
        module_name, _, class_name = type_name.partition(":")
        cls = getattr(__import__(module_name, fromlist=[class_name]), class_name)
    except Exception:
        return value
    for build in ("model_validate", "model_construct"):
        try:
            return getattr(cls, build)(value)
        except Exception:
            continue
    return value


class ReplayedStream:
    """A replayed stream's chunks, read as the client library's stream is: iteration,
    ``with``, ``close()``."""

    def __init__(self, chunks: list[Any]) -> None:
        self._chunks = iter(chunks)

    def __iter__(self) -> ReplayedStream:
        return self

    def __next__(self) -> Any:
        return next(self._chunks)

    def __enter__(self) -> ReplayedStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._chunks = iter(())


class AsyncReplayedStream:
    """The ``async for`` twin of :class:`ReplayedStream`."""

    def __init__(self, chunks: list[Any]) -> None:
        self._chunks = iter(chunks)

    def __aiter__(self) -> AsyncReplayedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self._chunks)
        except StopIteration:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AsyncReplayedStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        self._chunks = iter(())


def is_response_wrapper(result: Any) -> bool:
    """``with_raw_response`` / ``with_streaming_response`` hand back the HTTP response with
    a ``parse()`` that reads the answer (or the stream) from it. Read from the instance's
    own attributes: asking a pydantic answer for a missing attribute raises and catches
    an error inside pydantic (2 us a call)."""
    fields = getattr(result, "__dict__", None)
    return type(fields) is dict and "http_response" in fields and callable(getattr(result, "parse", None))


def is_stream(result: Any, kwargs: Mapping[str, Any], is_async: bool) -> bool:
    """A streamed answer: ``stream=True`` was asked for and the result iterates (a parsed
    answer object is never taken for a stream)."""
    if kwargs.get("stream") is not True:
        return False
    return hasattr(result, "__aiter__" if is_async else "__iter__")


def start_step(session: Session, method: ModelMethod, kwargs: dict[str, Any]) -> Any:
    """``node.started`` of a model call (the core's ``LlmStep``), or ``None`` when it could
    not be recorded (then the call runs unrecorded)."""
    ctx = _current_run.get()
    try:
        step = _native.llm_step(
            session._native, ctx.run_id if ctx is not None else None, ctx.name if ctx is not None else None,
            method.api, kwargs, method.sdk,
        )
    except Exception:
        warn(session, f"{method.sdk}-begin", f"failed to record a {method.sdk} call; it runs unrecorded")
        return None
    if method.stream_only:
        step.stream_only()
    return step


class StepWatch(StreamWatch):
    """Hands each stream chunk to the step; ends it once when the stream ends.
    ``source``: the client library's stream object, whose accumulated message (when it keeps
    one, e.g. Anthropic's ``current_message_snapshot``) completes the record."""

    __slots__ = ("source", "step")

    def __init__(self, step: Any, source: Any = None) -> None:
        self.step = step
        self.source = source

    def chunk(self, item: Any) -> None:
        self.step.chunk(item)

    def text(self, text: Any) -> None:
        if isinstance(text, str) and text:
            self.step.text(text)

    def end(self, error: BaseException | None) -> None:
        final = None
        if error is None and self.source is not None:
            try:
                snapshot = getattr(self.source, "current_message_snapshot", None)
                final = None if inspect.isawaitable(snapshot) else snapshot
            except Exception:
                final = None
        if error is None or isinstance(error, GeneratorExit):
            self.step.stream_end(final_message=final)
        elif is_abort_error(error) or not isinstance(error, Exception):
            self.step.stream_end(aborted=True)
        else:
            self.step.stream_end(*error_parts(error))


def _answer(step: Any, result: Any, kwargs: Mapping[str, Any], is_async: bool) -> tuple[Any, Any]:
    """What the gate after the request sees: ``(stream-or-None, answer)``. A response
    wrapper's answer is read through its ``parse()`` (cached: the app's own call gets the
    same object); its stream is watched when the app parses it."""
    if is_response_wrapper(result):
        if kwargs.get("stream") is True:
            parse = result.parse
            proxy = AsyncStreamProxy if is_async else SyncStreamProxy
            watched_parse: Any
            if is_async_callable(parse):

                async def watched_parse(*args: Any, **kw: Any) -> Any:
                    return proxy(await parse(*args, **kw), StepWatch(step))

            else:

                def watched_parse(*args: Any, **kw: Any) -> Any:
                    return proxy(parse(*args, **kw), StepWatch(step))

            try:
                result.parse = watched_parse
            except Exception:
                pass
            return result, None
        return None, result.parse()
    if is_stream(result, kwargs, is_async):
        proxy = AsyncStreamProxy if is_async else SyncStreamProxy
        return proxy(result, StepWatch(step)), None
    return None, result


class _CallPlan(ModelPlan):
    """A model call's part of the gated-call loop (``wrap._run_sync`` / ``_run_async``)."""

    __slots__ = ("is_async", "method")

    def __init__(self, method: ModelMethod, is_async: bool) -> None:
        self.method = method
        self.is_async = is_async

    def answer(self, step: Any, result: Any, kwargs: Any) -> tuple[Any, Any]:
        return _answer(step, result, kwargs, self.is_async)

    def reply(self, value: Any) -> Any:
        return self.method.reply(value)

    def stream(self, chunks: list[Any], is_async: bool) -> Any:
        return self.method.stream(chunks, is_async)


def model_caller(session: Session, method: ModelMethod, original: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    """The patched method: the original when GraphMind is off (or the call could not be
    recorded), else the gated-call loop over the core's LLM step."""
    plan = _CallPlan(method, is_async)
    if is_async:

        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            if not session._active():
                return await original(*args, **kwargs)
            step = start_step(session, method, kwargs)
            if step is None:
                return await original(*args, **kwargs)
            return await _run_async(session, None, original, args, kwargs, (step, *step.before()), plan)

        return _mark(async_wrapper, original)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not session._active():
            return original(*args, **kwargs)
        step = start_step(session, method, kwargs)
        if step is None:
            return original(*args, **kwargs)
        return _run_sync(session, None, original, args, kwargs, (step, *step.before()), plan)

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
