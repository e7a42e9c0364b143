'use strict';
// Replay figures in Node, one run, side by side (docs/replay.md): a 500-step run (500
// wrapTools calls, the 1 KB sample in and out) recorded into a real `graphmind serve`, then
// replayed by run id through /testing's replay() (the fetch from the server included) and
// a live run of the same size right after, five rounds. Per call: the median wall time of
// one awaited call (the JS thread's CPU clock ticks at 10 ms, too coarse for one call).
//   node bindings/node/bench/replay.js [bench/sample-1k.json]   (GRAPHMIND_BIN: the server)
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const { graphmind } = require('../openai.js');
const { replay } = require('../testing.js');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = process.env.GRAPHMIND_BIN || path.join(ROOT, 'target', 'release', 'graphmind');
const STEPS = 500;
const ROUNDS = 5;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function startServer(dir) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GRAPHMIND_')));
  Object.assign(env, { GRAPHMIND_HOME: path.join(dir, 'home'), GRAPHMIND_TELEMETRY: '0', GRAPHMIND_PAUSE_ON_ERROR: 'off' });
  const child = spawn(BIN, ['--port', '0', '--json', '--no-open', '--db', path.join(dir, 'g.db')], { stdio: ['ignore', 'pipe', 'ignore'], env });
  const line = await new Promise((resolve) => readline.createInterface({ input: child.stdout }).once('line', resolve));
  return { child, port: JSON.parse(line).port };
}

async function stored(port, runId, count) {
  for (let i = 0; i < 600; i += 1) {
    const res = await fetch(`http://127.0.0.1:${port}/api/runs/${runId}/events?limit=1`);
    const body = res.status === 200 ? await res.json() : null;
    if (body && body.total >= count) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the run was not stored');
}

async function main() {
  const sample = JSON.parse(fs.readFileSync(process.argv[2] || path.join(ROOT, 'bench', 'sample-1k.json'), 'utf8'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gm-bench-replay-'));
  const { child, port } = await startServer(dir);
  try {
    const gm = graphmind({ app: 'bench-replay', url: `ws://127.0.0.1:${port}/ingest`, env: {}, loopGuard: false });
    if (!(await gm.ready({ timeoutMs: 5000 }))) throw new Error('no server');
    const tools = gm.wrapTools({ work: async ({ payload, i }) => ({ echo: payload, i }) });
    const oneRun = async (name) => {
      const perCall = [];
      let runId;
      const t0 = process.hrtime.bigint();
      await gm.run(name, async (ctx) => {
        runId = ctx.runId;
        for (let i = 0; i < STEPS; i += 1) {
          const c = process.hrtime.bigint();
          await tools.work({ payload: sample, i });
          perCall.push(Number(process.hrtime.bigint() - c) / 1000);
        }
      });
      return { ms: Number(process.hrtime.bigint() - t0) / 1e6, perCall, runId };
    };
    await oneRun('warm-up');
    const { runId: recorded } = await oneRun('five-hundred');
    gm.session.flushSync(10_000);
    await stored(port, recorded, 2 * STEPS + 2);
    const rows = [];
    for (let k = 0; k < ROUNDS; k += 1) {
      const t0 = process.hrtime.bigint();
      let run;
      const r = await replay(recorded, async () => { run = await oneRun('five-hundred'); }, { session: gm, strict: true });
      const e2e = Number(process.hrtime.bigint() - t0) / 1e6;
      if (r.replayed !== STEPS) throw new Error(`replayed ${r.replayed}`);
      const live = await oneRun('five-hundred-live');
      rows.push([e2e, run.ms, live.ms, median(run.perCall), median(live.perCall)]);
    }
    console.log(`Node: ${STEPS}-step run, 1 KB in and out per step, attached to graphmind serve, ${ROUNDS} rounds`);
    console.log('round | replay end to end (fetch + run) | replayed run | live run | replayed call (wall, median) | live call (wall, median)');
    rows.forEach((r, k) => console.log(`${k + 1} | ${r[0].toFixed(1)} ms | ${r[1].toFixed(1)} ms | ${r[2].toFixed(1)} ms | ${r[3].toFixed(1)} us | ${r[4].toFixed(1)} us`));
    const med = (i) => median(rows.map((r) => r[i]));
    console.log(`median | ${med(0).toFixed(1)} ms | ${med(1).toFixed(1)} ms | ${med(2).toFixed(1)} ms | ${med(3).toFixed(1)} us | ${med(4).toFixed(1)} us (replayed/live ${(med(3) / med(4)).toFixed(2)})`);
    await gm.dispose();
  } finally {
    child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
