"""A small agent on the real ``openai`` client: the model picks tools until it answers,
then streams a one-line summary.

Run ``graphmind serve``, then ``OPENAI_API_KEY=... python examples/python/openai_agent.py``
(``OPENAI_BASE_URL`` points it at any compatible server). Replay a recorded run of it
without the model (``docs/replay.md``)::

    graphmind replay RUN_ID --exec "python examples/python/openai_agent.py"

It prints one JSON line: ``{"answer": ..., "summary": ...}``.
"""

from __future__ import annotations

import json
import os

from openai import OpenAI

import graphmind as gm

gm.configure(app="openai-agent")

MODEL = os.environ.get("AGENT_MODEL", "gpt-4o-mini")


@gm.tool
def search_flights(origin: str, destination: str, max_stops: int = 1) -> list[dict]:
    """Pretend flight search."""
    return [
        {"flight": "GM101", "from": origin, "to": destination, "stops": 0, "price": 189},
        {"flight": "GM202", "from": origin, "to": destination, "stops": 1, "price": 129},
    ]


@gm.tool
def book(flight: str, passenger: str) -> dict:
    """Pretend booking."""
    return {"confirmation": f"{flight}-{passenger[:3].upper()}", "status": "booked"}


FUNCTIONS = {"search_flights": search_flights, "book": book}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_flights",
            "description": "Search flights between two airports.",
            "parameters": {
                "type": "object",
                "properties": {"origin": {"type": "string"}, "destination": {"type": "string"}, "max_stops": {"type": "integer"}},
                "required": ["origin", "destination"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "book",
            "description": "Book a flight for a passenger.",
            "parameters": {
                "type": "object",
                "properties": {"flight": {"type": "string"}, "passenger": {"type": "string"}},
                "required": ["flight", "passenger"],
            },
        },
    },
]


def passenger_name(raw: str) -> str:
    """How the agent spells a passenger's name before booking."""
    return raw.strip().title()


def main(question: str = "Book me the cheapest flight from AMS to LIS, passenger Ada.") -> dict:
    gm.ready(1.0)  # attach if a debugger is running; carry on otherwise
    client = gm.instrument_openai(OpenAI())
    messages: list[dict] = [{"role": "user", "content": question}]
    answer = None
    with gm.run("book-with-openai", meta={"user": "ada"}):
        for _ in range(6):
            reply = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                answer = message.content
                break
            for call in message.tool_calls:
                args = json.loads(call.function.arguments or "{}")
                if call.function.name == "book":
                    args["passenger"] = passenger_name(args.get("passenger", ""))
                result = FUNCTIONS[call.function.name](**args)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
        stream = client.chat.completions.create(
            model=MODEL,
            messages=[*messages, {"role": "user", "content": "Summarise in one line."}],
            stream=True,
        )
        summary = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    return {"answer": answer, "summary": summary}


if __name__ == "__main__":
    print(json.dumps(main()), flush=True)
    gm.dispose()
