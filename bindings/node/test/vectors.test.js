'use strict';
// Every conformance vector in tests/vectors through the addon: the same cases the Rust
// core runs, reached from JavaScript values. Each test counts its cases and fails on any.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const gm = require('..');
const { native } = gm;

const VECTORS = path.resolve(__dirname, '..', '..', '..', 'tests', 'vectors');
const load = (rel) => JSON.parse(fs.readFileSync(path.join(VECTORS, rel), 'utf8'));
const json = (v) => (v === undefined ? null : JSON.stringify(v));

function check(label, cases, run) {
  assert.ok(cases.length > 0, `${label}: no case ran`);
  const failures = [];
  for (const c of cases) {
    try {
      run(c);
    } catch (error) {
      failures.push(`${c && c.name ? c.name : JSON.stringify(c).slice(0, 80)}: ${error.message}`);
    }
  }
  assert.equal(failures.length, 0, `${label}: ${failures.length} of ${cases.length} failed\n${failures.slice(0, 10).join('\n')}`);
  return cases.length;
}

/** Equal strings, without assert's diff (slow on 600 KB payloads). */
function same(got, want, label) {
  if (got === want) return;
  let at = 0;
  while (at < got.length && got[at] === want[at]) at += 1;
  throw new Error(`${label}: differs at ${at} (lengths ${got.length} / ${want.length}): ${JSON.stringify(got.slice(Math.max(0, at - 40), at + 40))} vs ${JSON.stringify(String(want).slice(Math.max(0, at - 40), at + 40))}`);
}

/** `expected` fields against the result: objects as key sets, arrays in order. */
function matches(got, want, where = '') {
  if (want !== null && typeof want === 'object' && !Array.isArray(want)) {
    assert.ok(got !== null && typeof got === 'object' && !Array.isArray(got), `${where}: not an object: ${JSON.stringify(got)}`);
    for (const k of Object.keys(want)) {
      assert.ok(k in got, `${where}.${k}: missing`);
      matches(got[k], want[k], `${where}.${k}`);
    }
    return;
  }
  assert.deepEqual(got, want, where);
}

test('canonical JSON and fingerprints: loop-guard fixture and differential (with lone surrogates)', () => {
  const lg = load('reference/loop-guard-fixture.json');
  const diff = load('reference/differential.json');
  let n = check('loop-guard canonical', lg.canonical, (c) => {
    assert.equal(native.canonicalCall(json(c.nodeId), json(c.input), c.ignoreKeys), c.canonical);
    assert.equal(gm.fingerprint(c.nodeId, c.input, c.ignoreKeys), c.fingerprint);
  });
  const lone = JSON.parse(diff.canonicalLoneSurrogates);
  for (const [label, cases] of [['differential canonical', diff.canonical], ['lone surrogates', lone]]) {
    n += check(label, cases, (c) => {
      assert.equal(native.canonicalCall(json(c.nodeId), json(c.input), c.ignoreKeys), c.canonical);
      assert.equal(gm.fingerprint(c.nodeId, c.input, c.ignoreKeys), c.fingerprint);
    });
  }
  assert.equal(gm.canonicalJson({ b: 1, a: [true, null], _meta: 1 }), '{"a":[true,null],"b":1}');
  // Key order is JavaScript's own sort (UTF-16 units), also where a lone surrogate meets a
  // pair that starts with it.
  const keys = ['\ud83d\ue000', '\ud83d\ude00', 'a', '\uffff', '\ud800', '\ud83d', 'é', '\ue000'];
  const obj = Object.fromEntries(keys.map((k, i) => [k, i]));
  const sorted = [...keys].sort();
  assert.equal(gm.canonicalJson(obj), `{${sorted.map((k) => `${JSON.stringify(k)}:${obj[k]}`).join(',')}}`);
  assert.ok(n > 400);
});

