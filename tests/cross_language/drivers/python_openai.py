"""Cross-language driver: the exchange through the PyPI ``openai`` client instrumented by
the Python SDK (contract: tests/cross_language/README.md)."""

from __future__ import annotations

import json
import os

import openai

import graphmind as gm

exchange = json.load(open(os.environ["GM_XL_EXCHANGE"], encoding="utf-8"))
# The replay phase (README): the recording to answer the run from.
replay = {"replay": {"file": os.environ["GM_XL_REPLAY_FILE"]}} if os.environ.get("GM_XL_REPLAY_FILE") else {}
g = gm.GraphMind(app=os.environ["GM_XL_APP"], url=os.environ["GRAPHMIND_URL"], env={}, **replay)
assert g.ready(10), "not attached"
client = g.instrument_openai(openai.OpenAI(api_key="sk-xl", base_url=os.environ["GM_XL_BASE_URL"], max_retries=0))


@g.tool(name="get_weather")
def get_weather(city: str) -> dict:
    return {"city": city, "forecast": "sunny"}


results: list[str] = []
with g.run(exchange["run"]) as ctx:
    for call in exchange["calls"]:
        request = call["request"]
        if request.get("stream"):
            text = ""
            for chunk in client.chat.completions.create(**request):
                if chunk.choices and chunk.choices[0].delta.content:
                    text += chunk.choices[0].delta.content
            results.append(text)
            continue
        answer = client.chat.completions.create(**request)
        message = answer.choices[0].message
        results.append(message.content or "")
        if "tool" in call:
            first = message.tool_calls[0]
            get_weather(**json.loads(first.function.arguments))
g.dispose()
print(json.dumps({"runId": ctx.run_id, "results": results}))
