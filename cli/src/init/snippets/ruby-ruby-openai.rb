require "graphmind"
require "openai"

Graphmind.configure(app: "my-agent")
client = Graphmind.instrument_openai(OpenAI::Client.new) # every chat call is an llm node

lookup = Graphmind.tool("lookup") { |query:| { query: query, answer: 42 } }

Graphmind.run("my-first-run") do
  # your usual loop: client.chat(parameters: { model:, messages: }), then call your tools
  lookup.call(query: "hello")
end