test('fingerprint of random JavaScript values: the unparsed-text path agrees with parsing', () => {
  // fingerprint() hashes JSON.stringify's text without parsing it when its tokens are
  // already canonical; canonicalCall() parses. Same SHA-256 on every value.
  let seed = 7;
  const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const strings = ['', 'a', '_meta', 'é', '😀', '\uff61', '\ud800', 'x\ny"z\\', '\u0001\u007f', 'ａ', 'b'];
  const numbers = [0, -0, 1, -1, 0.1, 1e21, 1e-7, 123456789012345680000, 2 ** 53 + 1, -3.14159, NaN, Infinity, 5e-324];
  const value = (depth) => {
    switch (rand(depth > 4 ? 4 : 7)) {
      case 0: return numbers[rand(numbers.length)];
      case 1: return strings[rand(strings.length)];
      case 2: return [null, true, false, undefined][rand(4)];
      case 3: return rand(1000) - 500;
      case 4: return Array.from({ length: rand(5) }, () => value(depth + 1));
      default: {
        const o = {};
        for (let i = rand(6); i > 0; i -= 1) o[strings[rand(strings.length)] + (rand(3) ? '' : String(i))] = value(depth + 1);
        return o;
      }
    }
  };
  const hash = (text) => crypto.createHash('sha256').update(text, 'utf8').digest('hex').slice(0, 32);
  const cases = Array.from({ length: 500 }, () => value(0));
  check('random values', cases, (v) => {
    const canonical = native.canonicalCall(json('tool:x'), json(v) ?? 'null', null);
    assert.equal(gm.fingerprint('tool:x', v), hash(canonical));
    const body = canonical.slice('["tool:x",'.length, -1);
    assert.equal(gm.canonicalJson(v), body);
  });
});

test('JCS (RFC 8785): every input canonicalised byte for byte, and the ES6 number spellings', () => {
  const dir = path.join(VECTORS, 'jcs');
  const names = fs.readdirSync(path.join(dir, 'input')).filter((f) => f.endsWith('.json'));
  check('jcs', names.map((name) => ({ name })), ({ name }) => {
    const got = native.canonicalizeText(fs.readFileSync(path.join(dir, 'input', name)));
    assert.equal(got, fs.readFileSync(path.join(dir, 'output', name), 'utf8'));
  });
  const lines = fs.readFileSync(path.join(dir, 'es6-numbers-1k.txt'), 'utf8').split('\n').filter(Boolean);
  const view = new DataView(new ArrayBuffer(8));
  check('es6 numbers', lines.map((l) => ({ l })), ({ l }) => {
    const [hex, text] = l.split(',');
    view.setBigUint64(0, BigInt(`0x${hex}`));
    assert.equal(native.formatNumber(view.getFloat64(0)), text, hex);
  });
});

test('JSONTestSuite: y_ parse, n_ are rejected, i_ never crash', () => {
  const dir = path.join(VECTORS, 'jsontestsuite', 'test_parsing');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
  check('jsontestsuite', files.map((name) => ({ name })), ({ name }) => {
    const out = native.parseText(fs.readFileSync(path.join(dir, name)));
    if (name.startsWith('y_')) assert.notEqual(out, null);
    if (name.startsWith('n_')) assert.equal(out, null);
  });
});

test('configuration and the kill switch: environment.json and kill-switch.json (flavor node and the others)', () => {
  for (const file of ['ours/environment.json', 'ours/kill-switch.json']) {
    check(file, load(file).cases, (c) => {
      const got = JSON.parse(native.resolveConfig(JSON.stringify(c.options ?? {}), JSON.stringify(c.env ?? {}), c.flavor));
      const { warnings, ...rest } = c.expected;
      matches(got, rest, 'config');
      if (warnings) {
        assert.equal(got.warnings.length, warnings.length, `warnings ${JSON.stringify(got.warnings)}`);
        warnings.forEach((w, i) => assert.ok(got.warnings[i].startsWith(w), `warning ${i}: ${got.warnings[i]}`));
      }
    });
  }
  // The session applies the same resolution (flavor node): its config is the core's.
  const s = gm.createSession({ env: {}, bufferSize: undefined });
  assert.equal(s.config().bufferSize, 5000);
  assert.equal(s.config().sdk.name, JSON.parse(native.resolveConfig('{}', '{}', 'node')).sdk.name);
});

test('server environment: server-environment.json', () => {
  check('server-environment', load('ours/server-environment.json').cases, (c) => {
    const got = JSON.parse(native.resolveServerConfig(JSON.stringify(c.flags ?? {}), JSON.stringify(c.env ?? {})));
    if (c.expected.error) {
      assert.equal(got.error, c.expected.error);
      return;
    }
    const { warnings, ...rest } = c.expected;
    matches(got, rest, 'server');
    if (warnings) {
      assert.equal(got.warnings.length, warnings.length, JSON.stringify(got.warnings));
      warnings.forEach((w, i) => assert.ok(got.warnings[i].startsWith(w), got.warnings[i]));
    }
  });
});

