"""The integrations against the real client libraries from PyPI (``openai``, ``anthropic``,
``langchain-core``), their HTTP answered locally by mock transports (streams as SSE
bodies), each test attached to a real ``graphmind serve`` and reading back what it stored.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from typing import Any

import anthropic
import httpx
import openai
import pytest

import graphmind as gm
from conftest import ROOT, paused_in_thread

sys.path.insert(0, str(ROOT / "tests" / "fake_provider"))
from server import sse_body  # noqa: E402


# -- helpers ---------------------------------------------------------------------------------


def run_events(server, g, run_id: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Every stored event of a finished run (waits for its ``run.finished``)."""
    g.session.flush(2)
    deadline = time.monotonic() + timeout
    events: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        events = server.events(run_id, 1, timeout=1)
        if events and events[-1]["type"] == "run.finished":
            return events
        time.sleep(0.05)
    return events


def of(events, kind: str, node_id: str | None = None) -> list[dict[str, Any]]:
    return [
        e["payload"]
        for e in events
        if e["type"] == kind and (node_id is None or e["payload"].get("nodeId") == node_id)
    ]


def streamed(events, node_id: str, channel: str = "text") -> str:
    return "".join(
        d["v"] for p in of(events, "node.token", node_id) for d in p["deltas"] if d["t"] == channel
    )


def sse(events: list[tuple[str | None, Any]]) -> bytes:
    """The SSE wire text of ``[(event, data), ...]`` (the fake provider's own writer)."""
    return sse_body(events)


class Recorder:
    """A mock HTTP server: answers with the queued responses and keeps every request."""

    def __init__(self, module: Any, answers: list[Any]) -> None:
        self.module = module
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(json.loads(request.content or b"{}"))
        status, body, stream = self.answers.pop(0)
        if stream:
            return self.module.Response(status, headers={"content-type": "text/event-stream"}, content=body)
        return self.module.Response(status, json=body)


def _client(module, client_cls, async_cls, base_url, answers, is_async):
    """A provider client (sync or async) whose HTTP goes to a Recorder: ``(client, rec)``."""
    rec = Recorder(module, answers)
    http_cls, cls = (module.AsyncClient, async_cls) if is_async else (module.Client, client_cls)
    http = http_cls(transport=module.MockTransport(rec))
    return cls(api_key="sk-test", base_url=base_url, http_client=http, max_retries=0), rec


def openai_client(answers, is_async=False):
    return _client(httpx, openai.OpenAI, openai.AsyncOpenAI, "http://llm.test/v1", answers, is_async)


def _anthropic_http():
    try:
        import httpx2 as module  # the client library's own HTTP package (anthropic >= 2)
    except ImportError:
        module = httpx
    return module


def anthropic_client(answers, is_async=False):
    return _client(_anthropic_http(), anthropic.Anthropic, anthropic.AsyncAnthropic, "http://llm.test", answers, is_async)


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def chat_completion(content=None, tool_calls=None, finish="stop", usage=None):
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def chat_chunk(delta=None, finish=None, usage=None):
    chunk: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}
    chunk["choices"] = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage is not None:
        chunk["usage"] = usage
    return chunk


CHAT_STREAM = sse(
    [
        (None, chat_chunk({"role": "assistant", "content": "Sun"})),
        (None, chat_chunk({"content": "ny, "})),
        (
            None,
            chat_chunk(
                {"tool_calls": [{"index": 0, "id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": '{"ci'}}]}
            ),
        ),
        (None, chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Lisbon"}'}}]}, finish="tool_calls")),
        (None, chat_chunk(None, usage={"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29, "completion_tokens_details": {"reasoning_tokens": 3}})),
        (None, "[DONE]"),
    ]
)


# -- OpenAI ----------------------------------------------------------------------------------


def test_openai_chat_completion_is_one_llm_step(server, gm_for):
    g = gm_for()
    assert g.ready(3)
    answer = chat_completion(
        None,
        tool_calls=[{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}],
        finish="tool_calls",
        usage={"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37, "prompt_tokens_details": {"cached_tokens": 10}},
    )
    client, rec = openai_client([(200, answer, False), (200, chat_completion("It is sunny."), False)])
    assert g.instrument_openai(client) is client
    messages = [{"role": "user", "content": "Weather in Lisbon?"}]
    with g.run("openai-chat") as ctx:
        first = client.chat.completions.create(
            model="gpt-test", messages=messages, tools=[WEATHER_TOOL], temperature=0.2, max_tokens=50,
            metadata={"secret": "not recorded"}, user="u1",
        )
        second = client.chat.completions.create(model="gpt-test", messages=messages, tools=[WEATHER_TOOL])
    # The app gets the library's own objects, untouched.
    assert isinstance(first, openai.types.chat.ChatCompletion)
    assert first.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert second.choices[0].message.content == "It is sunny."
    assert len(rec.requests) == 2 and rec.requests[0]["temperature"] == 0.2

    events = run_events(server, g, ctx.run_id)
    hint = of(events, "graph.hint")
    assert len(hint) == 1
    assert [n["nodeId"] for n in hint[0]["nodes"]] == ["agent:openai-chat", "llm:step", "tool:get_weather"]
    started = of(events, "node.started", "llm:step")
    assert len(started) == 2
    s0 = started[0]
    assert (s0["kind"], s0["name"], s0["parentId"], s0["sdk"]) == ("llm", "step", "agent:openai-chat", "openai")
    inp = s0["input"]
    assert inp["provider"] == "openai" and inp["model"] == "gpt-test"
    assert inp["messages"] == messages
    assert inp["temperature"] == 0.2 and inp["max_tokens"] == 50
    assert "metadata" not in inp and "user" not in inp
    assert inp["tools"] == [{"name": "get_weather", "schemaHash": gm._native.schema_hash(WEATHER_TOOL)}]
    assert inp["toolSchemas"] == {gm._native.schema_hash(WEATHER_TOOL): WEATHER_TOOL}
    # A definition is sent once per run.
    assert "toolSchemas" not in started[1]["input"]
    assert started[1]["input"]["tools"] == inp["tools"]

    finished = of(events, "node.finished", "llm:step")
    f0 = finished[0]
    assert f0["status"] == "ok" and f0["instanceId"] == s0["instanceId"]
    assert f0["output"] == {
        "text": "",
        "toolCalls": [{"id": "call_1", "name": "get_weather", "input": {"city": "Lisbon"}}],
        "finishReason": "tool-calls",
        "rawFinishReason": "tool_calls",
    }
    assert f0["usage"] == {"inputTokens": 30, "outputTokens": 7, "inclusive": True, "cacheReadTokens": 10}
    assert finished[1]["output"] == {"text": "It is sunny.", "finishReason": "stop", "rawFinishReason": "stop"}
    assert "usage" not in finished[1]
    assert started[0]["instanceId"] != started[1]["instanceId"]


def test_openai_stream_records_tokens_tool_calls_and_usage(server, gm_for):
    g = gm_for(token_interval=0)
    assert g.ready(3)
    client, _ = openai_client([(200, CHAT_STREAM, True)])
    gm.instrument_openai  # the module-level function exists too
    g.wrap_openai(client)
    with g.run("openai-stream") as ctx:
        stream = client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}], stream=True,
            stream_options={"include_usage": True},
        )
        texts = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert texts == ["Sun", "ny, "]
    events = run_events(server, g, ctx.run_id)
    started = of(events, "node.started", "llm:step")[0]
    assert started["input"]["stream"] is True
    assert streamed(events, "llm:step") == "Sunny, "
    assert streamed(events, "llm:step", "tool-args") == '{"city": "Lisbon"}'
    done = of(events, "node.finished", "llm:step")[0]
    assert done["streaming"] is True and done["status"] == "ok"
    assert done["output"] == {
        "text": "Sunny, ",
        "chunks": 5,
        "toolCalls": [{"id": "call_9", "name": "get_weather", "input": {"city": "Lisbon"}}],
        "finishReason": "tool-calls",
        "rawFinishReason": "tool_calls",
    }
    assert done["usage"] == {"inputTokens": 20, "outputTokens": 9, "inclusive": True, "reasoningTokens": 3}
    # Tokens come between the node's start and its end.
    order = [e["type"] for e in events if e["payload"].get("nodeId") == "llm:step"]
    assert order[0] == "node.started" and order[-1] == "node.finished" and "node.token" in order


def test_openai_async_client_and_async_stream(server, gm_for):
    g = gm_for()
    assert g.ready(3)
    client, _ = openai_client(
        [(200, chat_completion("async hello", usage={"prompt_tokens": 4, "completion_tokens": 2}), False), (200, CHAT_STREAM, True)],
        is_async=True,
    )
    g.instrument_openai(client)

    async def main():
        async with g.run("openai-async") as ctx:
            reply = await client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "a"}])
            stream = await client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "b"}], stream=True)
            chunks = [c async for c in stream]
        return ctx, reply, chunks

    ctx, reply, chunks = asyncio.run(main())
    assert reply.choices[0].message.content == "async hello" and len(chunks) == 5
    events = run_events(server, g, ctx.run_id)
    finished = of(events, "node.finished", "llm:step")
    assert finished[0]["output"]["text"] == "async hello"
    assert finished[0]["usage"] == {"inputTokens": 4, "outputTokens": 2, "inclusive": True}
    assert finished[1]["streaming"] is True and finished[1]["output"]["text"] == "Sunny, "
    assert streamed(events, "llm:step") == "Sunny, "


