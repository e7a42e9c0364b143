"""A tiny agent for the viewer's browser tests: one tool called with the same arguments
three times, so the reference SDK's loop guard holds the third call while a debugger is
attached. Prints each result as one JSON line, or `aborted` when the debugger aborts the
run; always disposes the session so every event is flushed before the process exits."""
import json
import sys

import graphmind as gm


@gm.tool
def search_flights(origin: str, destination: str) -> dict:
    return {"flights": [{"id": "GM101", "price": 420}], "origin": origin, "destination": destination}


try:
    with gm.run("trip-planner"):
        if not gm.ready(10):
            print("not attached", file=sys.stderr)
            sys.exit(3)
        for _ in range(3):
            print(json.dumps(search_flights("NYC", "LON")), flush=True)
except gm.GraphMindAbortError:
    print("aborted", flush=True)
finally:
    gm.dispose()
