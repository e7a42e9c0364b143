'use strict';
// The Node session against a real `graphmind serve`: storage, every action at every gate
// of a wrapped tool, the event loop while a gate holds, abort through the run's signal,
// the disabled identity path, and a script that exits on its own.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const gm = require('..');
const { startServer, Debugger, sleep } = require('./helpers');

let srv;
test.before(async () => { srv = await startServer(['--pause-on-error', 'off']); });
test.after(() => srv.stop());

async function attached(options = {}) {
  const session = gm.createSession({ url: srv.url, appName: 'node-test', env: {}, ...options });
  assert.equal(await session.ready({ timeoutMs: 3000 }), true, 'attaches to the live server');
  return session;
}

test('a run is stored in order with the input as given (lone surrogate included)', async () => {
  const session = await attached();
  const search = session.wrapCall('tool', 'search', async (q) => ({ hits: [q.q.length] }));
  let runId;
  const out = await session.run('store', async (ctx) => {
    runId = ctx.runId;
    assert.equal(session.currentRun(), ctx);
    assert.ok(ctx.signal instanceof AbortSignal);
    return search({ q: 'é \ud800 😀' });
  });
  assert.deepEqual(out, { hits: [6] });
  const events = await srv.events(runId, 4);
  assert.deepEqual(events.map((e) => e.type), ['run.started', 'node.started', 'node.finished', 'run.finished']);
  assert.equal(events[0].payload.app, 'node-test');
  assert.equal(events[0].payload.meta.name, 'store');
  assert.equal(JSON.stringify(events[1].payload.input), '{"q":"é \\ud800 😀"}');
  assert.deepEqual(events[2].payload.output, { hits: [6] });
  await srv.run(runId, (r) => r.status === 'ok');
  await session.dispose();
});

test('every action at every point of a wrapped tool reaches the app', async () => {
  const dbg = await Debugger.open(srv);
  for (const point of ['before', 'after', 'error']) dbg.breakpoint({ kind: 'tool', point });
  await sleep(150);
  const session = await attached();
  for (const point of ['before', 'after', 'error']) {
    for (const action of ['continue', 'inject', 'abort', 'retry']) {
      let calls = 0;
      const tool = session.wrapCall('tool', 'lookup', async (args) => {
        calls += 1;
        if (point === 'error' && calls === 1) throw new TypeError('boom');
        return { ok: args.n, calls };
      });
      let runId;
      const outcome = session.run(`${point}-${action}`, async (ctx) => {
        runId = ctx.runId;
        dbg.watch(ctx.runId);
        return tool({ n: 1 });
      }).then((v) => ({ value: v }), (e) => ({ error: e }));
      // Every tool gate holds: act at `point` once, let every other pause continue.
      const extra = action === 'inject' ? { output: { injected: [1, 2] } } : {};
      let acted = false;
      let settled = false;
      outcome.then(() => { settled = true; });
      while (!settled) {
        const paused = await dbg.nextWithin('exec.paused', 100);
        if (!paused) continue;
        if (!acted && paused.payload.point === point) {
          acted = true;
          dbg.resume(runId, paused.payload.pauseId, action, extra);
        } else {
          dbg.resume(runId, paused.payload.pauseId, 'continue');
        }
      }
      assert.ok(acted, `${point} ${action}: the ${point} gate held`);
      const got = await outcome;
      const label = `${point} ${action}`;
      if (action === 'inject') assert.deepEqual(got.value, { injected: [1, 2] }, label);
      if (action === 'abort') {
        assert.ok(got.error, label);
        assert.equal(got.error.name, 'AbortError', label);
        await srv.run(runId, (r) => r.status === 'aborted');
      }
      if (action === 'continue') {
        if (point === 'error') assert.equal(got.error.name, 'TypeError', label);
        else assert.deepEqual(got.value, { ok: 1, calls: 1 }, label);
      }
      if (action === 'retry') {
        if (point === 'before') assert.deepEqual(got.value, { ok: 1, calls: 1 }, label);
        else assert.deepEqual(got.value, { ok: 1, calls: 2 }, label);
      }
      if (action !== 'abort') await srv.run(runId, (r) => r.status === (got.error ? 'error' : 'ok'));
    }
  }
  for (const point of ['before', 'after', 'error']) dbg.clear({ kind: 'tool', point });
  await sleep(150);
  dbg.close();
  await session.dispose();
});

