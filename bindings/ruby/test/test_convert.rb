# frozen_string_literal: true

require_relative "test_helper"

# Ruby values -> core values (bindings/ruby/src/convert.rs), seen through the core's
# JSON.stringify-exact writer. The walk reads Ruby's objects directly (type tag, string
# bytes and code range, Hash iteration); these pin what it produces for every kind of
# value, including the odd ones.
class TestConvert < Minitest::Test
  def j(value) = Graphmind::Native.to_json(value)

  def test_scalars_and_integers_of_every_width
    assert_equal "[null,true,false,0,-1]", j([nil, true, false, 0, -1])
    # Fixnum edge, Bignums that fit i64, and beyond i64 (all digits kept).
    assert_equal "[4611686018427387903,4611686018427387904,9223372036854775807,-9223372036854775808]",
                 j([2**62 - 1, 2**62, 2**63 - 1, -(2**63)])
    assert_equal "[9223372036854775808,-18446744073709551616,1267650600228229401496703205376]",
                 j([2**63, -(2**64), 2**100])
    # Flonums and heap Floats; NaN and infinities are written null.
    assert_equal "[1.5,1e+300,0,null,null,1e+21,5e-7]", j([1.5, 1e300, -0.0, Float::NAN, Float::INFINITY, 1e21, 5e-7])
  end

  def test_symbols_and_hash_keys
    assert_equal '["abc","é"]', j([:abc, :"é"])
    assert_equal '{"a":1,"b":2}', j({ a: 1, "b" => 2 })
    # "a" and :a name the same member: the later one wins, in the first one's place.
    assert_equal '{"a":2,"c":3}', j({ "a" => 1, a: 2, "c" => 3 })
    assert_equal '{"1":"x","":2,"[1]":3,"1.5":4}', j({ 1 => "x", nil => 2, [1] => 3, 1.5 => 4 })
  end

  def test_strings_whatever_their_encoding_or_bytes
    assert_equal '["","abc","é","é","😀"]', j(["", "abc", "é", "é".b, "😀"])
    # A lone surrogate (WTF-8 bytes, as the core's parser hands it over) is kept.
    assert_equal '["\ud800","a\ud800b"]', j(["\xED\xA0\x80".b, "a\xED\xA0\x80b".dup.force_encoding("UTF-8")])
    # Text in another encoding is transcoded (issue #30); bytes that are not text (binary,
    # or invalid in their encoding) become U+FFFD.
    assert_equal "[\"\u00e9\",\"\uFFFD\uFFFD\",\"\uFFFD\"]",
                 j(["\xE9".dup.force_encoding("ISO-8859-1"), "\xFF\xFE".b, "\xFF".dup.force_encoding("UTF-8")])
    assert_equal "[\"a\",\"\u65e5\"]", j(["a".encode("UTF-16LE"), "\u65e5".encode("Shift_JIS")])
    assert_equal '["\u0000\u001f"]', j(["\u0000\u001f"])
    long = "x" * 5000
    assert_equal "[\"#{long}\"]", j([long])
  end

  Point = Struct.new(:x, :y)
  class Unreadable
    def inspect = raise("no")
  end

  class Dictish
    def to_h = { "k" => :v }
  end

  def test_other_objects_follow_the_reference_gem
    assert_equal '[{"x":1,"y":2},"TestConvert::Unreadable",{"k":"v"},"Object","1..3"]',
                 j([Point.new(1, 2), Unreadable.new, Dictish.new, Object, 1..3])
  end

  # Detached, a node's input and output cross to the core packed (convert.rs
  # `write_packed`, decoded by the core's worker); anything the packing walk does not take
  # is converted as above. Wherever it packs, the recording must be what the converter
  # makes.
  def test_the_packed_path_records_what_the_converter_records
    d = ->(value) { Graphmind::Native.detached_json(value) }
    specials = (0..0x1f).map(&:chr) + ['"', "\\", "\x7f", "é", "😀", "\u2028", "\ue000"]
    strings = []
    (0..40).each do |length|
      base = (0...length).map { |i| "abcdefghé✓"[i % 10] }.join
      strings << base
      specials.each do |special|
        (0..length).step([1, length / 6].max) { |at| strings << base.dup.insert(at, special) }
      end
    end
    values = strings + strings.first(200).map { |s| { s => s } } + [
      [nil, true, false, 0, -1, 2**62 - 1, -(2**62), 1.5, -0.0, 1.0, 1e21, 5e-324, 1e300],
      { a: 1, "b" => [:sym, { nested: { deep: [1.5, -2, "x" * 40] } }] },
      { "a" => 1, a: 2, "c" => 3 },
      ["", "abc", "é", "é".b, "😀", "a".encode("UTF-16LE").encode("UTF-8")],
      ("x" * 5000)
    ]
    taken = 0
    values.each do |value|
      packed = d.(value)
      next if packed.nil?

      taken += 1
      assert_equal j(value), packed, value.inspect[0, 120]
    end
    assert_operator taken, :>, strings.size
    # What it leaves to the converter: big integers, non-finite floats, bytes that are not
    # UTF-8 text Ruby knows of, other objects, other keys, nesting past 128.
    deep = "bottom"
    200.times { deep = [deep] }
    [2**64, 2**63, Float::NAN, Float::INFINITY, "\xED\xA0\x80".b, "\xFF".b, "é".b, Point.new(1, 2),
     { 1 => "x" }, { nil => 1 }, deep, 1..3].each do |value|
      assert_nil d.(value), value.inspect[0, 80]
    end
  end

  def test_nesting_at_the_depth_budget_becomes_the_cut_marker
    deep = []
    cur = deep
    600.times { cur << (n = []); cur = n }
    text = j(deep)
    levels = Graphmind::Native::MAX_VALUE_DEPTH - 1
    marker = '{"__graphmindTruncated":true,"bytes":0,"preview":"[deeply nested]"}'
    assert_equal "#{'[' * levels}#{marker}#{']' * levels}", text
  end

  # An object's to_h that empties an enclosing Array (and runs the GC) does not change
  # what is read: Arrays are read as they were when the conversion began.
  class ClearsOuter
    def initialize(target) = @target = target

    def to_h
      @target.clear
      @target.concat([9] * 10)
      GC.start
      { "o" => 1 }
    end
  end

  def test_arrays_read_as_they_were_when_ruby_code_changes_them
    outer = []
    outer.concat([[1, { "z" => ClearsOuter.new(outer) }, 2], 3, "s" * 50, [4, [5]]])
    expected = "[[1,{\"z\":{\"o\":1}},2],3,\"#{'s' * 50}\",[4,[5]]]"
    assert_equal expected, j(outer)
    outer.replace([[1, { "z" => ClearsOuter.new(outer) }, 2], 3, "s" * 50, [4, [5]]])
    GC.stress = true
    begin
      assert_equal expected, j(outer)
    ensure
      GC.stress = false
    end
  end

  class AddsKey
    def initialize(target) = @target = target

    def to_h
      @target["new"] = 1
      { "m" => 1 }
    end
  end

  def test_a_hash_changed_while_it_is_read_never_raises
    h = { "a" => 1 }
    h["z"] = AddsKey.new(h)
    # Adding a key during iteration raises inside to_h: the object falls back to inspect.
    assert_match(/\A\{"a":1,"z":"#<TestConvert::AddsKey/, j(h))
  end
end

# A wrapped callable's input (Wrap.describe, read through a plan made once per callable).
class TestDescribe < Minitest::Test
  def describe(callable, *args, **kwargs)
    Graphmind::Wrap.describe(Graphmind::Wrap.parameters_of(callable), args, kwargs)
  end

  def test_arguments_keyed_by_parameter_name
    assert_equal({ "request" => 1 }, describe(proc { |request| request }, 1))
    full = ->(a, b = 1, *rest, c:, **kw) { [a, b, rest, c, kw] }
    assert_equal({ "a" => 1, "b" => 2, "rest" => [3, 4], "c" => 5, "d" => 6 }, describe(full, 1, 2, 3, 4, c: 5, d: 6))
    assert_equal({ "a" => 1, "c" => 5 }, describe(full, 1, c: 5))
    assert_equal({ "a" => 1, "args" => [2, 3] }, describe(->(a, *) { a }, 1, 2, 3))
    assert_equal({ "a" => 1 }, describe(->(a = 0, b = 0) { a + b }, 1))
  end

  def test_extra_positional_arguments_are_capped
    extra = Array.new(40) { |i| i }
    out = describe(->(a) { a }, :x, *extra)
    assert_equal :x, out["a"]
    assert_equal extra.first(Graphmind::Wrap::MAX_ARGS_PREVIEW), out["args"]
    assert_equal({ "args" => [1, 2] }, Graphmind::Wrap.describe(nil, [1, 2], {}))
  end

  def test_the_keys_are_frozen_strings_shared_by_every_call
    callable = proc { |request| request }
    plan = Graphmind::Wrap.plan(Graphmind::Wrap.parameters_of(callable))
    a = Graphmind::Wrap.describe_planned(plan, [1], {})
    b = Graphmind::Wrap.describe_planned(plan, [2], {})
    assert a.keys.first.frozen?
    assert_same a.keys.first, b.keys.first
  end
end
