'use strict';
// `make bench-node`: what `wrapClient` adds to a real npm `openai` call. The bare client and
// the same client through `graphmind('/openai').wrapClient` (a detached session, as an app
// without a debugger runs) call `chat.completions.create` against the local fake provider
// (tests/fake_provider/server.py, HTTP on 127.0.0.1), interleaved in rounds: a complete
// answer, then a stream of CHUNKS chunks read to its end. Added time per call =
// wrapped - bare; per streamed chunk = (stream added - call added) / the stream's chunks. Per call: the
// process's CPU time (process.cpuUsage, µs resolution: the JavaScript thread, the core's
// worker and libuv's threads, the fake provider being another process), the JavaScript
// thread's alone (bench/thread_cpu.js), and the
// wall time (dominated by the loopback HTTP round trip).
const { performance } = require('node:perf_hooks');
const OpenAI = require('openai');
const { graphmind } = require(process.env.GRAPHMIND_NODE_PACKAGE ? `${process.env.GRAPHMIND_NODE_PACKAGE}/openai.js` : '../openai.js');
const { startFakeProvider } = require('../test/helpers.js');
const { chat, chunk } = require('../test/provider-helpers.js');
const { threadCpuUs } = require('./thread_cpu.js');

const CHUNKS = 100;
const ROUNDS = 10;
const CALLS_PER_BLOCK = 50;
const WARMUP = 40;

function streamAnswer() {
  const sse = [chunk({ role: 'assistant', content: '' })];
  for (let i = 0; i < CHUNKS; i += 1) sse.push(chunk({ content: `word${i} ` }));
  sse.push(chunk({}, { finish: 'stop' }));
  sse.push(chunk(null, { usage: { prompt_tokens: 10, completion_tokens: CHUNKS, total_tokens: 10 + CHUNKS } }));
  sse.push([null, '[DONE]']);
  return { status: 200, sse };
}

const messages = [{ role: 'user', content: 'Count to a hundred.' }];

async function once(client, stream) {
  if (!stream) {
    const c = await client.chat.completions.create({ model: 'gpt-test', messages });
    return c.choices[0].message.content.length;
  }
  const s = await client.chat.completions.create({ model: 'gpt-test', messages, stream: true, stream_options: { include_usage: true } });
  let n = 0;
  for await (const c of s) n += c.choices.length;
  return n;
}

async function main() {
  const fake = await startFakeProvider();
  const gm = graphmind({ app: 'bench', url: 'ws://127.0.0.1:9/ingest', env: {}, bufferSize: 1_000_000, maxBufferBytes: 256 << 20, logger: () => {} });
  const make = () => new OpenAI({ apiKey: 'sk-bench', baseURL: fake.baseURL, maxRetries: 0 });
  const variants = { bare: make(), wrapped: gm.wrapClient(make()) };
  const complete = chat('The numbers one to a hundred.', { usage: { prompt_tokens: 10, completion_tokens: 8, total_tokens: 18 } });
  const streamed = streamAnswer();
  const block = async (client, stream, n) => {
    await fake.script(...Array.from({ length: n }, () => (stream ? streamed : complete)));
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    const j0 = threadCpuUs();
    for (let i = 0; i < n; i += 1) await once(client, stream);
    const j1 = threadCpuUs();
    const c1 = process.cpuUsage(c0);
    return { wall: (performance.now() - t0) * 1000, cpu: c1.user + c1.system, js: j0 === null ? null : j1 - j0 };
  };
  for (const c of Object.values(variants)) { await block(c, false, WARMUP); await block(c, true, WARMUP / 4); }
  // Per round, per call: each block's figures divided by its calls; the figures printed
  // are medians over the rounds, the added time the median of the rounds' differences
  // (the blocks of one round ran side by side, under the same load).
  const rounds = {};
  for (let r = 0; r < ROUNDS; r += 1) {
    for (const stream of [false, true]) {
      for (const [name, c] of Object.entries(variants)) {
        const key = `${name}:${stream ? 'stream' : 'call'}`;
        const m = await block(c, stream, CALLS_PER_BLOCK);
        (rounds[key] ??= []).push({ wall: m.wall / CALLS_PER_BLOCK, cpu: m.cpu / CALLS_PER_BLOCK, js: m.js === null ? null : m.js / CALLS_PER_BLOCK });
      }
      await fake.reset();
    }
  }
  const median = (xs) => {
    if (xs.some((x) => x === null)) return null;
    const v = [...xs].sort((a, b) => a - b);
    return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  };
  const per = (k, f) => median(rounds[k].map((m) => m[f]));
  const us = (v) => (v === null ? 'n/a' : `${v.toFixed(1)} µs`);
  console.log(`wrapClient(openai) chat.completions.create against the fake provider (HTTP, 127.0.0.1), detached session, medians of ${ROUNDS} interleaved rounds of ${CALLS_PER_BLOCK}:`);
  const diffs = (kind, f) => rounds[`wrapped:${kind}`].map((m, i) => (m[f] === null ? null : m[f] - rounds[`bare:${kind}`][i][f]));
  const added = (kind, f) => median(diffs(kind, f));
  const perChunk = (f) => {
    const c = diffs('call', f);
    return median(diffs('stream', f).map((d, i) => (d === null || c[i] === null ? null : (d - c[i]) / (CHUNKS + 3))));
  };
  const cols = (k) => `${us(per(k, 'cpu'))} cpu, ${us(per(k, 'js'))} JS thread, ${us(per(k, 'wall'))} wall`;
  for (const kind of ['call', 'stream']) {
    const label = kind === 'call' ? 'complete answer' : `stream of ${CHUNKS + 3} chunks`;
    console.log(`  ${label}, per call: bare ${cols(`bare:${kind}`)}`);
    console.log(`  ${' '.repeat(label.length)}            wrapped ${cols(`wrapped:${kind}`)}`);
  }
  console.log(`  added per call: ${us(added('call', 'cpu'))} cpu, ${us(added('call', 'js'))} JS thread, ${us(added('call', 'wall'))} wall`);
  console.log(`  added per streamed chunk (beyond the call's own): ${us(perChunk('cpu'))} cpu, ${us(perChunk('js'))} JS thread, ${us(perChunk('wall'))} wall`);
  const ratio = (kind) => per(`wrapped:${kind}`, 'cpu') / per(`bare:${kind}`, 'cpu');
  console.log(`  CPU with the wrapper / bare: ${ratio('call').toFixed(2)}x a complete answer, ${ratio('stream').toFixed(2)}x a stream`);
  const st = gm.session.stats();
  console.log(`  recorded: ${st.seq} events, dropped ${st.dropped}, lost ${st.lost}`);
  await gm.dispose();
  fake.stop();
}

main().catch((e) => { console.error(e); process.exit(1); });