test('a held gate never blocks the event loop, and the run signal aborts it', async () => {
  const dbg = await Debugger.open(srv);
  dbg.breakpoint({ name: 'slow' });
  await sleep(150);
  const session = await attached();
  const slow = session.wrapCall('tool', 'slow', async () => 'done');
  let ticks = 0;
  const timer = setInterval(() => { ticks += 1; }, 10);
  let ctxSeen;
  const outcome = session.run('held', async (ctx) => {
    ctxSeen = ctx;
    dbg.watch(ctx.runId);
    return slow({});
  }).then((v) => ({ value: v }), (e) => ({ error: e }));
  let got;
  try {
    await dbg.next('exec.paused');
    const before = ticks;
    await sleep(300);
    assert.ok(ticks - before >= 10, `the interval kept ticking while held (${ticks - before} ticks)`);
    assert.equal(session.stats().heldGates, 1);
    ctxSeen.abortController.abort();
    got = await outcome;
  } finally {
    // A failed assertion must fail the test, not keep the process alive on this interval
    // (or on a gate still held: aborting the run releases it).
    clearInterval(timer);
    if (ctxSeen) ctxSeen.abortController.abort();
  }
  assert.equal(got.error.name, 'AbortError');
  const resumed = await dbg.next('exec.resumed');
  // Aborting the run releases its held gates as abort (the core's Session::abort_run).
  assert.equal(resumed.payload.action, 'abort', "an aborted run's held gate is released as abort");
  await srv.run(ctxSeen.runId, (r) => r.status === 'aborted');
  assert.equal(session.stats().heldGates, 0);
  dbg.clear({ name: 'slow' });
  dbg.close();
  await session.dispose();
});

test('session.gate resolves the decision; detached it is the shared continue', async () => {
  const session = gm.createSession({ url: 'ws://127.0.0.1:9/ingest', env: {} });
  const decision = await session.run('detached', () => session.gate('before', { nodeId: 'tool:x', kind: 'tool', name: 'x' }));
  assert.deepEqual(decision, { action: 'continue' });
  assert.equal(await session.ready({ timeoutMs: 50 }), false, 'ready() resolves false, never rejects');
  await session.dispose();
});

test('the kill switch: a disabled session is an identity and records nothing', async () => {
  const session = gm.createSession({ url: srv.url, env: { NODE_ENV: 'production' } });
  assert.equal(session.enabled, false);
  assert.equal(session.config().enabledReason, 'production');
  const fn = async (x) => x * 2;
  assert.equal(await session.wrapCall('tool', 'double', fn)(21), 42);
  assert.equal(await session.ready(), false);
  const g = gm.graphmind({ url: srv.url, env: { GRAPHMIND_DISABLED: '1' } });
  const tools = { a: { execute: fn } };
  assert.equal(g.wrapTools(tools), tools);
  const model = { modelId: 'm' };
  assert.equal(g.wrapModel(model), model);
  assert.equal(await g.ready(), false);
  assert.equal(await g.run('r', () => 7), 7);
  await g.dispose();
  assert.equal(gm.createSession({ env: { NODE_ENV: 'production', GRAPHMIND: '1' } }).enabled, true);
});

test('a script with an attached session exits on its own when its work ends', () => {
  const script = `
    const gm = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const s = gm.createSession({ url: ${JSON.stringify(srv.url)}, env: {} });
    s.ready({ timeoutMs: 3000 }).then(async (ok) => {
      const t = s.wrapCall('tool', 'exit-check', async () => 1);
      await s.run('exit', () => t({}));
      console.log('attached=' + ok);
    });`;
  const started = Date.now();
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 15_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /attached=true/);
  assert.ok(Date.now() - started < 10_000, 'it did not wait for a timeout');
});

test('warnings go to the logger option', async () => {
  const lines = [];
  const session = gm.createSession({ url: srv.url, env: {}, bufferSize: 'lots', logger: (l) => lines.push(l) });
  for (let i = 0; i < 50 && lines.length === 0; i += 1) await sleep(10);
  assert.ok(lines.some((l) => l.startsWith('[graphmind] bufferSize')), JSON.stringify(lines));
  await session.dispose();
});

test('past the call-site limit a wrapped call is still recorded (the stepStart path)', async () => {
  // Detached (nothing listens on port 9): each call is node.started + node.finished.
  const session = gm.createSession({ url: 'ws://127.0.0.1:9/ingest', env: {}, bufferSize: 20_000, logger: () => {} });
  const names = 4096 + 3;
  for (let i = 0; i < names; i += 1) {
    const wrapped = session.wrapCall('tool', `t${i}`, async (x) => x.n + i);
    assert.equal(await wrapped({ n: 1 }), 1 + i);
    assert.equal(await wrapped({ n: 2 }), 2 + i, 'a second call of the same wrapper');
  }
  session.flushSync(5000);
  // run.started of the implicit run, then two events per call.
  assert.equal(session.stats().seq, 1 + names * 2 * 2);
  await session.dispose();
});
