# frozen_string_literal: true

require_relative "test_helper"
require "timeout"

# The gem against a real `graphmind serve`, with a minimal debugger on /ws/ui.
class TestLive < Minitest::Test
  include GMTest::LiveServer
  APP = "ruby-test"

  # Runs `body` inside a run on another thread; returns [thread, run_id].
  def in_run(gm, name)
    ids = Queue.new
    thread = Thread.new do
      gm.run(name) do |ctx|
        ids << ctx.run_id
        yield ctx
      end
    rescue Exception => e # rubocop:disable Lint/RescueException
      e
    end
    run_id = ids.pop
    @viewer.watch(run_id)
    [thread, run_id]
  end

  def test_a_run_is_recorded_with_its_tool_and_span
    gm = attach
    add = gm.tool("add") { |a, b:| a + b }
    run_id = nil
    result = gm.run("store", meta: { ticket: 7 }) do |ctx|
      run_id = ctx.run_id
      gm.span("plan", kind: "chain", input: { "q" => "é \u{1F600}" }) { add.call(1, b: 2) }
    end
    assert_equal 3, result
    assert gm.flush(2.0)
    events = @server.events(run_id, count: 8)
    types = events.map { |e| e["type"] }
    assert_equal "run.started", types.first
    started = events.select { |e| e["type"] == "node.started" }.map { |e| e.dig("payload", "nodeId") }
    # The run's root node comes first, as the reference gem records it.
    assert_equal %w[agent:store chain:plan tool:add], started
    agent_end = events.find { |e| e["type"] == "node.finished" && e.dig("payload", "nodeId") == "agent:store" }
    assert_equal run_id, agent_end.dig("payload", "instanceId")
    assert_equal "ok", agent_end.dig("payload", "status")
    assert_equal "node.finished", types[-2], "the agent node ends right before run.finished"
    assert_equal({ "a" => 1, "b" => 2 }, events.find { |e| e.dig("payload", "nodeId") == "tool:add" }.dig("payload", "input"))
    assert_equal 7, events.first.dig("payload", "meta", "ticket")
    assert_equal "ok", @server.run(run_id) { |r| r["status"] == "ok" }["status"]
  end

  def test_values_recorded_detached_are_stored_as_the_same_values_recorded_attached
    # Detached, plain data crosses to the core packed (decoded by the session's worker);
    # attached, or for anything else, it is converted on the calling thread. Both must
    # store the same: one run recorded before its server exists (replayed when it starts),
    # the same calls again attached, through a tool and a span.
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    deep = "bottom"
    200.times { deep = [deep] }
    values = [
      { "f" => 1.0, "neg0" => -0.0, "big" => 1e21, "tiny" => 5e-324, "third" => 1.0 / 3, "huge" => 2.0**60 },
      { "imax" => 2**63 - 1, "imin" => -(2**63), "bigint" => 2**70, "nan" => Float::NAN, "inf" => Float::INFINITY },
      { "s" => "q\"\\\n\x01\x7f\u2028é😀", sym: :val, "k\"ey\n" => true, "none" => nil, "bin" => "é".b },
      deep,
      ["plain", "list", 3, false, [], {}],
      "a bare string",
      { "nested" => { "hash" => { "of" => { "hashes" => [1.5, -2, "x" * 40] } } } }
    ]
    gm = Graphmind.configure(app: "ruby-test", url: "ws://127.0.0.1:#{port}/ingest", env: {}, loop_guard: false,
                             logger: Logger.new(StringIO.new))
    echo = gm.tool("echo") { |value| value }
    record = lambda do
      values.each do |v|
        echo.call(v)
        gm.span("passthrough", input: v) { v }
      end
    end
    refute gm.attached?
    detached = gm.run("detached") { |ctx| record.call; ctx.run_id }
    late = GMTest::Server.new(port: port)
    begin
      assert gm.ready(10.0), "attached"
      attached = gm.run("attached") { |ctx| record.call; ctx.run_id }
      assert gm.flush(5.0)
      count = 2 + 2 * (1 + 2 * values.size)
      recorded = [detached, attached].map do |run_id|
        late.events(run_id, count: count)
            .select { |e| %w[node.started node.finished].include?(e["type"]) }
            .map { |e| [e["type"], e.dig("payload", "input"), e.dig("payload", "output")] }
      end
      assert_equal 2 * (1 + 2 * values.size), recorded[0].size
      assert_equal JSON.generate(recorded[0], max_nesting: false), JSON.generate(recorded[1], max_nesting: false)
      inputs = recorded[0].select { |t, _, _| t == "node.started" }.map { |_, i, _| i }.drop(1)
      tool_inputs, span_inputs = inputs.each_slice(2).to_a.transpose
      assert_equal tool_inputs, span_inputs.map { |v| { "value" => v } }
      assert_equal 1e21, span_inputs[0]["big"]
      assert_equal 2**70, span_inputs[1]["bigint"]
      assert_equal "val", span_inputs[2]["sym"]
    ensure
      late.stop
    end
  end

  def test_inject_before_the_call_skips_the_tool
    @viewer.breakpoint({ "kind" => "tool" })
    gm = attach
    called = false
    search = gm.tool("search") { |q| called = true; "real #{q}" }
    thread, run_id = in_run(gm, "inject") { search.call("x") }
    paused = @viewer.next_event("exec.paused")
    assert_equal "tool:search", paused.dig("payload", "nodeId")
    @viewer.resume(run_id, paused.dig("payload", "pauseId"), "inject", output: { "fake" => [1, 2] })
    assert_equal({ "fake" => [1, 2] }, thread.value)
    refute called
  end

  # Shaped like ruby-openai's OpenAI::Client (rubygems.org is not reachable here): fails
  # `failures` times, then answers.
  class FlakyOpenAI
    attr_reader :calls

    def initialize(failures = 0)
      @failures = failures
      @calls = 0
    end

    def chat(parameters:)
      @calls += 1
      raise IOError, "upstream 500" if @calls <= @failures

      { "id" => "c1", "choices" => [{ "finish_reason" => "stop", "message" => { "role" => "assistant", "content" => "real" } }] }
    end
  end

  def test_inject_at_a_model_calls_before_gate_returns_a_chat_completion
    @viewer.breakpoint({ "nodeId" => "llm:step" })
    gm = attach
    client = gm.instrument_openai(FlakyOpenAI.new)
    thread, run_id = in_run(gm, "llm-inject") { client.chat(parameters: { model: "gpt-test", messages: [] }) }
    paused = @viewer.next_event("exec.paused")
    assert_equal "llm:step", paused.dig("payload", "nodeId")
    @viewer.resume(run_id, paused.dig("payload", "pauseId"), "inject", output: "typed in the viewer")
    reply = thread.value
    assert_equal "typed in the viewer", reply.dig("choices", 0, "message", "content")
    assert_equal "gpt-test", reply["model"]
    assert_equal 0, client.calls
  end

  def test_retry_at_a_model_calls_error_gate_is_one_execution
    @viewer.breakpoint({ "nodeId" => "llm:step", "point" => "error" })
    gm = attach
    client = gm.instrument_openai(FlakyOpenAI.new(1))
    thread, run_id = in_run(gm, "llm-retry") { client.chat(parameters: { model: "gpt-test", messages: [] }) }
    paused = @viewer.next_event("exec.paused")
    assert_equal "error", paused.dig("payload", "point")
    @viewer.resume(run_id, paused.dig("payload", "pauseId"), "retry")
    assert_equal "real", thread.value.dig("choices", 0, "message", "content")
    assert gm.flush(2.0)
    events = @server.events(run_id, count: 7)
    done = events.select { |e| e["type"] == "node.finished" && e.dig("payload", "nodeId") == "llm:step" }
    assert_equal 1, done.length
    assert_equal 2, done[0].dig("payload", "attempts")
    assert_equal "real", done[0].dig("payload", "output", "text")
  end

  # Answers with a tool call cut off at the token limit (its arguments do not parse).
  class CutOffOpenAI
    def chat(parameters:)
      { "id" => "c2", "model" => parameters[:model],
        "choices" => [{ "finish_reason" => "length",
                        "message" => { "role" => "assistant", "content" => nil,
                                       "tool_calls" => [{ "id" => "call_9", "type" => "function",
                                                          "function" => { "name" => "search", "arguments" => "{\"q\":\"par" } }] } }] }
    end
  end

  def test_a_tool_call_cut_off_holds_as_a_smart_breakpoint_with_no_breakpoint_armed
    gm = attach
    client = gm.instrument_openai(CutOffOpenAI.new)
    thread, run_id = in_run(gm, "llm-cut") { client.chat(parameters: { model: "gpt-test", messages: [] }) }
    paused = @viewer.next_event("exec.paused")
    assert_equal %w[after breakpoint], [paused.dig("payload", "point"), paused.dig("payload", "reason")]
    assert_equal({ "rule" => "truncated-tool-call",
                   "detail" => "the model was stopped at the token limit with 1 tool call requested; " \
                               "1 call has arguments that did not parse" }, paused.dig("payload", "smart"))
    @viewer.resume(run_id, paused.dig("payload", "pauseId"), "continue")
    assert_equal "length", thread.value.dig("choices", 0, "finish_reason")
  end

  def test_a_tool_returning_an_error_shape_holds_at_after
    gm = attach
    deploy = gm.tool("deploy") { |target:| { "success" => false, "target" => target } }
    thread, run_id = in_run(gm, "tool-failed") { deploy.call(target: "prod") }
    paused = @viewer.next_event("exec.paused")
    assert_equal "tool:deploy", paused.dig("payload", "nodeId")
    assert_equal({ "rule" => "error-result", "detail" => "the tool returned a result with success: false" },
                 paused.dig("payload", "smart"))
    @viewer.resume(run_id, paused.dig("payload", "pauseId"), "inject", output: { "success" => true })
    assert_equal({ "success" => true }, thread.value)
  end

  def test_abort_raises_abort_error_and_aborts_the_run
    @viewer.breakpoint({ "kind" => "tool" })
    gm = attach
    step = gm.tool("step") { 1 }
    seen = nil
    thread, run_id = in_run(gm, "abort") do |ctx|
      step.call
    ensure
      seen = ctx.aborted?
    end
    paused = @viewer.next_event("exec.paused")
    @viewer.resume(run_id, paused.dig("payload", "pauseId"), "abort")
    assert_kind_of Graphmind::AbortError, thread.value
    assert seen
    assert_equal "aborted", @server.run(run_id) { |r| r["status"] == "aborted" }["status"]
  end

  def test_error_gate_retry_runs_the_tool_again
    @viewer.breakpoint({ "kind" => "tool", "point" => "error" })
    gm = attach
    calls = 0
    flaky = gm.tool("flaky") do
      calls += 1
      raise ArgumentError, "first time" if calls == 1

      "ok on #{calls}"
    end
    thread, run_id = in_run(gm, "retry") { flaky.call }
    paused = @viewer.next_event("exec.paused")
    assert_equal "error", paused.dig("payload", "point")
    @viewer.resume(run_id, paused.dig("payload", "pauseId"), "retry")
    assert_equal "ok on 2", thread.value
  end

  def test_a_held_gate_releases_the_gvl_and_holds_only_its_thread
    @viewer.breakpoint({ "kind" => "tool" })
    gm = attach
    slow = gm.tool("held") { :done }
    thread, run_id = in_run(gm, "gvl") { slow.call }
    paused = @viewer.next_event("exec.paused")
    # The gate is held now: another Ruby thread (and this one) keep running Ruby code.
    counter = 0
    ticker = Thread.new { 200_000.times { counter += 1 } }
    assert ticker.join(5), "another Ruby thread ran to completion while the gate was held"
    assert_equal 200_000, counter
    assert thread.alive?, "the gated thread is still held"
    assert_equal 1, gm.stats.held_gates
    @viewer.resume(run_id, paused.dig("payload", "pauseId"), "continue")
    assert_equal :done, thread.value
  end

  def test_thread_raise_interrupts_a_held_gate
    @viewer.breakpoint({ "kind" => "tool" })
    gm = attach
    held = gm.tool("held") { :never }
    thread, run_id = in_run(gm, "raise") { held.call }
    @viewer.next_event("exec.paused")
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    thread.raise(RuntimeError, "stop waiting")
    result = thread.value
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert_kind_of RuntimeError, result
    assert_equal "stop waiting", result.message
    assert_operator elapsed, :<, 1.0
    resumed = @viewer.next_event("exec.resumed")
    assert_equal "continue", resumed.dig("payload", "action")
    assert_equal 0, gm.stats.held_gates
    assert_equal "error", @server.run(run_id) { |r| r["status"] == "error" }["status"]
  end

  def test_timeout_interrupts_a_held_gate
    @viewer.breakpoint({ "kind" => "tool" })
    gm = attach
    held = gm.tool("held") { :never }
    result = gm.run("timeout") do
      Timeout.timeout(0.3) { held.call }
    rescue Timeout::Error => e
      e
    end
    assert_kind_of Timeout::Error, result
    assert_equal 0, gm.stats.held_gates
  end

  def test_ctrl_c_interrupts_a_held_gate
    @viewer.breakpoint({ "kind" => "tool" })
    sleep 0.15
    lib = File.expand_path("../lib", __dir__)
    script = <<~RUBY
      require "graphmind"
      gm = Graphmind.configure(app: "ctrl-c", url: #{@server.ingest_url.inspect}, env: {})
      gm.ready(5.0) or exit!(3)
      begin
        gm.run("ctrl-c") do |ctx|
          $stdout.puts ctx.run_id
          $stdout.flush
          gm.tool("held") { :never }.call
        end
      rescue Interrupt
        $stdout.puts "interrupted"
        $stdout.flush
        exit!(7)
      end
    RUBY
    io = IO.popen([RbConfig.ruby, "-I", lib, "-e", script], "r", err: [:child, :out])
    @viewer.watch(io.gets.to_s.strip)
    @viewer.next_event("exec.paused")
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    Process.kill("INT", io.pid)
    out = io.read
    io.close
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert_equal "interrupted\n", out, "exit: #{$?.inspect}"
    assert_equal 7, $?.exitstatus
    assert_operator elapsed, :<, 2.0
  end

  def test_at_exit_flushes_a_run_without_an_explicit_dispose
    lib = File.expand_path("../lib", __dir__)
    script = <<~RUBY
      require "graphmind"
      gm = Graphmind.configure(app: "exit", url: #{@server.ingest_url.inspect}, env: {})
      gm.ready(5.0) or exit!(3)
      gm.run("exit") { |ctx| $stdout.puts ctx.run_id; 20.times { |i| gm.tool("t") { |n| n }.call(i) } }
    RUBY
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    run_id = IO.popen([RbConfig.ruby, "-I", lib, "-e", script], &:read).strip
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 10
    assert $?.success?
    # run.started, the run's agent node, 20 tools x 2, run.finished.
    assert_equal 44, @server.events(run_id, count: 44).length
    assert_equal "ok", @server.run(run_id) { |r| r["status"] == "ok" }["status"]
  end

  def test_a_forked_child_records_through_its_own_worker
    gm = attach
    gm.run("parent") { gm.tool("p") { 1 }.call }
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      ok = Graphmind.ready(5.0)
      run_id = nil
      Graphmind.run("child") { |ctx| run_id = ctx.run_id; Graphmind.tool("c") { 2 }.call }
      Graphmind.instance.flush(2.0)
      writer.puts(JSON.generate({ "ok" => ok, "run" => run_id }))
      writer.close
      Graphmind.dispose
      exit!(0)
    end
    writer.close
    line = reader.read
    Process.wait(pid)
    child = JSON.parse(line)
    assert child["ok"], "the child attached with its own socket"
    events = @server.events(child["run"], count: 4)
    assert_includes events.map { |e| e.dig("payload", "nodeId") }, "tool:c"
    # The parent still works after the fork.
    assert gm.attached?
    assert_equal 5, gm.run("after-fork") { gm.tool("q") { 5 }.call }
  end

  # Other Ruby threads record (taking the session's locks while they hold the GVL) while
  # the main thread forks: neither the parent nor a child may hang. A fork protocol that
  # held the locks across Ruby code (a Process._fork hook) hung the parent here.
  def test_forks_while_other_threads_record_never_hang
    gm = attach
    stop = false
    busy = 2.times.map do |t|
      Thread.new do
        n = 0
        gm.run("busy-#{t}") { 20.times { gm.tool("b#{n % 3}") { n += 1 }.call } } until stop
      end
    end
    8.times do |i|
      reader, writer = IO.pipe
      pid = fork do
        reader.close
        Graphmind.run("child-#{i}") { Graphmind.tool("c") { 2 }.call }
        writer.puts(Graphmind.instance.flush(5.0) ? "ok" : "not flushed")
        writer.close
        exit!(0)
      end
      writer.close
      ready = IO.select([reader], nil, nil, 20)
      unless ready
        Process.kill(:KILL, pid)
        Process.wait(pid)
        flunk "fork #{i}: the child hung"
      end
      assert_equal "ok", reader.read.strip, "fork #{i}: the child recorded and flushed"
      Process.wait(pid)
    end
    stop = true
    assert busy.all? { |t| t.join(10) }, "the recording threads finished"
    assert gm.flush(5.0), "the parent still records"
  end

  def test_kill_switch_records_nothing
    gm = Graphmind.configure(app: "off", url: @server.ingest_url, env: { "GRAPHMIND_DISABLED" => "1" })
    refute gm.enabled?
    refute gm.ready(0.3)
    assert_equal 2, gm.run("nothing") { gm.tool("t") { 2 }.call }
    sleep 0.2
    runs = @server.get_json("/api/runs")["runs"]
    assert_empty runs.select { |r| r["app"] == "off" || r["name"] == "nothing" }
  end
end
