# frozen_string_literal: true

require_relative "test_helper"
require "timeout"
require "rbconfig"

# Issue #30: the app never hangs, crashes or loses data because of GraphMind. Each test is
# one way a real app broke the gem, against a real `graphmind serve`.
class TestFailOpen < Minitest::Test
  LIB = File.expand_path("../lib", __dir__)
  # Fresh processes for the first-call race (each one a new extension, so a new race).
  FIRST_CALL_PROCESSES = Integer(ENV.fetch("GM_FIRST_CALL_PROCESSES", "200"))
  # How many of them run at once.
  FIRST_CALL_PARALLEL = 4
  # A child that has not ended by then is hung.
  CHILD_TIMEOUT = 30

  include GMTest::LiveServer
  APP = "ruby-fail-open"

  # A Puma or Sidekiq app's first requests: eight threads make their first GraphMind calls
  # at once, right after configure. The extension made its Ruby classes' handles lazily
  # inside a lock whose set-up called Ruby, so one thread waited for the GVL inside the
  # lock while another held the GVL and waited for the lock (5 of 40 runs hung forever).
  def test_eight_threads_making_their_first_calls_at_once_never_hang
    script = <<~RUBY
      require "graphmind"
      gm = Graphmind.configure(app: "first-calls", url: #{@server.ingest_url.inspect}, env: {})
      tool = gm.tool("double") { |i:| i * 2 }
      threads = 8.times.map { |i| Thread.new { gm.run("r\#{i}") { tool.call(i: i) } } }
      sums = threads.map(&:value)
      exit!(sums == (0...8).map { |i| i * 2 } ? 0 : 4)
    RUBY
    hung = []
    failed = []
    pending = FIRST_CALL_PROCESSES.times.to_a
    running = {}
    until pending.empty? && running.empty?
      while running.size < FIRST_CALL_PARALLEL && (i = pending.shift)
        pid = Process.spawn(RbConfig.ruby, "-I", LIB, "-e", script, out: File::NULL, err: File::NULL)
        running[pid] = [i, Process.clock_gettime(Process::CLOCK_MONOTONIC)]
      end
      running.each do |pid, (i, started)|
        done, status = Process.wait2(pid, Process::WNOHANG)
        if done
          failed << [i, status.exitstatus] unless status.success?
          running.delete(pid)
        elsif Process.clock_gettime(Process::CLOCK_MONOTONIC) - started > CHILD_TIMEOUT
          Process.kill(:KILL, pid)
          Process.wait(pid)
          hung << i
          running.delete(pid)
        end
      end
      sleep 0.01
    end
    assert_empty hung, "#{hung.size} of #{FIRST_CALL_PROCESSES} processes hung"
    assert_empty failed, "processes that ended badly: #{failed.inspect}"
  end

  # The thread's value, or (after `secs`) every thread's backtrace and the session's
  # counters on stderr before the timeout is raised: a hang names where it waits.
  def value_within(thread, secs, gm)
    Timeout.timeout(secs) { thread.value }
  rescue Timeout::Error
    Thread.list.each { |t| warn "#{t.inspect}\n  #{(t.backtrace || []).first(8).join("\n  ")}" }
    warn gm.stats.inspect
    raise
  end

  # Three threads of one run held at a breakpoint; returns [threads, run_id, ran].
  def three_held_in_one_run(gm)
    ran = Queue.new
    tool = gm.tool("held") { |n:| ran << n; n }
    ids = Queue.new
    outer = Thread.new do
      gm.run("held-all") do |ctx|
        ids << ctx
        3.times.map { |i| Thread.new { gm.with_run_context(ctx) { tool.call(n: i) } rescue $! } }.map(&:value)
      end
    rescue Exception => e # rubocop:disable Lint/RescueException
      e
    end
    ctx = ids.pop
    @viewer.watch(ctx.run_id)
    held = 3.times.map { @viewer.next_event("exec.paused", timeout: 15) }
    [outer, ctx, held, ran]
  end

  # The rule both skins share (Node: "a debugger abort of one of three held calls of one
  # run aborts the other two at once"): the run's other held gates are released as abort,
  # not left held until dispose (where a later continue ran the tool inside the aborted run).
  def test_a_debugger_abort_of_one_held_gate_aborts_the_runs_other_held_gates
    @viewer.breakpoint({ "kind" => "tool" })
    gm = attach
    outer, ctx, held, ran = three_held_in_one_run(gm)
    @viewer.resume(ctx.run_id, held[1].dig("payload", "pauseId"), "abort")
    results = value_within(outer, 10, gm)
    assert_equal [Graphmind::AbortError] * 3, results.map(&:class), "every held call raised AbortError"
    assert_equal 0, gm.stats.held_gates, "no gate of the aborted run is left held"
    assert_equal 0, ran.size, "no tool of the aborted run ran"
    resumed = 3.times.map { @viewer.next_event("exec.resumed") }
    assert_equal %w[abort abort abort], resumed.map { |e| e.dig("payload", "action") }
    assert_equal "aborted", @server.run(ctx.run_id) { |r| r["status"] == "aborted" }["status"]
  end

  # Ruby wakes a blocked thread for more than exceptions (Thread#wakeup here; 1 in ~20 runs
  # of the two abort tests above, something else): the wait was cut, the gate released as
  # `continue` and held again under a new pause, so the debugger's decision for the pause it
  # saw was refused and the call stayed held. Now the gate stays held under its one pause.
  def test_a_wake_up_without_an_exception_keeps_the_gate_held_under_its_pause
    @viewer.breakpoint({ "kind" => "tool" })
    gm = attach
    ran = Queue.new
    tool = gm.tool("woken") { |n:| ran << n; n * 2 }
    ids = Queue.new
    caller = Thread.new { gm.run("woken") { |ctx| ids << ctx; tool.call(n: 21) } }
    ctx = ids.pop
    @viewer.watch(ctx.run_id)
    paused = @viewer.next_event("exec.paused", timeout: 15)
    5.times { caller.wakeup; sleep 0.05 }
    assert_equal 1, gm.stats.held_gates, "still held after the wake-ups"
    assert_equal 0, ran.size, "the tool has not run"
    @viewer.resume(ctx.run_id, paused.dig("payload", "pauseId"), "continue")
    assert_equal 42, value_within(caller, 10, gm)
    assert_equal [21], [ran.pop]
    resumed = @viewer.next_event("exec.resumed")
    assert_equal [paused.dig("payload", "pauseId"), "continue"],
                 [resumed.dig("payload", "pauseId"), resumed.dig("payload", "action")]
  end

  def test_ctx_abort_releases_the_runs_held_gates_at_once
    @viewer.breakpoint({ "kind" => "tool" })
    gm = attach
    outer, ctx, _held, ran = three_held_in_one_run(gm)
    ctx.abort!("the app gave up")
    results = value_within(outer, 10, gm)
    assert_equal [Graphmind::AbortError] * 3, results.map(&:class)
    assert_equal ["the app gave up"] * 3, results.map(&:message)
    assert_equal 0, gm.stats.held_gates
    assert_equal 0, ran.size
  end

  def nested(levels, leaf)
    v = leaf
    levels.times { |i| v = i.odd? ? { "k" => v } : [v] }
    v
  end

  def depth_of(v)
    case v
    when Array then 1 + (v.map { |x| depth_of(x) }.max || 0)
    when Hash then 1 + (v.values.map { |x| depth_of(x) }.max || 0)
    else 0
    end
  end

  def innermost(v)
    loop do
      if v.is_a?(Array) && v.length == 1 && (v[0].is_a?(Array) || v[0].is_a?(Hash))
        v = v[0]
      elsif v.is_a?(Hash) && (v["k"].is_a?(Array) || v["k"].is_a?(Hash))
        v = v["k"]
      else
        return v
      end
    end
  end

  # The shared vector (tests/vectors/ours/value-depth.json, also run by the Node suite).
  def test_values_of_any_depth_and_cyclic_ones_are_recorded_cut_and_marked
    vector = load_vector("ours/value-depth.json")
    assert_equal vector["maxValueDepth"], Graphmind::Native::MAX_VALUE_DEPTH
    gm = attach
    # A span's input is recorded as given (a tool's would be wrapped in {"v" => ...}).
    echo = ->(value) { gm.span("echo", kind: "tool", input: value) { "ok" } }
    cyclic = { "name" => "loop" }
    cyclic["self"] = cyclic
    run_id = nil
    gm.run("deep") do |ctx|
      run_id = ctx.run_id
      vector["cases"].each { |c| echo.call(nested(c["levels"], vector["leaf"])) }
      echo.call(cyclic)
    end
    assert gm.flush(5.0)
    count = vector["cases"].length + 1
    events = @server.events(run_id, count: 4 + 2 * count)
    inputs = events.select { |e| e["type"] == "node.started" && e.dig("payload", "nodeId") == "tool:echo" }
                   .map { |e| e.dig("payload", "input") }
    assert_equal count, inputs.length, "no node.started was refused by the server"
    finished = events.count { |e| e["type"] == "node.finished" && e.dig("payload", "nodeId") == "tool:echo" }
    assert_equal count, finished
    vector["cases"].each_with_index do |c, i|
      assert_equal c["recordedDepth"], depth_of(inputs[i]), "#{c['levels']} levels"
      assert_equal vector["marker"], innermost(inputs[i]), "#{c['levels']} levels end in the marker" if c["cut"]
    end
    cut = inputs.last
    cut = cut["self"] while cut.is_a?(Hash) && cut["name"] == "loop"
    assert_equal vector["marker"], cut, "a cycle ends in the marker"
    assert_equal vector["maxValueDepth"], depth_of(inputs.last)
  end

  def test_names_that_are_not_utf8_are_recorded_lossily_and_the_call_runs
    gm = attach
    bad = "t\xFFool".dup.force_encoding("UTF-8")
    ran = []
    tool = gm.tool(bad) { |n| ran << n; n * 2 }
    run_id = nil
    result = gm.run("r\xFEn".dup.force_encoding("UTF-8")) do |ctx|
      run_id = ctx.run_id
      gm.emit("custom\xFF".b, { "x" => 1 }) # an unknown type: ignored with a warning, never raised
      gm.span("s\xFFpan".dup.force_encoding("ASCII-8BIT")) { tool.call(21) }
    end
    assert_equal 42, result
    assert_equal [21], ran, "the tool body ran"
    assert gm.flush(5.0)
    events = @server.events(run_id, count: 7)
    started = events.select { |e| e["type"] == "node.started" }.map { |e| e.dig("payload", "nodeId") }
    assert_includes started, "tool:t\u{FFFD}ool"
    assert_includes started, "custom:s\u{FFFD}pan"
    assert_equal "r\u{FFFD}n", events.first.dig("payload", "meta", "name")
  end

  def test_strings_in_other_encodings_are_recorded_as_utf8
    gm = attach
    echo = gm.tool("echo") { |v| v }
    utf16 = "h\u00e9llo \u{1F600}".encode("UTF-16LE")
    sjis = "\u65e5\u672c\u8a9e".encode("Shift_JIS")
    run_id = nil
    gm.run("encodings") do |ctx|
      run_id = ctx.run_id
      echo.call({ "utf16" => utf16, "sjis" => sjis, "key".encode("UTF-16LE") => 1, "ascii_sjis" => "abc".encode("Shift_JIS") })
    end
    assert gm.flush(5.0)
    events = @server.events(run_id, count: 5)
    input = events.find { |e| e["type"] == "node.started" && e.dig("payload", "nodeId") == "tool:echo" }.dig("payload", "input", "v")
    assert_equal({ "utf16" => "h\u00e9llo \u{1F600}", "sjis" => "\u65e5\u672c\u8a9e", "key" => 1, "ascii_sjis" => "abc" }, input)
  end
end
