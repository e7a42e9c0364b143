# frozen_string_literal: true

# Cross-language driver: the exchange through Graphmind.instrument_openai (contract:
# tests/cross_language/README.md). rubygems.org is out of reach here, so the client is a
# duck-typed stand-in for ruby-openai's OpenAI::Client that really talks HTTP: #chat
# (parameters:) POSTs to the provider, a `stream:` proc gets each SSE chunk parsed, and a
# non-2xx answer raises as Faraday would (ruby-openai does not retry on its own).
require "json"
require "net/http"
require "uri"
require "graphmind"

# ruby-openai raises Faraday errors: these stand in for Faraday::ServerError and
# Faraday::TooManyRequestsError, with the answer on #response as Faraday keeps it.
class StandInHTTPError < StandardError
  attr_reader :response

  def initialize(status, body)
    @response = { status: status, body: body }
    super("the server responded with status #{status}")
  end
end

# The part of ruby-openai's OpenAI::Client the exchange uses.
class StandInOpenAI
  def initialize(access_token:, uri_base:)
    @access_token = access_token
    @uri_base = uri_base.end_with?("/") ? uri_base : "#{uri_base}/"
  end

  def chat(parameters: {})
    user_proc = parameters[:stream]
    streamed = user_proc.respond_to?(:call)
    body = streamed ? parameters.merge(stream: true) : parameters
    uri = URI("#{@uri_base}chat/completions")
    request = Net::HTTP::Post.new(uri, "Content-Type" => "application/json", "Authorization" => "Bearer #{@access_token}")
    request.body = JSON.generate(body)
    Net::HTTP.start(uri.host, uri.port) do |http|
      http.request(request) do |response|
        raise StandInHTTPError.new(response.code.to_i, response.body) unless response.code.start_with?("2")
        return JSON.parse(response.body) unless streamed

        buffer = +""
        response.read_body do |part|
          buffer << part
          while (cut = buffer.index("\n\n"))
            event = buffer.slice!(0, cut + 2)
            data = event.lines.filter_map { |l| l.delete_prefix("data: ").chomp if l.start_with?("data: ") }.join
            user_proc.call(JSON.parse(data)) unless data.empty? || data == "[DONE]"
          end
        end
        return {}
      end
    end
  end
end

exchange = JSON.parse(File.read(ENV.fetch("GM_XL_EXCHANGE")))
gm = Graphmind.configure(app: ENV.fetch("GM_XL_APP"), url: ENV.fetch("GRAPHMIND_URL"), env: {})
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
