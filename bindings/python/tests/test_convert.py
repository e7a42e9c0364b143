"""The converter's output, pinned: Python values -> the core's JSON, as recorded.

Each case's expectation is what the converter produced before its exact-type fast path
was added (``_native.to_json``: ``None`` when the value is unreadable and raises
``TypeError``; ``_native._recorded_json``: what a tool call records, a read that raises
degraded to the marker). Outputs longer than 200 characters are pinned by SHA-256.
Subclasses, non-``str`` keys, big ints, NaN, tuples, objects with throwing
``__getattr__`` / ``__repr__``, cycles and the depth limit must all keep their spelling.
"""

from __future__ import annotations

import hashlib
import collections
import dataclasses
import enum


class Tag(str):
    pass


class Level(enum.IntEnum):
    HIGH = 3


class Color(str, enum.Enum):
    RED = "red"


class Ratio(float):
    pass


class Bag(dict):
    pass


class DumpingBag(dict):
    def model_dump(self):
        return {"dumped": True}


class Items(list):
    pass


class Pair(tuple):
    pass


Point = collections.namedtuple("Point", "x y")


class Model:
    def model_dump(self):
        return {"kind": "model", "n": 1}


class HasDict:
    def dict(self):
        return {"via": "dict"}


class HasToDict:
    def to_dict(self):
        return [1, "to_dict"]


class DumpRaises:
    def model_dump(self):
        raise ValueError("no")

    def __repr__(self):
        return "<dump raises>"


class GetattrRaises:
    def __getattr__(self, name):
        raise RuntimeError("getattr " + name)

    def __repr__(self):
        return "<getattr raises>"


class ReprRaises:
    def __repr__(self):
        raise RuntimeError("no repr")


class LongRepr:
    def __repr__(self):
        return "r" * 2500


@dataclasses.dataclass
class Record:
    a: int
    b: str


def nested_list(n):
    v = 0
    for _ in range(n):
        v = [v]
    return v


def nested_dict(n):
    v = 0
    for _ in range(n):
        v = {"k": v}
    return v


def cyclic_list():
    l = []
    l.append(l)
    return l


def cyclic_dict():
    d = {"ok": 1}
    d["self"] = d
    return d


