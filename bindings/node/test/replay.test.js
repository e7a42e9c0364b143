'use strict';
// Replay in Node (docs/replay.md): examples/node/agent.js recorded into a real
// `graphmind serve` and exported, then run again as separate processes in replay mode: a
// copy whose tools throw if they run still finishes with the recorded result (nothing
// ran), a copy whose first tool call differs diverges and runs live, and a recorded tool
// error is raised as an Error with its name and message.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { startServer, ROOT, BIN } = require('./helpers');

const AGENT = path.join(ROOT, 'examples', 'node', 'agent.js');
let srv;
let dir;
let recorded;
let file;

function runAgent(script, env) {
  const r = spawnSync(process.execPath, [script], {
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, GRAPHMIND_URL: srv.url, NODE_ENV: 'development', ...env },
  });
  assert.equal(r.status, 0, r.stderr);
  return { result: JSON.parse(/result: (.*)/.exec(r.stdout)[1]), stderr: r.stderr };
}

/** A copy of the example agent next to it (its `require` of bindings/node still resolves). */
function variant(name, edit) {
  const source = fs.readFileSync(AGENT, 'utf8');
  const changed = edit(source);
  assert.notEqual(changed, source);
  const out = path.join(path.dirname(AGENT), `.replay-${name}-${process.pid}.js`);
  fs.writeFileSync(out, changed);
  return out;
}

async function newestRun(known) {
  for (let i = 0; i < 300; i += 1) {
    const { body } = await srv.get('/api/runs');
    const run = body.runs.find((r) => r.app === 'node-example-agent' && !known.has(r.id) && r.status !== 'running');
    if (run) {
      known.add(run.id);
      return run.id;
    }
    await new Promise((r) => setTimeout(r, 30));
  }
  throw new Error('no run');
}

const known = new Set();

