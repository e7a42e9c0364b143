# frozen_string_literal: true

# A duck-typed stand-in for ruby-openai's OpenAI::Client that really talks HTTP
# (rubygems.org is out of reach here): #chat(parameters:) POSTs to the provider, a
# `stream:` proc gets each SSE chunk parsed (as ruby-openai hands it: one Hash), and a
# non-2xx answer raises as Faraday would (ruby-openai does not retry on its own). Used by
# the cross-language driver and the replay tests against tests/fake_provider/server.py.
require "json"
require "net/http"
require "uri"

# ruby-openai raises Faraday errors: these stand in for Faraday::ServerError and
# Faraday::TooManyRequestsError, with the answer on #response as Faraday keeps it.
class StandInHTTPError < StandardError
  attr_reader :response

  def initialize(status, body)
    @response = { status: status, body: body }
    super("the server responded with status #{status}")
  end
end

# The part of ruby-openai's OpenAI::Client the tests use.
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
