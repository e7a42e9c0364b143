# frozen_string_literal: true

# A stand-in for the ruby_llm gem (rubygems.org is unreachable here): `RubyLLM.chat` returns
# an object shaped like RubyLLM::Chat (with_tool, ask, complete, messages, model), enough
# for `Graphmind.instrument_ruby_llm` and the `graphmind init` snippet. Not the real gem.
module RubyLLM
  Message = Struct.new(:role, :content, :model_id, :input_tokens, :output_tokens, :tool_calls)
  Model = Struct.new(:id)

  # Shaped like RubyLLM::Chat.
  class Chat
    attr_reader :tools, :messages

    def initialize
      @tools = {}
      @messages = []
    end

    def model = Model.new("stand-in-model")

    def with_tool(tool)
      @tools[tool.name.to_sym] = tool
      self
    end

    def ask(text)
      @messages << Message.new(:user, text)
      complete
    end

    def complete = Message.new(:assistant, "hello back", "stand-in-model", 3, 2, {})
  end

  def self.chat = Chat.new
end
