"""The ``anthropic`` client library: ``instrument_anthropic(client)`` / ``wrap_anthropic``.

Patches the client *instance*'s ``messages.create`` (``stream=True`` included),
``messages.parse`` and ``messages.stream`` (the context-manager helper), and the same
methods under ``beta.messages`` (what Pydantic AI calls), for ``Anthropic`` and
``AsyncAnthropic``. Each call is one ``llm:step`` node driven by the core's LLM step; an
injected reply comes back as the library's own ``Message``. ``messages.stream`` sends its
request when the ``with`` block is entered, so that is where its ``before`` gate is held.
The stream proxy sees raw events and ``.text_stream`` alike; at the end the core reads the
message the library accumulated, so text, tool calls and usage are recorded however the
app read the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from ..errors import error_parts
from ..session import Session, await_gate
from ._common import (
    AsyncStreamProxy,
    ModelMethod,
    StepWatch,
    SyncStreamProxy,
    default_session,
    is_async_callable,
    is_async_client,
    model_caller,
    patch_method,
    start_step,
    unpatch_method,
    ABORT,
    WAIT,
    warn,
)

SDK_NAME = "anthropic"

_REPLY = "anthropic.types:Message"
_MESSAGES = ModelMethod("anthropic", SDK_NAME, _REPLY)
_STREAM_HELPER = ModelMethod("anthropic", SDK_NAME, _REPLY, stream_only=True)

#: The resources whose methods are patched (``beta.messages`` is the same API).
_RESOURCES: tuple[tuple[str, ...], ...] = (("messages",), ("beta", "messages"))
#: The request methods patched on each.
_METHODS = ("create", "parse")


# -- messages.stream(): the request is sent by __enter__ -------------------------------------


class _MessageStream(SyncStreamProxy):
    """The app's ``MessageStream``: raw events and ``.text_stream`` both recorded."""

    @property
    def text_stream(self) -> Iterator[str]:
        def texts() -> Iterator[str]:
            try:
                for text in self._inner.text_stream:
                    self._watch.text(text)  # type: ignore[attr-defined]
                    yield text
            except BaseException as exc:
                self._end(exc)
                raise
            self._end(None)

        return texts()


class _AsyncMessageStream(AsyncStreamProxy):
    @property
    def text_stream(self) -> AsyncIterator[str]:
        async def texts() -> AsyncIterator[str]:
            try:
                async for text in self._inner.text_stream:
                    self._watch.text(text)  # type: ignore[attr-defined]
                    yield text
            except BaseException as exc:
                self._end(exc)
                raise
            self._end(None)

        return texts()


def _opened(session: Session, kwargs: dict[str, Any]) -> Any:
    """``node.started`` and the ``before`` gate's step of a stream helper, or ``None``."""
    return start_step(session, _STREAM_HELPER, kwargs)


def _failed_to_open(step: Any, exc: BaseException) -> None:
    """Entering the helper failed: the call ends as a stream that broke at once."""
    step.stream_started()
    step.stream_end(*error_parts(exc))


class _StreamManager:
    """Stands in for ``MessageStreamManager``: records and gates in ``__enter__``."""

    def __init__(self, inner: Any, session: Session, kwargs: dict[str, Any]) -> None:
        self._inner = inner
        self._session = session
        self._kwargs = kwargs
        self._stream: _MessageStream | None = None

    def __enter__(self) -> Any:
        step = _opened(self._session, self._kwargs)
        if step is None:
            return self._inner.__enter__()
        code, value = step.before()
        if code == WAIT:
            code, value = step.on_before(value.wait())
        if code == ABORT:
            raise self._session.abort_error()
        try:
            stream = self._inner.__enter__()
        except Exception as exc:
            _failed_to_open(step, exc)
            raise
        step.stream_started()
        self._stream = _MessageStream(stream, StepWatch(step, stream))
        return self._stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        if self._stream is not None:
            self._stream._end(exc)
        return self._inner.__exit__(exc_type, exc, tb)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _AsyncStreamManager:
    def __init__(self, inner: Any, session: Session, kwargs: dict[str, Any]) -> None:
        self._inner = inner
        self._session = session
        self._kwargs = kwargs
        self._stream: _AsyncMessageStream | None = None

    async def __aenter__(self) -> Any:
        step = _opened(self._session, self._kwargs)
        if step is None:
            return await self._inner.__aenter__()
        code, value = step.before()
        if code == WAIT:
            code, value = step.on_before(await await_gate(value))
        if code == ABORT:
            raise self._session.abort_error()
        try:
            stream = await self._inner.__aenter__()
        except Exception as exc:
            _failed_to_open(step, exc)
            raise
        step.stream_started()
        self._stream = _AsyncMessageStream(stream, StepWatch(step, stream))
        return self._stream

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        if self._stream is not None:
            self._stream._end(exc)
        return await self._inner.__aexit__(exc_type, exc, tb)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _stream_method(session: Session, is_async: bool, original: Callable[..., Any]) -> Callable[..., Any]:
    manager_cls = _AsyncStreamManager if is_async else _StreamManager

    def stream(*args: Any, **kwargs: Any) -> Any:
        manager = original(*args, **kwargs)
        if not session._active():
            return manager
        return manager_cls(manager, session, kwargs)

    stream.__name__ = getattr(original, "__name__", "stream")
    stream.__doc__ = getattr(original, "__doc__", None)
    stream.__wrapped__ = original  # type: ignore[attr-defined]
    return stream


def _resource(client: Any, path: tuple[str, ...]) -> Any:
    target = client
    for part in path:
        target = getattr(target, part, None) if target is not None else None
    return target


def instrument_anthropic(client: Any, session: Session | None = None) -> Any:
    """Instruments an ``anthropic.Anthropic`` / ``AsyncAnthropic`` client in place and
    returns the same client. Idempotent; with GraphMind disabled nothing changes."""
    session = default_session(session)
    if not session.enabled:
        return client
    if getattr(client, "messages", None) is None:
        warn(
            session,
            "anthropic-nothing-patched",
            "instrument_anthropic() found no `.messages` resource; pass an "
            "anthropic.Anthropic or anthropic.AsyncAnthropic client",
        )
        return client
    for path in _RESOURCES:
        resource = _resource(client, path)
        if resource is None:
            continue
        label = "anthropic." + ".".join(path)
        is_async = is_async_callable(getattr(resource, "create", None)) or is_async_client(client)
        for attr in _METHODS:
            if callable(getattr(resource, attr, None)):
                patch_method(
                    session, client, path, attr,
                    lambda fn, is_async=is_async: model_caller(session, _MESSAGES, fn, is_async), f"{label}.{attr}",
                )
        if getattr(resource, "stream", None) is not None:
            patch_method(
                session, client, path, "stream",
                lambda fn, is_async=is_async: _stream_method(session, is_async, fn), f"{label}.stream",
            )
    return client


#: The same function under the name other tools use.
wrap_anthropic = instrument_anthropic


def uninstrument_anthropic(client: Any) -> Any:
    """Puts the client's original methods back."""
    for path in _RESOURCES:
        for attr in (*_METHODS, "stream"):
            unpatch_method(client, path, attr)
    return client
