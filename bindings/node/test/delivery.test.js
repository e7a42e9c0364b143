'use strict';
// Every exit path and every rate, against a real `graphmind serve`: a warning pending at
// exit is printed and the status is the app's; a short script (no ready()) stores its run
// whole, with dispose() and without it (the 'exit' hook); a flood while attached is stored
// event for event. GM_EXIT_RUNS / GM_FLOOD_CALLS lengthen them (`make soak`).
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const gm = require('..');
const { startServer } = require('./helpers');

const HERE = path.resolve(__dirname, '..');
const EXIT_RUNS = Number(process.env.GM_EXIT_RUNS || 40);
const FLOOD_CALLS = Number(process.env.GM_FLOOD_CALLS || 20000);

function childEnv(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('GRAPHMIND_')) env[k] = v;
  return { ...env, GRAPHMIND_TELEMETRY: '0', ...extra };
}

/** Runs `script` with stderr on a file: resolves { code, out, err }. */
function runScript(script, env) {
  const errPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gm-exit-')), 'err');
  const errFd = fs.openSync(errPath, 'w');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', script], { cwd: HERE, env, stdio: ['ignore', 'pipe', errFd] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.on('exit', (code) => {
      fs.closeSync(errFd);
      const err = fs.readFileSync(errPath, 'utf8');
      fs.rmSync(path.dirname(errPath), { recursive: true, force: true });
      resolve({ code, out, err });
    });
  });
}

const WARN_AT_EXIT = (end) => `
const gm = require('.');
const s = gm.createSession({ appName: 'exit', url: 'ws://127.0.0.1:9/ingest' });
const same = s.wrapCall('tool', 'same', (x) => x);
(async () => {
  for (let i = 0; i < 3; i += 1) await same(1);
  ${end}
})();
`;

test('a warning pending at exit is printed and the status is the app\'s', async () => {
  const env = childEnv({ GRAPHMIND_ON_LOOP: 'warn', GRAPHMIND_LOOP_THRESHOLD: '3' });
  for (const [end, expected] of [['await s.dispose();', 0], ['', 0], ['process.exit(3);', 3]]) {
    for (let round = 0; round < EXIT_RUNS / 4; round += 1) {
      const results = await Promise.all([runScript(WARN_AT_EXIT(end), env), runScript(WARN_AT_EXIT(end), env)]);
      for (const { code, err } of results) {
        assert.equal(code, expected, `${end || 'plain exit'}: ${err.slice(-300)}`);
        assert.match(err, /possible loop/, `${end || 'plain exit'}: the warning was lost`);
      }
    }
  }
});

const SHORT = (end) => `
const gm = require('.');
const s = gm.createSession({ appName: 'short', url: process.env.GM_URL, env: {} });
const work = s.wrapCall('tool', 'work', (n) => n * 2);
(async () => {
  await s.run('short', async (ctx) => {
    console.log(ctx.runId);
    for (let n = 0; n < 10; n += 1) await work(n);
  });
  ${end}
})();
`;

test('a short script without ready() stores its run whole, disposed or not', async () => {
  const srv = await startServer(['--pause-on-error', 'off']);
  try {
    for (const end of ['await s.dispose();', '', 'process.exit(0);']) {
      for (let round = 0; round < 3; round += 1) {
        const { code, out, err } = await runScript(SHORT(end), childEnv({ GM_URL: srv.url }));
        assert.equal(code, 0, err);
        const runId = out.trim().split('\n')[0];
        const run = await srv.run(runId, (r) => r.status !== 'running');
        // run.started, ten tools (started + finished), run.finished
        assert.deepEqual([run.status, run.eventCount], ['ok', 22], `${end || 'plain exit'}: ${JSON.stringify(run)}`);
      }
    }
  } finally {
    srv.stop();
  }
});

