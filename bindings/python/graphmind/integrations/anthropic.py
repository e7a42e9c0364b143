"""The ``anthropic`` client library: ``instrument_anthropic(client)`` / ``wrap_anthropic``.

Patches the client *instance*'s ``messages.create`` (``stream=True`` included) and
``messages.stream`` (the context-manager helper), for ``Anthropic`` and
``AsyncAnthropic``. ``messages.stream`` sends its request when the ``with`` block is
entered, so that is where its ``before`` gate is held. The stream proxy sees raw events
and ``.text_stream`` alike; at the end it reads the accumulated message back from the
library so text, tool calls and usage are recorded however the app read the stream.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from ..session import Session
from ._common import (
    AsyncStreamProxy,
    CallPlan,
    GraphHinter,
    LlmCall,
    StreamWatch,
    SyncStreamProxy,
    async_caller,
    capture_tools,
    default_session,
    end_stream,
    field,
    finish_fields,
    given,
    is_async_callable,
    is_async_client,
    patch_method,
    request_params,
    sync_caller,
    tool_call,
    unpatch_method,
    usage,
    warn,
)

SDK_NAME = "anthropic"

_MESSAGES: tuple[str, ...] = ("messages",)

#: The raw usage fields a streamed message reports in pieces.
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
_USAGE_SPLIT = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")


def describe(session: Session, call: LlmCall, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``node.started.input``: model, system and messages in full, the allow-listed
    sampling parameters, the tools by name and hash, ``stream`` when streamed."""
    payload: dict[str, Any] = {"provider": SDK_NAME}
    for key in ("model", "system"):
        value = kwargs.get(key)
        if given(value):
            payload[key] = value
    payload["messages"] = kwargs.get("messages")
    payload.update(request_params(kwargs))
    tools = capture_tools(session, call.run_id, kwargs.get("tools"))
    if tools:
        payload.update(tools)
    if kwargs.get("stream") is True:
        payload["stream"] = True
    return payload


def summarize(message: Any) -> dict[str, Any]:
    """``node.finished.output`` of a complete message: text, thinking, the ``tool_use``
    calls as ``toolCalls``, ``finishReason`` / ``rawFinishReason`` from ``stop_reason``."""
    out: dict[str, Any] = {}
    try:
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in field(message, "content") or []:
            kind = field(block, "type")
            if kind == "text":
                text = field(block, "text")
                if isinstance(text, str):
                    texts.append(text)
            elif kind == "tool_use":
                recorded = tool_call(field(block, "id"), field(block, "name"), field(block, "input"))
                if recorded is not None:
                    calls.append(recorded)
            elif kind == "thinking":
                thinking = field(block, "thinking")
                if isinstance(thinking, str):
                    out["thinking"] = thinking
        out["text"] = "".join(texts)
        if calls:
            out["toolCalls"] = calls
        out.update(finish_fields(field(message, "stop_reason"), bool(calls)))
    except Exception:
        pass
    return out


