# frozen_string_literal: true

require_relative "test_helper"

# The conformance vectors of the core's pure rules the wrappers rely on — LLM capture,
# edit input, smart breakpoints — through the gem: every fixture value crosses the
# Ruby -> core conversion, every answer the core -> Ruby one. Each file's every case runs.
class TestVectorsMore < Minitest::Test
  N = Graphmind::Native

  def text(value) = N.to_json(value)

  # assert_equal that also takes an expected nil.
  def same(want, got, label)
    want.nil? ? assert_nil(got, label) : assert_equal(want, got, label)
  end

  # Fails unless every case of a non-empty section ran.
  def each_case(cases, label)
    assert_kind_of Array, cases, label
    refute_empty cases, label
    cases.each_with_index { |c, i| yield c, "#{label} #{c.is_a?(Hash) ? (c['name'] || i) : i}" }
    cases.length
  end

  def test_llm_fixture
    f = load_vector("reference/llm-fixture.json")
    n = each_case(f["finishReasons"], "finishReasons") do |(raw, has_calls, want), label|
      same want, N.finish_reason(raw, false, has_calls), label
    end
    n += each_case(f["toolCalls"], "toolCalls") do |c, label|
      i = c["in"]
      mask = (i.key?("id") ? 0 : 1) | (i.key?("name") ? 0 : 2) | (i.key?("args") ? 0 : 4)
      assert_equal text(c["out"]), text(N.tool_call(i["id"], i["name"], i["args"], mask)), label
    end
    n += each_case(f["schemaHashes"], "schemaHashes") do |c, label|
      assert_equal c["hash"], N.schema_hash(c["in"]), label
    end
    n += each_case(f["toolDefinitions"], "toolDefinitions") do |c, label|
      out = N.sanitize_tool_definition(c["in"])
      assert_equal text(c["out"]), text(out), label
      assert_equal c["hash"], N.schema_hash(out), label
    end
    n += each_case(f["usage"], "usage") do |c, label|
      assert_equal text(c["out"]), text(N.provider_usage(c["provider"], c["raw"])), label
    end
    assert_equal f["samplingParams"], N.sampling_param_keys
    assert_equal 107, n
  end

  # Every model API the core has a codec for (the fixture's provider names).
  APIS = %w[openai-chat openai-responses anthropic langchain ruby_llm ai-sdk].freeze

  # A complete answer of `provider` reporting `raw` as its usage.
  def reply_with_usage(provider, raw)
    case provider
    when "ruby_llm" then { "content" => "", "tokens" => raw }
    when "langchain" then { "generations" => [[{ "text" => "", "message" => { "usage_metadata" => raw } }]] }
    else { { "openai-chat" => "choices", "openai-responses" => "output" }.fetch(provider, "content") => [], "usage" => raw }
    end
  end

  # The fixture's cases carried inside provider answers and read back through the codecs'
  # decode path (`Native.llm_decode`), as core/tests/codec_fixture.rs does.
  def test_llm_fixture_through_the_codecs
    f = load_vector("reference/llm-fixture.json")
    n = each_case(f["usage"], "usage") do |c, label|
      _, usage = N.llm_decode(c["provider"], reply_with_usage(c["provider"], c["raw"]))
      assert_equal text(c["out"]), text(usage), "#{c['provider']} #{label}"
    end
    n += each_case(f["toolCalls"], "toolCalls") do |c, label|
      i = c["in"]
      function = { "name" => i["name"], "arguments" => i["args"] }.select { |k, _| i.key?(k == "arguments" ? "args" : k) }
      block = { "type" => "tool_use", "name" => i["name"], "input" => i["args"] }.select { |k, _| k == "type" || i.key?(k == "input" ? "args" : k) }
      call = { "function" => function }
      call["id"] = block["id"] = i["id"] if i.key?("id")
      chat = { "choices" => [{ "message" => { "content" => nil, "tool_calls" => [call] } }] }
      [["openai-chat", chat], ["anthropic", { "content" => [block] }]].each do |api, reply|
        got = (N.llm_decode(api, reply)[0]["toolCalls"] || [nil])[0]
        assert_equal text(c["out"]), text(got), "#{api} #{label}"
      end
    end
    n += each_case(f["finishReasons"], "finishReasons") do |(raw, has_calls, want), label|
      calls = has_calls ? [{ "id" => "c", "function" => { "name" => "f", "arguments" => "{}" } }] : []
      choice = { "message" => { "content" => "", "tool_calls" => calls }, "finish_reason" => raw }
      same want, N.llm_decode("openai-chat", { "choices" => [choice] })[0]["finishReason"], label
    end
    n += each_case(f["samplingParams"], "samplingParams") do |key, label|
      APIS.each do |api|
        recorded = N.llm_request_input(api, { "model" => "m", key => 1, "api_key" => "sk-secret" })
        assert_equal 1, recorded[key], "#{api} #{label}"
        refute recorded.key?("api_key"), "#{api} #{label}"
      end
    end
    assert_equal 132, n
  end

  def test_edit_input_fixture
    f = load_vector("reference/edit-input-fixture.json")
    assert_equal f["maxRefusalMessage"], N::MAX_REFUSAL_MESSAGE
    assert_equal f["placeholder"], N::REDACTED
    n = each_case(f["proposedValue"], "proposedValue") do |c, label|
      same c["refusal"], N.proposed_value_refusal(c["value"]), label
    end
    n += each_case(f["prototypeKeys"], "prototypeKeys") do |c, label|
      assert_equal c["refused"], N.prototype_key_refused?(c["value"]), label
    end
    n += each_case(f["normalizeValidation"], "normalizeValidation") do |c, label|
      assert_equal text(c["expected"]), text(N.normalize_validation(c["result"], !c.key?("result"))), label
    end
    n += each_case(f["sanitizeShortText"], "sanitizeShortText") do |c, label|
      assert_equal text(c["expected"]), text(N.sanitize_short_text(c["input"], !c.key?("input"))), label
    end
    n += each_case(f["mergeToolInput"], "mergeToolInput") do |c, label|
      mask = (c.key?("live") ? 0 : 1) | (c.key?("proposed") ? 0 : 2)
      merged, refusal = N.merge_edited_input(c["live"], c["proposed"], c["inputHidden"] == true, mask)
      want = c["expected"]
      if want["ok"]
        assert_nil refusal, label
        assert_equal text(want["value"]), text(merged), label
      else
        assert_equal want["code"], refusal, label
      end
    end
    assert_equal 124, n
  end

  def test_loop_kinds_smart_breakpoint_rules
    f = load_vector("reference/loop-kinds-fixture.json")
    n = each_case(f["errorResult"], "errorResult") do |c, label|
      same c["shape"], N.error_result_shape(c["result"]), label
    end
    n += each_case(f["truncated"], "truncated") do |c, label|
      assert_equal text(c["fires"]), text(N.truncated_tool_call(c["result"])), label
    end
    n += each_case(f["errorText"], "errorText") do |c, label|
      assert_equal c["key"], N.error_text_key(c["text"]), label
    end
    n += each_case(f["breakOnEnv"], "breakOnEnv") do |c, label|
      assert_equal c["on"], N.parse_break_on(c["raw"]), label
    end
    assert_equal 55, n
  end
