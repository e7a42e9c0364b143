# frozen_string_literal: true

# Replay (docs/replay.md) in Ruby: an agent (fixtures/replay_agent.rb, the ruby-openai
# stand-in over real HTTP) recorded against tests/fake_provider/server.py into a real
# `graphmind serve` and exported with `graphmind record`; then run again as separate
# processes in replay mode: the whole run with nothing scripted at the provider, to a fork
# point with the provider up, with a changed agent (a divergence), with an edited output,
# with bad input (a warning, a live run); and Graphmind::Testing.replay in-process (a
# recorded tool error raised as a Graphmind::ReplayedError).
require_relative "test_helper"
require "graphmind/testing"
require "open3"
require "tmpdir"

# tests/fake_provider/server.py in a child process, scripted over HTTP.
class FakeProviderProcess
  attr_reader :port

  def initialize
    @io = IO.popen(["python3", File.join(ROOT, "tests", "fake_provider", "server.py")], "r+")
    @port = JSON.parse(@io.gets).fetch("port")
  end

  def base_url = "http://127.0.0.1:#{@port}/v1"

  def script(*answers) = post("/__script", answers)
  def reset = post("/__reset", nil)
  def requests = JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{@port}/__requests")))

  def stop
    @io.close
  rescue IOError
    nil
  end

  private def post(path, body)
    Net::HTTP.post(URI("http://127.0.0.1:#{@port}#{path}"), JSON.generate(body), "Content-Type" => "application/json")
  end
end

