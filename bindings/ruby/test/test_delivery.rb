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
end
