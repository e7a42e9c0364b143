'use strict';
// Issue #30: the app never hangs, crashes or loses data because of GraphMind. Each test is
// one way a real app broke the Node skin, against a real `graphmind serve`; where Ruby
// behaved differently, the same scenario is in bindings/ruby/test/test_fail_open.rb and the
// shared data in tests/vectors/ours/value-depth.json.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const gm = require('..');
const { startServer, Debugger, sleep, ROOT } = require('./helpers');

const PKG = path.resolve(__dirname, '..');
/** A child that has not exited by then is hung. */
const CHILD_TIMEOUT_MS = 30_000;

let srv;
test.before(async () => { srv = await startServer(['--pause-on-error', 'off']); });
test.after(() => srv.stop());

/**
 * Runs `body` (a script's text) in a fresh node; resolves {code, stdout, stderr, hung}. A
 * line `{"run": id}` it prints makes `dbg` watch that run (the server relays a run's
 * events to the viewers that watch it).
 */
function child(body, dbg, env = {}) {
  const script = `const gm = require(${JSON.stringify(PKG)});\nconst URL = ${JSON.stringify(srv.url)};\n${body}`;
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['-e', script], { env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    let pending = '';
    p.stdout.on('data', (d) => {
      stdout += d;
      pending += d;
      const lines = pending.split('\n');
      pending = lines.pop();
      for (const line of lines) {
        if (line.startsWith('{"run"') && dbg) dbg.watch(JSON.parse(line).run);
      }
    });
    p.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), CHILD_TIMEOUT_MS);
    p.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, hung: signal === 'SIGKILL' });
    });
  });
}

/** The lines of a child's stdout that are JSON. */
function reports(out) {
  return out.split('\n').filter((l) => l.startsWith('{') && !l.startsWith('{"run"')).map((l) => JSON.parse(l));
}

/** Clears the breakpoint these tests set (the server keeps it after the viewer leaves). */
async function closeDebugger(dbg) {
  dbg.clear({ kind: 'tool', point: 'before' });
  await sleep(150);
  dbg.close();
}

/** Waits for `n` exec.paused envelopes on any run; returns them. */
async function paused(dbg, n) {
  const out = [];
  while (out.length < n) {
    const p = await dbg.nextWithin('exec.paused', 15_000);
    assert.ok(p, `only ${out.length} of ${n} gates were held`);
    out.push(p);
  }
  return out;
}

// A child whose tool a breakpoint holds: one run per call (`runs`) or one run of three
// parallel calls. `whenHeld` runs once `holds` gates are held, `whenRejected` once a call
// rejects (an abort); then each call's outcome and how often the tool ran are printed.
const HELD_TOOLS = ({ calls = 3, runs, holds = calls, whenHeld = '() => {}', whenRejected = '() => {}' }) => `
  const s = gm.createSession({ url: URL, appName: 'fail-open', env: {}, logger: () => {} });
  let ran = 0;
  const tool = s.wrapCall('tool', 'held', async (x) => { ran += 1; return { got: x.n }; });
  const ns = Array.from({ length: ${calls} }, (_, i) => i + 1);
  const announce = (ctx) => console.log(JSON.stringify({ run: ctx.runId }));
  (async () => {
    if (!(await s.ready({ timeoutMs: 5000 }))) { console.log('{"attached":false}'); return; }
    const calls = ${runs}
      ? ns.map((n) => s.run('held-' + n, (ctx) => { announce(ctx); return tool({ n }); }))
      : [s.run('held-all', (ctx) => { announce(ctx); return Promise.allSettled(ns.map((n) => tool({ n }))); })];
    for (const c of calls) c.catch(() => (${whenRejected})(s));
    const poll = setInterval(() => {
      if (s.stats().heldGates >= ${holds}) { clearInterval(poll); (${whenHeld})(s); }
    }, 10);
    const settled = await Promise.allSettled(calls);
    clearInterval(poll);
    const flat = settled.flatMap((r) => (r.status === 'fulfilled' && Array.isArray(r.value) ? r.value : [r]));
    for (const r of flat) {
      console.log(JSON.stringify(r.status === 'fulfilled'
        ? { ok: r.value }
        : { error: r.reason && r.reason.name, message: r.reason && r.reason.message }));
    }
    console.log(JSON.stringify({ ran }));
    await s.dispose();
  })();`;