end

# The loop guard's sequences: one run, each start recorded then its before-gate consulted.
class TestLoopGuardSequences < Minitest::Test
  N = Graphmind::Native

  def guard_for(seq, detect = seq["detect"])
    N::LoopGuard.new(seq["threshold"], seq["allowNodes"], seq["ignoreKeys"], seq["kinds"], detect)
  end

  # The reference's loop-kinds fixture runs with the opt-in detectors on.
  ALL_DETECTORS = %w[cycle error-repeat].freeze

  def test_loop_guard_fixture_sequences
    f = load_vector("reference/loop-guard-fixture.json")
    refute_empty f["sequences"]
    f["sequences"].each do |seq|
      guard = guard_for(seq)
      trips = []
      seq["calls"].each_with_index do |call, i|
        label = "#{seq['name']} call #{i}"
        fp = guard.started("run-1", call["nodeId"], call["kind"], call["name"], nil, call["input"],
                           call["inputAbsent"] == true || !call.key?("input"), call["unreadable"] == true, i)
        want = seq["fingerprints"][i]
        want.nil? ? assert_nil(fp, label) : assert_equal(want, fp, label)
        hold = guard.consult_before("run-1", call["kind"], call["nodeId"], call["name"])
        next unless hold

        assert_equal "repeat", hold["kind"], label
        assert_equal i, hold["lastSeq"], label
        assert_equal seq["fingerprints"][i], hold["fingerprint"], label
        trips << { "at" => i, "repeats" => hold["repeats"], "firstAt" => hold["firstSeq"] }
        assert_nil guard.consult_before("run-1", call["kind"], call["nodeId"], call["name"]), "#{label} retry"
      end
      assert_equal seq["trips"], trips, seq["name"]
      first = trips.first
      [[seq["tripsAt"], first && first["at"]], [seq["repeatsAtTrip"], first && first["repeats"]]].each do |want, got|
        want.nil? ? assert_nil(got, seq["name"]) : assert_equal(want, got, seq["name"])
      end
    end
    assert_equal 32, f["sequences"].length
  end

  def test_loop_kinds_fixture_sequences
    f = load_vector("reference/loop-kinds-fixture.json")
    refute_empty f["sequences"]
    f["sequences"].each do |seq|
      assert_holds(seq, guard_for(seq, ALL_DETECTORS))
    end
    assert_equal 41, f["sequences"].length
  end

  # Our loop-hold defaults and opt-ins: alternating calls and one error with other arguments
  # are held only with their detector named (tests/vectors/ours/loop-detect.json).
  def test_our_loop_detect_vectors
    cases = load_vector("ours/loop-detect.json")["cases"]
    assert_equal 10, cases.length
    cases.each { |c| assert_holds(c, guard_for(c)) }
  end

  def test_an_unknown_detector_is_refused
    assert_raises(ArgumentError) { N::LoopGuard.new(nil, nil, nil, nil, ["loops"]) }
  end

  # Runs the loop-kinds events of seq (attached, a retry checked at each hold) against its holds.
  def assert_holds(seq, guard)
    holds = []
    seq["events"].each_with_index do |e, i|
      case e["event"]
      when "start"
        guard.started("run", e["nodeId"], e["kind"], e["name"], e["instanceId"], e["input"],
                      e["inputAbsent"] == true || !e.key?("input"), e["unreadable"] == true, i)
        hold = guard.consult_before("run", e["kind"], e["nodeId"], e["name"])
        next unless hold

        assert_equal i, hold["lastSeq"], "#{seq['name']} #{i}"
        assert_equal 32, hold["fingerprint"].length
        h = { "at" => i, "kind" => hold["kind"], "repeats" => hold["repeats"], "firstAt" => hold["firstSeq"] }
        h.merge!("period" => hold["period"], "laps" => hold["laps"]) if hold.key?("period")
        holds << h
        assert_nil guard.consult_before("run", e["kind"], e["nodeId"], e["name"]), "#{seq['name']} retry at #{i}"
      when "error" then guard.errored("run", e["nodeId"], e["instanceId"], e["name"], e["message"])
      when "finish" then guard.finished("run", e["nodeId"], e["instanceId"], e["status"], e["output"], !e.key?("output"))
      else flunk "unknown event #{e['event']}"
      end
    end
    want = seq["holds"].map do |h|
      o = { "at" => h["at"], "kind" => h["kind"], "repeats" => h["repeats"], "firstAt" => h["firstAt"] }
      o.merge!("period" => h["period"], "laps" => h["laps"]) if h.key?("period")
      o
    end
    assert_equal want, holds, seq["name"]
  end
