# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# Credential-leak audit through the Ruby skin (the core-level audit is cli/tests/leaks.rs,
# Python's bindings/python/tests/test_leaks.py): keys planted where a Ruby app carries them
# (a ruby-openai client's access token and extra headers, an env-looking string and a
# bearer header as a tool's arguments, a token in a raised error), then searched for in
# the SQLite file, the HTTP API and the three `record` exports. It asserts the table of
# docs/security.md ("Where a credential can end up"), so a new leak fails it. The client is
# a duck-typed stand-in (rubygems.org is out of reach here), shaped like ruby-openai's.
class TestLeaks < Minitest::Test
  KEYS = {
    "client-token" => "sk-gmleak-rbclient-4Tq7",
    "client-header" => "gmleak-rbheader-8Wz2",
    "env-string" => "sk-gmleak-rbenv-5Hs3",
    "bearer-args" => "gmleak-rbbearer-9Lp6",
    "exception" => "gmleak-rbexc-1Vx4"
  }.freeze
  RECORDED_BY_DESIGN = %w[bearer-args env-string exception].freeze
  EXPORTED = %w[env-string exception].freeze

  # ruby-openai's client keeps its credentials in @access_token and @extra_headers.
  class StandInClient
    def initialize(access_token:, extra_headers:)
      @access_token = access_token
      @extra_headers = extra_headers
    end

    def chat(parameters:)
      { "id" => "c1", "model" => parameters[:model],
        "choices" => [{ "finish_reason" => "stop", "message" => { "role" => "assistant", "content" => "ok" } }] }
    end
  end

  def setup
    # No error breakpoint: the planted error must not hold the tool with nobody to resume it.
    @server = GMTest::Server.new(args: ["--pause-on-error", "off"])
  end

  def teardown
    Graphmind.reset
    @server&.stop
  end

  def found_in(text) = KEYS.select { |_, key| text.include?(key) }.keys.sort

  def test_every_planted_credential_is_redacted_or_recorded_by_design_and_nowhere_else
    gm = Graphmind.configure(app: "rb-leaks", url: @server.ingest_url, env: {})
    assert gm.ready(5.0)
    client = gm.instrument_openai(StandInClient.new(access_token: KEYS["client-token"],
                                                    extra_headers: { "X-Custom-Auth" => KEYS["client-header"] }))
    deploy = gm.tool("deploy") { |**_| raise IOError, "401 from upstream: invalid token #{KEYS['exception']}" }
    run_id = nil
    assert_raises(IOError) do
      gm.run("leaky") do |ctx|
        run_id = ctx.run_id
        client.chat(parameters: { model: "gpt-test", messages: [{ role: "user", content: "hi" }] })
        deploy.call(note: "OPENAI_API_KEY=#{KEYS['env-string']}", headers: { "Authorization" => "Bearer #{KEYS['bearer-args']}" })
      end
    end
    assert gm.flush(5.0)
    @server.run(run_id) { |r| r["status"] != "running" }

    db = @server.db_path
    places = {}
    places["sqlite"] = ["", "-wal"].map { |s| File.exist?(db + s) ? File.binread(db + s) : "" }.join.force_encoding("BINARY")
    places["http-api"] = ["/api/runs", "/api/runs/#{run_id}/events?limit=5000", "/health"].map do |path|
      Net::HTTP.get(URI("http://127.0.0.1:#{@server.port}#{path}"))
    end.join
    { "record-ndjson" => [], "record-otlp" => ["--format", "otlp"] }.each do |place, extra|
      out, err, status = Open3.capture3({ "GRAPHMIND_TELEMETRY" => "0" }, @server.bin, "record", run_id, "--db", db, "--out", "-", *extra)
      assert status.success?, "#{place}: #{err}"
      places[place] = out
    end
    actual = places.transform_values { |text| found_in(text.dup.force_encoding("BINARY")) }
    expected = places.keys.to_h { |p| [p, p.start_with?("record-") ? EXPORTED : RECORDED_BY_DESIGN] }
    assert_equal expected, actual
  end
end
