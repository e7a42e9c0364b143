# frozen_string_literal: true

# `graphmind init` prints a Ruby snippet per framework (cli/tests/init/ruby-*); written with
# `--write` into a copy of each fixture and run as its own process against a real server,
# each records a run. ruby_llm and ruby-openai cannot be installed here (rubygems.org is
# unreachable): test/standins holds duck-typed stand-ins with their class names.
require_relative "test_helper"
require "fileutils"
require "open3"

class TestInitSnippets < Minitest::Test
  FIXTURES = File.join(ROOT, "cli", "tests", "init")
  STANDINS = File.join(__dir__, "standins")
  LIB = File.expand_path("../lib", __dir__)

  { "ruby-plain" => "tool:lookup", "ruby-ruby_llm" => "llm:step", "ruby-ruby-openai" => "tool:lookup" }.each do |name, node|
    define_method("test_#{name.tr('-', '_')}_snippet_records_a_run") do
      server = GMTest::Server.new
      Dir.mktmpdir("gm-init-rb") do |tmp|
        project = File.join(tmp, name)
        FileUtils.cp_r(File.join(FIXTURES, name), project)
        File.delete(File.join(project, "expected.txt"))
        _out, err, st = Open3.capture3(server.bin, "init", "--write", chdir: project)
        assert st.success?, err
        snippet = File.join(project, "graphmind_snippet.rb")
        assert_match(/\A# graphmind init: begin/, File.read(snippet))
        env = ENV.to_h.reject { |k, _| k.start_with?("GRAPHMIND_") }.merge("GRAPHMIND_URL" => server.ingest_url)
        _out, err, st = Open3.capture3(env, RbConfig.ruby, "-I", LIB, "-I", STANDINS, snippet, chdir: project, unsetenv_others: true)
        assert st.success?, err
        run = nil
        100.times do
          run = (server.get_json("/api/runs") || {})["runs"]&.find { |r| r["app"] == "my-agent" && r["status"] == "ok" }
          break if run

          sleep 0.05
        end
        refute_nil run, "a finished run"
        ids = server.events(run["id"], count: 3).map { |e| e.dig("payload", "nodeId") }
        assert_includes ids, node
      end
    ensure
      server&.stop
    end
  end
end
