'use strict';
// `make bench` (one run): a wrapped tool call with 1 KB in and out, detached, next to an
// OpenTelemetry span carrying the same JSON; how many of N synchronous calls each keeps;
// fingerprint of bench/sample-1k.json next to npm canonicalizers (+ the same SHA-256).
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const gm = require('..');
const { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base');
const canonicalize = require('canonicalize').default || require('canonicalize');
const { canonicalize: jsonCanonicalize } = require('json-canonicalize');
const stableStringify = require('safe-stable-stringify');

const sample = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', '..', '..', 'bench', 'sample-1k.json'), 'utf8'));
const output = { ...sample, echoed: true };

function perCallUs(fn, n) {
  for (let i = 0; i < Math.min(n, 2000); i += 1) fn();
  const t = performance.now();
  for (let i = 0; i < n; i += 1) fn();
  return ((performance.now() - t) * 1000) / n;
}

async function perCallAsyncUs(fn, n) {
  for (let i = 0; i < 2000; i += 1) await fn(i);
  const t = performance.now();
  for (let i = 0; i < n; i += 1) await fn(i);
  return ((performance.now() - t) * 1000) / n;
}

const row = (name, us, goal) => console.log(`  ${name.padEnd(52)} ${us.toFixed(2).padStart(8)} µs${goal ? `   (goal <= ${goal} µs: ${us <= goal ? 'met' : 'NOT met'})` : ''}`);

async function main() {
  const N = 20_000;
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
  console.log('\nwrapped tool call, 1 KB in and out, detached (awaited one by one):');
  const baseline = await perCallAsyncUs(() => bare(sample), N);
  const ours = await perCallAsyncUs(() => tool(sample), N);
  const otel = await perCallAsyncUs(() => otelCall(sample), N);
  row('plain async call (baseline)', baseline);
  row('graphmind wrapCall (core Step, node.started+finished)', ours, 5);
  row('@opentelemetry/sdk-trace-base span, same JSON', otel);
  row('graphmind overhead over the baseline', ours - baseline);
  session.flushSync(5000);
  await session.dispose();
  await provider.shutdown();

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
  console.log('\nfingerprint of bench/sample-1k.json:');
  row('graphmind fingerprint (canonical + SHA-256, core)', perCallUs(() => gm.fingerprint('tool:x', sample), N), 8);
  row('graphmind canonicalJson only', perCallUs(() => gm.canonicalJson(sample), N));
  row('canonicalize (npm) + sha256', perCallUs(() => sha(canonicalize(['tool:x', sample])), N));
  row('json-canonicalize (npm) + sha256', perCallUs(() => sha(jsonCanonicalize(['tool:x', sample])), N));
  row('safe-stable-stringify (npm) + sha256', perCallUs(() => sha(stableStringify(['tool:x', sample])), N));
  row('canonicalize (npm) text only', perCallUs(() => canonicalize(sample), N));
  row('json-canonicalize (npm) text only', perCallUs(() => jsonCanonicalize(sample), N));
  row('safe-stable-stringify (npm) text only', perCallUs(() => stableStringify(sample), N));
  console.log(`\nload average: ${require('node:os').loadavg().map((x) => x.toFixed(1)).join(' ')} (2 cores shared)`);
}

main().catch((e) => { console.error(e); process.exitCode = 1; });
