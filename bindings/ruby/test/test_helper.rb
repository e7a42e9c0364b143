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

module GMTest
  # A test class against a real `graphmind serve` with a minimal debugger on /ws/ui: a
  # fresh server and viewer per test, and `attach`, the default instance configured for
  # them and attached. The class names its app with `APP`.
  module LiveServer
    def setup
      @server = GMTest::Server.new
      @viewer = GMTest::Viewer.new(@server.port, @server.viewer_token)
    end

    def teardown
      Graphmind.reset
      @viewer&.close
      @server&.stop
    end

    def attach(**extra)
      sleep 0.15 # let the server apply the viewer's controls first
      gm = Graphmind.configure(app: self.class::APP, url: @server.ingest_url, env: {}, **extra)
      assert gm.ready(5.0), "attached"
      gm
    end
  end
end
