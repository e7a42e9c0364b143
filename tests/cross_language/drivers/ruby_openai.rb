# frozen_string_literal: true

# Cross-language driver: the exchange through Graphmind.instrument_openai (contract:
# tests/cross_language/README.md). rubygems.org is out of reach here, so the client is a
# duck-typed stand-in for ruby-openai's OpenAI::Client that really talks HTTP
# (bindings/ruby/test/standins/openai_http.rb).
require "json"
require "graphmind"
require_relative "../../../bindings/ruby/test/standins/openai_http"

exchange = JSON.parse(File.read(ENV.fetch("GM_XL_EXCHANGE")))
# The replay phase (README): the recording to answer the run from.
replay = ENV["GM_XL_REPLAY_FILE"].to_s.empty? ? {} : { replay: { "file" => ENV["GM_XL_REPLAY_FILE"] } }
gm = Graphmind.configure(app: ENV.fetch("GM_XL_APP"), url: ENV.fetch("GRAPHMIND_URL"), env: {}, **replay)
raise "not attached" unless gm.ready(10.0)

client = gm.instrument_openai(StandInOpenAI.new(access_token: "sk-xl", uri_base: ENV.fetch("GM_XL_BASE_URL")))
get_weather = gm.tool("get_weather") { |city:| { "city" => city, "forecast" => "sunny" } }
results = []
run_id = nil
gm.run(exchange["run"]) do |ctx|
  run_id = ctx.run_id
  exchange["calls"].each do |call|
    request = call["request"].transform_keys(&:to_sym)
    if request[:stream]
      text = +""
      client.chat(parameters: request.merge(stream: proc { |chunk| text << (chunk.dig("choices", 0, "delta", "content") || "") }))
      results << text
      next
    end
    answer = client.chat(parameters: request)
    message = answer.dig("choices", 0, "message") || {}
    results << (message["content"] || "")
    next unless call["tool"]

    arguments = JSON.parse(message["tool_calls"][0]["function"]["arguments"])
    get_weather.call(**arguments.transform_keys(&:to_sym))
  end
end
gm.dispose
puts JSON.generate({ "runId" => run_id, "results" => results })
