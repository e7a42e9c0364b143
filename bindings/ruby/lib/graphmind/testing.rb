# frozen_string_literal: true

require "graphmind"

module Graphmind
  # Recorded runs as offline tests (docs/replay.md): `require "graphmind/testing"`, then
  #
  #   r = Graphmind::Testing.replay("test/data/booking.ndjson", strict: true) { main }
  #   assert_equal 6, r.replayed
  #
  # Inside the block the next run the app starts (a run with the recorded run's name) has
  # its tool and model calls answered from the recording, by the core: no tool body runs,
  # no request reaches the provider, until the fork point or the first call whose input
  # differs, after which the run is live. In a Minitest::Test, `include Graphmind::Testing`
  # and call `replay(...)` (or `replay_recording(...)`).
  module Testing
    # Raised on leaving `replay(..., strict: true)` when the run went live anywhere but at
    # `from:` or nothing was replayed. A Minitest::Assertion when Minitest is loaded (the
    # test fails rather than errors).
    ReplayDiverged = Class.new(defined?(::Minitest::Assertion) ? ::Minitest::Assertion : StandardError)

    # What a replay did, read from the core: `replayed` (calls answered from the
    # recording), `live` (where it went live: {"reason", "at", "differs"?, ...}), `error`
    # (why nothing was replayed), `replay_of` (the recorded run), `run_id` (the run it
    # answered).
    class Replay
      def initialize(native, begun)
        @native = native
        @begun = begun || {}
        @final = nil
      end

      # The core's report as a Hash (string keys).
      def report = @final || @native.replay_report || @begun
      def replayed = report["replayed"].to_i
      def live = report["live"]
      def error = report["error"]
      def replay_of = report["replayOf"]
      def run_id = report["runId"]

      # Ends the replay (later calls run live) and keeps its last report.
      def finish
        @final = @native.replay_end || @final || @begun
        self
      end
    end

    module_function

    # Replays `source` around the block and returns the Replay (the block gets it too):
    # `source` an exported run (`graphmind record RUN_ID --no-redact-secrets`, a path or
    # Pathname) or a run id on the server `client` attaches to. `from: "<nodeId>#<n>"` goes
    # live at that call, with `output` as the output of the call just before it. `strict`:
    # raise ReplayDiverged on leaving when the run went live anywhere but at `from`.
    def replay(source, from: nil, output: nil, strict: false, client: Graphmind.instance)
      handle = Replay.new(client.native, client.native.replay_begin(replay_spec(source, from, output)))
      begin
        yield handle if block_given?
      ensure
        handle.finish
      end
      replay_check!(handle) if strict
      handle
    end

    # The same, under a name that does not clash with a test's own `replay`.
    def replay_recording(source, **kwargs, &block) = Testing.replay(source, **kwargs, &block)

    # The core's `replay` option value for `source` (the core reads it as a file when one
    # exists there, else as a run reference).
    def replay_spec(source, from, output)
      out = { "source" => source.to_s }
      out["from"] = from unless from.nil?
      out["output"] = output unless output.nil?
      out
    end

    def replay_check!(handle)
      raise ReplayDiverged, "nothing replayed: #{handle.error}" if handle.error

      live = handle.live
      return if live.nil? || live["reason"] == "fork"

      raise ReplayDiverged, "the run went live at #{live['at']}: #{live['reason']} #{live['differs']}".rstrip
    end
  end
end
