# frozen_string_literal: true

require_relative "test_helper"
require "logger"
require "stringio"

# The public API's idioms. ruby-openai and ruby_llm are not installable here (no
# rubygems.org), so their integrations run against hand-made objects shaped like those
# gems' clients (OpenAI::Client#chat(parameters:) / #responses.create, RubyLLM::Chat
# #complete / #tools / #with_tool, RubyLLM::Tool#call(args)).
class TestApi < Minitest::Test
  def setup
    @server = GMTest::Server.new
    Graphmind.reset
  end

  def teardown
    Graphmind.reset
    @server.stop
  end

  def gm
    @gm ||= Graphmind.configure(app: "api-test", url: @server.ingest_url, env: {}).tap { |c| assert c.ready(5.0) }
  end

  def recorded(run_id, count)
    gm.flush(2.0)
    @server.events(run_id, count: count)
  end

  def node_ids(events, type = "node.started") = events.select { |e| e["type"] == type }.map { |e| e.dig("payload", "nodeId") }

  def test_module_api_and_run_context
    refute Graphmind.configured?
    assert_same gm, Graphmind.instance
    assert Graphmind.configured?
    assert Graphmind.respond_to?(:init)
    assert_nil Graphmind.current_run
    ctx_seen = nil
    Graphmind.run("ctx") do |ctx|
      ctx_seen = ctx
      assert_same ctx, Graphmind.current_run
      refute ctx.aborted?
      ctx.abort!("enough")
      assert ctx.aborted?
      assert_equal "enough", ctx.reason
      Thread.new { Graphmind.with_run_context(ctx) { assert_same ctx, Graphmind.current_run } }.join
    end
    assert_nil Graphmind.current_run
    assert_equal "aborted", @server.run(ctx_seen.run_id) { |r| r["status"] == "aborted" }["status"]
    error = assert_raises(ArgumentError) { Graphmind.run("boom") { raise ArgumentError, "bad" } }
    assert_equal "bad", error.message
    Graphmind.instance.clear_run_context
    assert_kind_of Graphmind::Stats, Graphmind.stats
  end

  def test_wrap_forms_keep_their_shape_and_record_tool_nodes
    gm
    tools = Graphmind.wrap_tools({ "lookup" => ->(id) { id * 2 }, double: method(:Integer) })
    assert_equal %w[lookup double], tools.keys.map(&:to_s)
    list = Graphmind.wrap_tools([->(x) { x }])
    assert list.first.graphmind_wrapped?
    target = Struct.new(:base) { def add(x, y: 1) = base + x + y }.new(10)
    Graphmind.wrap_method(target, :add, name: "adder")
    wrapped = Graphmind.wrap(->(a, b) { a - b }, name: "minus")

    class_with_tools = Class.new do
      include Graphmind::Instrument
      graphmind_tool :shout
      def shout(text) = text.upcase
    end

    run_id = nil
    Graphmind.run("wraps") do |ctx|
      run_id = ctx.run_id
      assert_equal 6, tools["lookup"].call(3)
      assert_equal 13, target.add(2)
      assert_equal 14, target.add(2, y: 2)
      assert_equal 1, wrapped.(3, 2)
      assert_equal "HI", class_with_tools.new.shout("hi")
    end
    events = recorded(run_id, 14)
    assert_equal %w[agent:wraps tool:lookup tool:adder tool:adder tool:minus tool:shout], node_ids(events)
    add = events.find { |e| e.dig("payload", "nodeId") == "tool:adder" }
    assert_equal({ "x" => 2 }, add.dig("payload", "input"))
    shout = events.find { |e| e.dig("payload", "nodeId") == "tool:shout" }
    assert_equal({ "text" => "hi" }, shout.dig("payload", "input"))
  end

  def test_edited_input_becomes_the_call_arguments
    params = ->(a, b = 2, *rest, k:, **opts) {}.parameters
    args, kwargs = Graphmind::Wrap.arguments(params, { "a" => 5, "b" => 6, "rest" => [7], "k" => 8, "z" => 9 }, [], {})
    assert_equal [5, 6, 7], args
    assert_equal({ k: 8, z: 9 }, kwargs)
    assert_equal({ "a" => 1, "b" => 2, "k" => 3 }, Graphmind::Wrap.describe(params, [1, 2], { k: 3 }))
  end

  def test_disabled_is_a_pass_through
    off = Graphmind.configure(app: "off", env: { "GRAPHMIND_DISABLED" => "1" })
    refute off.enabled?
    assert_equal 3, off.tool("t") { |x| x + 1 }.call(2)
    assert_equal :v, off.span("s") { :v }
    assert_equal 0, off.stats.seq
  end

  def test_logger_receives_the_cores_warnings
    io = StringIO.new
    client = Graphmind::Client.new(app: "warn", url: "ws://127.0.0.1:9/ingest", env: {}, logger: Logger.new(io),
                                   not_an_option: 1)
    client.stats
    assert_match(/notAnOption is not a GraphMind option/, io.string)
    client.dispose
  end

  def test_abort_error_and_emit_and_graph_hint
    gm
    assert Graphmind::AbortError < StandardError
    run_id = nil
    Graphmind.run("raw") do |ctx|
      run_id = ctx.run_id
      Graphmind.graph_hint([{ "nodeId" => "tool:later", "kind" => "tool", "name" => "later" }])
      Graphmind.emit("node.started", { "nodeId" => "custom:raw", "kind" => "custom", "name" => "raw", "instanceId" => "i1" })
    end
    types = recorded(run_id, 4).map { |e| e["type"] }
    assert_includes types, "graph.hint"
    assert_includes types, "node.started"
  end

  # Shaped like ruby-openai's OpenAI::Client: Hashes in the APIs' own wire shapes; a
  # `stream:` proc is called with each parsed chunk.
  class OpenAIShaped
    class Responses
      def create(parameters:)
        { "id" => "resp_1", "status" => "completed",
          "output" => [{ "type" => "message", "content" => [{ "type" => "output_text", "text" => "hello #{parameters[:input]}" }] }] }
      end
    end

    CHUNKS = [
      { "choices" => [{ "index" => 0, "delta" => { "content" => "Sun" } }] },
      { "choices" => [{ "index" => 0, "delta" => { "content" => "ny" }, "finish_reason" => "stop" }] },
      { "choices" => [], "usage" => { "prompt_tokens" => 4, "completion_tokens" => 2 } }
    ].freeze

    def chat(parameters:)
      stream = parameters[:stream]
      if stream.respond_to?(:call)
        CHUNKS.each { |c| stream.call(c, 10) }
        return {}
      end
      { "id" => "c1", "model" => parameters[:model], "usage" => { "prompt_tokens" => 3, "completion_tokens" => 1 },
        "choices" => [{ "finish_reason" => "stop", "message" => { "role" => "assistant", "content" => "hi" } }] }
    end

    def responses = (@responses ||= Responses.new)
  end

  def test_instrument_openai_records_llm_nodes
    gm
    client = Graphmind.instrument_openai(OpenAIShaped.new)
    run_id = nil
    seen = []
    Graphmind.run("openai") do |ctx|
      run_id = ctx.run_id
      assert_equal "hi", client.chat(parameters: { model: "m", messages: [{ role: "user", content: "yo" }], temperature: 0.5 }).dig("choices", 0, "message", "content")
      assert_equal "resp_1", client.responses.create(parameters: { model: "m", input: "you" })["id"]
      client.chat(parameters: { model: "m", messages: [], stream: proc { |chunk, _bytes| seen << chunk } })
    end
    assert_equal 3, seen.length
    events = recorded(run_id, 12)
    started = events.select { |e| e["type"] == "node.started" && e.dig("payload", "kind") != "agent" }
    assert_equal %w[llm:step llm:step llm:step], started.map { |e| e.dig("payload", "nodeId") }
    input = started[0]["payload"]["input"]
    assert_equal({ "provider" => "openai", "model" => "m", "messages" => [{ "role" => "user", "content" => "yo" }], "temperature" => 0.5 }, input)
    assert_equal "ruby-openai", started[0].dig("payload", "sdk")
    assert_match(/\Ainv_.*:s0\z/, started[0].dig("payload", "instanceId"))
    assert_equal true, started[2].dig("payload", "input", "stream")
    finished = events.select { |e| e["type"] == "node.finished" }.map { |e| e["payload"] }
    assert_equal({ "text" => "hi", "finishReason" => "stop", "rawFinishReason" => "stop" }, finished[0]["output"])
    assert_equal({ "inputTokens" => 3, "outputTokens" => 1, "inclusive" => true }, finished[0]["usage"])
    assert_equal "hello you", finished[1].dig("output", "text")
    assert_equal({ "text" => "Sunny", "chunks" => 3, "finishReason" => "stop", "rawFinishReason" => "stop" }, finished[2]["output"])
    assert_equal true, finished[2]["streaming"]
    assert_equal 4, finished[2].dig("usage", "inputTokens")
    tokens = events.select { |e| e["type"] == "node.token" }.flat_map { |e| e.dig("payload", "deltas") }
    assert_equal "Sunny", tokens.select { |d| d["t"] == "text" }.map { |d| d["v"] }.join
  end

  # Shaped like ruby_llm's RubyLLM::Chat and RubyLLM::Tool.
  class ToolShaped
    def name = "weather"
    def call(args) = "sunny in #{args['city']}"
  end

  class ChatShaped
    Message = Struct.new(:role, :content, :model_id, :input_tokens, :output_tokens, :tool_calls)
    Model = Struct.new(:id)
    attr_reader :tools, :messages

    def initialize
      @tools = {}
      @messages = []
    end

    def model = Model.new("model-x")

    def with_tool(tool)
      @tools[tool.name.to_sym] = tool
      self
    end

    def ask(text)
      @messages << Message.new(:user, text)
      complete
    end

    def complete
      weather = @tools[:weather]&.call({ "city" => "Cairo" })
      Message.new(:assistant, "it is #{weather}", "model-x", 5, 2, {})
    end
  end

  def test_instrument_ruby_llm_gates_the_round_trip_and_tools
    gm
    chat = Graphmind.instrument_ruby_llm(ChatShaped.new)
    chat.with_tool(ToolShaped.new)
    run_id = nil
    reply = Graphmind.run("ruby_llm") do |ctx|
      run_id = ctx.run_id
      chat.ask("weather?")
    end
    assert_equal "it is sunny in Cairo", reply.content
    events = recorded(run_id, 8)
    assert_equal %w[agent:ruby_llm llm:step tool:weather], node_ids(events)
    llm = events.find { |e| e["type"] == "node.started" && e.dig("payload", "kind") == "llm" }
    assert_equal "model-x", llm.dig("payload", "input", "model")
    assert_equal ["weather"], llm.dig("payload", "input", "tools").map { |t| t["name"] }
    fin = events.find { |e| e["type"] == "node.finished" && e.dig("payload", "nodeId") == "llm:step" }
    assert_equal "it is sunny in Cairo", fin.dig("payload", "output", "text")
  end
end
