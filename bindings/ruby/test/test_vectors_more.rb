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
