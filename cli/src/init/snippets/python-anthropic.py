import graphmind as gm
from anthropic import Anthropic

gm.configure(app="my-agent")
client = gm.instrument_anthropic(Anthropic())  # every messages.create / stream is an llm node


@gm.tool
def lookup(query: str) -> dict:
    return {"query": query, "answer": 42}


with gm.run("my-first-run"):
    # your usual tool-use loop: client.messages.create(...), then call your tools
    lookup("hello")