def cases():
    return {
        "none": None,
        "true": True,
        "false": False,
        "zero": 0,
        "neg": -1,
        "i64max": 2**63 - 1,
        "i64max+1": 2**63,
        "i64min": -(2**63),
        "i64min-1": -(2**63) - 1,
        "big": 10**30,
        "bigneg": -(10**30),
        "float": 1.5,
        "negzero": -0.0,
        "e21": 1e21,
        "tiny": 5e-7,
        "nan": float("nan"),
        "inf": float("inf"),
        "-inf": float("-inf"),
        "empty str": "",
        "ascii": "abc",
        "latin": "ünï",
        "astral": "😀 ✓",
        "lone high": "\ud800",
        "lone low inside": "a\udfffb",
        "controls": "\x00\x1f\x7f\"\\",
        "str subclass": Tag("x"),
        "str subclass surrogate": Tag("\ud800"),
        "str enum": Color.RED,
        "bool vs int list": [True, 1, False, 0, 1.0],
        "bool vs int dict": {"t": True, "one": 1, "f": False, "zero": 0},
        "int enum": Level.HIGH,
        "float subclass": Ratio(0.25),
        "empty dict": {},
        "nested empty": {"a": {}, "b": [], "c": ()},
        "ordered": collections.OrderedDict(z=1, a=None),
        "defaultdict": collections.defaultdict(list, {"k": [1]}),
        "dict subclass": Bag(x=True, y=[Bag()]),
        "dict subclass with model_dump": DumpingBag(x=1),
        "int key": {1: "a"},
        "int then str key": {1: "a", "1": "b"},
        "str then int key": {"1": "b", 1: "a"},
        "scalar keys": {None: 0, True: 1, False: 2, 1.5: 3, float("nan"): 4, float("inf"): 5, float("-inf"): 6, -0.0: 7},
        "big int key": {2**70: 1},
        "int enum key": {Level.HIGH: "high"},
        "str subclass key": {Tag("k"): 1, "j": 2},
        "surrogate key": {"\udc00": 1},
        "tuple key": {(1, 2): "t", "kept": 1},
        "object key": {Model(): 1},
        "empty tuple": (),
        "tuple": (1, "a", None),
        "nested tuples": (1, (2, (3, (4,))), [(5, 6), [7, (8,)]]),
        "tuple of dicts": ({"a": 1}, {"b": (2,)}),
        "tuple subclass": Pair((1, 2)),
        "namedtuple": Point(1, 2),
        "list subclass": Items([1.5, False, Items()]),
        "set": {1},
        "frozenset": frozenset({"a"}),
        "bytes": b"ab\xff",
        "bytearray": bytearray(b"x"),
        "model_dump": Model(),
        "dict()": HasDict(),
        "to_dict()": HasToDict(),
        "dump raises": DumpRaises(),
        "getattr raises": GetattrRaises(),
        "getattr raises in dict": {"a": 1, "bad": GetattrRaises(), "c": [GetattrRaises()], "d": (GetattrRaises(),)},
        "repr raises": ReprRaises(),
        "long repr": LongRepr(),
        "dataclass": Record(1, "x"),
        "deep mixed": {"a": [1, {"b": Model(), "c": "d"}], "e": (Model(),)},
        "object at top of dict": {"x": HasDict(), "y": 1},
        "cyclic list": cyclic_list(),
        "cyclic dict": cyclic_dict(),
        "cycle in a field": {"ok": 1, "cyc": cyclic_list(), "cycd": cyclic_dict(), "t": (cyclic_list(),)},
        "list 512 deep": nested_list(512),
        "list 513 deep": nested_list(513),
        "dict 512 deep": nested_dict(512),
        "dict 513 deep": nested_dict(513),
        "field 512 deep": {"x": nested_list(511), "y": 1},
        "field 513 deep": {"x": nested_list(512), "y": 1},
        "tuple 513 deep": {"x": (nested_list(512),), "y": 1},
        "huge int": 10**5000,
        "huge int in dict": {"h": 10**5000, "k": 1},
    }


