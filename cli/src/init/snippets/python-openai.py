import graphmind as gm
from openai import OpenAI

gm.configure(app="my-agent")
client = gm.instrument_openai(OpenAI())  # every chat.completions / responses call is an llm node


@gm.tool
def lookup(query: str) -> dict:
    return {"query": query, "answer": 42}


with gm.run("my-first-run"):
    # your usual loop: client.chat.completions.create(...), then call your tools
    lookup("hello")