end

# JSONTestSuite's test_parsing through the gem's parser entry point, and the loop guards'
# documented defaults against an unconfigured configuration.
class TestParsingAndDefaults < Minitest::Test
  N = Graphmind::Native

  def test_jsontestsuite
    dir = File.join(VECTORS, "jsontestsuite/test_parsing")
    counts = Hash.new(0)
    Dir.children(dir).select { |n| n.end_with?(".json") }.sort.each do |name|
      bytes = File.binread(File.join(dir, name))
      kind = name[0, 2]
      counts[kind] += 1
      case kind
      when "y_"
        value = N.parse_json(bytes)
        # Through Ruby and back: the same document.
        text = N.to_json(value)
        assert_equal text, N.to_json(N.parse_json(text)), name
      when "n_"
        assert_raises(ArgumentError, name) { N.parse_json(bytes) }
      else
        begin
          N.parse_json(bytes)
        rescue ArgumentError
          nil # either verdict is allowed; never a crash
        end
      end
    end
    assert_equal({ "i_" => 35, "n_" => 188, "y_" => 95 }, counts)
  end

  def test_loop_guard_defaults_are_an_unconfigured_sessions
    guard = N.resolve_config({}, {}, nil)["loopGuard"]
    %w[reference/loop-guard-fixture.json reference/loop-kinds-fixture.json].each do |file|
      defaults = load_vector(file)["defaults"]
      %w[threshold mode kinds ignoreKeys].each do |key|
        assert_equal defaults[key], guard[key], "#{file} defaults.#{key}"
      end
    end
  end
end
