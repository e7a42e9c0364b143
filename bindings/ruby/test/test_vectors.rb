# frozen_string_literal: true

require_relative "test_helper"
require "digest"

# The conformance vectors in tests/vectors, through the gem: every value crosses the
# Ruby <-> core conversion (fixtures are parsed by the core's parser, so lone surrogates
# arrive as WTF-8 Ruby strings, and key order is kept).
class TestVectors < Minitest::Test
  def count(name, n)
    (@@counts ||= {})[name] = n
    assert_operator n, :>, 0
  end

  def check_calls(cases, label)
    cases.each_with_index do |c, i|
      absent = c["inputAbsent"] == true || !c.key?("input")
      input = absent ? nil : c["input"]
      ignore = c["ignoreKeys"]
      assert_equal c["canonical"], Graphmind::Native.canonical_call(c["nodeId"], input, absent, ignore),
                   "#{label} #{c['name'] || i} canonical"
      next if c["fingerprint"].nil?

      fp = if ignore.nil? && c["nodeId"].valid_encoding?
             absent ? Graphmind.fingerprint(c["nodeId"]) : Graphmind.fingerprint(c["nodeId"], input)
           else
             Graphmind::Native.fingerprint(c["nodeId"], input, absent, ignore)
           end
      assert_equal c["fingerprint"], fp, "#{label} #{c['name'] || i} fingerprint"
    end
    cases.length
  end

  def test_loop_guard_fixture_canonical
    fixture = load_vector("reference/loop-guard-fixture.json")
    assert_operator check_calls(fixture["canonical"], "loop-guard"), :>, 10
  end

  def test_differential_canonical
    fixture = load_vector("reference/differential.json")
    assert_equal 354, check_calls(fixture["canonical"], "differential")
    lone = Graphmind::Native.parse_json(fixture["canonicalLoneSurrogates"])
    assert_equal 52, check_calls(lone, "differential lone surrogates")
  end

  def test_rfc8785_vectors
    names = Dir.children(File.join(VECTORS, "jcs/input")).sort
    assert_equal 6, names.length
    names.each do |name|
      input = load_vector("jcs/input/#{name}")
      expected = File.read(File.join(VECTORS, "jcs/output", name))
      assert_equal expected, Graphmind.canonical_json(input, ignore_keys: []), name
    end
  end

  def test_es6_number_spelling
    n = 0
    File.foreach(File.join(VECTORS, "jcs/es6-numbers-1k.txt")) do |line|
      line = line.strip
      next if line.empty?

      hex, expected = line.split(",", 2)
      float = [hex.rjust(16, "0")].pack("H*").unpack1("G")
      assert_equal expected, Graphmind.canonical_json(float), hex
      n += 1
    end
    assert_operator n, :>=, 1000
  end

  # $repeat / $array / $concat / $keys / $merge generators of the shrink fixture.
  def expand(value)
    case value
    when Array then value.map { |v| expand(v) }
    when Hash
      if value.length == 1 && value.first[1].is_a?(Array) && value.first[0].start_with?("$")
        key, args = value.first
        case key
        when "$repeat" then return wtf8(expand(args[0]) * args[1])
        when "$array"
          item = expand(args[0])
          return Array.new(args[1], item)
        when "$concat" then return wtf8(args.map { |p| expand(p) }.join)
        when "$merge"
          out = {}
          args.each { |part| out.merge!(expand(part)) }
          return out
        when "$keys"
          item = expand(args[2])
          out = {}
          args[1].times { |i| out["#{args[0]}#{i}"] = item }
          return out
        end
      end
      value.transform_values { |v| expand(v) }
    else value
    end
  end

  # Joined WTF-8 may put a lone high surrogate before a lone low one: they form one pair.
  def wtf8(text)
    return text if text.valid_encoding?

    Graphmind::Native.parse_json(Graphmind::Native.to_json(text))
  end

  def test_shrink_fixture
    fixture = load_vector("reference/shrink-fixture.json")
    cases = fixture["cases"]
    failures = []
    cases.each do |c|
      input = expand(c["input"])
      max = c["maxBytes"] || fixture.dig("constants", "MAX_PAYLOAD_BYTES")
      json, truncated = Graphmind::Native.serialize_payload(input, max, c["type"])
      want = c["expected"]
      failures << "#{c['name']}: truncated #{truncated}" if truncated != want["truncated"]
      if want.key?("json")
        failures << "#{c['name']}: json differs" if json != want["json"]
      elsif json.bytesize != want["jsonBytes"] || Digest::SHA256.hexdigest(json) != want["jsonSha256"]
        failures << "#{c['name']}: #{json.bytesize} bytes, sha differs"
      end
    end
    assert_empty failures
    assert_operator cases.length, :>, 10
  end

  # One redaction case: `in` events through one redactor under `switches` give `out`.
  def redaction_failures(label, c)
    results = Graphmind::Native.redact_events(c["switches"] || {}, c["in"])
    failures = []
    c["out"].each_with_index do |want, i|
      kept, payload = results[i]
      if want["dropped"] == true
        failures << "#{label} ##{i}: expected dropped" if kept
      elsif !kept
        failures << "#{label} ##{i}: dropped"
      elsif Graphmind::Native.to_json(payload) != Graphmind::Native.to_json(want["payload"])
        failures << "#{label} ##{i}: #{Graphmind::Native.to_json(payload)[0, 200]}"
      end
    end
    failures << "#{label}: in/out lengths" if c["in"].length != c["out"].length
    failures
  end

  def test_redaction_fixture
    fixture = load_vector("reference/redaction-fixture.json")
    assert_equal 23, fixture["cases"].length
    failures = fixture["cases"].flat_map { |c| redaction_failures(c["name"], c) }
    assert_empty failures
  end

  def test_differential_redaction
    diff = load_vector("reference/differential.json")
    lone = Graphmind::Native.parse_json(diff["redactionLoneSurrogates"])
    assert_equal 84, diff["redaction"].length
    assert_equal 36, lone.length
    failures = diff["redaction"].each_with_index.flat_map { |c, i| redaction_failures("redaction[#{i}]", c) }
    failures += lone.each_with_index.flat_map { |c, i| redaction_failures("lone[#{i}]", c) }
    assert_empty failures
  end

  def same?(a, b)
    case a
    when Numeric then b.is_a?(Numeric) && a.to_f == b.to_f
    when Array then b.is_a?(Array) && a.length == b.length && a.zip(b).all? { |x, y| same?(x, y) }
    when Hash then b.is_a?(Hash) && a.length == b.length && a.all? { |k, v| b.key?(k) && same?(v, b[k]) }
    else a == b
    end
  end

  def run_config_vectors(file)
    doc = load_vector("ours/#{file}")
    failures = []
    doc["cases"].each do |c|
      config = Graphmind::Native.resolve_config(c["options"], c["env"], c["flavor"])
      c["expected"].each do |key, want|
        got = config[key]
        if key == "warnings"
          ok = want.length == got.length && want.zip(got).all? { |n, line| line.start_with?(n) }
          failures << "#{c['name']}: warnings #{got.inspect}" unless ok
        elsif !config.key?(key) || !same?(want, got)
          failures << "#{c['name']}: #{key} want #{want.inspect} got #{got.inspect}"
        end
      end
    end
    assert_empty failures
    doc["cases"].length
  end

  def test_environment_vectors
    assert_operator run_config_vectors("environment.json"), :>, 10
  end

  def test_kill_switch_vectors
    assert_operator run_config_vectors("kill-switch.json"), :>, 5
  end

  # The same option set through the Ruby spelling (seconds, snake_case) and through the
  # camelCase JSON the vectors use resolve to the same configuration.
  def test_ruby_option_spelling_maps_onto_the_core
    gm = Graphmind::Client.new(**quiet_options(connect_timeout: 0.25, handshake_timeout: 2, retry_interval: 5,
                                               buffer_size: 10, max_buffer_bytes: 4096, pause_timeout: 30,
                                               token_interval: 0.05, warn_interval: 1,
                                               loop_guard: { threshold: 5, "allow_nodes" => ["tool:x"], ignoreKeys: ["t"] },
                                               hide_inputs: true, meta: { team: "a" },
                                               spool_dir: "/tmp/gm-ruby-spool", spool_max_bytes: 1 << 20))
    c = gm.config
    assert_equal "/tmp/gm-ruby-spool", c["spoolDir"]
    assert_equal 1 << 20, c["spoolMaxBytes"]
    assert_equal 250, c["connectTimeoutMs"]
    assert_equal 2000, c["handshakeTimeoutMs"]
    assert_equal 5000, c["retryIntervalMs"]
    assert_equal 10, c["bufferSize"]
    assert_equal 4096, c["maxBufferBytes"]
    assert_equal 30_000, c["pauseTimeoutMs"]
    assert_equal 50, c["tokenIntervalMs"]
    assert_equal 1000, c["warnIntervalMs"]
    assert_equal 5, c.dig("loopGuard", "threshold")
    assert_equal ["tool:x"], c.dig("loopGuard", "allowNodes")
    assert_includes c.dig("loopGuard", "ignoreKeys"), "t"
    assert_equal true, c["hideInputs"]
    assert_equal({ "team" => "a" }, c["meta"])
    assert_equal "test", c["appName"]
    assert_equal "ruby", c.dig("sdk", "name")
    assert_equal 2000, Graphmind::Client.new(**quiet_options).config["bufferSize"]
    gm.dispose
  end
end