EXPECTED = {
    'none': ('null', 'null'),
    'true': ('true', 'true'),
    'false': ('false', 'false'),
    'zero': ('0', '0'),
    'neg': ('-1', '-1'),
    'i64max': ('9223372036854775807', '9223372036854775807'),
    'i64max+1': ('9223372036854775808', '9223372036854775808'),
    'i64min': ('-9223372036854775808', '-9223372036854775808'),
    'i64min-1': ('-9223372036854775809', '-9223372036854775809'),
    'big': ('1000000000000000000000000000000', '1000000000000000000000000000000'),
    'bigneg': ('-1000000000000000000000000000000', '-1000000000000000000000000000000'),
    'float': ('1.5', '1.5'),
    'negzero': ('0', '0'),
    'e21': ('1e+21', '1e+21'),
    'tiny': ('5e-7', '5e-7'),
    'nan': ('null', 'null'),
    'inf': ('null', 'null'),
    '-inf': ('null', 'null'),
    'empty str': ('""', '""'),
    'ascii': ('"abc"', '"abc"'),
    'latin': ('"ünï"', '"ünï"'),
    'astral': ('"😀 ✓"', '"😀 ✓"'),
    'lone high': ('"\\ud800"', '"\\ud800"'),
    'lone low inside': ('"a\\udfffb"', '"a\\udfffb"'),
    'controls': ('"\\u0000\\u001f\x7f\\"\\\\"', '"\\u0000\\u001f\x7f\\"\\\\"'),
    'str subclass': ('"x"', '"x"'),
    'str subclass surrogate': ('"\\ud800"', '"\\ud800"'),
    'str enum': ('"red"', '"red"'),
    'bool vs int list': ('[true,1,false,0,1]', '[true,1,false,0,1]'),
    'bool vs int dict': ('{"t":true,"one":1,"f":false,"zero":0}', '{"t":true,"one":1,"f":false,"zero":0}'),
    'int enum': ('3', '3'),
    'float subclass': ('0.25', '0.25'),
    'empty dict': ('{}', '{}'),
    'nested empty': ('{"a":{},"b":[],"c":[]}', '{"a":{},"b":[],"c":[]}'),
    'ordered': ('{"z":1,"a":null}', '{"z":1,"a":null}'),
    'defaultdict': ('{"k":[1]}', '{"k":[1]}'),
    'dict subclass': ('{"x":true,"y":[{}]}', '{"x":true,"y":[{}]}'),
    'dict subclass with model_dump': ('{"x":1}', '{"x":1}'),
    'int key': ('{"1":"a"}', '{"1":"a"}'),
    'int then str key': ('{"1":"a","1":"b"}', '{"1":"a","1":"b"}'),
    'str then int key': ('{"1":"a"}', '{"1":"a"}'),
    'scalar keys': ('{"null":0,"true":1,"false":7,"1.5":3,"NaN":4,"Infinity":5,"-Infinity":6}', '{"null":0,"true":1,"false":7,"1.5":3,"NaN":4,"Infinity":5,"-Infinity":6}'),
    'big int key': ('{"1180591620717411303424":1}', '{"1180591620717411303424":1}'),
    'int enum key': ('{"3":"high"}', '{"3":"high"}'),
    'str subclass key': ('{"k":1,"j":2}', '{"k":1,"j":2}'),
    'surrogate key': ('{"\\udc00":1}', '{"\\udc00":1}'),
    'tuple key': (None, '{"kept":1}'),
    'object key': (None, '{}'),
    'empty tuple': ('[]', '[]'),
    'tuple': ('[1,"a",null]', '[1,"a",null]'),
    'nested tuples': ('[1,[2,[3,[4]]],[[5,6],[7,[8]]]]', '[1,[2,[3,[4]]],[[5,6],[7,[8]]]]'),
    'tuple of dicts': ('[{"a":1},{"b":[2]}]', '[{"a":1},{"b":[2]}]'),
    'tuple subclass': ('[1,2]', '[1,2]'),
    'namedtuple': ('[1,2]', '[1,2]'),
    'list subclass': ('[1.5,false,[]]', '[1.5,false,[]]'),
    'set': ('[1]', '[1]'),
    'frozenset': ('["a"]', '["a"]'),
    'bytes': ('"ab�"', '"ab�"'),
    'bytearray': ('"x"', '"x"'),
    'model_dump': ('{"kind":"model","n":1}', '{"kind":"model","n":1}'),
    'dict()': ('{"via":"dict"}', '{"via":"dict"}'),
    'to_dict()': ('[1,"to_dict"]', '[1,"to_dict"]'),
    'dump raises': ('"<dump raises>"', '"<dump raises>"'),
    'getattr raises': (None, '{"__graphmindTruncated":true,"bytes":0,"preview":"[unserializable value]"}'),
    'getattr raises in dict': (None, '{"a":1,"bad":{"__graphmindTruncated":true,"bytes":0,"preview":"[unserializable value]"},"c":[],"d":[]}'),
    'repr raises': ('"<unserializable ReprRaises>"', '"<unserializable ReprRaises>"'),
    'long repr': ('sha256:bccfcffef7e3d000e3e729ce7d62bbc694acc70ce43307edd9642f2ea7d9744d', 'sha256:bccfcffef7e3d000e3e729ce7d62bbc694acc70ce43307edd9642f2ea7d9744d'),
    'dataclass': ('"Record(a=1, b=\'x\')"', '"Record(a=1, b=\'x\')"'),
    'deep mixed': ('{"a":[1,{"b":{"kind":"model","n":1},"c":"d"}],"e":[{"kind":"model","n":1}]}', '{"a":[1,{"b":{"kind":"model","n":1},"c":"d"}],"e":[{"kind":"model","n":1}]}'),
    'object at top of dict': ('{"x":{"via":"dict"},"y":1}', '{"x":{"via":"dict"},"y":1}'),
    'cyclic list': (None, '{"__graphmindTruncated":true,"bytes":0,"preview":"[unserializable value]"}'),
    'cyclic dict': (None, '{"ok":1,"self":{"__graphmindTruncated":true,"bytes":0,"preview":"[unserializable value]"}}'),
    'cycle in a field': (None, '{"ok":1,"cyc":[],"cycd":{"__graphmindTruncated":true,"bytes":0,"preview":"[unserializable value]"},"t":[]}'),
    'list 512 deep': ('sha256:8ffc0a1c6c684d5a33431fd2d1cd8295423335157134c42b1ee0be9ab57b36eb', 'sha256:8ffc0a1c6c684d5a33431fd2d1cd8295423335157134c42b1ee0be9ab57b36eb'),
    'list 513 deep': (None, '{"__graphmindTruncated":true,"bytes":0,"preview":"[unserializable value]"}'),
    'dict 512 deep': ('sha256:ba166cb5bcb8b7677c049edefa286bdee29d534f6ec320e4cb4a92dcdb097ded', 'sha256:ba166cb5bcb8b7677c049edefa286bdee29d534f6ec320e4cb4a92dcdb097ded'),
    'dict 513 deep': (None, '{"k":{"__graphmindTruncated":true,"bytes":0,"preview":"[unserializable value]"}}'),
    'field 512 deep': ('sha256:83c4969c65f2398108f7228abca63688893d33898bc6de1cb96e70bf548227c1', 'sha256:83c4969c65f2398108f7228abca63688893d33898bc6de1cb96e70bf548227c1'),
    'field 513 deep': (None, '{"x":[],"y":1}'),
    'tuple 513 deep': (None, '{"x":[],"y":1}'),
    'huge int': (None, '{"__graphmindTruncated":true,"bytes":0,"preview":"[unserializable value]"}'),
    'huge int in dict': (None, '{"h":{"__graphmindTruncated":true,"bytes":0,"preview":"[unserializable value]"},"k":1}'),
}


