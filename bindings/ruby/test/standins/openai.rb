# frozen_string_literal: true

# A stand-in for the ruby-openai gem (rubygems.org is unreachable here): `OpenAI::Client`
# with `chat(parameters:)`, enough to load the `graphmind init` snippet. Not the real gem.
module OpenAI
  # Shaped like ruby-openai's OpenAI::Client.
  class Client
    def chat(parameters:)
      { "id" => "c1", "model" => parameters[:model], "choices" => [{ "finish_reason" => "stop", "message" => { "role" => "assistant", "content" => "hi" } }] }
    end
  end
end