/** The shrink fixture's generator shorthands, in JavaScript. */
function expand(v) {
  if (Array.isArray(v)) return v.map(expand);
  if (v === null || typeof v !== 'object') return v;
  const keys = Object.keys(v);
  if (keys.length === 1 && Array.isArray(v[keys[0]])) {
    const args = v[keys[0]];
    switch (keys[0]) {
      case '$repeat': return expand(args[0]).repeat(args[1]);
      case '$array': { const item = expand(args[0]); return Array.from({ length: args[1] }, () => item); }
      case '$concat': return args.map(expand).join('');
      case '$keys': { const o = {}; const item = expand(args[2]); for (let i = 0; i < args[1]; i += 1) o[`${args[0]}${i}`] = item; return o; }
      case '$merge': { const o = {}; for (const part of args.map(expand)) for (const k of Object.keys(part)) put(o, k, part[k]); return o; }
      default: break;
    }
  }
  const out = {};
  for (const k of keys) put(out, k, expand(v[k]));
  return out;
}

/** An own property even for "__proto__" (as JSON.parse makes it). */
function put(o, k, value) {
  Object.defineProperty(o, k, { value, enumerable: true, writable: true, configurable: true });
}

test('shrink: every case of shrink-fixture.json byte for byte, and the constants', () => {
  const f = load('reference/shrink-fixture.json');
  assert.equal(f.constants.MAX_PAYLOAD_BYTES, gm.MAX_PAYLOAD_BYTES);
  check('shrink', f.cases, (c) => {
    const input = expand(c.input);
    const out = native.serializePayload(JSON.stringify(input), c.maxBytes, c.type);
    assert.equal(out.truncated, c.expected.truncated, 'truncated');
    if (c.expected.json !== undefined) {
      same(out.json, c.expected.json, 'json');
    } else {
      assert.equal(Buffer.byteLength(out.json), c.expected.jsonBytes, 'bytes');
      assert.equal(crypto.createHash('sha256').update(out.json).digest('hex'), c.expected.jsonSha256, 'sha256');
    }
    if (!out.truncated) same(out.json, JSON.stringify(input), 'untouched is JSON.stringify');
  });
});

function redactionCase(c) {
  const sw = c.switches || {};
  const r = new native.NativeRedactor(!!sw.hideInputs, !!sw.hideOutputs, !!sw.hideToolArgs, !!sw.hideToolResults);
  c.in.forEach((event, i) => {
    const out = r.redact(event.type, event.runId ?? '', event.nodeKind ?? null, JSON.stringify(event.payload ?? null));
    const want = c.out[i];
    if (want.dropped) {
      assert.equal(out.outcome, 'dropped', `#${i}`);
    } else {
      assert.notEqual(out.outcome, 'dropped', `#${i}`);
      assert.equal(out.payload, JSON.stringify(want.payload), `#${i} ${event.type}`);
    }
  });
}

test('redaction: redaction-fixture.json and the differential cases (with lone surrogates)', () => {
  const diff = load('reference/differential.json');
  check('redaction-fixture', load('reference/redaction-fixture.json').cases, redactionCase);
  check('differential redaction', diff.redaction, redactionCase);
  check('differential redaction lone surrogates', JSON.parse(diff.redactionLoneSurrogates), redactionCase);
  assert.equal(gm.REDACTED, load('reference/redaction-fixture.json').placeholder);
});

test('edit input: every section of edit-input-fixture.json', () => {
  const f = load('reference/edit-input-fixture.json');
  assert.equal(native.constants().maxRefusalMessage, f.maxRefusalMessage);
  check('proposedValue', f.proposedValue, (c) => {
    assert.equal(native.proposedValueRefusal(json(c.value ?? null)), c.refusal ?? null);
  });
  check('prototypeKeys', f.prototypeKeys, (c) => {
    const refusal = native.prototypeKeyRefusal(json(c.value ?? null));
    assert.equal(refusal !== null, c.refused);
  });
  check('normalizeValidation', f.normalizeValidation, (c) => {
    assert.equal(native.normalizeValidation(json(c.result)), JSON.stringify(c.expected));
  });
  check('sanitizeShortText', f.sanitizeShortText, (c) => {
    assert.equal(native.sanitizeShortText(json(c.input)), c.expected === undefined || c.expected === null ? null : JSON.stringify(c.expected));
  });
  check('mergeToolInput', f.mergeToolInput, (c) => {
    assert.equal(native.mergeToolInput(json(c.live), json(c.proposed), !!c.inputHidden), JSON.stringify(c.expected));
  });
});

