import graphmind as gm

gm.configure(app="my-agent")


@gm.tool
def lookup(query: str) -> dict:
    # your tool; a gated call: hold it, retry it or inject its result in the viewer
    return {"query": query, "answer": 42}


with gm.run("my-first-run"):
    lookup("hello")