def _pinned(text: str | None) -> str | None:
    if text is not None and len(text) > 200:
        return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return text


def test_the_converter_writes_every_tricky_value_as_before():
    from graphmind import _native

    got = {}
    for name, value in cases().items():
        try:
            strict = _native.to_json(value)
        except TypeError:
            strict = None
        got[name] = (_pinned(strict), _pinned(_native._recorded_json(value)))
    assert set(got) == set(EXPECTED)
    for name in EXPECTED:
        assert got[name] == EXPECTED[name], name


def test_the_detached_text_path_records_what_the_converter_records():
    # Detached, a value made only of JSON types crosses as JSON text written in one
    # borrowed pass; everything else is converted. Wherever the text path writes, the core
    # must read back what the converter would have built: every special character at many
    # positions of strings up to 40 characters (the writer's eight-byte scan and its short
    # copies), as values and as keys, and every pinned tricky case.
    import json

    from graphmind import _native

    specials = [chr(c) for c in range(0x20)] + ['"', "\\", "\x7f", "é", "😀", "\ud7ff", "\u2028", "\ue000"]
    strings = []
    for length in range(0, 41):
        base = "".join("abcdefghé✓"[i % 10] for i in range(length))
        strings.append(base)
        for special in specials:
            for at in range(0, length + 1, max(1, length // 6)):
                strings.append(base[:at] + special + base[at:])
    taken = 0
    for value in strings + [{s: s} for s in strings[:200]] + list(cases().values()):
        text = _native._detached_json(value)
        if text is not None:
            taken += 1
            assert text == _native._recorded_json(value), repr(value)[:120]
    assert taken > len(strings)
    assert _native._detached_json("x\ud800") is None  # a lone surrogate: converted
    assert _native._detached_json(2**70) is None and _native._detached_json(float("nan")) is None
    for f in (1.0, -0.0, 1e21, 5e-324, 2.0**60, -3.14159):
        assert _native._detached_json(f) == _native._recorded_json(f)
    assert json.loads(_native._detached_json({"k": [1, 2.5, None, True]})) == {"k": [1, 2.5, None, True]}


def test_the_converter_is_stable_across_repeated_reads():
    # The fast path reads borrowed references: converting the same objects many times
    # must neither leak nor free them (reference counts unchanged) and give one answer.
    import sys

    from graphmind import _native

    value = {"a": [1, 2.5, "x", None, True, {"b": ("c", 2**70)}], "d": Model(), "e": "ü"}
    before = [sys.getrefcount(v) for v in (value, value["a"], value["a"][5], value["e"])]
    first = _native._recorded_json(value)
    for _ in range(1000):
        assert _native._recorded_json(value) == first
    after = [sys.getrefcount(v) for v in (value, value["a"], value["a"][5], value["e"])]
    assert before == after


class Grows:
    """``model_dump()`` adds a key to the dict being read (only the first time)."""

    def __init__(self, d):
        self.d = d

    def model_dump(self):
        self.d["extra"] = len(self.d)
        return {"grown": True}


def _growing():
    d: dict = {"a": 1}
    d["g"] = Grows(d)
    return d


def test_positional_arguments_record_what_the_bound_dict_records():
    # A call whose positional arguments fill the signature builds its input field by
    # field in the module (no dict): it must record what converting {name: arg} records,
    # including a field that is unreadable the first time and readable the second.
    from graphmind import _native

    names = list(cases())
    for i, name in enumerate(names):
        other = names[(i + 7) % len(names)]
        a, b = cases(), cases()
        expected = _native._recorded_json({"x": a[name], "y": a[other]})
        assert _native._recorded_args_json(["x", "y"], (b[name], b[other])) == expected, (name, other)
    assert _native._recorded_args_json([], ()) == _native._recorded_json({}) == "{}"
    expected = _native._recorded_json({"p": _growing(), "q": [1]})
    assert _native._recorded_args_json(["p", "q"], (_growing(), [1])) == expected
    assert '"a":1' in expected and '"extra":' in expected


def test_calls_bound_in_the_module_record_what_describe_records():
    # enter_call binds a signature of named parameters itself (positional, keyword and
    # mixed calls, defaults filled in); it must record what converting describe()'s dict
    # records, and hand every call it does not bind back to describe().
    from graphmind import _native
    from graphmind.wrap import _Arguments

    def f(a, b=2, c=(3, Model()), *, d=None, e="é"):
        return a

    def g():
        return None

    def h(a, *rest, **more):
        return a

    calls = [
        (f, (1,), {}),
        (f, (1, 5), {}),
        (f, (1, 5, [6]), {}),
        (f, (1, 5, 6, 7), {}),
        (f, (1, 5, 6, 7, 8), {}),
        (f, (1, 5, 6, 7, 8, 9), {}),
        (f, (), {"a": 1}),
        (f, (), {"e": "x", "a": {"k": Model()}}),
        (f, (1,), {"d": GetattrRaises()}),
        (f, (1,), {"c": cyclic_list(), "d": {"ok": 1}}),
        (f, (), {}),
        (f, (1,), {"a": 2}),
        (f, (1,), {"zzz": 2}),
        (f, (_growing(),), {"b": 1}),
        (g, (), {}),
        (g, (1,), {}),
        (g, (), {"x": 1}),
        (h, (1, 2), {"k": 3}),
    ]
    bound_by_module = 0
    for fn, args, kwargs in calls:
        spec = _Arguments(fn)
        node = _native.NodeSpec("tool", fn.__name__, None, None, spec.names if spec.plain else None)
        got = node._recorded_call_json(args, dict(kwargs), spec.defaults)
        described, bound = spec.describe(args, dict(kwargs))
        if got is None:
            continue
        bound_by_module += 1
        assert bound, (fn.__name__, args, kwargs)
        # Fresh objects for the side-effecting case: each path reads its own.
        if args and isinstance(args[0], dict) and "g" in args[0]:
            described, _ = spec.describe((_growing(),), dict(kwargs))
        assert got == _native._recorded_json(described), (fn.__name__, args, kwargs)
    assert bound_by_module == 12
