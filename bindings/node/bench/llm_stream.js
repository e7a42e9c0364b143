'use strict';
// `make bench-node`: what `wrapModel` costs the JavaScript thread per streamed chunk. The
// AI SDK's own MockLanguageModelV3 streams CHUNKS text-delta parts (no HTTP, so only the
// SDK and GraphMind run); the bare model's `doStream` read to the end, then the same model
// through `graphmind().wrapModel` (detached session, as an app without a debugger runs),
// interleaved in rounds. Per chunk = (wrapped - bare) / CHUNKS, the JS thread's CPU time
// (/proc/thread-self/stat) and wall time.
const { performance } = require('node:perf_hooks');
const { wrapLanguageModel } = require('ai');
const { MockLanguageModelV3 } = require('ai/test');
const { graphmind } = require(process.env.GRAPHMIND_NODE_PACKAGE || '..');
const { threadCpuUs } = require('./thread_cpu.js');

const CHUNKS = 200;
const ROUNDS = 15;
const CALLS_PER_BLOCK = 20;


function parts() {
  const out = [{ type: 'stream-start', warnings: [] }, { type: 'text-start', id: 't' }];
  for (let i = 0; i < CHUNKS; i += 1) out.push({ type: 'text-delta', id: 't', delta: `word${i} ` });
  out.push({ type: 'text-end', id: 't' });
  out.push({ type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: { inputTokens: { total: 10 }, outputTokens: { total: CHUNKS } } });
  return out;
}

const model = new MockLanguageModelV3({
  modelId: 'bench-model',
  doStream: async () => {
    const all = parts();
    let i = 0;
    return { stream: new ReadableStream({ pull(c) { if (i < all.length) c.enqueue(all[i++]); else c.close(); } }) };
  },
});

async function drain(m) {
  const { stream } = await m.doStream({ prompt: [{ role: 'user', content: [{ type: 'text', text: 'Count' }] }] });
  const reader = stream.getReader();
  for (;;) if ((await reader.read()).done) break;
}

async function main() {
  const gm = graphmind({ app: 'bench', url: 'ws://127.0.0.1:9/ingest', env: {}, bufferSize: 1_000_000, maxBufferBytes: 256 << 20, logger: () => {} });
  const bare = wrapLanguageModel({ model, middleware: {} });
  const wrapped = gm.wrapModel(model);
  const variants = { bare, wrapped };
  const acc = { bare: { n: 0, js: 0, wall: 0 }, wrapped: { n: 0, js: 0, wall: 0 } };
  for (const m of Object.values(variants)) for (let i = 0; i < 50; i += 1) await drain(m);
  for (let r = 0; r < ROUNDS; r += 1) {
    for (const [name, m] of Object.entries(variants)) {
      const t0 = performance.now();
      const j0 = threadCpuUs();
      for (let i = 0; i < CALLS_PER_BLOCK * 5; i += 1) await drain(m);
      const j1 = threadCpuUs();
      acc[name].n += CALLS_PER_BLOCK * 5;
      acc[name].wall += (performance.now() - t0) * 1000;
      acc[name].js = j0 === null || acc[name].js === null ? null : acc[name].js + (j1 - j0);
    }
  }
  const per = (a, k) => (a[k] === null ? null : a[k] / a.n);
  const fmt = (us) => (us === null ? 'n/a' : us.toFixed(1)).padStart(9);
  console.log(`graphmind node wrapModel stream bench (node ${process.version}, ai ${require('ai/package.json').version}), ${CHUNKS} text-delta chunks a call, detached`);
  console.log(`  ${''.padEnd(34)} ${'wall'.padStart(9)}    ${'JS thread'.padStart(9)}`);
  for (const name of ['bare', 'wrapped']) console.log(`  ${`${name} doStream, a call`.padEnd(34)} ${fmt(per(acc[name], 'wall'))} µs ${fmt(per(acc[name], 'js'))} µs`);
  const wall = (per(acc.wrapped, 'wall') - per(acc.bare, 'wall')) / CHUNKS;
  const js = acc.bare.js === null ? null : (per(acc.wrapped, 'js') - per(acc.bare, 'js')) / CHUNKS;
  console.log(`  ${'wrapModel, per chunk'.padEnd(34)} ${fmt(wall)} µs ${fmt(js)} µs   (${acc.wrapped.n} calls each)`);
  await gm.dispose();
}

main().catch((e) => { console.error(e); process.exit(1); });
