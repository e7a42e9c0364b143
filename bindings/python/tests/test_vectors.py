"""Every conformance vector in tests/vectors, through the binding: each value crosses
Python -> core -> Python, so the conversions are checked along with the rules."""

from __future__ import annotations

import hashlib
import json

import pytest

import graphmind as gm
from graphmind import _native
from conftest import VECTORS, load_vectors

to_json = _native.to_json


def _text(v):
    return to_json(v)


# -- canonical JSON and fingerprints -------------------------------------------------


def test_loop_guard_canonical_and_fingerprints():
    f = load_vectors("reference/loop-guard-fixture.json")
    n = 0
    for case in f["canonical"]:
        keys = case.get("ignoreKeys")
        inp = None if case.get("inputAbsent") else case.get("input")
        assert _native.canonical_call(case["nodeId"], inp, keys) == case["canonical"], case
        assert _native.fingerprint(case["nodeId"], inp, keys) == case["fingerprint"], case
        n += 1
    assert n == len(f["canonical"]) > 0


def test_differential_canonical():
    f = load_vectors("reference/differential.json")
    cases = list(f["canonical"])
    for extra in ("canonicalLoneSurrogates",):
        if isinstance(f.get(extra), str):
            cases += _native.parse_json(f[extra])
        elif isinstance(f.get(extra), list):
            cases += f[extra]
    for case in cases:
        keys = case.get("ignoreKeys")
        inp = None if case.get("inputAbsent") else case.get("input")
        assert _native.canonical_call(case["nodeId"], inp, keys) == case["canonical"]
        assert _native.fingerprint(case["nodeId"], inp, keys) == case["fingerprint"]
    assert len(cases) > 354


def test_public_fingerprint_matches_the_canonical_sha256():
    import graphmind as gm

    v = {"b": [1.0, "x\ud800"], "a": {"_meta": 1, "z": 1e21}}
    text = gm.canonical_json(v)
    assert text == '{"a":{"z":1e+21},"b":[1,"x\\ud800"]}'
    call = _native.canonical_call("tool:t", v)
    assert gm.fingerprint("tool:t", v) == hashlib.sha256(call.encode("utf-8", "surrogatepass")).hexdigest()[:32]


JCS = ["arrays", "french", "structures", "unicode", "values", "weird"]


@pytest.mark.parametrize("name", JCS)
def test_jcs(name):
    value = _native.parse_json((VECTORS / "jcs" / "input" / f"{name}.json").read_text(encoding="utf-8"))
    want = (VECTORS / "jcs" / "output" / f"{name}.json").read_text(encoding="utf-8")
    assert _native.canonical_json(value, []) == want


def test_jcs_numbers():
    lines = (VECTORS / "jcs" / "es6-numbers-1k.txt").read_text().split("\n")
    n = 0
    for line in lines:
        if not line:
            continue
        bits, want = line.split(",")
        import struct

        x = struct.unpack(">d", bytes.fromhex(bits.rjust(16, "0")))[0]
        assert _native.canonical_json(x) == want, line
        n += 1
    assert n > 900


# -- shrink -------------------------------------------------------------------------