def test_openai_responses_api(server, gm_for):
    # The answer is a tool call cut off: recorded here, not held (the smart hold's own tests
    # are in test_fake_provider.py; nobody watches this server to resume it).
    g = gm_for(break_on_truncated=False)
    assert g.ready(3)
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-test",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Partial", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_7", "name": "lookup", "arguments": '{"q": "x'},
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 11, "output_tokens": 5, "total_tokens": 16,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 2}},
    }
    client, _ = openai_client([(200, response, False)])
    g.instrument_openai(client)
    with g.run("responses") as ctx:
        result = client.responses.create(model="gpt-test", input="hello", instructions="be brief", max_output_tokens=5)
    assert result.output_text == "Partial"
    events = run_events(server, g, ctx.run_id)
    inp = of(events, "node.started", "llm:step")[0]["input"]
    assert inp == {"provider": "openai", "model": "gpt-test", "instructions": "be brief", "input": "hello", "max_output_tokens": 5}
    done = of(events, "node.finished", "llm:step")[0]
    assert done["output"] == {
        "text": "Partial",
        "toolCalls": [{"id": "call_7", "name": "lookup", "input": None, "inputText": '{"q": "x'}],
        "finishReason": "length",
        "rawFinishReason": "max_output_tokens",
        "status": "incomplete",
    }
    assert done["usage"] == {"inputTokens": 11, "outputTokens": 5, "inclusive": True, "cacheReadTokens": 0, "reasoningTokens": 2}


def test_openai_responses_stream(server, gm_for):
    g = gm_for(token_interval=0)
    assert g.ready(3)
    final = {
        "id": "resp_2", "object": "response", "created_at": 1, "model": "gpt-test", "status": "completed",
        "output": [
            {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Hi there", "annotations": []}]},
            {"type": "function_call", "id": "fc_2", "call_id": "call_8", "name": "lookup", "arguments": '{"q": 1}'},
        ],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": 6, "output_tokens": 4, "total_tokens": 10,
                  "input_tokens_details": {"cached_tokens": 1}, "output_tokens_details": {"reasoning_tokens": 0}},
    }
    created = dict(final, status="in_progress", output=[], usage=None)
    body = sse([
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": created}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_2", "output_index": 0, "content_index": 0, "delta": "Hi ", "logprobs": []}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 2, "item_id": "msg_2", "output_index": 0, "content_index": 0, "delta": "there", "logprobs": []}),
        ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta", "sequence_number": 3, "item_id": "fc_2", "output_index": 1, "delta": '{"q": 1}'}),
        ("response.completed", {"type": "response.completed", "sequence_number": 4, "response": final}),
    ])
    client, _ = openai_client([(200, body, True)])
    g.instrument_openai(client)
    with g.run("responses-stream") as ctx:
        kinds = [event.type for event in client.responses.create(model="gpt-test", input="hi", stream=True)]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    events = run_events(server, g, ctx.run_id)
    assert streamed(events, "llm:step") == "Hi there"
    assert streamed(events, "llm:step", "tool-args") == '{"q": 1}'
    done = of(events, "node.finished", "llm:step")[0]
    assert done["streaming"] is True
    assert done["output"] == {
        "text": "Hi there",
        "chunks": 5,
        "toolCalls": [{"id": "call_8", "name": "lookup", "input": {"q": 1}}],
        "finishReason": "tool-calls",
        "rawFinishReason": "completed",
        "status": "completed",
    }
    assert done["usage"] == {"inputTokens": 6, "outputTokens": 4, "inclusive": True, "cacheReadTokens": 1, "reasoningTokens": 0}


def test_openai_parse_records_the_parsed_object(server, gm_for):
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        sunny: bool

    g = gm_for()
    assert g.ready(3)
    client, rec = openai_client([(200, chat_completion('{"name": "Lisbon", "sunny": true}'), False)])
    g.instrument_openai(client)
    with g.run("parse") as ctx:
        reply = client.chat.completions.parse(model="gpt-test", messages=[{"role": "user", "content": "x"}], response_format=City)
    assert reply.choices[0].message.parsed == City(name="Lisbon", sunny=True)
    assert rec.requests[0]["response_format"]["type"] == "json_schema"
    events = run_events(server, g, ctx.run_id)
    inp = of(events, "node.started", "llm:step")[0]["input"]
    assert inp["response_format"] is not None  # the allow-listed parameter, as the app passed it
    done = of(events, "node.finished", "llm:step")[0]
    assert done["output"]["parsed"] == {"name": "Lisbon", "sunny": True}
    assert done["output"]["text"] == '{"name": "Lisbon", "sunny": true}'