test('smart breakpoints: errorResult, truncated, errorText and breakOnEnv of loop-kinds-fixture.json', () => {
  const f = load('reference/loop-kinds-fixture.json');
  check('errorResult', f.errorResult, (c) => assert.equal(native.errorResultShape(json(c.result)), c.shape ?? null));
  check('truncated', f.truncated, (c) => {
    const got = native.truncatedToolCall(json(c.result));
    if (c.fires === null) assert.equal(got, null);
    else assert.deepEqual(JSON.parse(got), c.fires);
  });
  check('errorText', f.errorText, (c) => assert.equal(native.errorTextKey(json(c.text)), JSON.stringify(c.key)));
  check('breakOnEnv', f.breakOnEnv, (c) => assert.equal(native.parseBreakOn(c.raw), c.on));
});

test('llm capture: every section of llm-fixture.json', () => {
  const f = load('reference/llm-fixture.json');
  check('finishReasons', f.finishReasons, ([raw, hasCalls, want]) => {
    assert.equal(native.normalizeFinishReason(json(raw), hasCalls), want);
  });
  check('toolCalls', f.toolCalls, (c) => {
    const got = native.toolCall(json(c.in.id), json(c.in.name), json(c.in.args));
    assert.equal(got, c.out === null ? null : JSON.stringify(c.out));
  });
  check('schemaHashes', f.schemaHashes, (c) => assert.equal(native.schemaHash(json(c.in)), c.hash));
  check('toolDefinitions', f.toolDefinitions, (c) => {
    const out = native.sanitizeToolDefinition(json(c.in));
    assert.equal(out, JSON.stringify(c.out));
    assert.equal(native.schemaHash(out), c.hash);
  });
  check('usage', f.usage, (c) => {
    const got = native.providerUsage(c.provider, json(c.raw));
    assert.equal(got, c.out === null ? null : JSON.stringify(c.out));
  });
  assert.deepEqual(native.samplingParamKeys(), f.samplingParams);
});

/** Every model API the core has a codec for (the fixture's provider names). */
const APIS = ['openai-chat', 'openai-responses', 'anthropic', 'langchain', 'ruby_llm', 'ai-sdk'];

/** A complete answer of `provider` reporting `raw` as its usage. */
function replyWithUsage(provider, raw) {
  if (provider === 'ruby_llm') return { content: '', tokens: raw };
  if (provider === 'langchain') return { generations: [[{ text: '', message: { usage_metadata: raw } }]] };
  const body = { 'openai-chat': 'choices', 'openai-responses': 'output' }[provider] ?? 'content';
  return { [body]: [], usage: raw };
}

const decode = (api, reply) => JSON.parse(native.codecDecode(api, JSON.stringify(reply)));

test('llm capture: the fixture\'s cases through the codecs\' decode path (as core/tests/codec_fixture.rs)', () => {
  const f = load('reference/llm-fixture.json');
  let n = 0;
  n += check('usage', f.usage, (c) => {
    assert.equal(JSON.stringify(decode(c.provider, replyWithUsage(c.provider, c.raw)).usage), JSON.stringify(c.out), `${c.provider} ${c.name}`);
  });
  n += check('toolCalls', f.toolCalls, (c) => {
    const i = c.in;
    const fn = {};
    const block = { type: 'tool_use' };
    if ('name' in i) fn.name = block.name = i.name;
    if ('args' in i) { fn.arguments = i.args; block.input = i.args; }
    const call = { function: fn };
    if ('id' in i) call.id = block.id = i.id;
    const chat = { choices: [{ message: { content: null, tool_calls: [call] } }] };
    for (const [api, reply] of [['openai-chat', chat], ['anthropic', { content: [block] }]]) {
      const got = (decode(api, reply).output.toolCalls ?? [null])[0];
      assert.equal(JSON.stringify(got), JSON.stringify(c.out), `${api} ${JSON.stringify(i)}`);
    }
  });
  n += check('finishReasons', f.finishReasons, ([raw, hasCalls, want]) => {
    const calls = hasCalls ? [{ id: 'c', function: { name: 'f', arguments: '{}' } }] : [];
    const choice = { message: { content: '', tool_calls: calls }, finish_reason: raw };
    assert.equal(decode('openai-chat', { choices: [choice] }).output.finishReason ?? null, want);
  });
  n += check('samplingParams', f.samplingParams, (key) => {
    for (const api of APIS) {
      const recorded = JSON.parse(native.codecRequestInput(api, JSON.stringify({ model: 'm', [key]: 1, api_key: 'sk-secret' })));
      assert.equal(recorded[key], 1, `${api} ${key}`);
      assert.ok(!('api_key' in recorded), `${api} ${key}`);
    }
  });
  assert.equal(n, 132);
});