def _expand(v):
    if isinstance(v, dict):
        if len(v) == 1:
            (k, a), = v.items()
            if k == "$repeat":
                return _expand(a[0]) * a[1]
            if k == "$array":
                return [_expand(a[0]) for _ in range(a[1])]
            if k == "$concat":
                return "".join(_expand(p) for p in a)
            if k == "$keys":
                return {f"{a[0]}{i}": _expand(a[2]) for i in range(a[1])}
            if k == "$merge":
                out = {}
                for o in a:
                    out.update(_expand(o))
                return out
        return {k: _expand(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_expand(x) for x in v]
    return v


def test_shrink_fixture():
    f = load_vectors("reference/shrink-fixture.json")
    consts = _native.shrink_constants()
    for k, v in f["constants"].items():
        assert consts[k] == v, k
    for case in f["cases"]:
        payload = _expand(case["input"])
        text, truncated, _ = _native.serialize_payload(
            payload, case.get("maxBytes") or consts["MAX_PAYLOAD_BYTES"], case.get("type")
        )
        want = case["expected"]
        assert truncated == want["truncated"], case["name"]
        if "json" in want:
            assert text == want["json"], case["name"]
        else:
            data = text.encode("utf-8", "surrogatepass")
            assert len(data) == want["jsonBytes"], case["name"]
            assert hashlib.sha256(data).hexdigest() == want["jsonSha256"], case["name"]
    assert len(f["cases"]) == 49


# -- redaction -------------------------------------------------------------------------


def _redaction_cases(cases):
    n = 0
    for case in cases:
        got = _native.redact_events(case.get("switches") or {}, case["in"])
        for i, (g, want) in enumerate(zip(got, case["out"])):
            if want.get("dropped"):
                assert g is None, (case.get("name"), i)
            else:
                assert g is not None and _text(g) == _text(want["payload"]), (case.get("name"), i)
        n += 1
    return n


def test_redaction_fixture():
    f = load_vectors("reference/redaction-fixture.json")
    assert _redaction_cases(f["cases"]) == 23


def test_differential_redaction():
    f = load_vectors("reference/differential.json")
    assert _redaction_cases(f["redaction"]) == 84


# -- configuration and the kill switch ---------------------------------------------------


def _config_cases(path):
    f = load_vectors(path)
    for case in f["cases"]:
        got = _native.resolve_config(case.get("options") or {}, case.get("env") or {}, case.get("flavor", "python"))
        want = case["expected"]
        for key, value in want.items():
            if key == "warnings":
                assert len(got["warnings"]) == len(value), (case["name"], got["warnings"])
                for line, name in zip(got["warnings"], value):
                    assert line.startswith(name), (case["name"], line, name)
            elif isinstance(value, dict):
                for k, v in value.items():
                    assert got[key][k] == v, (case["name"], key, k)
            else:
                assert got[key] == value, (case["name"], key, got.get(key))
    return len(f["cases"])


def test_environment_vectors():
    assert _config_cases("ours/environment.json") == 59


def test_kill_switch_vectors():
    assert _config_cases("ours/kill-switch.json") == 43


# -- LLM capture -------------------------------------------------------------------------


def test_llm_fixture():
    f = load_vectors("reference/llm-fixture.json")
    for raw, has_tools, want in f["finishReasons"]:
        assert _native.finish_reason(raw, has_tools) == want, raw
    for case in f["toolCalls"]:
        i = case["in"]
        assert _text(_native.tool_call(i.get("id"), i.get("name"), i.get("args"))) == _text(case["out"]), i
    for case in f["schemaHashes"]:
        assert _native.schema_hash(case["in"]) == case["hash"]
    for case in f["toolDefinitions"]:
        out = _native.sanitize_tool_definition(case["in"])
        assert _text(out) == _text(case["out"]), case.get("name")
        assert _native.schema_hash(out) == case["hash"]
    for case in f["usage"]:
        got = _native.provider_usage(case["provider"], case["raw"])
        assert _text(got) == _text(case["out"]), case.get("name")
    assert _native.sampling_param_keys() == f["samplingParams"]


#: Every model API the core has a codec for (the fixture's provider names).
APIS = ["openai-chat", "openai-responses", "anthropic", "langchain", "ruby_llm", "ai-sdk"]


def _reply_with_usage(provider, raw):
    """A complete answer of ``provider`` reporting ``raw`` as its usage."""
    if provider == "ruby_llm":
        return {"content": "", "tokens": raw}
    if provider == "langchain":
        return {"generations": [[{"text": "", "message": {"usage_metadata": raw}}]]}
    body = {"openai-chat": "choices", "openai-responses": "output"}.get(provider, "content")
    return {body: [], "usage": raw}


def test_llm_fixture_through_the_codecs():
    """The fixture's cases carried inside provider answers and read back through the
    codecs' decode path (``_native.llm_decode``), as ``core/tests/codec_fixture.rs`` does."""
    f = load_vectors("reference/llm-fixture.json")
    n = 0
    for case in f["usage"]:
        _, usage = _native.llm_decode(case["provider"], _reply_with_usage(case["provider"], case["raw"]))
        assert _text(usage) == _text(case["out"]), (case["provider"], case.get("name"))
        n += 1
    for case in f["toolCalls"]:
        i = case["in"]
        function = {k2: i[k] for k, k2 in (("name", "name"), ("args", "arguments")) if k in i}
        block = {"type": "tool_use", **{k2: i[k] for k, k2 in (("name", "name"), ("args", "input")) if k in i}}
        call = {"function": function}
        if "id" in i:
            call["id"] = block["id"] = i["id"]
        chat = {"choices": [{"message": {"content": None, "tool_calls": [call]}}]}
        for api, reply in (("openai-chat", chat), ("anthropic", {"content": [block]})):
            calls = _native.llm_decode(api, reply)[0].get("toolCalls") or [None]
            assert _text(calls[0]) == _text(case["out"]), (api, i)
        n += 1
    for raw, has_calls, want in f["finishReasons"]:
        calls = [{"id": "c", "function": {"name": "f", "arguments": "{}"}}] if has_calls else []
        choice = {"message": {"content": "", "tool_calls": calls}, "finish_reason": raw}
        assert _native.llm_decode("openai-chat", {"choices": [choice]})[0].get("finishReason") == want, raw
        n += 1
    for key in f["samplingParams"]:
        for api in APIS:
            recorded = _native.llm_request_input(api, {"model": "m", key: 1, "api_key": "sk-secret"})
            assert recorded.get(key) == 1 and "api_key" not in recorded, (api, key)
        n += 1
    assert n == 132  # 48 usage, 13 tool calls, 32 finish reasons, 39 sampling parameters


# -- edit input --------------------------------------------------------------------------


def test_edit_input_fixture():
    f = load_vectors("reference/edit-input-fixture.json")
    for case in f["proposedValue"]:
        assert _native.proposed_value_refusal(case.get("value")) == case.get("refusal"), case.get("name")
    for case in f["prototypeKeys"]:
        assert _native.prototype_key_refused(case.get("value")) == case["refused"], case.get("name")
    for case in f["normalizeValidation"]:
        got = _native.normalize_validation(case.get("result")) if "result" in case else _native.normalize_validation()
        assert _text(got) == _text(case["expected"]), case.get("name")
    for case in f["sanitizeShortText"]:
        got = _native.sanitize_short_text(case.get("input")) if "input" in case else _native.sanitize_short_text()
        assert _text(got) == _text(case.get("expected")), case.get("name")
    for case in f["mergeToolInput"]:
        merged, refusal = _native.merge_edited_input(case.get("live"), case.get("proposed"), bool(case.get("inputHidden")))
        want = case.get("expected")
        if want.get("ok"):
            assert refusal is None and _text(merged) == _text(want["value"]), case.get("name")
        else:
            assert refusal == want["code"], (case.get("name"), refusal, want)


class _Failed(Exception):
    """A tool failure with the vector's error name and message."""


def _answering(error, finish):
    """A tool body that takes any keyword arguments (all recorded as its input) and fails
    with the vector's error, or returns its output."""

    def body(**_kw):
        if error:
            raise _Failed(error["message"])
        return finish.get("output") if finish else None

    return body


def test_our_loop_detect_vectors_through_a_real_session():
    """tests/vectors/ours/loop-detect.json through @tool calls of a detached session in warn
    mode: each hold the vector expects is one loop warning of its kind; no hold, no warning.
    Alternating calls and one error with other arguments warn only with their detector named
    in loop_guard={"detect": [...]}. (Detached, the worker feeds the guard, so the warnings
    arrive after the calls: they are counted, not placed.)"""
    import time

    cases = load_vectors("ours/loop-detect.json")["cases"]
    assert len(cases) == 10
    words = {"repeat": "in a row with identical arguments", "cycle": "of a cycle of", "error-repeat": "failed"}
    for case in cases:
        lines: list[str] = []
        loop_guard = {"mode": "warn"}
        if "detect" in case:
            loop_guard["detect"] = case["detect"]
        g = gm.GraphMind(url="ws://127.0.0.1:9/ingest", env={}, loop_guard=loop_guard, logger=lines.append)
        events = case["events"]
        with g.run(case["name"]):
            for e in events:
                if e["event"] != "start":
                    continue
                mine = [x for x in events if x.get("instanceId") == e["instanceId"] and x is not e]
                error = next((x for x in mine if x["event"] == "error"), None)
                finish = next((x for x in mine if x["event"] == "finish"), None)

                try:
                    g.tool(name=e["nodeId"].split(":", 1)[1])(_answering(error, finish))(**e["input"])
                except _Failed:
                    pass
        assert g.session.flush(10)
        want = [words[h["kind"]] for h in case["holds"]]
        deadline = time.monotonic() + 5
        warned = lambda: [l for l in lines if "possible loop" in l]  # noqa: E731
        while len(warned()) < len(want) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # and nothing more arrives
        g.dispose()
        got = warned()
        assert len(got) == len(want), (case["name"], got)
        for line, word in zip(got, want):
            assert word in line, (case["name"], line)
