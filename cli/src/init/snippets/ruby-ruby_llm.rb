require "graphmind"
require "ruby_llm"

Graphmind.configure(app: "my-agent")
chat = Graphmind.instrument_ruby_llm(RubyLLM.chat) # every ask is an llm node, every tool a gated call

Graphmind.run("my-first-run") do
  chat.ask("hello")
end
