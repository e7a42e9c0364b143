"""The ``openai`` client library: ``instrument_openai(client)`` / ``wrap_openai``.

Patches the client *instance*'s ``chat.completions.create``, ``chat.completions.parse``
(when present) and ``responses.create``, for ``OpenAI`` and ``AsyncOpenAI``. Each call is
one ``llm:step`` node: the ``before`` gate is held before the request leaves, ``error``
when it raises, ``after`` on a complete answer; a streamed answer (``stream=True``) is
handed back behind a proxy that records the deltas as ``node.token`` and ends the node
when the stream ends. Nothing from ``openai`` is imported: the objects are read by shape.
"""

from __future__ import annotations

from collections.abc import Callable
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

SDK_NAME = "openai"

#: (resource path, method, API flavour).
_TARGETS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("chat", "completions"), "create", "chat"),
    (("chat", "completions"), "parse", "chat"),
    (("responses",), "create", "responses"),
)

_USAGE_PROVIDER = {"chat": "openai-chat", "responses": "openai-responses"}


# -- what is recorded ------------------------------------------------------------------------


def describe(session: Session, call: LlmCall, flavor: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``node.started.input``: the request as sent (model, instructions, the messages or
    input in full, the allow-listed sampling parameters, the tools by name and hash)."""
    payload: dict[str, Any] = {"provider": SDK_NAME}
    for key in ("model", "instructions", "previous_response_id"):
        value = kwargs.get(key)
        if given(value):
            payload[key] = value
    if flavor == "chat":
        payload["messages"] = kwargs.get("messages")
    else:
        payload["input"] = kwargs.get("input")
    payload.update(request_params(kwargs))
    tools = capture_tools(session, call.run_id, kwargs.get("tools"))
    if tools:
        payload.update(tools)
    if kwargs.get("stream") is True:
        payload["stream"] = True
    return payload


def _custom_call(call_id: Any, name: Any, text: Any) -> dict[str, Any] | None:
    """A custom (free-form) tool's call: its input is text by design, kept as it is."""
    if not isinstance(name, str) or not name:
        return None
    entry: dict[str, Any] = {}
    if isinstance(call_id, str) and call_id:
        entry["id"] = call_id
    entry["name"] = name
    entry["input"] = text if isinstance(text, str) else ""
    return entry


def chat_tool_calls(calls: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in calls or []:
        function = field(c, "function")
        if function is not None:
            recorded = tool_call(field(c, "id"), field(function, "name"), field(function, "arguments"))
        else:
            custom = field(c, "custom")
            recorded = _custom_call(field(c, "id"), field(custom, "name"), field(custom, "input"))
        if recorded is not None:
            out.append(recorded)
    return out


def responses_tool_calls(output: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in output or []:
        kind = field(item, "type")
        recorded = None
        if kind == "function_call":
            recorded = tool_call(field(item, "call_id"), field(item, "name"), field(item, "arguments"))
        elif kind == "custom_tool_call":
            recorded = _custom_call(field(item, "call_id"), field(item, "name"), field(item, "input"))
        if recorded is not None:
            out.append(recorded)
    return out


def summarize(flavor: str, result: Any) -> dict[str, Any]:
    """``node.finished.output`` of a complete answer: text, requested ``toolCalls``,
    ``finishReason`` / ``rawFinishReason`` (chat: the first choice's; Responses: the
    incomplete reason, else the status) and, for the Responses API, ``status``."""
    out: dict[str, Any] = {}
    try:
        if flavor == "chat":
            texts: list[str] = []
            calls: list[dict[str, Any]] = []
            raw_reason: Any = None
            for choice in field(result, "choices") or []:
                message = field(choice, "message")
                content = field(message, "content")
                if isinstance(content, str) and content:
                    texts.append(content)
                parsed = field(message, "parsed")
                if parsed is not None:
                    out["parsed"] = parsed
                calls.extend(chat_tool_calls(field(message, "tool_calls")))
                if raw_reason is None:
                    raw_reason = field(choice, "finish_reason")
            out["text"] = "".join(texts)
            if calls:
                out["toolCalls"] = calls
            out.update(finish_fields(raw_reason, bool(calls)))
        else:
            text = field(result, "output_text")
            if isinstance(text, str):
                out["text"] = text
            calls = responses_tool_calls(field(result, "output"))
            if calls:
                out["toolCalls"] = calls
            status = field(result, "status")
            reason = field(field(result, "incomplete_details"), "reason")
            out.update(finish_fields(reason if isinstance(reason, str) and reason else status, bool(calls)))
            if isinstance(status, str):
                out["status"] = status
    except Exception:
        pass
    return out


# -- streams ---------------------------------------------------------------------------------


class _ChatWatch(StreamWatch):
    """A Chat Completions stream: text, reasoning and tool-argument deltas, the tool calls
    assembled by index, the finish reason, the usage on the last chunk."""

    def __init__(self, call: LlmCall) -> None:
        self.call = call
        self.text: list[str] = []
        self.chunks = 0
        self.raw_reason: str | None = None
        self.raw_usage: Any = None
        self.calls: dict[int, list[Any]] = {}  # index -> [id, name, text, custom]

    def chunk(self, chunk: Any) -> None:
        self.chunks += 1
        reported = field(chunk, "usage")
        if reported is not None:
            self.raw_usage = reported
        for choice in field(chunk, "choices") or []:
            delta = field(choice, "delta")
            if delta is not None:
                self._delta(delta)
            reason = field(choice, "finish_reason")
            if isinstance(reason, str) and reason:
                self.raw_reason = reason

    def _delta(self, delta: Any) -> None:
        content = field(delta, "content")
        if isinstance(content, str) and content:
            self.text.append(content)
            self.call.token("text", content)
        reasoning = field(delta, "reasoning_content") or field(delta, "reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.call.token("reasoning", reasoning)
        for part in field(delta, "tool_calls") or []:
            index = field(part, "index")
            entry = self.calls.setdefault(index if isinstance(index, int) else 0, [None, None, "", False])
            custom = field(part, "custom")
            if field(part, "type") == "custom" or custom is not None:
                entry[3] = True
            source = custom if entry[3] else field(part, "function")
            part_id = field(part, "id")
            if isinstance(part_id, str) and part_id:
                entry[0] = part_id
            name = field(source, "name")
            if isinstance(name, str) and name:
                entry[1] = name
            text = field(source, "input" if entry[3] else "arguments")
            if isinstance(text, str) and text:
                entry[2] += text
                self.call.token("tool-args", text)

    def tool_calls(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for index in sorted(self.calls):
            call_id, name, text, custom = self.calls[index]
            recorded = _custom_call(call_id, name, text) if custom else tool_call(call_id, name, text)
            if recorded is not None:
                out.append(recorded)
        return out

    def end(self, error: BaseException | None) -> None:
        output: dict[str, Any] = {"text": "".join(self.text), "chunks": self.chunks}
        calls = self.tool_calls()
        if calls:
            output["toolCalls"] = calls
        output.update(finish_fields(self.raw_reason, bool(calls)))
        end_stream(self.call, output, usage("openai-chat", self.raw_usage), error)


class _ResponsesWatch(StreamWatch):
    """A Responses API event stream: text, reasoning and tool-argument deltas; the final
    ``response.completed`` / ``incomplete`` / ``failed`` event carries the whole answer."""

    _REASONING = ("response.reasoning_summary_text.delta", "response.reasoning_text.delta")
    _FINAL = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self, call: LlmCall) -> None:
        self.call = call
        self.text: list[str] = []
        self.chunks = 0
        self.final: Any = None

    def chunk(self, event: Any) -> None:
        self.chunks += 1
        kind = field(event, "type")
        delta = field(event, "delta")
        if kind == "response.output_text.delta" and isinstance(delta, str):
            self.text.append(delta)
            self.call.token("text", delta)
        elif kind == "response.function_call_arguments.delta":
            self.call.token("tool-args", delta)
        elif kind in self._REASONING:
            self.call.token("reasoning", delta)
        elif kind in self._FINAL:
            response = field(event, "response")
            if response is not None:
                self.final = response

    def end(self, error: BaseException | None) -> None:
        output: dict[str, Any] = {"text": "".join(self.text), "chunks": self.chunks}
        raw_usage = None
        if self.final is not None:
            summary = summarize("responses", self.final)
            if not summary.get("text"):
                summary.pop("text", None)
            output.update(summary)
            raw_usage = field(self.final, "usage")
        end_stream(self.call, output, usage("openai-responses", raw_usage), error)


# -- the patched methods -----------------------------------------------------------------------


class _Plan(CallPlan):
    def __init__(self, session: Session, hinter: GraphHinter, flavor: str) -> None:
        self.session = session
        self.hinter = hinter
        self.flavor = flavor

    def begin(self, call: LlmCall, kwargs: dict[str, Any]) -> None:
        self.hinter.hint(self.session, kwargs.get("tools"))
        call.begin(describe(self.session, call, self.flavor, kwargs))

    def stream(self, result: Any, kwargs: dict[str, Any], is_async: bool) -> bool:
        # Without stream=True, a parsed answer object is never taken for a stream.
        if kwargs.get("stream") is not True and (hasattr(result, "model_dump") or hasattr(result, "choices")):
            return False
        return hasattr(result, "__aiter__" if is_async else "__iter__")

    def tee(self, call: LlmCall, result: Any, is_async: bool) -> Any:
        watch = _ChatWatch(call) if self.flavor == "chat" else _ResponsesWatch(call)
        return AsyncStreamProxy(result, watch) if is_async else SyncStreamProxy(result, watch)

    def finish(self, call: LlmCall, result: Any) -> None:
        call.finish(summarize(self.flavor, result), "ok", usage(_USAGE_PROVIDER[self.flavor], field(result, "usage")))


def instrument_openai(client: Any, session: Session | None = None) -> Any:
    """Instruments an ``openai.OpenAI`` / ``AsyncOpenAI`` client in place and returns the
    same client. Idempotent; with GraphMind disabled the client is left untouched."""
    session = default_session(session)
    if not session.enabled:
        return client
    hinter = GraphHinter()
    async_client = is_async_client(client)
    patched = 0
    for path, attr, flavor in _TARGETS:
        target: Any = client
        for part in path:
            target = getattr(target, part, None) if target is not None else None
        original = getattr(target, attr, None) if target is not None else None
        if original is None or not callable(original):
            continue
        plan = _Plan(session, hinter, flavor)
        use_async = is_async_callable(original) or async_client
        caller = async_caller if use_async else sync_caller

        def make(fn: Callable[..., Any], plan: _Plan = plan, caller: Any = caller) -> Callable[..., Any]:
            return caller(session, plan, SDK_NAME, fn)

        if patch_method(session, client, path, attr, make, f"openai.{'.'.join(path)}.{attr}"):
            patched += 1
    if patched == 0:
        warn(
            session,
            "openai-nothing-patched",
            "instrument_openai() found no chat.completions / responses methods on this object; "
            "pass an openai.OpenAI or openai.AsyncOpenAI client",
        )
    return client


#: The same function under the name other tools use.
wrap_openai = instrument_openai


def uninstrument_openai(client: Any) -> Any:
    """Puts the client's original methods back."""
    for path, attr, _flavor in _TARGETS:
        unpatch_method(client, path, attr)
    return client
