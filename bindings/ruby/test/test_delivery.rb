# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "tempfile"

# Every exit path and every rate, against a real `graphmind serve`: a warning pending at
# exit is printed and the status is the app's; a short script (no `ready`) stores its run
# whole; a flood while attached is stored event for event. GM_EXIT_RUNS / GM_FLOOD_CALLS
# lengthen them (`make soak`).
class TestDelivery < Minitest::Test
  LIB = File.expand_path("../lib", __dir__)
  EXIT_RUNS = Integer(ENV.fetch("GM_EXIT_RUNS", "40"))
  FLOOD_CALLS = Integer(ENV.fetch("GM_FLOOD_CALLS", "20000"))

  def child_env(extra = {})
    env = ENV.to_h.reject { |k, _| k.start_with?("GRAPHMIND_") }
    env.merge("GRAPHMIND_TELEMETRY" => "0").merge(extra)
  end

  # Runs `script` with stderr on a file; returns [status, stdout, stderr].
  def run_script(script, env)
    Tempfile.create("gm-err") do |err|
      out, status = Open3.capture2(env, RbConfig.ruby, "-I", LIB, "-e", script, err: err.path)
      [status.exitstatus, out, File.read(err.path)]
    end
  end

  WARN_AT_EXIT = <<~RUBY
    require "graphmind"
    Graphmind.configure(app: "exit", url: "ws://127.0.0.1:9/ingest")
    same = Graphmind.tool("same") { |x| x }
    3.times { same.call(1) }
    %<end>s
  RUBY

  def test_a_warning_pending_at_exit_is_printed_and_the_status_is_the_apps
    env = child_env("GRAPHMIND_ON_LOOP" => "warn", "GRAPHMIND_LOOP_THRESHOLD" => "3")
    { "Graphmind.dispose" => 0, "" => 0, "exit 3" => 3 }.each do |ending, expected|
      script = format(WARN_AT_EXIT, end: ending)
      Array.new(EXIT_RUNS / 2) { Thread.new { run_script(script, env) } }.map(&:value).each do |status, _, err|
        assert_equal expected, status, "ending #{ending.inspect}: #{err[-300..]}"
        assert_includes err, "possible loop", "ending #{ending.inspect}: the warning was lost"
      end
    end
  end

  SHORT = <<~RUBY
    require "graphmind"
    gm = Graphmind.configure(app: "short", url: ARGV.fetch(0, ENV.fetch("GM_URL")), env: {})
    work = gm.tool("work") { |n| n * 2 }
    gm.run("short") do |ctx|
      puts ctx.run_id
      10.times { |n| work.call(n) }
    end
    %<end>s
  RUBY

  def test_a_short_script_without_ready_stores_its_run_whole
    server = GMTest::Server.new
    { "Graphmind.dispose" => "dispose", "" => "exit", "Graphmind.flush" => "flush" }.each do |ending, label|
      3.times do
        status, out, err = run_script(format(SHORT, end: ending), child_env("GM_URL" => server.ingest_url))
        assert_equal 0, status, err
        run_id = out.lines.first.strip
        run = server.run(run_id) { |r| r["status"] != "running" }
        # run.started, the agent node, ten tools (started + finished), agent end, run.finished
        assert_equal ["ok", 24], [run["status"], run["eventCount"]], "#{label}: #{run.inspect}"
      end
    end
  ensure
    server&.stop
  end

  def test_a_flood_while_attached_is_stored_event_for_event
    server = GMTest::Server.new
    gm = Graphmind::Client.new(app: "flood", url: server.ingest_url, env: {})
    assert gm.ready(5.0)
    pad = "x" * 1000
    work = gm.tool("work") { |n| n }
    run_id = nil
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    gm.run("flood") do |ctx|
      run_id = ctx.run_id
      FLOOD_CALLS.times { |n| work.call({ "n" => n, "pad" => pad }) }
    end
    per_call_us = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) * 1e6 / FLOOD_CALLS
    stats = gm.stats
    gm.dispose
    emitted = 2 * FLOOD_CALLS + 4
    assert_equal [emitted, 0], [stats.seq, stats.lost], stats.inspect
    run = server.run(run_id, timeout: 60) { |r| r["status"] != "running" && r["eventCount"] >= emitted }
    assert_equal ["ok", emitted], [run["status"], run["eventCount"]], format("%.1f us a call", per_call_us)
  ensure
    server&.stop
  end

  def all_events(server, run_id)
    out = []
    after = -1
    loop do
      page = (server.get_json("/api/runs/#{run_id}/events?afterSeq=#{after}&limit=1000") || {})["events"] || []
      return out if page.empty?

      out.concat(page)
      after = page.last["seq"]
    end
  end

  def test_a_stopped_server_delays_the_app_at_most_the_deadline_and_every_drop_is_marked
    server = GMTest::Server.new
    gm = Graphmind::Client.new(app: "stopped", url: server.ingest_url, env: {})
    assert gm.ready(5.0)
    pad = "x" * 1000
    work = gm.tool("work") { |v| v["n"] }
    stop_for = Float(ENV.fetch("GM_STOP_SECS", "2"))
    slowest = 0.0
    run_id = nil
    clock = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
    gm.run("stopped") do |ctx|
      run_id = ctx.run_id
      started = clock.call
      stopped_at = resumed_at = nil
      n = 0
      while resumed_at.nil? || clock.call - resumed_at < 1.0
        now = clock.call
        if stopped_at.nil? && now - started > 0.3
          Process.kill("STOP", server.pid)
          stopped_at = now
        end
        if resumed_at.nil? && stopped_at && now - stopped_at >= stop_for
          Process.kill("CONT", server.pid)
          resumed_at = now
        end
        t = clock.call
        work.call({ "n" => n, "pad" => pad })
        slowest = [slowest, clock.call - t].max
        n += 1
      end
    end
    assert gm.flush(60.0)
    stats = gm.stats
    gm.dispose
    # BACKPRESSURE_DEADLINE is 250 ms; a call is two events, plus this loaded machine's slack.
    assert_operator slowest, :<=, 1.0, "the slowest call took #{(slowest * 1000).round} ms"
    run = server.run(run_id, timeout: 30) { |r| r["status"] != "running" }
    assert_equal "ok", run["status"]
    deadline = clock.call + 30
    events = marked = nil
    loop do
      events = all_events(server, run_id)
      marked = events.select { |e| e["type"] == "graph.hint" }.sum { |e| e.dig("payload", "gap", "droppedCount") || 0 }
      break if events.length + marked >= stats.seq || clock.call > deadline

      sleep 0.1
    end
    assert_equal stats.seq, events.length + marked, stats.inspect
    assert_equal stats.lost, marked
  ensure
    Process.kill("CONT", server.pid) if server
    server&.stop
  end
end