test('dispose() while a gate is held: the held call continues, the tool returns and the process exits', async () => {
  for (let round = 0; round < 3; round += 1) {
    const dbg = await Debugger.open(srv);
    dbg.breakpoint({ kind: 'tool', point: 'before' });
    await sleep(150);
    // A SIGTERM handler that disposes, while a breakpoint holds the tool.
    const r = await child(HELD_TOOLS({ calls: 1, runs: true, whenHeld: '(s) => s.dispose()' }), dbg);
    await closeDebugger(dbg);
    assert.equal(r.hung, false, `round ${round}: the process never exited\n${r.stdout}${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    const lines = reports(r.stdout);
    assert.deepEqual(lines, [{ ok: { got: 1 } }, { ran: 1 }], `round ${round}: ${r.stdout}${r.stderr}`);
  }
});

test('a debugger abort of one of three held calls in three runs, then dispose(): the others continue', async () => {
  for (let round = 0; round < 3; round += 1) {
    const dbg = await Debugger.open(srv);
    dbg.breakpoint({ kind: 'tool', point: 'before' });
    await sleep(150);
    // The aborted run's call rejects; then the app disposes, with the other two still held.
    const run = child(HELD_TOOLS({ runs: true, whenRejected: '(s) => s.dispose()' }), dbg);
    const [first] = await paused(dbg, 3);
    dbg.resume(first.runId, first.payload.pauseId, 'abort');
    const r = await run;
    await closeDebugger(dbg);
    assert.equal(r.hung, false, `round ${round}: the process never exited\n${r.stdout}${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    const lines = reports(r.stdout);
    assert.equal(lines.filter((l) => l.error === 'AbortError').length, 1, r.stdout + r.stderr);
    assert.equal(lines.filter((l) => l.ok).length, 2, r.stdout + r.stderr);
    assert.deepEqual(lines.at(-1), { ran: 2 });
  }
});

// The rule both skins share (Ruby: test_a_debugger_abort_of_one_held_gate_aborts_the_runs_other_held_gates).
test('a debugger abort of one of three held calls of one run aborts the other two at once', async () => {
  for (let round = 0; round < 3; round += 1) {
    const dbg = await Debugger.open(srv);
    dbg.breakpoint({ kind: 'tool', point: 'before' });
    await sleep(150);
    const run = child(HELD_TOOLS({ runs: false }), dbg);
    const held = await paused(dbg, 3);
    dbg.resume(held[1].runId, held[1].payload.pauseId, 'abort');
    const r = await run;
    await closeDebugger(dbg);
    assert.equal(r.hung, false, `round ${round}: the process never exited\n${r.stdout}${r.stderr}`);
    const lines = reports(r.stdout);
    assert.equal(lines.filter((l) => l.error === 'AbortError').length, 3, r.stdout + r.stderr);
    assert.deepEqual(lines.at(-1), { ran: 0 }, 'no tool of the aborted run ran');
    const stored = await srv.run(held[0].runId, (x) => x.status === 'aborted');
    assert.equal(stored.status, 'aborted');
  }
});

/** Three identical tool calls as a session's first calls; resolves the logged lines. */
async function firstCallsWarn(options, readyFirst) {
  const lines = [];
  const session = gm.createSession({ appName: 'loop-first', env: {}, logger: (l) => lines.push(l), ...options });
  const readied = readyFirst ? session.ready({ timeoutMs: options.url === srv.url ? 3000 : 300 }) : null;
  const lookup = session.wrapCall('tool', 'lookup', async (q) => q.id);
  await session.run('loop', async () => {
    for (let i = 0; i < 3; i += 1) assert.equal(await lookup({ id: 7 }), 7);
  });
  await readied;
  session.flushSync(3000);
  for (let i = 0; i < 100 && !lines.some((l) => l.includes('possible loop')); i += 1) await sleep(10);
  await session.dispose();
  return lines;
}

test('the loop guard warns about a session\'s first three identical calls, detached and attached', async () => {
  const cases = [
    ['detached', { url: 'ws://127.0.0.1:9/ingest', connectTimeoutMs: 50 }, false],
    ['detached, ready() pending', { url: 'ws://127.0.0.1:9/ingest', connectTimeoutMs: 50 }, true],
    ['attached, ready() pending', { url: srv.url }, true],
  ];
  for (const [label, options, readyFirst] of cases) {
    for (let round = 0; round < 10; round += 1) {
      const lines = await firstCallsWarn({ ...options, loopGuard: { mode: 'warn', threshold: 3 } }, readyFirst);
      assert.ok(lines.some((l) => l.includes('possible loop') && l.includes('tool:lookup')),
        `${label}, round ${round}: ${JSON.stringify(lines)}`);
    }
  }
});

test('a BigInt degrades only itself (its digits, a JSON number), and distinct BigInts are not a loop', async () => {
  const dbg = await Debugger.open(srv);
  await sleep(150);
  const session = gm.createSession({ url: srv.url, appName: 'bigint', env: {}, logger: () => {} });
  assert.equal(await session.ready({ timeoutMs: 3000 }), true);
  const getUser = session.wrapCall('tool', 'getUser', async (q) => ({ id: q.id, name: 'u' }));
  let runId;
  const out = await session.run('bigint', async (ctx) => {
    runId = ctx.runId;
    const got = [];
    for (const id of [1n, 2n, 3n]) got.push(await getUser({ id, tag: 'x' }));
    return got;
  });
  assert.deepEqual(out.map((u) => u.id), [1n, 2n, 3n], 'the app gets its values back untouched');
  assert.equal(await dbg.nextWithin('exec.paused', 500), null, 'three distinct inputs are not held as a loop');
  const events = await srv.events(runId, 8);
  const inputs = events.filter((e) => e.type === 'node.started' && e.payload.nodeId === 'tool:getUser').map((e) => e.payload.input);
  assert.deepEqual(inputs, [{ id: 1, tag: 'x' }, { id: 2, tag: 'x' }, { id: 3, tag: 'x' }]);
  assert.equal(gm.toJson({ big: 12345678901234567890123n, list: [-5n] }), '{"big":12345678901234567890123,"list":[-5]}');
  // A cycle degrades only the reference back; a throwing getter only its own field.
  const cyclic = { a: 1 };
  cyclic.self = cyclic;
  assert.equal(gm.toJson(cyclic), '{"a":1,"self":"[circular]"}');
  const getter = { ok: 1, get bad() { throw new Error('no'); } };
  assert.equal(gm.toJson(getter), '{"ok":1,"bad":"[unserializable]"}');
  await session.dispose();
  dbg.close();
});

test('inputs degraded as unserializable are never held as a loop', async () => {
  const dbg = await Debugger.open(srv);
  await sleep(150);
  const session = gm.createSession({ url: srv.url, appName: 'degraded', env: {}, logger: () => {} });
  assert.equal(await session.ready({ timeoutMs: 3000 }), true);
  const tool = session.wrapCall('tool', 'opaque', async () => 1);
  const bad = () => ({ get secret() { throw new Error('unreadable'); } });
  await session.run('degraded', async () => {
    for (let i = 0; i < 4; i += 1) await tool(bad());
  });
  assert.equal(await dbg.nextWithin('exec.paused', 500), null, 'unreadable inputs equal nothing');
  await session.dispose();
  dbg.close();
});

test('a BigInt in createSession({ meta }) leaves the session enabled', async () => {
  const session = gm.createSession({ url: srv.url, appName: 'meta-bigint', env: {}, meta: { build: 7n }, logger: () => {} });
  assert.equal(session.enabled, true);
  assert.equal(await session.ready({ timeoutMs: 3000 }), true);
  let runId;
  await session.run('meta', async (ctx) => { runId = ctx.runId; });
  const [started] = await srv.events(runId, 1);
  assert.equal(started.payload.meta.build, 7);
  await session.dispose();
});

// The shared vector: what every skin records for values deeper than the budget.
const DEPTH = JSON.parse(fs.readFileSync(path.join(ROOT, 'tests', 'vectors', 'ours', 'value-depth.json'), 'utf8'));

function nested(levels) {
  let v = DEPTH.leaf;
  for (let i = 0; i < levels; i += 1) v = i % 2 ? { k: v } : [v];
  return v;
}

function depthOf(v) {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (v && typeof v === 'object') return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}

/** The innermost container of a chain built by `nested` (or the value itself). */
function innermost(v) {
  for (;;) {
    if (Array.isArray(v) && v.length === 1 && typeof v[0] === 'object' && v[0] !== null) v = v[0];
    else if (v && typeof v === 'object' && 'k' in v && typeof v.k === 'object' && v.k !== null) v = v.k;
    else return v;
  }
}

test('values of any depth, and cyclic ones, are recorded cut at the depth budget and marked (shared vector)', async () => {
  assert.equal(gm.native.constants().maxValueDepth, DEPTH.maxValueDepth);
  for (const attachedRun of [false, true]) {
    const session = gm.createSession({ url: attachedRun ? srv.url : 'ws://127.0.0.1:9/ingest', appName: 'deep', env: {}, bufferSize: 1000, logger: () => {} });
    if (attachedRun) assert.equal(await session.ready({ timeoutMs: 3000 }), true);
    const echo = session.wrapCall('tool', 'echo', async () => 'ok');
    let runId;
    await session.run('deep', async (ctx) => {
      runId = ctx.runId;
      for (const c of DEPTH.cases) await echo(nested(c.levels));
    });
    if (!attachedRun) {
      // Recorded detached, replayed when a server is there: only checks nothing was lost.
      assert.equal(session.stats().lost, 0);
      await session.dispose();
      continue;
    }
    const events = await srv.events(runId, 2 + DEPTH.cases.length * 2);
    const inputs = events.filter((e) => e.type === 'node.started' && e.payload.nodeId === 'tool:echo').map((e) => e.payload.input);
    assert.equal(inputs.length, DEPTH.cases.length, 'no node.started was refused by the server');
    assert.equal(events.filter((e) => e.type === 'node.finished' && e.payload.nodeId === 'tool:echo').length, DEPTH.cases.length);
    DEPTH.cases.forEach((c, i) => {
      assert.equal(depthOf(inputs[i]), c.recordedDepth, `${c.levels} levels`);
      if (c.cut) assert.deepEqual(innermost(inputs[i]), DEPTH.marker, `${c.levels} levels end in the marker`);
    });
    await session.dispose();
  }
});