test.before(async () => {
  srv = await startServer(['--pause-on-error', 'off']);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gm-node-replay-'));
  const first = runAgent(AGENT, {});
  recorded = { result: first.result, run: await newestRun(known) };
  file = path.join(dir, 'run.ndjson');
  const r = spawnSync(BIN, ['record', recorded.run, '--db', srv.dbPath, '--no-redact-secrets', '--out', file], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});

test.after(() => srv && srv.stop && srv.stop());

test('a replayed run never runs its tools and returns the recorded result', async () => {
  const throwing = variant('throwing', (s) => s.replaceAll('async execute(', 'async execute(_a) { throw new Error("a replayed tool ran"); }, async unused('));
  try {
    for (const env of [{ GRAPHMIND_REPLAY_FILE: file }, { GRAPHMIND_REPLAY: recorded.run }]) {
      const { result } = runAgent(throwing, env);
      assert.deepEqual(result, recorded.result);
      const id = await newestRun(known);
      const events = await srv.events(id, 6);
      const meta = events.find((e) => e.type === 'run.started').payload.meta;
      assert.equal(meta.replayOf, recorded.run);
      const tools = events.filter((e) => e.type.startsWith('node.') && e.payload.nodeId.startsWith('tool:'));
      assert.equal(tools.length, 4);
      assert.ok(tools.every((e) => e.payload.replayed === true), JSON.stringify(tools));
    }
  } finally {
    fs.rmSync(throwing, { force: true });
  }
});

test('a changed tool argument diverges and the run goes live', async () => {
  const changed = variant('changed', (s) => s.replace("to: 'LIS'", "to: 'OPO'"));
  try {
    const { result, stderr } = runAgent(changed, { GRAPHMIND_REPLAY_FILE: file });
    assert.equal(result.booked, true);
    assert.match(stderr, /tool:search#1 diverged/);
    const id = await newestRun(known);
    const events = await srv.events(id, 6);
    const search = events.find((e) => e.type === 'node.started' && e.payload.nodeId === 'tool:search').payload;
    const { recordedKey, liveKey, ...live } = search.replayLive;
    assert.deepEqual(live, { reason: 'diverged', at: 'tool:search#1', differs: ['input.to'] });
    assert.match(recordedKey, /^[0-9a-f]{32}$/);
    assert.match(liveKey, /^[0-9a-f]{32}$/);
    assert.notEqual(recordedKey, liveKey);
    assert.equal(search.replayed, undefined);
  } finally {
    fs.rmSync(changed, { force: true });
  }
});

test('a recorded tool error is raised as an Error with its name and message', () => {
  const rec = path.join(dir, 'error.ndjson');
  const lines = [
    { gm: 1, seq: 0, ts: 1, runId: 'run_e', type: 'run.started', payload: { app: 'node-replay', sdk: { name: 'node', version: '0' }, meta: { name: 'trip' } } },
    { gm: 1, seq: 1, ts: 1, runId: 'run_e', type: 'node.started', payload: { nodeId: 'tool:lookup', kind: 'tool', name: 'lookup', instanceId: 'a', input: { city: 'Porto' } } },
    { gm: 1, seq: 2, ts: 1, runId: 'run_e', type: 'node.error', payload: { nodeId: 'tool:lookup', instanceId: 'a', error: { name: 'TimeoutError', message: 'slow' } } },
    { gm: 1, seq: 3, ts: 1, runId: 'run_e', type: 'node.finished', payload: { nodeId: 'tool:lookup', instanceId: 'a', durationMs: 1, status: 'error' } },
  ];
  fs.writeFileSync(rec, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  const script = `
    const { graphmind } = require(${JSON.stringify(path.join(ROOT, 'bindings', 'node'))});
    const gm = graphmind({ app: 'node-replay' });
    const tools = gm.wrapTools({ lookup: { async execute() { throw new Error('a replayed tool ran'); } } });
    gm.run('trip', () => tools.lookup.execute({ city: 'Porto' })).then(
      () => console.log('no error'),
      (e) => console.log(JSON.stringify({ name: e.name, message: e.message, replayed: e.replayed })),
    ).finally(() => gm.dispose());`;
  const r = spawnSync(process.execPath, ['-e', script], {
    encoding: 'utf8',
    timeout: 20_000,
    env: { ...process.env, GRAPHMIND_URL: 'ws://127.0.0.1:1/ingest', GRAPHMIND_REPLAY_FILE: rec, NODE_ENV: 'development' },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout.trim().split('\n').pop()), { name: 'TimeoutError', message: 'slow', replayed: true });
});

// -- model calls: the npm `openai` client through /openai's wrapClient -------------------------

test('openai calls replay by run id: the same reply and stream, nothing sent', async () => {
  const OpenAI = require('openai');
  const { graphmind: openaiGraphmind } = require('../openai.js');
  const { startFakeProvider } = require('./helpers');
  const { chat, chatStream } = require('./provider-helpers');
  const fake = await startFakeProvider();
  try {
    const ask = async (gm) => {
      const c = gm.wrapClient(new OpenAI({ apiKey: 'sk-test', baseURL: fake.baseURL, maxRetries: 0 }));
      return gm.run('ask', async () => {
        const messages = [{ role: 'user', content: 'Weather in Lisbon?' }];
        const reply = await c.chat.completions.create({ model: 'gpt-test', messages });
        const stream = await c.chat.completions.create({ model: 'gpt-test', messages: [...messages, reply.choices[0].message, { role: 'user', content: 'Again' }], stream: true, stream_options: { include_usage: true } });
        let text = '';
        for await (const chunk of stream) text += (chunk.choices[0] && chunk.choices[0].delta.content) || '';
        return { reply: reply.choices[0].message.content, finish: reply.choices[0].finish_reason, text };
      });
    };
    await fake.script(chat('Sunny in Lisbon.', { usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 } }), chatStream());
    const gm1 = openaiGraphmind({ app: 'openai-replay', url: srv.url, env: {} });
    const original = await ask(gm1);
    await gm1.dispose();
    assert.deepEqual(original, { reply: 'Sunny in Lisbon.', finish: 'stop', text: 'Sunny' });
    const { body } = await srv.get('/api/runs');
    const run = body.runs.find((r) => r.app === 'openai-replay');
    await srv.events(run.id, 8);
    await fake.reset();
    const gm2 = openaiGraphmind({ app: 'openai-replay', url: srv.url, env: {}, replay: run.id });
    const replayed = await ask(gm2);
    await gm2.dispose();
    assert.deepEqual(replayed, original);
    assert.deepEqual(await fake.requests(), [], 'the provider saw no request');
  } finally {
    fake.stop();
  }
});
