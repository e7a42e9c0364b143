import graphmind as gm

gm.configure(app="my-agent")
handler = gm.handler()  # a LangChain callback handler: chains, LLMs, tools, retrievers


@gm.tool
def lookup(query: str) -> dict:
    # wrap plain tool functions too: that is what makes inject and retry work on them
    return {"query": query, "answer": 42}


with gm.run("my-first-run"):
    # graph.invoke(inputs, config={"callbacks": [handler]})
    lookup("hello")
