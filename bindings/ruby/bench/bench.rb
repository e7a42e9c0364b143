# frozen_string_literal: true

# `rake bench` (and `make bench`): the gem's figures of docs/ruby.md, one run, side by side.
#
# Each figure is the best of ROUNDS rounds of about ROUND_SECONDS each (so >= 2 s per
# figure), as the calling thread's CPU time per call (CLOCK_THREAD_CPUTIME_ID: what the app
# thread pays, whatever else loads the machine) and as wall time. The core's worker thread
# (which serializes the events) is not the app thread and is not counted in the CPU column.
require "graphmind"
require "json"
require "digest"
require "logger"

ROUNDS = Integer(ENV.fetch("GM_BENCH_ROUNDS", "5"))
ROUND_SECONDS = Float(ENV.fetch("GM_BENCH_ROUND_SECONDS", "0.5"))

def cpu_now = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
def wall_now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

# [cpu µs/call, wall µs/call], each the best round.
def measure(&block)
  200.times(&block)
  iterations = 1_000
  spent = 0.0
  loop do # calibrate: one round lasts about ROUND_SECONDS
    started = cpu_now
    iterations.times(&block)
    spent = cpu_now - started
    break if spent >= ROUND_SECONDS / 4

    iterations *= 4
  end
  iterations = [(iterations * ROUND_SECONDS / spent).to_i, 1].max
  best_cpu = best_wall = Float::INFINITY
  ROUNDS.times do
    GC.start
    wall = wall_now
    cpu = cpu_now
    iterations.times(&block)
    best_cpu = [best_cpu, (cpu_now - cpu) * 1e6 / iterations].min
    best_wall = [best_wall, (wall_now - wall) * 1e6 / iterations].min
  end
  [best_cpu, best_wall]
end

root = File.expand_path("../../..", __dir__)
payload = { "query" => "x" * 900, "limit" => 10, "filters" => { "lang" => "en", "tags" => %w[a b c] } }
answer = { "results" => ["y" * 900], "count" => 1, "took" => 3 }

# The reference Python SDK (graphmind-ai 0.5.1), the issue's peer: the same tool call,
# detached, measured the same way in a child process (skipped when its venv is absent).
REF_PYTHON_CODE = <<~PY
  import json, sys, time
  import graphmind as gm
  payload, answer = json.loads(sys.argv[1]), json.loads(sys.argv[2])
  inst = gm.GraphMind(url="ws://127.0.0.1:9/ingest", env={}, logger=lambda line: None)
  @inst.tool
  def search(request):
      return answer
  for _ in range(500):
      search(payload)
  n, best_cpu, best_wall = 2000, float("inf"), float("inf")
  for _ in range(#{ROUNDS}):
      w, c = time.perf_counter(), time.thread_time()
      for _ in range(n):
          search(payload)
      best_cpu = min(best_cpu, (time.thread_time() - c) / n * 1e6)
      best_wall = min(best_wall, (time.perf_counter() - w) / n * 1e6)
  inst.dispose()
  print(json.dumps([best_cpu, best_wall]))
PY

def reference_python(root, payload, answer)
  python = [ENV["GRAPHMIND_REF_PYTHON"], File.join(root, ".venv-ref/bin/python"), "/work/main/.venv-ref/bin/python"]
           .compact.find { |p| File.executable?(p) }
  return nil unless python

  out = IO.popen([python, "-c", REF_PYTHON_CODE, JSON.generate(payload), JSON.generate(answer)], err: File::NULL, &:read)
  JSON.parse(out.lines.last || "null")
rescue StandardError
  nil
end

# 1. A wrapped tool call, 1 KB in and 1 KB out, detached (no debugger: events buffered).
gm = Graphmind.configure(app: "bench", url: "ws://127.0.0.1:9/ingest", env: {}, buffer_size: 2_000,
                         logger: Logger.new(nil))
tool = gm.tool("search") { |_request| answer }
plain = ->(_request) { answer }
wrapped = measure { tool.call(payload) }
bare = measure { plain.call(payload) }
in_bytes = JSON.generate(payload).bytesize
out_bytes = JSON.generate(answer).bytesize
gm.dispose

# 2. The loop guard's fingerprint of bench/sample-1k.json vs pure Ruby.
sample = JSON.parse(File.read(File.join(root, "bench/sample-1k.json")))
sorted = lambda do |v|
  case v
  when Hash then v.keys.sort.to_h { |k| [k, sorted.call(v[k])] }
  when Array then v.map { |x| sorted.call(x) }
  else v
  end
end
ours = measure { Graphmind.fingerprint("tool:search", sample) }
ruby = measure { Digest::SHA256.hexdigest("tool:search" + JSON.generate(sorted.call(sample))) }
python = reference_python(root, payload, answer)

load = File.read("/proc/loadavg").split.first(3).join(" ") rescue "n/a"
row = ->(label, (cpu, wall), goal = "") { puts format("%-58s %9.2f %9.2f  %s", label, cpu, wall, goal) }
puts format("%-58s %9s %9s", "µs per call (best of #{ROUNDS} rounds), load average #{load}", "cpu", "wall")
row.call("wrapped tool call, detached (#{in_bytes} B in, #{out_bytes} B out)", wrapped, "(goal <= 10)")
row.call("  the same lambda called directly", bare)
if python
  row.call("  reference Python SDK 0.5.1 @tool call, detached", python)
else
  puts "  reference Python SDK: not found (.venv-ref), not measured"
end
row.call("Graphmind.fingerprint(sample-1k.json)", ours, "(goal <= 10)")
row.call("  pure Ruby: JSON.generate(key-sorted copy) + SHA256", ruby)
