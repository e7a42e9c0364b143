'use strict';
// `make bench` (one run): a wrapped tool call with 1 KB in and out, detached, next to an
// OpenTelemetry span carrying the same JSON and the floor both pay (the two JSON.stringify,
// the text read into a Rust frame), with the issue's goals as ratios; how many of N
// synchronous calls each keeps;
// fingerprint of bench/sample-1k.json next to npm canonicalizers (+ the same SHA-256).
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
// GRAPHMIND_NODE_PACKAGE: measure another build of the package (e.g. an older one) with this bench.
const gm = require(process.env.GRAPHMIND_NODE_PACKAGE || '..');
const { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base');
const canonicalize = require('canonicalize').default || require('canonicalize');
const { canonicalize: jsonCanonicalize } = require('json-canonicalize');
const stableStringify = require('safe-stable-stringify');

const sample = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', '..', '..', 'bench', 'sample-1k.json'), 'utf8'));
const output = { ...sample, echoed: true };

const { threadCpuUs } = require('./thread_cpu.js');

// The variants run interleaved in blocks of ~100 ms, `rounds` times each, so a swing of the
// machine's load hits them alike. Per call: wall time, process CPU time (every thread:
// the JS thread and the session's worker) and the JS thread's own CPU time, each the
// median over the rounds; `ratio(a, b, f)` is the median of the rounds' ratios.
const CALL_ROUNDS = 15;
const median = (xs) => {
  const v = [...xs].sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};
async function interleaved(variants, { rounds = 25, blockMs = 100, isAsync = true } = {}) {
  const acc = new Map(Object.keys(variants).map((k) => [k, []]));
  for (const fn of Object.values(variants)) for (let i = 0; i < 2000; i += 1) if (isAsync) await fn(); else fn();
  for (let r = 0; r < rounds; r += 1) {
    for (const [name, fn] of Object.entries(variants)) {
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      const j0 = threadCpuUs();
      const end = t0 + blockMs;
      let n = 0;
      while (performance.now() < end) {
        if (isAsync) for (let i = 0; i < 100; i += 1) await fn();
        else for (let i = 0; i < 100; i += 1) fn();
        n += 100;
      }
      const c = process.cpuUsage(c0);
      const j1 = threadCpuUs();
      acc.get(name).push({ wall: ((performance.now() - t0) * 1000) / n, cpu: (c.user + c.system) / n, js: j0 === null ? null : (j1 - j0) / n });
    }
  }
  const out = {};
  for (const [name, per] of acc) {
    out[name] = { wall: median(per.map((m) => m.wall)), cpu: median(per.map((m) => m.cpu)), js: per[0].js === null ? null : median(per.map((m) => m.js)) };
  }
  out.ratio = (a, b, f) => median(acc.get(a).map((m, i) => m[f] / acc.get(b)[i][f]));
  return out;
}

const fmt = (us) => (us === null ? 'n/a' : us.toFixed(2)).padStart(8);
const header = () => console.log(`  ${''.padEnd(56)} ${'wall'.padStart(8)}    ${'cpu'.padStart(8)}    ${'JS thr'.padStart(8)}`);
const row = (name, m, goal) => {
  const judged = m.js ?? m.cpu;
  console.log(`  ${name.padEnd(56)} ${fmt(m.wall)} µs ${fmt(m.cpu)} µs ${fmt(m.js)} µs${goal ? `   (goal <= ${goal} µs: ${judged <= goal ? 'met' : 'NOT met'})` : ''}`);
};

async function main() {
  console.log(`graphmind node bench (node ${process.version}), ${JSON.stringify(sample).length} B sample`);

  // -- a wrapped tool call, detached ---------------------------------------------------
  const session = gm.createSession({ url: 'ws://127.0.0.1:9/ingest', env: {}, bufferSize: 50_000, maxBufferBytes: 256 << 20, loopGuard: false, logger: () => {} });
  const tool = session.wrapCall('tool', 'bench', async () => output);
  const bare = async () => output;
  const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new InMemorySpanExporter())] });
  const tracer = provider.getTracer('bench');
  const otelCall = async (input) => {
    const span = tracer.startSpan('tool bench');
    span.setAttribute('input', JSON.stringify(input));
    const out = await bare(input);
    span.setAttribute('output', JSON.stringify(out));
    span.end();
    return out;
  };
  // The floor any recorder of the call pays on the JavaScript thread: the two payloads'
  // JSON.stringify, and the text handed to Rust, read as a wrapped call reads it and
  // written into a frame (`frameFloor`, src/text.rs: what the worker does with a spliced
  // value, done here on this thread, so it is all in the floor's CPU).
  let kept = 0;
  const stringified = async (input) => {
    kept += JSON.stringify(input).length;
    const out = await bare(input);
    kept += JSON.stringify(out).length;
    return out;
  };
  const floorCall = async (input) => {
    kept += gm.native.frameFloor(JSON.stringify(input));
    const out = await bare(input);
    kept += gm.native.frameFloor(JSON.stringify(out));
    return out;
  };
  console.log(`\nwrapped tool call, 1 KB in and out, detached (awaited one by one), per call, median of ${CALL_ROUNDS} interleaved rounds:`);
  header();
  const w = await interleaved({ baseline: () => bare(sample), ours: () => tool(sample), otel: () => otelCall(sample), stringify: () => stringified(sample), floor: () => floorCall(sample) }, { rounds: CALL_ROUNDS, blockMs: 150 });
  row('plain async call (baseline)', w.baseline);
  row('graphmind wrapCall (core Step, node.started+finished)', w.ours);
  row('@opentelemetry/sdk-trace-base span, same JSON', w.otel);
  row('floor: JSON.stringify of the two payloads', w.stringify);
  row('floor: the same + each text read into a Rust frame', w.floor);
  const over = (a, b) => ({ wall: a.wall - b.wall, cpu: a.cpu - b.cpu, js: a.js === null ? null : a.js - b.js });
  row('graphmind overhead over the baseline', over(w.ours, w.baseline));
  row('OpenTelemetry overhead over the baseline', over(w.otel, w.baseline));
  // The goals of the Node model issue (#19), as ratios in this run (medians of the
  // per-round ratios: each round's blocks ran side by side, under the same load).
  const judge = (ratio, goal) => `${ratio.toFixed(2)}x (goal <= ${goal.toFixed(1)}x: ${ratio <= goal ? 'met' : 'NOT met'})`;
  const r = (a, b, f) => w.ratio(a, b, f).toFixed(2);
  if (w.ours.js !== null) {
    console.log(`  JS thread per call vs the span: ${judge(w.ratio('ours', 'otel', 'js'), 1.0)}; vs the floor ${r('ours', 'floor', 'js')}x (the span: ${r('otel', 'floor', 'js')}x)`);
  }
  console.log(`  CPU in all per call vs the span: ${judge(w.ratio('ours', 'otel', 'cpu'), 1.3)}; vs the floor ${r('ours', 'floor', 'cpu')}x (the span: ${r('otel', 'floor', 'cpu')}x)`);
  console.log(`  wall per call vs the span: ${r('ours', 'otel', 'wall')}x`);
  session.flushSync(5000);
  await session.dispose();
  await provider.shutdown();
  if (kept === 0) throw new Error('the floor did no work');

  // -- what a tight synchronous loop keeps ----------------------------------------------
  const M = 10_000;
  const exporter = new InMemorySpanExporter();
  const p2 = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
  const t2 = p2.getTracer('loop');
  for (let i = 0; i < M; i += 1) {
    const span = t2.startSpan('tool bench');
    span.setAttribute('input', JSON.stringify(sample));
    span.setAttribute('output', JSON.stringify(output));
    span.end();
  }
  await p2.forceFlush();
  const otelKept = exporter.getFinishedSpans().length;
  await p2.shutdown();
  const s2 = gm.createSession({ url: 'ws://127.0.0.1:9/ingest', env: {}, bufferSize: 3 * M, maxBufferBytes: 256 << 20, loopGuard: false, logger: () => {} });
  const tool2 = s2.wrapCall('tool', 'bench', () => output);
  const pending = [];
  for (let i = 0; i < M; i += 1) pending.push(tool2(sample)); // each call's start runs synchronously
  await Promise.all(pending);
  s2.flushSync(10_000);
  const st = s2.stats();
  await s2.dispose();
  console.log(`\n${M} calls in a tight synchronous loop:`);
  console.log(`  @opentelemetry BatchSpanProcessor (default queue 2048): kept ${otelKept}, dropped ${M - otelKept}`);
  console.log(`  graphmind (bufferSize ${3 * M}): ${st.seq} events, ${st.buffered} buffered, lost ${st.lost}, dropped ${st.dropped}`);

  // -- fingerprint ---------------------------------------------------------------------
  const sha = (text) => crypto.createHash('sha256').update(text).digest('hex').slice(0, 32);
  console.log('\nfingerprint of bench/sample-1k.json, per call:');
  header();
  const f = await interleaved({
    fp: () => gm.fingerprint('tool:x', sample),
    canon: () => gm.canonicalJson(sample),
    c1: () => sha(canonicalize(['tool:x', sample])),
    c2: () => sha(jsonCanonicalize(['tool:x', sample])),
    c3: () => sha(stableStringify(['tool:x', sample])),
    t1: () => canonicalize(sample),
    t2: () => jsonCanonicalize(sample),
    t3: () => stableStringify(sample),
  }, { rounds: 20, isAsync: false });
  row('graphmind fingerprint (canonical + SHA-256, core)', f.fp, 8);
  row('graphmind canonicalJson only', f.canon);
  row('canonicalize (npm) + sha256', f.c1);
  row('json-canonicalize (npm) + sha256', f.c2);
  row('safe-stable-stringify (npm) + sha256', f.c3);
  row('canonicalize (npm) text only', f.t1);
  row('json-canonicalize (npm) text only', f.t2);
  row('safe-stable-stringify (npm) text only', f.t3);
  console.log(`\nload average: ${require('node:os').loadavg().map((x) => x.toFixed(1)).join(' ')} (2 cores shared)`);
}

main().catch((e) => { console.error(e); process.exitCode = 1; });