@pytest.mark.parametrize("status", [400, 500])
def test_openai_http_error_is_recorded_and_raised(server, gm_for, status):
    g = gm_for()
    assert g.ready(3)
    client, _ = openai_client([(status, {"error": {"message": "nope", "type": "invalid_request_error"}}, False)])
    g.instrument_openai(client)
    expected = openai.BadRequestError if status == 400 else openai.InternalServerError
    with pytest.raises(expected):
        with g.run("openai-error") as ctx:
            client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])
    events = run_events(server, g, ctx.run_id)
    error = of(events, "node.error", "llm:step")[0]
    assert error["error"]["name"] == expected.__name__ and "nope" in error["error"]["message"]
    done = of(events, "node.finished", "llm:step")[0]
    assert done["status"] == "error" and "output" not in done
    assert error["instanceId"] == done["instanceId"]


def test_openai_stream_that_breaks_ends_the_node_as_error(server, gm_for):
    g = gm_for()
    assert g.ready(3)
    broken = sse([(None, chat_chunk({"content": "par"})), (None, "{not json")])
    client, _ = openai_client([(200, broken, True)])
    g.instrument_openai(client)
    got = []
    with pytest.raises(Exception):
        with g.run("openai-broken") as ctx:
            for chunk in client.chat.completions.create(model="gpt-test", messages=[], stream=True):
                got.append(chunk)
    assert len(got) == 1
    events = run_events(server, g, ctx.run_id)
    assert of(events, "node.error", "llm:step")
    done = of(events, "node.finished", "llm:step")[0]
    assert done["status"] == "error" and done["streaming"] is True and done["output"]["text"] == "par"


def test_openai_instrumentation_is_idempotent_and_reversible(server, gm_for):
    g = gm_for()
    client, _ = openai_client([])
    original = client.chat.completions.create
    assert g.instrument_openai(client) is client
    patched = client.chat.completions.create
    assert patched is not original and patched.__graphmind_wrapped__
    assert g.instrument_openai(client) is client and client.chat.completions.create is patched
    assert client.responses.create.__graphmind_wrapped__ and client.chat.completions.parse.__graphmind_wrapped__
    from graphmind.integrations.openai import uninstrument_openai

    uninstrument_openai(client)
    assert client.chat.completions.create == original
    # Disabled: the client is returned untouched.
    off = gm.GraphMind(enabled=False, env={})
    other, _ = openai_client([])
    before = other.chat.completions.create
    assert off.instrument_openai(other) is other and other.chat.completions.create == before
    off.dispose()


def _drive_with_gate(server, debugger, g, body, point, action, node="llm:step", arm=True, **extra):
    """Runs ``body`` in a thread while the debugger resumes the first pause (at ``point`` of
    ``node``, armed by a breakpoint unless ``arm`` is false: a smart hold) with ``action``.
    The pause's payload is ``result["paused"]``."""
    if arm:
        debugger.breakpoint({"point": point, "nodeId": node})
    result: dict[str, Any] = {}
    go = threading.Event()

    def target():
        try:
            with g.run(f"gate-{point}-{action}") as ctx:
                result["ctx"] = ctx
                go.wait(5)
                result["value"] = body()
        except BaseException as exc:  # noqa: BLE001
            result["raised"] = exc

    t, paused = paused_in_thread(debugger, target, result, go)
    result["paused"] = paused["payload"]
    assert paused["payload"]["nodeId"] == node and paused["payload"]["point"] == point
    if action == "retry" and arm:
        debugger.control("*", "breakpoint.clear", {"matcher": {"point": point, "nodeId": node}})
        time.sleep(0.15)
    debugger.resume(result["ctx"].run_id, paused["payload"]["pauseId"], action, **extra)
    t.join(10)
    assert not t.is_alive()
    return result


def test_openai_inject_at_before_skips_the_request(server, debugger, gm_for):
    g = gm_for()
    assert g.ready(3)
    client, rec = openai_client([])
    g.instrument_openai(client)
    result = _drive_with_gate(
        server, debugger, g,
        lambda: client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}]),
        "before", "inject", output={"text": "from the debugger"},
    )
    # An injected `{text}` comes back as the client library's own ChatCompletion.
    value = result.get("value")
    assert isinstance(value, openai.types.chat.ChatCompletion), result
    assert value.choices[0].message.content == "from the debugger"
    assert rec.requests == []
    events = run_events(server, g, result["ctx"].run_id)
    done = of(events, "node.finished", "llm:step")[0]
    assert done["injected"] is True and done["output"] == {"text": "from the debugger"}


def test_openai_retry_at_error_sends_the_request_again(server, debugger, gm_for):
    g = gm_for()
    assert g.ready(3)
    client, rec = openai_client([(503, {"error": {"message": "busy"}}, False), (200, chat_completion("second try"), False)])
    g.instrument_openai(client)
    result = _drive_with_gate(
        server, debugger, g,
        lambda: client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}]),
        "error", "retry",
    )
    assert result["value"].choices[0].message.content == "second try", result
    assert len(rec.requests) == 2
    events = run_events(server, g, result["ctx"].run_id)
    assert len(of(events, "node.error", "llm:step")) == 1
    done = of(events, "node.finished", "llm:step")
    assert len(done) == 1 and done[0]["output"]["text"] == "second try"


def test_openai_abort_at_after_raises_the_abort_error(server, debugger, gm_for):
    g = gm_for()
    assert g.ready(3)
    client, _ = openai_client([(200, chat_completion("unused"), False)])
    g.instrument_openai(client)
    result = _drive_with_gate(
        server, debugger, g,
        lambda: client.chat.completions.create(model="gpt-test", messages=[]),
        "after", "abort",
    )
    assert isinstance(result.get("raised"), gm.GraphMindAbortError), result
    events = run_events(server, g, result["ctx"].run_id)
    assert of(events, "node.finished", "llm:step")[0]["status"] == "aborted"
    assert events[-1]["payload"]["status"] == "aborted"


def test_openai_before_gate_holds_with_no_request_in_flight(server, debugger, gm_for):
    g = gm_for()
    assert g.ready(3)
    client, rec = openai_client([(200, chat_completion("after the pause"), False)])
    g.instrument_openai(client)
    debugger.breakpoint({"point": "before", "nodeId": "llm:step"})
    result: dict[str, Any] = {}
    go = threading.Event()

    def call():
        with g.run("held") as ctx:
            result["ctx"] = ctx
            go.wait(5)
            result["value"] = client.chat.completions.create(model="gpt-test", messages=[])

    t = threading.Thread(target=call)
    t.start()
    _watch_first(debugger, result)
    time.sleep(0.1)
    go.set()
    paused = debugger.next_event("exec.paused")
    assert paused["payload"]["nodeId"] == "llm:step"
    time.sleep(0.3)
    assert rec.requests == [], "nothing may be in flight while the before gate holds"
    debugger.resume(result["ctx"].run_id, paused["payload"]["pauseId"], "continue")
    t.join(10)
    assert result["value"].choices[0].message.content == "after the pause" and len(rec.requests) == 1


