# frozen_string_literal: true

# Replay figures in Ruby, one run, side by side (docs/replay.md): a 500-step run (500
# gm.tool calls, the 1 KB sample in and out) recorded into a real `graphmind serve`, then
# replayed by run id through Graphmind::Testing.replay (the fetch from the server
# included) and a live run of the same size right after, five rounds; per call the median
# calling-thread CPU time (CLOCK_THREAD_CPUTIME_ID).
#   ruby -Ibindings/ruby/lib bindings/ruby/bench/replay.rb [bench/sample-1k.json]
require "json"
require "net/http"
require "tmpdir"
require "graphmind"
require "graphmind/testing"

ROOT = File.expand_path("../../..", __dir__)
BIN = ENV["GRAPHMIND_BIN"] || File.join(ROOT, "target", "release", "graphmind")
STEPS = 500
ROUNDS = 5

def median(xs) = xs.sort[xs.length / 2]
def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
def cpu_us = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :float_microsecond)

sample = JSON.parse(File.read(ARGV[0] || File.join(ROOT, "bench", "sample-1k.json")))
dir = Dir.mktmpdir("gm-bench-replay")
env = ENV.keys.grep(/\AGRAPHMIND_/).to_h { |k| [k, nil] }
env.merge!("GRAPHMIND_HOME" => File.join(dir, "home"), "GRAPHMIND_TELEMETRY" => "0", "GRAPHMIND_PAUSE_ON_ERROR" => "off")
server = IO.popen([env, BIN, "--port", "0", "--json", "--no-open", "--db", File.join(dir, "g.db")], "r", err: File::NULL)
port = JSON.parse(server.gets).fetch("port")
begin
  gm = Graphmind.configure(app: "bench-replay", url: "ws://127.0.0.1:#{port}/ingest", env: {}, loop_guard: false)
  raise "no server" unless gm.ready(5.0)

  work = gm.tool("work") { |payload:, i:| { "echo" => payload, "i" => i } }
  one_run = lambda do |name|
    per_call = []
    run_id = nil
    t0 = now
    gm.run(name) do |ctx|
      run_id = ctx.run_id
      STEPS.times do |i|
        c = cpu_us
        work.call(payload: sample, i: i)
        per_call << (cpu_us - c)
      end
    end
    [(now - t0) * 1000, per_call, run_id]
  end
  one_run.call("warm-up")
  _, _, recorded = one_run.call("five-hundred")
  gm.flush(10.0)
  300.times do
    body = JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{port}/api/runs/#{recorded}/events?limit=1")))
    break if body["total"].to_i >= 2 * STEPS + 2

    sleep 0.05
  end
  rows = ROUNDS.times.map do
    t0 = now
    run = nil
    r = Graphmind::Testing.replay(recorded, strict: true, client: gm) { run = one_run.call("five-hundred") }
    e2e = (now - t0) * 1000
    raise "replayed #{r.replayed}" unless r.replayed == STEPS

    live = one_run.call("five-hundred-live")
    [e2e, run[0], live[0], median(run[1]), median(live[1])]
  end
  puts "Ruby: #{STEPS}-step run, 1 KB in and out per step, attached to graphmind serve, #{ROUNDS} rounds"
  puts "round | replay end to end (fetch + run) | replayed run | live run | replayed call (CPU) | live call (CPU)"
  rows.each_with_index { |r, k| puts format("%d | %.1f ms | %.1f ms | %.1f ms | %.1f us | %.1f us", k + 1, *r) }
  med = ->(i) { median(rows.map { |r| r[i] }) }
  puts format("median | %.1f ms | %.1f ms | %.1f ms | %.1f us | %.1f us (replayed/live %.2f)", med[0], med[1], med[2], med[3], med[4], med[3] / med[4])
  gm.dispose
ensure
  Process.kill("TERM", server.pid)
  server.close
end