class TestReplay < Minitest::Test
  AGENT = File.join(__dir__, "fixtures", "replay_agent.rb")
  AGENT_APP = "ruby-openai-agent"
  AGENT_TIMEOUT = 60
  EXPECTED = { "answer" => "Booked: GM202-ADA", "summary" => "Booked GM202 for Ada, AMS to LIS." }.freeze

  def self.chat(content: nil, tool_calls: nil, finish: "stop")
    message = { "role" => "assistant", "content" => content }
    message["tool_calls"] = tool_calls if tool_calls
    { "status" => 200, "json" => { "id" => "chatcmpl-1", "object" => "chat.completion", "created" => 1, "model" => "gpt-test",
                                   "choices" => [{ "index" => 0, "message" => message, "finish_reason" => finish }],
                                   "usage" => { "prompt_tokens" => 20, "completion_tokens" => 5, "total_tokens" => 25 } } }
  end

  def self.call(id, name, args)
    { "id" => id, "type" => "function", "function" => { "name" => name, "arguments" => JSON.pretty_generate(args) } }
  end

  def self.summary_stream(text = EXPECTED["summary"])
    chunk = lambda do |delta, finish = nil|
      [nil, { "id" => "c", "object" => "chat.completion.chunk", "created" => 1, "model" => "gpt-test",
              "choices" => [{ "index" => 0, "delta" => delta, "finish_reason" => finish }] }]
    end
    pieces = text.scan(/.{1,7}/m)
    { "status" => 200, "sse" => [chunk.call({ "role" => "assistant", "content" => "" }), *pieces.map { |p| chunk.call({ "content" => p }) },
                                 chunk.call({}, "stop"), [nil, "[DONE]"]] }
  end

  SCRIPT = [
    chat(tool_calls: [call("call_s", "search_flights", { "origin" => "AMS", "destination" => "LIS" })], finish: "tool_calls"),
    chat(tool_calls: [call("call_b", "book", { "flight" => "GM202", "passenger" => "ada" })], finish: "tool_calls"),
    chat(content: "Booked: GM202-ADA"),
    summary_stream
  ].freeze

  # One server, provider and recording for the whole class.
  def self.recorded
    @recorded ||= begin
      server = GMTest::Server.new(args: ["--pause-on-error", "off"]) # the in-process test records a tool error
      provider = FakeProviderProcess.new
      Minitest.after_run do
        provider.stop
        server.stop
      end
      provider.script(*SCRIPT)
      out, err = run_agent(server, provider)
      raise "recording failed: #{out.inspect} #{err}" unless out == EXPECTED
      raise "recording: #{provider.requests.length} requests" unless provider.requests.length == 4

      run = finished_run(server, [])
      file = File.join(Dir.mktmpdir("gm-ruby-replay"), "run.ndjson")
      _o, e, status = Open3.capture3(server.bin, "record", run["id"], "--db", server.db_path, "--no-redact-secrets", "--out", file)
      raise "graphmind record: #{e}" unless status.success?

      { server: server, provider: provider, run: run["id"], file: file, known: [run["id"]] }
    end
  end

  def self.run_agent(server, provider, url: server.ingest_url, **env)
    full = { "GRAPHMIND_URL" => url, "OPENAI_BASE_URL" => provider.base_url, "GRAPHMIND_TELEMETRY" => "0" }
    ENV.each_key { |k| full[k] = nil if k.start_with?("GRAPHMIND") && !full.key?(k) }
    full.merge!(env.transform_keys(&:to_s))
    out, err, status = Timeout.timeout(AGENT_TIMEOUT) { Open3.capture3(full, "ruby", AGENT) }
    line = out.lines.reverse.find { |l| l.start_with?("{") }
    [status.success? && line ? JSON.parse(line) : nil, err]
  end

  def self.finished_run(server, known, timeout: 10)
    deadline = Time.now + timeout
    loop do
      fresh = ((server.get_json("/api/runs") || {})["runs"] || []).select { |r| r["app"] == AGENT_APP && !known.include?(r["id"]) }
      return fresh.first if fresh.any? && !%w[running live].include?(fresh.first["status"].to_s) && fresh.first["status"]
      raise "no finished run" if Time.now > deadline

      sleep 0.05
    end
  end

  def rec = self.class.recorded
  def provider = rec[:provider]
  def server = rec[:server]
  def run_agent(**env) = self.class.run_agent(server, provider, **env)

  # The replayed run's stored events (its run.started says what it replays).
  def replayed_events
    run = self.class.finished_run(server, rec[:known])
    rec[:known] << run["id"]
    events = server.events(run["id"], count: 2)
    events = server.events(run["id"], count: events.length) until events.last["type"] == "run.finished"
    assert_equal rec[:run], events.find { |e| e["type"] == "run.started" }.dig("payload", "meta", "replayOf")
    events
  end

  def nodes(events, type)
    events.select { |e| e["type"] == type && e.dig("payload", "nodeId").to_s.start_with?("tool:", "llm:") }.map { |e| e["payload"] }
  end

  def setup = provider.reset

  def test_a_whole_run_replays_from_the_file_and_the_provider_sees_no_request
    out, err = run_agent(GRAPHMIND_REPLAY_FILE: rec[:file])
    assert_equal EXPECTED, out, err
    assert_empty provider.requests
    events = replayed_events
    started = nodes(events, "node.started")
    assert_equal %w[llm:step tool:search_flights llm:step tool:book llm:step llm:step], started.map { |n| n["nodeId"] }
    assert(started.all? { |n| n["replayed"] == true }, started.inspect)
    assert(nodes(events, "node.finished").all? { |n| n["replayed"] == true })
    assert_includes nodes(events, "node.finished").map { |n| n["output"] }, { "confirmation" => "GM202-ADA", "status" => "booked" }
  end

  def test_a_whole_run_replays_by_run_id
    out, err = run_agent(GRAPHMIND_REPLAY: rec[:run])
    assert_equal EXPECTED, out, err
    assert_empty provider.requests
    assert(nodes(replayed_events, "node.started").all? { |n| n["replayed"] == true })
  end

  def test_replay_to_a_fork_point_then_live
    provider.script(SCRIPT[2], SCRIPT[3])
    out, err = run_agent(GRAPHMIND_REPLAY: "#{rec[:run]}@llm:step#3")
    assert_equal EXPECTED, out, err
    assert_equal 2, provider.requests.length, "llm:step#3 and #4 reach the provider"
    started = nodes(replayed_events, "node.started")
    assert_equal [true] * 4, started.first(4).map { |n| n["replayed"] }
    assert_equal({ "reason" => "fork", "at" => "llm:step#3" }, started[4]["replayLive"])
    assert_nil started[5]["replayed"]
  end

  def test_an_edited_output_before_the_fork_reaches_the_app
    provider.script(SCRIPT[2], SCRIPT[3])
    edited = { "confirmation" => "EDITED-1", "status" => "booked" }
    out, err = run_agent(GRAPHMIND_REPLAY: "#{rec[:run]}@llm:step#3", GRAPHMIND_REPLAY_OUTPUT: JSON.generate(edited))
    assert_equal EXPECTED, out, err
    tool_message = provider.requests.first.dig("body", "messages").find { |m| m["tool_call_id"] == "call_b" }
    assert_equal edited, JSON.parse(tool_message["content"])
    book = nodes(replayed_events, "node.finished").find { |n| n["nodeId"] == "tool:book" }
    assert_equal true, book["replayEdited"]
  end

  def test_a_changed_tool_argument_diverges_and_runs_live
    provider.script(SCRIPT[2], SCRIPT[3])
    out, err = run_agent(GRAPHMIND_REPLAY_FILE: rec[:file], AGENT_PASSENGER_STYLE: "upcase")
    assert_equal EXPECTED, out, err
    assert_equal 2, provider.requests.length
    assert_match(/replay: tool:book#1 diverged \(\["input.passenger"\]\); the run is live from here/, err)
    started = nodes(replayed_events, "node.started")
    book = started.find { |n| n["nodeId"] == "tool:book" }
    live = book["replayLive"]
    assert_equal %w[diverged tool:book#1], [live["reason"], live["at"]]
    assert_equal ["input.passenger"], live["differs"]
    refute_equal live["recordedKey"], live["liveKey"]
    assert_nil book["replayed"]
    assert_equal [true, true, true], started.first(3).map { |n| n["replayed"] }
  end

  def test_bad_input_warns_and_runs_live
    [
      [{ GRAPHMIND_REPLAY: "run_000000000000" }, /replay: .*has no run run_000000000000; running live/],
      [{ GRAPHMIND_REPLAY_FILE: "/nonexistent/run.ndjson" }, %r{replay: cannot read /nonexistent/run.ndjson.*running live}],
      [{ GRAPHMIND_REPLAY: "not a run id!" }, /replay: "not a run id!" is not a run id/]
    ].each do |env, warning|
      provider.reset
      provider.script(*SCRIPT)
      out, err = run_agent(**env)
      assert_equal EXPECTED, out, err
      assert_equal 4, provider.requests.length, env.inspect
      assert_match warning, err
      rec[:known] << self.class.finished_run(server, rec[:known])["id"]
    end
  end

  # In-process: Graphmind::Testing.replay answers the next run, and a recorded tool error
  # comes back raised as a ReplayedError named after it, without the tool's body running.
  def test_the_testing_helper_replays_a_recorded_error_in_process
    gm = Graphmind.configure(app: "ruby-replay-helper", url: server.ingest_url, env: {})
    assert gm.ready(5.0)
    calls = 0
    lookup = gm.tool("lookup") do |id:|
      calls += 1
      raise ArgumentError, "no such id #{id}" if id == 2

      { "id" => id }
    end
    body = lambda do
      gm.run("lookups") do |ctx|
        lookup.call(id: 1)
        begin
          lookup.call(id: 2)
        rescue StandardError => e
          [ctx.run_id, e]
        end
      end
    end
    recorded_id, error = body.call
    assert_kind_of ArgumentError, error
    assert_equal 2, calls
    gm.flush(5.0)
    server.run(recorded_id) { |r| r["status"] && r["status"] != "running" }
    file = File.join(Dir.mktmpdir("gm-ruby-replay"), "lookups.ndjson")
    _o, e, status = Open3.capture3(server.bin, "record", recorded_id, "--db", server.db_path, "--no-redact-secrets", "--out", file)
    assert status.success?, e

    replayed = nil
    r = Graphmind::Testing.replay(file, strict: true, client: gm) { replayed = body.call }
    assert_equal 2, calls, "no tool body ran under replay"
    assert_equal 2, r.replayed
    assert_equal recorded_id, r.replay_of
    assert_equal replayed[0], r.run_id
    error = replayed[1]
    assert_kind_of Graphmind::ReplayedError, error
    assert_equal "Graphmind::Replayed::ArgumentError", error.class.name
    assert_equal ["ArgumentError", "no such id 2"], [error.name, error.message]
    assert_match(/test_replay\.rb/, error.recorded_stack.to_s)

    assert_raises(Graphmind::Testing::ReplayDiverged) do
      Graphmind::Testing.replay(file, strict: true, client: gm) { gm.run("lookups") { lookup.call(id: 3) } }
    end
    missing = Graphmind::Testing.replay("/nonexistent/x.ndjson", client: gm) { gm.run("lookups") { lookup.call(id: 1) } }
    assert_match(%r{"/nonexistent/x.ndjson" is neither a file nor a run id}, missing.error)
    assert_equal 0, missing.replayed
  ensure
    Graphmind.reset
  end
end
