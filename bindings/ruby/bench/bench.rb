# frozen_string_literal: true

# `rake bench` (and `make bench`): the gem's two figures, one run, printed side by side.
require "graphmind"
require "json"
require "digest"

def per_call_us(iterations)
  GC.start
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  iterations.times { yield }
  (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) * 1e6 / iterations
end

def best_of(runs, iterations, &block) = Array.new(runs) { per_call_us(iterations, &block) }.min

root = File.expand_path("../../..", __dir__)

# 1. A wrapped tool call, 1 KB in and 1 KB out, detached (no debugger: events buffered).
gm = Graphmind.configure(app: "bench", url: "ws://127.0.0.1:9/ingest", env: {}, buffer_size: 2_000)
payload = { "query" => "x" * 900, "limit" => 10, "filters" => { "lang" => "en", "tags" => %w[a b c] } }
answer = { "results" => ["y" * 900], "count" => 1, "took" => 3 }
tool = gm.tool("search") { |request| answer }
plain = ->(request) { answer }
warm = 2_000
warm.times { tool.call(payload) }
wrapped = best_of(5, 20_000) { tool.call(payload) }
bare = best_of(5, 20_000) { plain.call(payload) }
in_bytes = JSON.generate(payload).bytesize
out_bytes = JSON.generate(answer).bytesize

# 2. The loop guard's fingerprint of bench/sample-1k.json vs pure Ruby.
sample = JSON.parse(File.read(File.join(root, "bench/sample-1k.json")))
sorted = lambda do |v|
  case v
  when Hash then v.keys.sort.to_h { |k| [k, sorted.call(v[k])] }
  when Array then v.map { |x| sorted.call(x) }
  else v
  end
end
ours = best_of(5, 20_000) { Graphmind.fingerprint("tool:search", sample) }
ruby = best_of(5, 20_000) { Digest::SHA256.hexdigest("tool:search" + JSON.generate(sorted.call(sample))) }

puts format("%-62s %8.2f us/call (goal <= 10)", "wrapped tool call, detached (#{in_bytes} B in, #{out_bytes} B out)", wrapped)
puts format("%-62s %8.2f us/call", "  the same lambda called directly", bare)
puts format("%-62s %8.2f us/call (goal <= 10)", "Graphmind.fingerprint(sample-1k.json)", ours)
puts format("%-62s %8.2f us/call", "  pure Ruby: JSON.generate(key-sorted copy) + SHA256", ruby)
gm.dispose