def _watch_first(debugger, result) -> None:
    """Subscribes the viewer to the run the caller thread is starting."""
    deadline = time.monotonic() + 10
    while "ctx" not in result and time.monotonic() < deadline:
        time.sleep(0.005)
    debugger.watch(result["ctx"].run_id)


def test_openai_async_gate_keeps_the_loop_running(server, debugger, gm_for):
    g = gm_for()
    assert g.ready(3)
    client, rec = openai_client([(200, chat_completion("async after pause"), False)], is_async=True)
    g.instrument_openai(client)
    debugger.breakpoint({"point": "before", "nodeId": "llm:step"})
    seen: dict[str, Any] = {}

    async def main():
        async with g.run("async-held") as ctx:
            debugger.watch(ctx.run_id)
            await asyncio.sleep(0.1)
            task = asyncio.ensure_future(client.chat.completions.create(model="gpt-test", messages=[]))
            ticks = 0
            loop = asyncio.get_running_loop()
            paused = await loop.run_in_executor(None, debugger.next_event, "exec.paused")
            for _ in range(5):
                await asyncio.sleep(0.02)
                ticks += 1
            seen["in_flight"] = len(rec.requests)
            debugger.resume(ctx.run_id, paused["payload"]["pauseId"], "continue")
            seen["reply"] = await asyncio.wait_for(task, 10)
            seen["ticks"] = ticks

    asyncio.run(main())
    assert seen["ticks"] == 5 and seen["in_flight"] == 0
    assert seen["reply"].choices[0].message.content == "async after pause" and len(rec.requests) == 1


def test_disabled_graphmind_leaves_the_clients_untouched():
    off = gm.GraphMind(enabled=False, env={})
    client, rec = openai_client([(200, chat_completion("plain"), False)])
    aclient, arec = anthropic_client([(200, anthropic_message([{"type": "text", "text": "plain"}]), False)])
    assert off.instrument_openai(client) is client and off.instrument_anthropic(aclient) is aclient
    assert not getattr(client.chat.completions.create, "__graphmind_wrapped__", False)
    assert not getattr(aclient.messages.create, "__graphmind_wrapped__", False)
    assert client.chat.completions.create(model="gpt-test", messages=[]).choices[0].message.content == "plain"
    assert aclient.messages.create(model="claude-test", max_tokens=4, messages=[]).content[0].text == "plain"
    assert len(rec.requests) == 1 and len(arec.requests) == 1
    off.dispose()


def test_an_agent_loop_is_one_coherent_graph(server, gm_for):
    g = gm_for()
    assert g.ready(3)
    call = {"id": "call_1", "type": "function", "function": {"name": "search_flights", "arguments": '{"origin": "VIE"}'}}
    client, _ = openai_client([
        (200, chat_completion(None, tool_calls=[call], finish="tool_calls"), False),
        (200, chat_completion("Booked TP1234."), False),
    ])
    g.instrument_openai(client)

    @g.tool
    def search_flights(origin: str) -> dict:
        return {"flight": "TP1234", "from": origin}

    tools = [{"type": "function", "function": {"name": "search_flights"}}]
    messages: list[Any] = [{"role": "user", "content": "Book me out of Vienna"}]
    with g.run("book-trip") as ctx:
        first = client.chat.completions.create(model="gpt-test", messages=messages, tools=tools)
        requested = first.choices[0].message.tool_calls[0]
        found = search_flights(**json.loads(requested.function.arguments))
        messages += [{"role": "tool", "tool_call_id": requested.id, "content": json.dumps(found)}]
        client.chat.completions.create(model="gpt-test", messages=messages, tools=tools)
    events = run_events(server, g, ctx.run_id)
    started = of(events, "node.started")
    assert [p["kind"] for p in started] == ["agent", "llm", "tool", "llm"]
    assert [p["nodeId"] for p in started] == ["agent:book-trip", "llm:step", "tool:search_flights", "llm:step"]
    assert started[2]["input"] == {"origin": "VIE"}
    assert started[1]["instanceId"] != started[3]["instanceId"]
    assert all(p["parentId"] == "agent:book-trip" for p in started if p["kind"] == "llm")
    assert of(events, "node.finished", "llm:step")[1]["output"]["text"] == "Booked TP1234."


def test_anthropic_stream_helper_abort_at_before(server, debugger, gm_for):
    g = gm_for()
    assert g.ready(3)
    client, rec = anthropic_client([(200, ANTHROPIC_STREAM, True)])
    g.instrument_anthropic(client)

    def body():
        with client.messages.stream(model="claude-test", max_tokens=8, messages=[]) as stream:
            return list(stream.text_stream)

    result = _drive_with_gate(server, debugger, g, body, "before", "abort")
    assert isinstance(result.get("raised"), gm.GraphMindAbortError), result
    assert rec.requests == []
    events = run_events(server, g, result["ctx"].run_id)
    assert of(events, "node.finished", "llm:step")[0]["status"] == "aborted"


def test_hide_switches_apply_to_llm_steps(server, gm_for):
    g = gm_for(hide_inputs=True, hide_outputs=True, token_interval=0)
    assert g.ready(3)
    client, _ = openai_client([(200, chat_completion("secret answer", usage={"prompt_tokens": 2, "completion_tokens": 2}), False), (200, CHAT_STREAM, True)])
    g.instrument_openai(client)
    with g.run("hidden") as ctx:
        client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "secret prompt"}])
        list(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
    events = run_events(server, g, ctx.run_id)
    text = json.dumps([e["payload"] for e in events if e["payload"].get("nodeId") == "llm:step"])
    assert "secret prompt" not in text and "secret answer" not in text and "Sunny" not in text
    started = of(events, "node.started", "llm:step")[0]
    assert started["input"] == "__REDACTED__" and started["redaction"]["keys"] == ["input"]
    done = of(events, "node.finished", "llm:step")[0]
    assert done["output"] == "__REDACTED__"
    assert done["usage"] == {"inputTokens": 2, "outputTokens": 2, "inclusive": True}


# -- Anthropic -------------------------------------------------------------------------------


def anthropic_message(content, stop="end_turn", usage=None):
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 3, "output_tokens": 1},
    }


ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": "Weather",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}

