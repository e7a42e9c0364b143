# frozen_string_literal: true

# A small instrumented agent. Start a debugger (`graphmind serve`), then:
#   rake compile && ruby -Ibindings/ruby/lib examples/ruby/agent.rb
# Without a debugger it runs straight through and the events are buffered.
require "graphmind"

Graphmind.configure(app: "ruby-example", meta: { "example" => true })
Graphmind.ready(1.0) # false: carry on detached

# A tool from a block, and a class whose methods are tools.
search = Graphmind.tool("search_flights") do |origin:, destination:|
  [{ "flight" => "GM#{origin.length}#{destination.length}", "price" => 420 }]
end

class Booking
  include Graphmind::Instrument
  graphmind_tool :book

  def book(flight, seats: 1)
    { "confirmation" => "#{flight}-#{seats}", "seats" => seats }
  end
end

# An LLM-shaped client (ruby-openai's interface), so the example runs offline.
class FakeOpenAI
  def chat(parameters:)
    { "id" => "chatcmpl-1", "model" => parameters[:model],
      "choices" => [{ "index" => 0, "finish_reason" => "stop",
                      "message" => { "role" => "assistant", "content" => "Book the cheapest flight." } }],
      "usage" => { "prompt_tokens" => 12, "completion_tokens" => 6 } }
  end
end
llm = Graphmind.instrument_openai(FakeOpenAI.new)

result = Graphmind.run("book-a-trip", meta: { "user" => "demo" }) do |ctx|
  plan = llm.chat(parameters: { model: "gpt-4o-mini", messages: [{ role: "user", content: "LHR to JFK" }] })
  flights = search.call(origin: "LHR", destination: "JFK")
  Graphmind.span("choose", input: { "count" => flights.length }) { |span| span.output = flights.first }
  booking = Booking.new.book(flights.first["flight"], seats: 2)
  { "run" => ctx.run_id, "plan" => plan.dig("choices", 0, "message", "content"), "booking" => booking }
end

puts result
p Graphmind.stats.to_h
Graphmind.dispose
