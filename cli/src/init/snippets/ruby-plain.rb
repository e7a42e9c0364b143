require "graphmind"

Graphmind.configure(app: "my-agent")

# your tool; a gated call: hold it, retry it or inject its result in the viewer
lookup = Graphmind.tool("lookup") { |query:| { query: query, answer: 42 } }

Graphmind.run("my-first-run") { lookup.call(query: "hello") }