ANTHROPIC_STREAM = sse(
    [
        ("message_start", {"type": "message_start", "message": anthropic_message([], None, {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 4, "cache_creation_input_tokens": 2})}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me "}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "check."}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"city": '}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '"Porto"}'}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 12}}),
        ("message_stop", {"type": "message_stop"}),
    ]
)

ANTHROPIC_STREAM_OUTPUT = {
    "toolCalls": [{"id": "toolu_1", "name": "get_weather", "input": {"city": "Porto"}}],
    "finishReason": "tool-calls",
    "rawFinishReason": "tool_use",
}
ANTHROPIC_STREAM_USAGE = {"inputTokens": 16, "outputTokens": 12, "inclusive": True, "cacheReadTokens": 4, "cacheWriteTokens": 2}


def test_anthropic_message_with_tool_use(server, gm_for):
    g = gm_for()
    assert g.ready(3)
    answer = anthropic_message(
        [{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"city": "Faro"}}],
        stop="tool_use",
        usage={"input_tokens": 5, "output_tokens": 8, "cache_read_input_tokens": 100},
    )
    client, rec = anthropic_client([(200, answer, False)])
    assert g.instrument_anthropic(client) is client
    with g.run("anthropic") as ctx:
        message = client.messages.create(
            model="claude-test", max_tokens=64, system="You are terse.", stop_sequences=["END"],
            tool_choice={"type": "auto"}, metadata={"user_id": "u-1"},
            messages=[{"role": "user", "content": "Weather in Faro?"}], tools=[ANTHROPIC_TOOL],
        )
    assert isinstance(message, anthropic.types.Message) and message.content[1].input == {"city": "Faro"}
    events = run_events(server, g, ctx.run_id)
    started = of(events, "node.started", "llm:step")[0]
    assert (started["kind"], started["name"], started["sdk"], started["parentId"]) == ("llm", "step", "anthropic", "agent:anthropic")
    h = gm._native.schema_hash(ANTHROPIC_TOOL)
    assert started["input"] == {
        "provider": "anthropic",
        "model": "claude-test",
        "system": "You are terse.",
        "messages": [{"role": "user", "content": "Weather in Faro?"}],
        "max_tokens": 64,
        "stop_sequences": ["END"],
        "tool_choice": {"type": "auto"},
        "tools": [{"name": "get_weather", "schemaHash": h}],
        "toolSchemas": {h: ANTHROPIC_TOOL},
    }
    done = of(events, "node.finished", "llm:step")[0]
    assert done["output"] == {
        "text": "Checking.",
        "toolCalls": [{"id": "toolu_9", "name": "get_weather", "input": {"city": "Faro"}}],
        "finishReason": "tool-calls",
        "rawFinishReason": "tool_use",
    }
    # Anthropic reports the uncached tail: the recorded input is the whole prompt.
    assert done["usage"] == {"inputTokens": 105, "outputTokens": 8, "inclusive": True, "cacheReadTokens": 100}


def test_anthropic_raw_event_stream(server, gm_for):
    g = gm_for(token_interval=0)
    assert g.ready(3)
    client, _ = anthropic_client([(200, ANTHROPIC_STREAM, True)])
    g.wrap_anthropic(client)
    with g.run("anthropic-stream") as ctx:
        kinds = [e.type for e in client.messages.create(model="claude-test", max_tokens=64, messages=[], stream=True)]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and len(kinds) == 11
    events = run_events(server, g, ctx.run_id)
    assert of(events, "node.started", "llm:step")[0]["input"]["stream"] is True
    assert streamed(events, "llm:step") == "Let me check."
    assert streamed(events, "llm:step", "tool-args") == '{"city": "Porto"}'
    done = of(events, "node.finished", "llm:step")[0]
    assert done["streaming"] is True
    assert done["output"] == {"text": "Let me check.", "chunks": 11, **ANTHROPIC_STREAM_OUTPUT}
    assert done["usage"] == ANTHROPIC_STREAM_USAGE