class _UsagePieces:
    """A streamed message reports usage in pieces (``message_start``, then cumulative
    ``message_delta``s): the raw fields reported last are kept and handed to the core's
    Anthropic mapping once, at the end."""

    def __init__(self) -> None:
        self.raw: dict[str, Any] = {}

    def add(self, reported: Any) -> None:
        if reported is None:
            return
        for key in _USAGE_FIELDS:
            value = field(reported, key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.raw[key] = value
        split = field(reported, "cache_creation")
        if split is not None:
            parts = dict(self.raw.get("cache_creation") or {})
            for key in _USAGE_SPLIT:
                value = field(split, key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    parts[key] = value
            if parts:
                self.raw["cache_creation"] = parts

    def usage(self) -> dict[str, Any] | None:
        return usage("anthropic", self.raw) if self.raw else None


class _EventWatch(StreamWatch):
    """Raw message events: text / tool-argument / thinking deltas, ``tool_use`` blocks
    assembled by index, the stop reason and the usage pieces."""

    def __init__(self, call: LlmCall, source: Any = None) -> None:
        self.call = call
        self.source = source  # a MessageStream: its accumulated message is read at the end
        self.text: list[str] = []
        self.chunks = 0
        self.raw_reason: str | None = None
        self.pieces = _UsagePieces()
        self.blocks: dict[int, list[Any]] = {}  # open tool_use blocks: [id, name, json text]
        self.calls: dict[int, dict[str, Any]] = {}

    def chunk(self, event: Any) -> None:
        self.chunks += 1
        kind = field(event, "type")
        index = field(event, "index")
        if kind == "message_start":
            self.pieces.add(field(field(event, "message"), "usage"))
        elif kind == "content_block_start":
            block = field(event, "content_block")
            if field(block, "type") == "tool_use" and isinstance(index, int):
                self.blocks[index] = [field(block, "id"), field(block, "name"), ""]
        elif kind == "content_block_stop":
            if isinstance(index, int) and index in self.blocks:
                block_id, name, text = self.blocks.pop(index)
                recorded = tool_call(block_id, name, text)
                if recorded is not None:
                    self.calls[index] = recorded
        elif kind == "content_block_delta":
            self._delta(field(event, "delta"), index)
        elif kind == "message_delta":
            self.pieces.add(field(event, "usage"))
            reason = field(field(event, "delta"), "stop_reason")
            if isinstance(reason, str):
                self.raw_reason = reason

    def _delta(self, delta: Any, index: Any) -> None:
        kind = field(delta, "type")
        if kind == "text_delta":
            self.text_delta(field(delta, "text"))
        elif kind == "input_json_delta":
            partial = field(delta, "partial_json")
            if isinstance(partial, str) and partial:
                self.call.token("tool-args", partial)
                block = self.blocks.get(index) if isinstance(index, int) else None
                if block is not None:
                    block[2] += partial
        elif kind == "thinking_delta":
            self.call.token("reasoning", field(delta, "thinking"))

    def text_delta(self, text: Any) -> None:
        if isinstance(text, str) and text:
            self.text.append(text)
            self.call.token("text", text)

    def tool_calls(self) -> list[dict[str, Any]]:
        calls = dict(self.calls)
        for index, (block_id, name, text) in self.blocks.items():  # never closed: cut off
            if index not in calls:
                recorded = tool_call(block_id, name, text)
                if recorded is not None:
                    calls[index] = recorded
        return [calls[i] for i in sorted(calls)]

    def end(self, error: BaseException | None) -> None:
        output: dict[str, Any] = {"text": "".join(self.text), "chunks": self.chunks}
        calls = self.tool_calls()
        if calls:
            output["toolCalls"] = calls
        output.update(finish_fields(self.raw_reason, bool(calls)))
        reported = self.pieces.usage()
        final = self._final() if error is None else None
        if final is not None:
            summary = summarize(final)
            if summary.get("text") or summary.get("toolCalls"):
                output.update(summary)
            reported = usage("anthropic", field(final, "usage")) or reported
        end_stream(self.call, output, reported, error)

    def _final(self) -> Any:
        """The message the library accumulated so far (read from its snapshot, so nothing
        more is pulled from the network and nothing is awaited)."""
        if self.source is None:
            return None
        try:
            snapshot = getattr(self.source, "current_message_snapshot", None)
            return None if inspect.isawaitable(snapshot) else snapshot
        except Exception:
            return None


class _Plan(CallPlan):
    def __init__(self, session: Session, hinter: GraphHinter) -> None:
        self.session = session
        self.hinter = hinter

    def begin(self, call: LlmCall, kwargs: dict[str, Any]) -> None:
        self.hinter.hint(self.session, kwargs.get("tools"))
        call.begin(describe(self.session, call, kwargs))

    def stream(self, result: Any, kwargs: dict[str, Any], is_async: bool) -> bool:
        return kwargs.get("stream") is True and hasattr(result, "__aiter__" if is_async else "__iter__")

    def tee(self, call: LlmCall, result: Any, is_async: bool) -> Any:
        watch = _EventWatch(call)
        return AsyncStreamProxy(result, watch) if is_async else SyncStreamProxy(result, watch)

    def finish(self, call: LlmCall, result: Any) -> None:
        call.finish(summarize(result), "ok", usage("anthropic", field(result, "usage")))


# -- messages.stream(): the request is sent by __enter__ -------------------------------------


class _MessageStream(SyncStreamProxy):
    """The app's ``MessageStream``: raw events and ``.text_stream`` both recorded."""

    def __init__(self, inner: Any, watch: _EventWatch) -> None:
        super().__init__(inner, watch)

    @property
    def text_stream(self) -> Iterator[str]:
        def texts() -> Iterator[str]:
            try:
                for text in self._inner.text_stream:
                    self._watch.text_delta(text)  # type: ignore[attr-defined]
                    yield text
            except BaseException as exc:
                self._end(exc)
                raise
            self._end(None)

        return texts()


class _AsyncMessageStream(AsyncStreamProxy):
    def __init__(self, inner: Any, watch: _EventWatch) -> None:
        super().__init__(inner, watch)

    @property
    def text_stream(self) -> AsyncIterator[str]:
        async def texts() -> AsyncIterator[str]:
            try:
                async for text in self._inner.text_stream:
                    self._watch.text_delta(text)  # type: ignore[attr-defined]
                    yield text
            except BaseException as exc:
                self._end(exc)
                raise
            self._end(None)

        return texts()


_STREAM_INJECT = (
    "`inject` is not supported at a messages.stream() gate (a provider stream cannot be "
    "made up); continuing. Use messages.create() or wrap the call site with gm.span to inject."
)


class _StreamManager:
    """Stands in for ``MessageStreamManager``: records and gates in ``__enter__``."""

    def __init__(self, inner: Any, session: Session, plan: _Plan, kwargs: dict[str, Any]) -> None:
        self._inner = inner
        self._session = session
        self._plan = plan
        self._kwargs = kwargs
        self._stream: _MessageStream | None = None

    def __enter__(self) -> Any:
        call = LlmCall(self._session, SDK_NAME)
        self._plan.begin(call, self._kwargs)
        decision = call.gate("before")
        if decision.action == "abort":
            call.finish(None, "aborted")
            raise call.abort_error()
        if decision.action == "inject":
            warn(self._session, "anthropic-stream-inject", _STREAM_INJECT)
        try:
            stream = self._inner.__enter__()
        except Exception as exc:
            call.error(exc)
            call.finish(None, "error")
            raise
        self._stream = _MessageStream(stream, _EventWatch(call, stream))
        return self._stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        if self._stream is not None:
            self._stream._end(exc)
        return self._inner.__exit__(exc_type, exc, tb)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _AsyncStreamManager:
    def __init__(self, inner: Any, session: Session, plan: _Plan, kwargs: dict[str, Any]) -> None:
        self._inner = inner
        self._session = session
        self._plan = plan
        self._kwargs = kwargs
        self._stream: _AsyncMessageStream | None = None

    async def __aenter__(self) -> Any:
        call = LlmCall(self._session, SDK_NAME)
        self._plan.begin(call, self._kwargs)
        decision = await call.gate_async("before")
        if decision.action == "abort":
            call.finish(None, "aborted")
            raise call.abort_error()
        if decision.action == "inject":
            warn(self._session, "anthropic-stream-inject", _STREAM_INJECT)
        try:
            stream = await self._inner.__aenter__()
        except Exception as exc:
            call.error(exc)
            call.finish(None, "error")
            raise
        self._stream = _AsyncMessageStream(stream, _EventWatch(call, stream))
        return self._stream

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        if self._stream is not None:
            self._stream._end(exc)
        return await self._inner.__aexit__(exc_type, exc, tb)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _stream_method(session: Session, plan: _Plan, is_async: bool, original: Callable[..., Any]) -> Callable[..., Any]:
    manager_cls = _AsyncStreamManager if is_async else _StreamManager

    def stream(*args: Any, **kwargs: Any) -> Any:
        manager = original(*args, **kwargs)
        if not session._active():
            return manager
        return manager_cls(manager, session, plan, kwargs)

    stream.__name__ = getattr(original, "__name__", "stream")
    stream.__doc__ = getattr(original, "__doc__", None)
    stream.__wrapped__ = original  # type: ignore[attr-defined]
    return stream


def instrument_anthropic(client: Any, session: Session | None = None) -> Any:
    """Instruments an ``anthropic.Anthropic`` / ``AsyncAnthropic`` client in place and
    returns the same client. Idempotent; with GraphMind disabled nothing changes."""
    session = default_session(session)
    if not session.enabled:
        return client
    messages = getattr(client, "messages", None)
    if messages is None:
        warn(
            session,
            "anthropic-nothing-patched",
            "instrument_anthropic() found no `.messages` resource; pass an "
            "anthropic.Anthropic or anthropic.AsyncAnthropic client",
        )
        return client
    plan = _Plan(session, GraphHinter())
    is_async = is_async_callable(getattr(messages, "create", None)) or is_async_client(client)
    caller = async_caller if is_async else sync_caller
    patch_method(
        session, client, _MESSAGES, "create",
        lambda fn: caller(session, plan, SDK_NAME, fn), "anthropic.messages.create",
    )
    if getattr(messages, "stream", None) is not None:
        patch_method(
            session, client, _MESSAGES, "stream",
            lambda fn: _stream_method(session, plan, is_async, fn), "anthropic.messages.stream",
        )
    return client


#: The same function under the name other tools use.
wrap_anthropic = instrument_anthropic


def uninstrument_anthropic(client: Any) -> Any:
    """Puts the client's original methods back."""
    for attr in ("create", "stream"):
        unpatch_method(client, _MESSAGES, attr)
    return client