test('loop guard: every sequence of loop-guard-fixture.json (fingerprints, trips, a retry runs on)', () => {
  const f = load('reference/loop-guard-fixture.json');
  check('loop-guard sequences', f.sequences, (seq) => {
    const guard = new native.NativeLoopGuard(seq.threshold, seq.allowNodes, seq.ignoreKeys, seq.kinds);
    const trips = [];
    seq.calls.forEach((call, i) => {
      const input = call.inputAbsent || call.unreadable ? null : json(call.input);
      const fp = guard.started('run-1', call.nodeId, call.kind, call.name, call.instanceId, input, !!call.unreadable, i, true);
      assert.equal(fp, seq.fingerprints[i], `fingerprint ${i}`);
      const hold = guard.consultBefore('run-1', call.kind, call.nodeId, call.name, true);
      if (hold) {
        const info = JSON.parse(hold);
        assert.equal(info.kind, 'repeat');
        assert.equal(info.lastSeq, i);
        assert.equal(info.fingerprint, seq.fingerprints[i]);
        trips.push({ at: i, repeats: info.repeats, firstAt: info.firstSeq });
        assert.equal(guard.consultBefore('run-1', call.kind, call.nodeId, call.name, true), null, `retry at ${i}`);
      }
    });
    assert.deepEqual(trips, seq.trips);
    assert.equal(trips.length ? trips[0].at : null, seq.tripsAt ?? null);
    assert.equal(trips.length ? trips[0].repeats : null, seq.repeatsAtTrip ?? null);
  });
});

// Runs the loop-kinds events of seq (attached, a retry checked at each hold) against its holds.
function assertHolds(seq, guard) {
  const holds = [];
  seq.events.forEach((e, i) => {
    if (e.event === 'start') {
      const input = e.inputAbsent || e.unreadable ? null : json(e.input);
      guard.started('run', e.nodeId, e.kind, e.name, e.instanceId, input, !!e.unreadable, i, true);
      const hold = guard.consultBefore('run', e.kind, e.nodeId, e.name, true);
      if (hold) {
        const info = JSON.parse(hold);
        assert.equal(info.lastSeq, i);
        assert.equal(info.fingerprint.length, 32);
        const h = { at: i, kind: info.kind, repeats: info.repeats, firstAt: info.firstSeq };
        if (info.period !== undefined) { h.period = info.period; h.laps = info.laps; }
        holds.push(h);
        assert.equal(guard.consultBefore('run', e.kind, e.nodeId, e.name, true), null, `retry at ${i}`);
      }
    } else if (e.event === 'error') {
      guard.errored('run', e.nodeId, e.instanceId, json(e.name), json(e.message));
    } else if (e.event === 'finish') {
      guard.finished('run', e.nodeId, e.instanceId, e.status, json(e.output));
    } else {
      throw new Error(`unknown event ${e.event}`);
    }
  });
  const want = seq.holds.map((h) => {
    const o = { at: h.at, kind: h.kind, repeats: h.repeats, firstAt: h.firstAt };
    if (h.period !== undefined) { o.period = h.period; o.laps = h.laps; }
    return o;
  });
  assert.deepEqual(holds, want);
}

// The reference's loop-kinds fixture runs with the opt-in detectors on.
const ALL_DETECTORS = ['cycle', 'error-repeat'];

test('loop kinds: every sequence of loop-kinds-fixture.json (repeat, cycle, error-repeat holds)', () => {
  const f = load('reference/loop-kinds-fixture.json');
  check('loop-kinds sequences', f.sequences, (seq) => {
    assertHolds(seq, new native.NativeLoopGuard(seq.threshold, seq.allowNodes, seq.ignoreKeys, seq.kinds, ALL_DETECTORS));
  });
});

test('our loop-hold defaults and opt-ins (ours/loop-detect.json): held only with the detector named', () => {
  const f = load('ours/loop-detect.json');
  assert.equal(f.cases.length, 10);
  check('loop-detect cases', f.cases, (c) => {
    assertHolds(c, new native.NativeLoopGuard(c.threshold, c.allowNodes, c.ignoreKeys, c.kinds, c.detect));
  });
  assert.throws(() => new native.NativeLoopGuard(null, null, null, null, ['loops']), /not a loop detector/);
});