def test_anthropic_messages_stream_helper_text_stream(server, gm_for):
    g = gm_for()
    assert g.ready(3)
    client, _ = anthropic_client([(200, ANTHROPIC_STREAM, True)])
    g.instrument_anthropic(client)
    with g.run("anthropic-helper") as ctx:
        with client.messages.stream(model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as stream:
            pieces = list(stream.text_stream)
            final = stream.get_final_message()
    assert pieces == ["Let me ", "check."] and final.stop_reason == "tool_use"
    events = run_events(server, g, ctx.run_id)
    assert streamed(events, "llm:step") == "Let me check."
    done = of(events, "node.finished", "llm:step")
    assert len(done) == 1
    assert done[0]["output"]["text"] == "Let me check."
    assert {k: done[0]["output"][k] for k in ANTHROPIC_STREAM_OUTPUT} == ANTHROPIC_STREAM_OUTPUT
    assert done[0]["usage"] == ANTHROPIC_STREAM_USAGE


def test_anthropic_async_create_and_stream_helper(server, gm_for):
    g = gm_for()
    assert g.ready(3)
    client, _ = anthropic_client(
        [(200, anthropic_message([{"type": "text", "text": "async hi"}]), False), (200, ANTHROPIC_STREAM, True)],
        is_async=True,
    )
    g.instrument_anthropic(client)

    async def main():
        async with g.run("anthropic-async") as ctx:
            message = await client.messages.create(model="claude-test", max_tokens=8, messages=[])
            async with client.messages.stream(model="claude-test", max_tokens=8, messages=[]) as stream:
                kinds = [event.type async for event in stream]
        return ctx, message, kinds

    ctx, message, kinds = asyncio.run(main())
    assert message.content[0].text == "async hi" and "message_stop" in kinds
    events = run_events(server, g, ctx.run_id)
    done = of(events, "node.finished", "llm:step")
    assert done[0]["output"] == {"text": "async hi", "finishReason": "stop", "rawFinishReason": "end_turn"}
    assert done[0]["usage"] == {"inputTokens": 3, "outputTokens": 1, "inclusive": True}
    assert done[1]["streaming"] is True and done[1]["output"]["text"] == "Let me check."
    assert done[1]["usage"] == ANTHROPIC_STREAM_USAGE


def test_anthropic_http_error(server, gm_for):
    g = gm_for()
    assert g.ready(3)
    client, _ = anthropic_client([(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, False)])
    g.instrument_anthropic(client)
    with pytest.raises(anthropic.APIStatusError):
        with g.run("anthropic-error") as ctx:
            client.messages.create(model="claude-test", max_tokens=8, messages=[])
    events = run_events(server, g, ctx.run_id)
    error = of(events, "node.error", "llm:step")[0]["error"]
    assert "Overloaded" in error["message"]
    assert of(events, "node.finished", "llm:step")[0]["status"] == "error"
    assert events[-1]["payload"]["status"] == "error"


def test_anthropic_instrumentation_is_idempotent(server, gm_for):
    g = gm_for()
    client, _ = anthropic_client([])
    g.instrument_anthropic(client)
    create, stream = client.messages.create, client.messages.stream
    assert create.__graphmind_wrapped__ and stream.__graphmind_wrapped__
    gm.integrations.instrument_anthropic  # lazily importable from the package too
    g.instrument_anthropic(client)
    assert client.messages.create is create and client.messages.stream is stream


# -- LangChain -------------------------------------------------------------------------------


def _fake_model(*messages):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    return GenericFakeChatModel(messages=iter(list(messages)))


def test_langchain_chain_llm_and_tool_nodes(server, gm_for):
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda
    from langchain_core.tools import tool

    g = gm_for()
    assert g.ready(3)
    handler = g.callback_handler()
    assert isinstance(handler, gm.GraphMindCallbackHandler)

    reply = AIMessage(
        content="",
        tool_calls=[{"id": "call_3", "name": "add", "args": {"a": 2, "b": 3}}],
        usage_metadata={"input_tokens": 12, "output_tokens": 4, "total_tokens": 16, "input_token_details": {"cache_read": 2}},
        response_metadata={"finish_reason": "tool_calls"},
    )
    model = _fake_model(reply)

    @tool
    def add(a: int, b: int) -> int:
        """Adds two numbers."""
        return a + b

    chain = RunnableLambda(lambda q: f"Question: {q}", name="prompt") | model
    with g.run("lc") as ctx:
        message = chain.invoke("2+3?", config={"callbacks": [handler]})
        total = add.invoke(message.tool_calls[0]["args"], config={"callbacks": [handler]})
    assert total == 5
    events = run_events(server, g, ctx.run_id)
    started = {p["nodeId"]: p for p in of(events, "node.started")}
    assert started["chain:RunnableSequence"]["parentId"] == "agent:lc"
    assert started["chain:prompt"]["parentId"] == "chain:RunnableSequence"
    # The chat model is the core's LLM step, as every provider call and Node's handler.
    llm = started["llm:step"]
    assert llm["kind"] == "llm" and llm["name"] == "step" and llm["sdk"] == "langchain"
    assert llm["parentId"] == "chain:RunnableSequence"
    assert llm["input"]["provider"] == "langchain" and llm["input"]["model"] == "GenericFakeChatModel"
    assert llm["input"]["messages"][0][0]["content"] == "Question: 2+3?"
    assert llm["instanceId"].startswith("inv_") and llm["instanceId"].endswith(":s0")
    assert started["tool:add"]["input"] == {"a": 2, "b": 3} and started["tool:add"]["parentId"] == "agent:lc"
    done = {p["nodeId"]: p for p in of(events, "node.finished")}
    out = done["llm:step"]
    assert out["instanceId"] == llm["instanceId"]
    assert out["output"]["toolCalls"] == [{"id": "call_3", "name": "add", "input": {"a": 2, "b": 3}}]
    assert out["output"]["finishReason"] == "tool-calls" and out["output"]["rawFinishReason"] == "tool_calls"
    assert out["usage"] == {"inputTokens": 12, "outputTokens": 4, "inclusive": True, "cacheReadTokens": 2}
    assert done["tool:add"]["output"] == 5 and done["tool:add"]["status"] == "ok"
    assert done["chain:RunnableSequence"]["status"] == "ok"
    # Instance ids are the core's, never LangChain's run ids; no event carries 0.5.1's
    # `framework` field (Node's handler records none either).
    assert started["tool:add"]["instanceId"] == done["tool:add"]["instanceId"]
    assert all("framework" not in e["payload"] for e in events)
    hint = [p for p in of(events, "graph.hint")]
    assert {"nodeId": "llm:step", "kind": "llm", "name": "step", "parentId": "chain:RunnableSequence"} in [
        {k: n.get(k) for k in ("nodeId", "kind", "name", "parentId")} for h in hint for n in h["nodes"]
    ]


def _tool_model(*messages):
    """A fake chat model that binds tools as a provider's chat model does (the OpenAI
    definitions reach `invocation_params`)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.utils.function_calling import convert_to_openai_tool

    class ToolFake(GenericFakeChatModel):
        def bind_tools(self, tools, **kwargs):
            return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    return ToolFake(messages=iter(list(messages)))


def test_langchain_model_steps_group_into_an_invocation_with_the_tool_roster(server, gm_for):
    """Two model calls of one conversation (the second's prompt grows the first's) are
    steps s0 and s1 of one invocation; the tools bound are announced once in the run's
    `graph.hint` under `llm:step` and recorded by name and schema hash."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool

    @tool
    def add(a: int, b: int) -> int:
        """Adds two numbers."""
        return a + b

    g = gm_for()
    assert g.ready(3)
    call = AIMessage(content="", tool_calls=[{"id": "c1", "name": "add", "args": {"a": 1, "b": 2}}])
    model = _tool_model(call, AIMessage(content="3"))
    bound = model.bind_tools([add])
    handler = g.handler()
    history = [HumanMessage(content="1+2?")]
    with g.run("lc-steps") as ctx:
        first = bound.invoke(history, config={"callbacks": [handler]})
        history += [first, ToolMessage(content="3", tool_call_id="c1")]
        second = bound.invoke(history, config={"callbacks": [handler]})
    assert second.content == "3"
    events = run_events(server, g, ctx.run_id)
    steps = of(events, "node.started", "llm:step")
    assert len(steps) == 2
    inv = steps[0]["instanceId"].rsplit(":", 1)[0]
    assert [s["instanceId"] for s in steps] == [f"{inv}:s0", f"{inv}:s1"]
    assert all(s["parentId"] == "agent:lc-steps" for s in steps)
    assert [t["name"] for t in steps[0]["input"]["tools"]] == ["add"]
    assert "toolSchemas" in steps[0]["input"] and "toolSchemas" not in steps[1]["input"]
    nodes = [n for h in of(events, "graph.hint") for n in h["nodes"]]
    assert {(n["nodeId"], n.get("parentId")) for n in nodes} >= {("llm:step", "agent:lc-steps"), ("tool:add", "llm:step")}
    done = of(events, "node.finished", "llm:step")
    assert done[0]["output"]["toolCalls"] == [{"id": "c1", "name": "add", "input": {"a": 1, "b": 2}}]
    assert done[1]["output"]["text"] == "3"


def test_langchain_streaming_tokens(server, gm_for):
    g = gm_for(token_interval=0)
    assert g.ready(3)
    model = _fake_model("alpha beta gamma")
    with g.run("lc-stream") as ctx:
        parts = [c.content for c in model.stream("go", config={"callbacks": [g.handler()]})]
    assert "".join(parts) == "alpha beta gamma"
    events = run_events(server, g, ctx.run_id)
    assert streamed(events, "llm:step") == "alpha beta gamma"
    done = of(events, "node.finished", "llm:step")[0]
    assert done["output"]["text"] == "alpha beta gamma"


def test_langchain_tool_error_is_recorded(server, gm_for):
    from langchain_core.tools import tool

    g = gm_for()
    assert g.ready(3)

    @tool
    def explode(x: int) -> int:
        """Fails."""
        raise ValueError("kaboom")

    with pytest.raises(ValueError):
        with g.run("lc-error") as ctx:
            explode.invoke({"x": 1}, config={"callbacks": [g.callback_handler()]})
    events = run_events(server, g, ctx.run_id)
    error = of(events, "node.error", "tool:explode")[0]
    assert error["error"]["name"] == "ValueError" and error["error"]["message"] == "kaboom"
    assert of(events, "node.finished", "tool:explode")[0]["status"] == "error"


def test_langchain_a_failure_pauses_once_at_the_innermost_level(server, debugger, gm_for):
    """A tool's error climbs through the chain that ran it: the tool's error gate holds,
    the chain records `node.error` and finishes `error` without pausing again (the core's
    `Step::error_once`, as Node's handler)."""
    from langchain_core.runnables import RunnableLambda
    from langchain_core.tools import tool

    @tool
    def explode(x: int) -> int:
        """Fails."""
        raise ValueError("kaboom")

    g = gm_for()
    assert g.ready(3)
    outer = RunnableLambda(lambda x, config: explode.invoke({"x": x}, config=config), name="outer")
    debugger.breakpoint({"point": "error", "nodeId": "chain:outer"})
    result = _drive_with_gate(
        server, debugger, g, lambda: outer.invoke(1, config={"callbacks": [g.handler()]}), "error", "continue", node="tool:explode",
    )
    assert isinstance(result.get("raised"), ValueError)
    events = run_events(server, g, result["ctx"].run_id)
    assert [p["nodeId"] for p in of(events, "exec.paused")] == ["tool:explode"]
    assert [p["nodeId"] for p in of(events, "node.error")] == ["tool:explode", "chain:outer", "agent:gate-error-continue"]
    finished = {p["nodeId"]: p["status"] for p in of(events, "node.finished")}
    assert finished["tool:explode"] == finished["chain:outer"] == "error"


def test_langchain_async_handler(server, gm_for):
    from langchain_core.messages import AIMessage

    g = gm_for()
    assert g.ready(3)
    handler = g.async_callback_handler()
    assert isinstance(handler, gm.AsyncGraphMindCallbackHandler)
    model = _fake_model(AIMessage(content="async answer", usage_metadata={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}))

    async def main():
        async with g.run("lc-async") as ctx:
            message = await model.ainvoke("hi", config={"callbacks": [handler]})
        return ctx, message

    ctx, message = asyncio.run(main())
    assert message.content == "async answer"
    events = run_events(server, g, ctx.run_id)
    started = of(events, "node.started", "llm:step")[0]
    assert started["parentId"] == "agent:lc-async" and started["sdk"] == "langchain"
    done = of(events, "node.finished", "llm:step")[0]
    assert done["output"]["text"] == "async answer"
    assert done["usage"] == {"inputTokens": 3, "outputTokens": 2, "inclusive": True}


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_langchain_abort_at_a_gate_ends_the_chain(server, debugger, gm_for, flavor):
    g = gm_for()
    assert g.ready(3)
    model = _fake_model("never seen")
    node = "llm:step"
    debugger.breakpoint({"point": "before", "nodeId": node})
    result: dict[str, Any] = {}
    go = threading.Event()

    def target():
        try:
            if flavor == "sync":
                with g.run("lc-abort") as ctx:
                    result["ctx"] = ctx
                    go.wait(5)
                    result["value"] = model.invoke("x", config={"callbacks": [g.handler()]})
            else:

                async def main():
                    async with g.run("lc-abort") as ctx:
                        result["ctx"] = ctx
                        await asyncio.get_running_loop().run_in_executor(None, go.wait, 5)
                        result["value"] = await model.ainvoke("x", config={"callbacks": [g.async_handler()]})

                asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001
            result["raised"] = exc

    t, paused = paused_in_thread(debugger, target, result, go)
    assert paused["payload"]["nodeId"] == node and paused["payload"]["point"] == "before"
    debugger.resume(result["ctx"].run_id, paused["payload"]["pauseId"], "abort")
    t.join(10)
    assert not t.is_alive()
    assert isinstance(result.get("raised"), gm.GraphMindAbortError), result
    events = run_events(server, g, result["ctx"].run_id)
    assert of(events, "node.finished", node)[0]["status"] == "aborted"


def test_langchain_inject_at_a_callback_gate_continues_with_a_warning(server, debugger, gm_for):
    """A callback cannot replace a result: the core's watching gate continues and the
    skin logs the one warning it hands back."""
    lines: list[str] = []
    g = gm_for(logger=lines.append)
    assert g.ready(3)
    model = _fake_model("the real answer")
    node = "llm:step"
    debugger.breakpoint({"point": "before", "nodeId": node})
    result: dict[str, Any] = {}
    go = threading.Event()

    def target():
        with g.run("lc-inject") as ctx:
            result["ctx"] = ctx
            go.wait(5)
            result["value"] = model.invoke("x", config={"callbacks": [g.handler()]})

    t, paused = paused_in_thread(debugger, target, result, go)
    assert paused["payload"]["nodeId"] == node
    debugger.resume(result["ctx"].run_id, paused["payload"]["pauseId"], "inject", output="never delivered")
    t.join(10)
    assert not t.is_alive()
    assert result["value"].content == "the real answer"
    deadline = time.monotonic() + 5
    while not any("is not supported at a LangChain callback gate" in l for l in lines) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert any("`inject` is not supported at a LangChain callback gate" in l and "@gm.tool" in l for l in lines), lines
    events = run_events(server, g, result["ctx"].run_id)
    assert of(events, "node.finished", node)[0]["status"] == "ok"


def test_langchain_retriever_node(server, gm_for):
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class Shelf(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):
            return [Document(page_content=f"about {query}", metadata={"page": 3})]

    g = gm_for()
    assert g.ready(3)
    with g.run("lc-retriever") as ctx:
        docs = Shelf().invoke("tides", config={"callbacks": [g.callback_handler()]})
    assert docs[0].page_content == "about tides"
    events = run_events(server, g, ctx.run_id)
    started = of(events, "node.started", "retriever:Shelf")[0]
    assert started["kind"] == "retriever" and started["input"] == {"query": "tides"}
    done = of(events, "node.finished", "retriever:Shelf")[0]
    assert done["output"] == [{"pageContent": "about tides", "metadata": {"page": 3}}]


def test_langchain_handler_classes_are_lazy_exports():
    from graphmind.integrations import langchain

    assert gm.GraphMindCallbackHandler is langchain.GraphMindCallbackHandler
    assert gm.AsyncGraphMindCallbackHandler is langchain.AsyncGraphMindCallbackHandler
    assert langchain.LANGCHAIN_AVAILABLE
    from langchain_core.callbacks.base import AsyncCallbackHandler, BaseCallbackHandler

    assert issubclass(gm.GraphMindCallbackHandler, BaseCallbackHandler)
    assert issubclass(gm.AsyncGraphMindCallbackHandler, AsyncCallbackHandler)
    assert gm.GraphMindCallbackHandler.raise_error is True


# -- the reference SDK as an oracle --------------------------------------------------------

ORACLE_SCRIPT = r'''
import json, sys
import httpx, openai
import graphmind as gm

url, stream_body = sys.argv[1], sys.argv[2].encode()
answers = [
    (200, {"id": "c", "object": "chat.completion", "created": 1, "model": "gpt-test",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": "Lisbon is sunny."},
                        "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}),
    (200, stream_body),
    (400, {"error": {"message": "bad request", "type": "invalid_request_error"}}),
]

def handler(request):
    status, body = answers.pop(0)
    if isinstance(body, bytes):
        return httpx.Response(status, headers={"content-type": "text/event-stream"}, content=body)
    return httpx.Response(status, json=body)

client = openai.OpenAI(api_key="sk", base_url="http://llm.test/v1", max_retries=0,
                       http_client=httpx.Client(transport=httpx.MockTransport(handler)))
g = gm.GraphMind(url=url, app="oracle", env={})
assert g.ready(5)
assert g.instrument_openai(client) is client
messages = [{"role": "user", "content": "weather in Lisbon?"}]
with g.run("oracle") as ctx:
    client.chat.completions.create(model="gpt-test", messages=messages, temperature=0.2)
    text = "".join(c.choices[0].delta.content or "" for c in
                   client.chat.completions.create(model="gpt-test", messages=messages, stream=True) if c.choices)
    try:
        client.chat.completions.create(model="gpt-test", messages=messages)
    except openai.BadRequestError:
        pass

import anthropic
try:
    import httpx2 as ahttp
except ImportError:
    ahttp = httpx
message = {"id": "m", "type": "message", "role": "assistant", "model": "claude-test",
           "content": [{"type": "text", "text": "Porto is cloudy."}], "stop_reason": "end_turn",
           "stop_stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 4}}
aclient = anthropic.Anthropic(api_key="sk", base_url="http://llm.test", max_retries=0,
                              http_client=ahttp.Client(transport=ahttp.MockTransport(
                                  lambda request: ahttp.Response(200, json=message))))
g.instrument_anthropic(aclient)
with g.run("oracle-anthropic") as actx:
    aclient.messages.create(model="claude-test", max_tokens=32, system="terse", messages=messages)

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool

@tool
def add(a: int, b: int) -> int:
    """Adds."""
    return a + b

model = GenericFakeChatModel(messages=iter([AIMessage(content="five", usage_metadata={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6})]))
chain = RunnableLambda(lambda q: "Q: " + q, name="prompt") | model
handler = g.callback_handler()
with g.run("oracle-langchain") as lctx:
    chain.invoke("2+3?", config={"callbacks": [handler]})
    add.invoke({"a": 2, "b": 3}, config={"callbacks": [handler]})

g.dispose()
print(json.dumps({"run": ctx.run_id, "text": text, "anthropic": actx.run_id, "langchain": lctx.run_id}))
'''


def _reference_python():
    from pathlib import Path

    from conftest import ROOT, paused_in_thread

    ref = Path(ROOT) / ".venv-ref" / "bin" / "python"
    assert ref.exists(), "the reference SDK's venv is made by scripts/setup.sh (make setup)"
    return ref


def _client_libraries_for(tmp_path):
    """A directory exposing this venv's client libraries (openai, httpx, ...) but not our
    `graphmind`, so the reference SDK can drive the same openai package."""
    import site

    shelf = tmp_path / "libs"
    shelf.mkdir()
    for base in site.getsitepackages():
        from pathlib import Path

        for entry in Path(base).iterdir():
            name = entry.name
            if name.startswith(("graphmind", "_graphmind")) or name.endswith(".pth") or name.startswith("_distutils"):
                continue
            target = shelf / name
            if not target.exists():
                target.symlink_to(entry)
    return shelf


def _shape(events, usage=True):
    """What both SDKs must agree on: the events' order and identities, and the step's
    request and answer as the app saw them."""
    out = []
    for e in events:
        p = e["payload"]
        if e["type"] in ("run.started", "run.finished"):
            out.append((e["type"], p.get("status")))
            continue
        if e["type"] == "node.token":
            continue  # batching differs; the concatenated text is compared separately
        inp = p.get("input") if isinstance(p.get("input"), dict) else {}
        counts = (p.get("usage") or {}) if usage else {}
        output = p.get("output") if isinstance(p.get("output"), dict) else {}
        out.append((
            e["type"], p.get("nodeId"), p.get("kind"), p.get("name"), p.get("parentId"), p.get("sdk"),
            p.get("status"), p.get("streaming"), inp.get("provider"), inp.get("model"),
            json.dumps(inp.get("messages")), inp.get("temperature"), inp.get("stream"),
            output.get("text"), counts.get("inputTokens"), counts.get("outputTokens"),
            (p.get("error") or {}).get("name"), p.get("framework"),
            json.dumps(p.get("input") if p.get("kind") in ("chain", "tool") else None),
        ))
    return out


def test_openai_steps_match_the_reference_sdk(server, tmp_path):
    import os
    import subprocess
    import sys

    body = sse([
        (None, chat_chunk({"role": "assistant", "content": "Lis"})),
        (None, chat_chunk({"content": "bon"}, finish="stop")),
        (None, "[DONE]"),
    ]).decode()
    script = tmp_path / "oracle.py"
    script.write_text(ORACLE_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMIND_")}
    ours = subprocess.run([sys.executable, str(script), server.url, body], capture_output=True, text=True, env=env, timeout=60)
    assert ours.returncode == 0, ours.stderr
    ref_env = dict(env, PYTHONPATH=str(_client_libraries_for(tmp_path)))
    ref = subprocess.run([str(_reference_python()), str(script), server.url, body], capture_output=True, text=True, env=ref_env, timeout=60)
    assert ref.returncode == 0, ref.stderr
    mine, theirs = json.loads(ours.stdout), json.loads(ref.stdout)
    assert mine["text"] == theirs["text"] == "Lisbon"

    def stored(run_id):
        deadline = time.monotonic() + 10
        events = []
        while time.monotonic() < deadline:
            events = server.events(run_id, 1, timeout=1)
            if events and events[-1]["type"] == "run.finished":
                break
            time.sleep(0.05)
        return events

    a, b = stored(mine["run"]), stored(theirs["run"])
    assert _shape(a) == _shape(b)
    assert streamed(a, "llm:step") == streamed(b, "llm:step") == "Lisbon"
    assert [e["type"] for e in a].count("node.started") == 4  # the agent and three steps
    a, b = stored(mine["anthropic"]), stored(theirs["anthropic"])
    assert len(a) == 7 and _shape(a) == _shape(b)
    # LangChain: chains and tools as 0.5.1 records them (less its `framework` field, which
    # Node's handler never had); the chat model is the core's LLM step (`llm:step`, the
    # `langchain` codec, a `graph.hint`) where 0.5.1 drew `llm:<model>`, and 0.5.1 missed
    # LangChain's usage_metadata (a dict, read as attributes) where we read it.
    lc, ref_lc = stored(mine["langchain"]), stored(theirs["langchain"])

    def without_model(events):
        kept = [e for e in events if e["type"] != "graph.hint" and not str(e["payload"].get("nodeId", "")).startswith("llm:")]
        return [(*row[:17], None, *row[18:]) for row in _shape(kept, usage=False)]

    assert without_model(lc) == without_model(ref_lc)
    step = of(lc, "node.finished", "llm:step")[0]
    theirs_step = of(ref_lc, "node.finished", "llm:GenericFakeChatModel")[0]
    assert step["output"]["text"] == theirs_step["output"]["text"] == "five"
    assert step["usage"] == {"inputTokens": 5, "outputTokens": 1, "inclusive": True}
    assert of(lc, "node.started", "llm:step")[0]["parentId"] == of(ref_lc, "node.started", "llm:GenericFakeChatModel")[0]["parentId"]
    assert {p["nodeId"] for p in of(lc, "node.started")} == {
        "agent:oracle-langchain", "chain:RunnableSequence", "chain:prompt", "llm:step", "tool:add",
    }
