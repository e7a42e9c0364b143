"""The integrations over real HTTP: the PyPI ``openai`` / ``anthropic`` clients talk to the
fake provider server (``tests/fake_provider/server.py``, 127.0.0.1, scripted per test),
each test attached to a real ``graphmind serve`` and reading back what it stored."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import anthropic
import openai
import pytest

import graphmind as gm
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "fake_provider"))
from server import FakeProvider  # noqa: E402

from test_integrations import _drive_with_gate, of, run_events, streamed  # noqa: E402


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.stop()


def chat(content=None, tool_calls=None, finish="stop", usage=None, id="chatcmpl-1"):
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": id, "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return {"status": 200, "json": body}


def chunk(delta=None, finish=None, usage=None):
    c: dict[str, Any] = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}
    c["choices"] = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage is not None:
        c["usage"] = usage
    return [None, c]


WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


def openai_client(provider, is_async=False, retries=0):
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(api_key="sk-test", base_url=provider.base_url, max_retries=retries)


def anthropic_client(provider, is_async=False, retries=0):
    cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
    return cls(api_key="sk-test", base_url=provider.root_url, max_retries=retries)


def test_an_agent_loop_is_one_invocation_with_one_tool_roster(server, provider, gm_for):
    g = gm_for()
    assert g.ready(3)
    provider.script(
        chat(None, [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Lisbon"}'}}],
             "tool_calls", {"prompt_tokens": 30, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 10}}),
        chat("It is sunny."),
        chat("Unrelated."),
    )
    client = g.instrument_openai(openai_client(provider))
    first = [{"role": "user", "content": "Weather in Lisbon?"}]
    with g.run("loop") as ctx:
        a = client.chat.completions.create(model="gpt-test", messages=first, tools=[WEATHER], temperature=0.1)
        grown = first + [a.choices[0].message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
        client.chat.completions.create(model="gpt-test", messages=grown, tools=[WEATHER])
        client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "other"}])
    events = run_events(server, g, ctx.run_id)
    started = of(events, "node.started", "llm:step")
    ids = [s["instanceId"] for s in started]
    assert ids[0].endswith(":s0") and ids[1] == ids[0][:-1] + "1", ids
    assert ids[2].endswith(":s0") and ids[2].split(":")[0] != ids[0].split(":")[0]
    assert started[0]["sdk"] == "openai" and started[0]["parentId"] == "agent:loop"
    assert started[0]["input"]["temperature"] == 0.1 and started[0]["input"]["tools"][0]["name"] == "get_weather"
    assert "toolSchemas" in started[0]["input"] and "toolSchemas" not in started[1]["input"]
    hints = of(events, "graph.hint")
    assert len(hints) == 1
    assert [n["nodeId"] for n in hints[0]["nodes"]] == ["agent:loop", "llm:step", "tool:get_weather"]
    done = of(events, "node.finished", "llm:step")
    assert done[0]["output"]["toolCalls"] == [{"id": "call_1", "name": "get_weather", "input": {"city": "Lisbon"}}]
    assert done[0]["usage"] == {"inputTokens": 30, "outputTokens": 7, "inclusive": True, "cacheReadTokens": 10}
    assert [d["instanceId"] for d in done] == ids
    assert provider.bodies()[0]["temperature"] == 0.1


def test_a_streamed_chat_with_include_usage(server, provider, gm_for):
    g = gm_for(token_interval=0)
    assert g.ready(3)
    provider.script({"status": 200, "sse": [
        chunk({"role": "assistant", "content": "Sun"}),
        chunk({"content": "ny"}),
        chunk({"tool_calls": [{"index": 0, "id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": '{"ci'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Faro"}'}}]}, finish="tool_calls"),
        chunk(None, usage={"prompt_tokens": 20, "completion_tokens": 9}),
        [None, "[DONE]"],
    ]})
    client = g.instrument_openai(openai_client(provider))
    with g.run("stream") as ctx:
        stream = client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}], stream=True, stream_options={"include_usage": True},
        )
        parts = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert parts == ["Sun", "ny"]
    events = run_events(server, g, ctx.run_id)
    assert streamed(events, "llm:step") == "Sunny"
    assert streamed(events, "llm:step", "tool-args") == '{"city": "Faro"}'
    done = of(events, "node.finished", "llm:step")[0]
    assert done["streaming"] is True
    assert done["output"] == {
        "text": "Sunny", "chunks": 5, "toolCalls": [{"id": "call_9", "name": "get_weather", "input": {"city": "Faro"}}],
        "finishReason": "tool-calls", "rawFinishReason": "tool_calls",
    }
    assert done["usage"] == {"inputTokens": 20, "outputTokens": 9, "inclusive": True}
    assert provider.bodies()[0]["stream_options"] == {"include_usage": True}


def test_a_500_then_success_is_one_ok_step_and_a_429_is_an_error(server, provider, gm_for):
    g = gm_for()
    assert g.ready(3)
    provider.script(
        {"status": 500, "json": {"error": {"message": "boom"}}},
        chat("after a retry"),
        {"status": 429, "json": {"error": {"message": "slow down"}}, "headers": {"retry-after": "0"}},
    )
    with g.run("http") as ctx:
        retried = g.instrument_openai(openai_client(provider, retries=1))
        assert retried.chat.completions.create(model="gpt-test", messages=[]).choices[0].message.content == "after a retry"
        plain = g.instrument_openai(openai_client(provider))
        with pytest.raises(openai.RateLimitError):
            plain.chat.completions.create(model="gpt-test", messages=[])
    events = run_events(server, g, ctx.run_id)
    done = of(events, "node.finished", "llm:step")
    assert [d["status"] for d in done] == ["ok", "error"]
    errors = of(events, "node.error", "llm:step")
    assert len(errors) == 1 and errors[0]["error"]["name"] == "RateLimitError"
    assert len(provider.requests) == 3


def test_responses_stream_and_previous_response_id_chaining(server, provider, gm_for):
    g = gm_for(token_interval=0)
    assert g.ready(3)
    final = {
        "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-test", "status": "completed",
        "output": [{"type": "message", "id": "m", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Hi there", "annotations": []}]}],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": 6, "output_tokens": 4, "total_tokens": 10,
                  "input_tokens_details": {"cached_tokens": 1}, "output_tokens_details": {"reasoning_tokens": 0}},
    }
    provider.script(
        {"status": 200, "sse": [
            ["response.created", {"type": "response.created", "sequence_number": 0, "response": dict(final, status="in_progress", output=[], usage=None)}],
            ["response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "m", "output_index": 0, "content_index": 0, "delta": "Hi ", "logprobs": []}],
            ["response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 2, "item_id": "m", "output_index": 0, "content_index": 0, "delta": "there", "logprobs": []}],
            ["response.completed", {"type": "response.completed", "sequence_number": 3, "response": final}],
        ]},
        {"status": 200, "json": dict(final, id="resp_2")},
    )
    client = g.instrument_openai(openai_client(provider))
    with g.run("responses") as ctx:
        for _ in client.responses.create(model="gpt-test", input="hi", stream=True):
            pass
        follow = client.responses.create(model="gpt-test", input="and then?", previous_response_id="resp_1")
    assert follow.output_text == "Hi there"
    events = run_events(server, g, ctx.run_id)
    done = of(events, "node.finished", "llm:step")
    assert done[0]["output"]["text"] == "Hi there" and done[0]["output"]["chunks"] == 4 and done[0]["streaming"] is True
    assert done[0]["usage"]["cacheReadTokens"] == 1
    started = of(events, "node.started", "llm:step")
    assert started[1]["instanceId"].endswith(":s1"), "previous_response_id continues the invocation"
    assert started[1]["input"]["previous_response_id"] == "resp_1"


def test_raw_and_streaming_response_wrappers_are_recorded(server, provider, gm_for):
    g = gm_for(token_interval=0)
    assert g.ready(3)
    provider.script(
        chat("raw answer"),
        chat("streamed wrapper answer"),
        {"status": 200, "sse": [chunk({"content": "wrap"}), chunk({"content": "ped"}, finish="stop"), [None, "[DONE]"]]},
    )
    client = g.instrument_openai(openai_client(provider))
    with g.run("wrappers") as ctx:
        raw = client.chat.completions.with_raw_response.create(model="gpt-test", messages=[])
        assert raw.http_response.status_code == 200 and raw.parse().choices[0].message.content == "raw answer"
        with client.chat.completions.with_streaming_response.create(model="gpt-test", messages=[]) as response:
            assert response.parse().choices[0].message.content == "streamed wrapper answer"
        with client.chat.completions.with_streaming_response.create(model="gpt-test", messages=[], stream=True) as response:
            texts = [c.choices[0].delta.content for c in response.parse() if c.choices]
    assert texts == ["wrap", "ped"]
    events = run_events(server, g, ctx.run_id)
    done = of(events, "node.finished", "llm:step")
    assert [d["output"]["text"] for d in done] == ["raw answer", "streamed wrapper answer", "wrapped"]
    assert done[2]["streaming"] is True


def test_anthropic_beta_parse_and_stream_events(server, provider, gm_for):
    g = gm_for(token_interval=0)
    assert g.ready(3)
    message = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Faro"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 8, "cache_read_input_tokens": 100},
    }
    events_sse = [
        ["message_start", {"type": "message_start", "message": dict(message, content=[], stop_reason=None, usage={"input_tokens": 3, "output_tokens": 1})}],
        ["content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}],
        ["content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}],
        ["content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}}],
        ["content_block_stop", {"type": "content_block_stop", "index": 0}],
        ["message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 2}}],
        ["message_stop", {"type": "message_stop"}],
    ]
    provider.script({"status": 200, "json": message}, {"status": 200, "sse": events_sse}, {"status": 200, "sse": events_sse})
    client = g.instrument_anthropic(anthropic_client(provider))
    with g.run("anthropic") as ctx:
        got = client.beta.messages.create(model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "w?"}])
        assert got.content[1].input == {"city": "Faro"}
        kinds = [e.type for e in client.messages.create(model="claude-test", max_tokens=10, messages=[], stream=True)]
        with client.messages.stream(model="claude-test", max_tokens=10, messages=[]) as stream:
            text = "".join(stream.text_stream)
    assert kinds[0] == "message_start" and text == "Hello"
    events = run_events(server, g, ctx.run_id)
    done = of(events, "node.finished", "llm:step")
    assert done[0]["output"]["toolCalls"] == [{"id": "toolu_1", "name": "get_weather", "input": {"city": "Faro"}}]
    assert done[0]["usage"] == {"inputTokens": 105, "outputTokens": 8, "inclusive": True, "cacheReadTokens": 100}
    assert done[1]["output"] == {"text": "Hello", "chunks": 7, "finishReason": "stop", "rawFinishReason": "end_turn"}
    assert done[1]["usage"] == {"inputTokens": 3, "outputTokens": 2, "inclusive": True}
    assert done[2]["output"]["text"] == "Hello" and done[2]["streaming"] is True
    assert streamed(events, "llm:step") == "HelloHello"
    assert provider.bodies()[0]["max_tokens"] == 10


@pytest.mark.parametrize("flavor", ["chat", "responses", "anthropic"])
def test_an_injected_text_is_returned_as_the_sdks_own_type(server, debugger, provider, gm_for, flavor):
    g = gm_for()
    assert g.ready(3)
    if flavor == "anthropic":
        client = g.instrument_anthropic(anthropic_client(provider))
        call = lambda: client.messages.create(model="claude-test", max_tokens=5, messages=[])  # noqa: E731
    else:
        client = g.instrument_openai(openai_client(provider))
        if flavor == "chat":
            call = lambda: client.chat.completions.create(model="gpt-test", messages=[])  # noqa: E731
        else:
            call = lambda: client.responses.create(model="gpt-test", input="x")  # noqa: E731
    out = _drive_with_gate(server, debugger, g, call, "before", "inject", output="from the debugger")
    value = out.get("value")
    if flavor == "chat":
        assert isinstance(value, openai.types.chat.ChatCompletion), out
        assert value.choices[0].message.content == "from the debugger" and value.model == "gpt-test"
    elif flavor == "responses":
        assert isinstance(value, openai.types.responses.Response), out
        assert value.output_text == "from the debugger"
    else:
        assert isinstance(value, anthropic.types.Message), out
        assert value.content[0].text == "from the debugger"
    assert provider.requests == []
    events = run_events(server, g, out["ctx"].run_id)
    done = of(events, "node.finished", "llm:step")[0]
    assert done["injected"] is True and done["output"] == "from the debugger"


def test_an_error_then_retry_is_one_execution_with_attempts(server, debugger, provider, gm_for):
    g = gm_for()
    assert g.ready(3)
    provider.script({"status": 500, "json": {"error": {"message": "down"}}}, chat("second try"))
    client = g.instrument_openai(openai_client(provider))
    out = _drive_with_gate(server, debugger, g, lambda: client.chat.completions.create(model="gpt-test", messages=[]), "error", "retry")
    assert out["value"].choices[0].message.content == "second try", out
    events = run_events(server, g, out["ctx"].run_id)
    done = of(events, "node.finished", "llm:step")
    assert len(done) == 1 and done[0]["attempts"] == 2 and done[0]["status"] == "ok"
    assert len(of(events, "node.error", "llm:step")) == 1


def test_inject_at_error_recovers_with_a_completion(server, debugger, provider, gm_for):
    g = gm_for()
    assert g.ready(3)
    provider.script({"status": 500, "json": {"error": {"message": "down"}}})
    client = g.instrument_openai(openai_client(provider))
    out = _drive_with_gate(server, debugger, g, lambda: client.chat.completions.create(model="gpt-test", messages=[]), "error", "inject", output="patched")
    assert out["value"].choices[0].message.content == "patched", out
    events = run_events(server, g, out["ctx"].run_id)
    done = of(events, "node.finished", "llm:step")[0]
    assert done["injected"] is True and done["recoveredFromError"] is True


def test_async_clients_over_http(server, provider, gm_for):
    g = gm_for(token_interval=0)
    assert g.ready(3)
    provider.script(chat("async hello", usage={"prompt_tokens": 4, "completion_tokens": 2}),
                    {"status": 200, "sse": [chunk({"content": "a"}), chunk({"content": "b"}, finish="stop"), [None, "[DONE]"]]})

    async def main():
        client = g.instrument_openai(openai_client(provider, is_async=True))
        with g.run("async") as ctx:
            first = await client.chat.completions.create(model="gpt-test", messages=[])
            texts = [c.choices[0].delta.content async for c in await client.chat.completions.create(model="gpt-test", messages=[], stream=True)]
        return ctx, first, texts

    ctx, first, texts = asyncio.run(main())
    assert first.choices[0].message.content == "async hello" and texts == ["a", "b"]
    events = run_events(server, g, ctx.run_id)
    done = of(events, "node.finished", "llm:step")
    assert done[0]["usage"] == {"inputTokens": 4, "outputTokens": 2, "inclusive": True}
    assert done[1]["output"]["text"] == "ab" and done[1]["streaming"] is True


# -- smart breakpoints: the core's LLM step and tool step hold on what does not throw --------


def _cut_off(arguments='{"city":"Par'):
    return chat(None, [{"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}], "length")


def test_a_tool_call_cut_off_at_the_token_limit_holds_as_a_smart_breakpoint(server, debugger, provider, gm_for):
    g = gm_for()
    assert g.ready(3)
    provider.script(_cut_off(), chat("fixed"))
    client = g.instrument_openai(openai_client(provider))
    call = lambda: client.chat.completions.create(model="gpt-test", messages=[], tools=[WEATHER], max_tokens=5)  # noqa: E731
    # No breakpoint armed: the rule itself holds the after gate; retry sends the request again.
    out = _drive_with_gate(server, debugger, g, call, "after", "retry", arm=False)
    assert out["paused"]["reason"] == "breakpoint"
    assert out["paused"]["smart"] == {
        "rule": "truncated-tool-call",
        "detail": "the model was stopped at the token limit with 1 tool call requested; "
        "1 call has arguments that did not parse",
    }
    assert out["value"].choices[0].message.content == "fixed", out
    events = run_events(server, g, out["ctx"].run_id)
    done = of(events, "node.finished", "llm:step")
    assert len(done) == 1 and done[0]["attempts"] == 2 and done[0]["output"]["text"] == "fixed"
    assert len(provider.requests) == 2


@pytest.mark.parametrize("switch", ["option", "env"])
def test_the_truncated_rule_turned_off_never_holds(server, debugger, provider, gm_for, switch):
    g = gm_for(break_on_truncated=False) if switch == "option" else gm_for(env={"GRAPHMIND_BREAK_ON_TRUNCATED": "off"})
    assert g.ready(3)
    provider.script(_cut_off())
    client = g.instrument_openai(openai_client(provider))
    with g.run("off") as ctx:
        debugger.watch(ctx.run_id)
        answer = client.chat.completions.create(model="gpt-test", messages=[], tools=[WEATHER])
    assert answer.choices[0].finish_reason == "length"
    events = run_events(server, g, ctx.run_id)
    assert of(events, "exec.paused") == []
    assert of(events, "node.finished", "llm:step")[0]["output"]["finishReason"] == "length"


def test_a_streamed_cut_off_is_recorded_but_never_held(server, debugger, provider, gm_for):
    g = gm_for()
    assert g.ready(3)
    call_delta = {"tool_calls": [{"index": 0, "id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": '{"ci'}}]}
    provider.script({"status": 200, "sse": [chunk(call_delta), chunk({}, finish="length"), [None, "[DONE]"]]})
    client = g.instrument_openai(openai_client(provider))
    with g.run("stream-cut") as ctx:
        list(client.chat.completions.create(model="gpt-test", messages=[], tools=[WEATHER], stream=True))
    events = run_events(server, g, ctx.run_id)
    assert of(events, "exec.paused") == []
    output = of(events, "node.finished", "llm:step")[0]["output"]
    assert output["finishReason"] == "length" and output["toolCalls"][0]["inputText"] == '{"ci'


def test_a_tool_returning_an_error_shape_holds_at_after(server, debugger, gm_for):
    g = gm_for()
    assert g.ready(3)

    @g.tool(name="deploy")
    def deploy(target: str) -> dict:
        return {"isError": True, "content": [{"type": "text", "text": "denied"}]}

    out = _drive_with_gate(server, debugger, g, lambda: deploy("prod"), "after", "inject", node="tool:deploy", arm=False, output={"ok": True})
    assert out["paused"]["reason"] == "breakpoint"
    assert out["paused"]["smart"] == {"rule": "error-result", "detail": "the tool returned a result with isError: true"}
    assert out["value"] == {"ok": True}


def test_a_hide_switch_keeps_the_hold_and_drops_its_detail(server, debugger, provider, gm_for):
    g = gm_for(hide_outputs=True)
    assert g.ready(3)
    provider.script(_cut_off())
    client = g.instrument_openai(openai_client(provider))
    call = lambda: client.chat.completions.create(model="gpt-test", messages=[], tools=[WEATHER])  # noqa: E731
    out = _drive_with_gate(server, debugger, g, call, "after", "continue", arm=False)
    assert out["paused"]["smart"] == {"rule": "truncated-tool-call"}
    assert out["value"].choices[0].finish_reason == "length"