test('a flood while attached is stored event for event and ends ok', async () => {
  const srv = await startServer(['--pause-on-error', 'off']);
  try {
    const s = gm.createSession({ appName: 'flood', url: srv.url, env: {} });
    assert.equal(await s.ready({ timeoutMs: 5000 }), true);
    const pad = 'x'.repeat(1000);
    const work = s.wrapCall('tool', 'work', (v) => v.n);
    let runId;
    const started = process.hrtime.bigint();
    await s.run('flood', async (ctx) => {
      runId = ctx.runId;
      for (let n = 0; n < FLOOD_CALLS; n += 1) await work({ n, pad });
    });
    const perCallUs = Number(process.hrtime.bigint() - started) / 1000 / FLOOD_CALLS;
    const stats = s.stats();
    await s.dispose();
    const emitted = 2 * FLOOD_CALLS + 2;
    assert.deepEqual([stats.seq, stats.lost], [emitted, 0], JSON.stringify(stats));
    const deadline = Date.now() + 60_000;
    let run;
    do {
      const { body } = await srv.get('/api/runs');
      run = body.runs.find((r) => r.id === runId);
    } while ((!run || run.status === 'running' || run.eventCount < emitted) && Date.now() < deadline);
    assert.deepEqual([run.status, run.eventCount], ['ok', emitted], `${perCallUs.toFixed(1)} us a call`);
  } finally {
    srv.stop();
  }
});

async function allEvents(srv, runId) {
  const out = [];
  let after = -1;
  for (;;) {
    const { status, body } = await srv.get(`/api/runs/${runId}/events?afterSeq=${after}&limit=1000`);
    const page = status === 200 ? body.events : [];
    if (page.length === 0) return out;
    out.push(...page);
    after = page[page.length - 1].seq;
  }
}

test('a stopped server delays the app at most the deadline and every drop is marked', async () => {
  const srv = await startServer(['--pause-on-error', 'off']);
  try {
    const stopFor = Number(process.env.GM_STOP_SECS || 2) * 1000;
    const s = gm.createSession({ appName: 'stopped', url: srv.url, env: {} });
    assert.equal(await s.ready({ timeoutMs: 5000 }), true);
    const pad = 'x'.repeat(1000);
    const work = s.wrapCall('tool', 'work', (v) => v.n);
    let runId;
    let slowest = 0;
    await s.run('stopped', async (ctx) => {
      runId = ctx.runId;
      const started = performance.now();
      let stoppedAt = null;
      let resumedAt = null;
      for (let n = 0; resumedAt === null || performance.now() - resumedAt < 1000; n += 1) {
        const now = performance.now();
        if (stoppedAt === null && now - started > 300) { process.kill(srv.pid, 'SIGSTOP'); stoppedAt = now; }
        if (resumedAt === null && stoppedAt !== null && now - stoppedAt >= stopFor) { process.kill(srv.pid, 'SIGCONT'); resumedAt = now; }
        const t = performance.now();
        await work({ n, pad });
        slowest = Math.max(slowest, performance.now() - t);
      }
    });
    assert.equal(s.flushSync(60000), true);
    const stats = s.stats();
    await s.dispose();
    // BACKPRESSURE_DEADLINE is 250 ms; a call is two events, plus this loaded machine's slack.
    assert.ok(slowest <= 1000, `the slowest call took ${slowest.toFixed(0)} ms`);
    const run = await srv.run(runId, (r) => r.status !== 'running');
    assert.equal(run.status, 'ok');
    const deadline = Date.now() + 30_000;
    let events;
    let marked;
    do {
      events = await allEvents(srv, runId);
      marked = events.filter((e) => e.type === 'graph.hint').reduce((sum, e) => sum + ((e.payload.gap || {}).droppedCount || 0), 0);
    } while (events.length + marked < stats.seq && Date.now() < deadline);
    assert.equal(events.length + marked, stats.seq, JSON.stringify(stats));
    assert.equal(marked, stats.lost);
  } finally {
    try { process.kill(srv.pid, 'SIGCONT'); } catch { /* already gone */ }
    srv.stop();
  }
});
