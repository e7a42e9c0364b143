# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "graphmind"
require "minitest/autorun"
require "json"
require_relative "support/server"

ROOT = File.expand_path("../../..", __dir__)
VECTORS = File.join(ROOT, "tests", "vectors")

# Options that keep a test session away from a real debugger and the process environment.
def quiet_options(**extra)
  { app: "test", url: "ws://127.0.0.1:9/ingest", env: {}, connect_timeout: 0.05 }.merge(extra)
end

def load_vector(rel)
  Graphmind::Native.parse_json(File.binread(File.join(VECTORS, rel)))
end
