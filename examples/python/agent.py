"""A small instrumented agent: a scripted "model" picks tools in a loop until it answers.

Run `graphmind serve`, then `python examples/python/agent.py` (with the package installed:
`pip install .`). Without a debugger it runs straight through; with one you can pause at
any tool, edit its arguments, retry it or inject a result.
"""

from __future__ import annotations

import graphmind as gm

gm.configure(app="example-agent")


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


def model(history: list[dict]) -> dict:
    """A scripted policy standing in for an LLM: search, then book the cheapest."""
    if not any(h["tool"] == "search_flights" for h in history):
        return {"tool": "search_flights", "args": {"origin": "AMS", "destination": "LIS"}}
    if not any(h["tool"] == "book" for h in history):
        flights = next(h["result"] for h in history if h["tool"] == "search_flights")
        cheapest = min(flights, key=lambda f: f["price"])
        return {"tool": "book", "args": {"flight": cheapest["flight"], "passenger": "Ada"}}
    booked = next(h["result"] for h in history if h["tool"] == "book")
    return {"answer": f"Booked: {booked['confirmation']}"}


TOOLS = {"search_flights": search_flights, "book": book}


def main() -> str:
    gm.ready(1.0)  # attach if a debugger is running; carry on otherwise
    history: list[dict] = []
    with gm.run("book-a-flight", meta={"user": "ada"}):
        for _ in range(5):
            with gm.span("plan", kind="chain", input={"steps": len(history)}) as span:
                decision = model(history)
                span.set_output(decision)
            if "answer" in decision:
                print(decision["answer"])
                return decision["answer"]
            result = TOOLS[decision["tool"]](**decision["args"])
            history.append({"tool": decision["tool"], "result": result})
    return "gave up"


if __name__ == "__main__":
    main()
    gm.dispose()
