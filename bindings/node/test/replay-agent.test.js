'use strict';
// Replay of a model-driven agent in Node (docs/replay.md): test/fixtures/replay-agent.js
// (the npm `openai` client through /openai's wrapClient) recorded against
// tests/fake_provider/server.py into a real `graphmind serve` and exported with
// `graphmind record`; then run again as separate processes: the whole run from the file
// and by run id with nothing scripted at the provider, to `@llm:step#3` with the provider
// up, with an edited output at the fork, with a changed agent (a divergence), with bad
// input (a warning, a live run); and `/testing`'s replay() in-process.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { startServer, startFakeProvider, BIN } = require('./helpers');
const { chat, chunk } = require('./provider-helpers');

const AGENT = path.join(__dirname, 'fixtures', 'replay-agent.js');
const APP = 'node-openai-agent';
const EXPECTED = { answer: 'Booked: GM202-ADA', summary: 'Booked GM202 for Ada, AMS to LIS.' };
const USAGE = { prompt_tokens: 20, completion_tokens: 5, total_tokens: 25 };
const call = (id, name, args) => ({ id, type: 'function', function: { name, arguments: JSON.stringify(args, null, 1) } });
const summaryStream = () => ({
  status: 200,
  sse: [chunk({ role: 'assistant', content: '' }), ...EXPECTED.summary.match(/.{1,7}/gs).map((p) => chunk({ content: p })), chunk({}, { finish: 'stop' }), [null, '[DONE]']],
});
const SCRIPT = [
  chat(null, { toolCalls: [call('call_s', 'search_flights', { origin: 'AMS', destination: 'LIS' })], finish: 'tool_calls', usage: USAGE }),
  chat(null, { toolCalls: [call('call_b', 'book', { flight: 'GM202', passenger: 'ada' })], finish: 'tool_calls', usage: USAGE }),
  chat('Booked: GM202-ADA', { usage: USAGE }),
  summaryStream(),
];

let srv;
let fake;
let dir;
let recorded;
const known = new Set();

function runAgent(env) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GRAPHMIND')));
  const r = spawnSync(process.execPath, [AGENT], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...clean, GRAPHMIND_URL: srv.url, OPENAI_BASE_URL: fake.baseURL, NODE_ENV: 'development', ...env },
  });
  assert.equal(r.status, 0, r.stderr);
  return { out: JSON.parse(r.stdout.trim().split('\n').pop()), stderr: r.stderr };
}

async function newestRun() {
  for (let i = 0; i < 300; i += 1) {
    const { body } = await srv.get('/api/runs');
    const run = body.runs.find((r) => r.app === APP && !known.has(r.id) && r.status && r.status !== 'running');
    if (run) {
      known.add(run.id);
      return run.id;
    }
    await new Promise((r) => setTimeout(r, 30));
  }
  throw new Error('no finished run');
}

/** The newest run's stored events, once finished; it must be a replay of the recording. */
async function replayedEvents() {
  const id = await newestRun();
  let events = await srv.events(id, 2);
  for (let i = 0; i < 100 && events[events.length - 1].type !== 'run.finished'; i += 1) events = await srv.events(id, events.length + 1);
  assert.equal(events.find((e) => e.type === 'run.started').payload.meta.replayOf, recorded.run);
  return events;
}

const nodes = (events, type) => events.filter((e) => e.type === type && /^(tool|llm):/.test(e.payload.nodeId)).map((e) => e.payload);

test.before(async () => {
  srv = await startServer(['--pause-on-error', 'off']);
  fake = await startFakeProvider();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gm-node-replay-agent-'));
  await fake.script(...SCRIPT);
  const { out } = runAgent({});
  assert.deepEqual(out, EXPECTED);
  assert.equal((await fake.requests()).length, 4);
  recorded = { run: await newestRun(), file: path.join(dir, 'run.ndjson') };
  const r = spawnSync(BIN, ['record', recorded.run, '--db', srv.dbPath, '--no-redact-secrets', '--out', recorded.file], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});

test.beforeEach(() => fake.reset());

test.after(() => {
  if (fake) fake.stop();
  if (srv) srv.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('the whole run replays from the file and by run id; the provider sees no request', async () => {
  for (const env of [{ GRAPHMIND_REPLAY_FILE: recorded.file }, { GRAPHMIND_REPLAY: recorded.run }]) {
    const { out, stderr } = runAgent(env);
    assert.deepEqual(out, EXPECTED, stderr);
    assert.deepEqual(await fake.requests(), [], 'the provider saw no request');
    const events = await replayedEvents();
    const started = nodes(events, 'node.started');
    assert.deepEqual(started.map((n) => n.nodeId), ['llm:step', 'tool:search_flights', 'llm:step', 'tool:book', 'llm:step', 'llm:step']);
    assert.ok(started.every((n) => n.replayed === true), JSON.stringify(started));
    const finished = nodes(events, 'node.finished');
    assert.ok(finished.every((n) => n.replayed === true));
    assert.deepEqual(finished.find((n) => n.nodeId === 'tool:book').output, { confirmation: 'GM202-ADA', status: 'booked' });
  }
});

test('replay to @llm:step#3, then live: the calls from there reach the provider', async () => {
  await fake.script(SCRIPT[2], SCRIPT[3]);
  const { out, stderr } = runAgent({ GRAPHMIND_REPLAY: `${recorded.run}@llm:step#3` });
  assert.deepEqual(out, EXPECTED, stderr);
  assert.equal((await fake.requests()).length, 2, 'llm:step#3 and #4 were sent');
  const started = nodes(await replayedEvents(), 'node.started');
  assert.deepEqual(started.slice(0, 4).map((n) => n.replayed), [true, true, true, true]);
  assert.deepEqual(started[4].replayLive, { reason: 'fork', at: 'llm:step#3' });
  assert.equal(started[5].replayed, undefined);
});

test('an edited output at the fork reaches the app', async () => {
  await fake.script(SCRIPT[2], SCRIPT[3]);
  const edited = { confirmation: 'EDITED-1', status: 'booked' };
  const { out, stderr } = runAgent({ GRAPHMIND_REPLAY: `${recorded.run}@llm:step#3`, GRAPHMIND_REPLAY_OUTPUT: JSON.stringify(edited) });
  assert.deepEqual(out, EXPECTED, stderr);
  const [first] = await fake.requests();
  const toolMessage = first.body.messages.find((m) => m.tool_call_id === 'call_b');
  assert.deepEqual(JSON.parse(toolMessage.content), edited, 'the live call saw the edited tool output');
  const book = nodes(await replayedEvents(), 'node.finished').find((n) => n.nodeId === 'tool:book');
  assert.equal(book.replayEdited, true);
});

test('a changed second tool call diverges at tool:book#1 and runs live from there', async () => {
  await fake.script(SCRIPT[2], SCRIPT[3]);
  const { out, stderr } = runAgent({ GRAPHMIND_REPLAY_FILE: recorded.file, AGENT_PASSENGER_STYLE: 'upcase' });
  assert.deepEqual(out, EXPECTED, stderr);
  assert.equal((await fake.requests()).length, 2);
  assert.match(stderr, /replay: tool:book#1 diverged \(\["input.passenger"\]\); the run is live from here/);
  const started = nodes(await replayedEvents(), 'node.started');
  const book = started.find((n) => n.nodeId === 'tool:book');
  const { recordedKey, liveKey, ...live } = book.replayLive;
  assert.deepEqual(live, { reason: 'diverged', at: 'tool:book#1', differs: ['input.passenger'] });
  assert.notEqual(recordedKey, liveKey);
  assert.equal(book.replayed, undefined);
  assert.deepEqual(started.slice(0, 3).map((n) => n.replayed), [true, true, true]);
});

test('bad input is one clear warning and a live run', async () => {
  const notExport = path.join(dir, 'not-an-export.ndjson');
  fs.writeFileSync(notExport, '{"hello": "world"}\n');
  const otherApp = path.join(dir, 'other-app.ndjson');
  fs.writeFileSync(otherApp, fs.readFileSync(recorded.file, 'utf8').replaceAll(`"app":"${APP}"`, '"app":"someone-else"'));
  const cases = [
    [{ GRAPHMIND_REPLAY: 'run_000000000000' }, /replay: the server at .* has no run run_000000000000; running live/],
    [{ GRAPHMIND_REPLAY_FILE: notExport }, /replay: not an exported GraphMind run .*; running live/],
    [{ GRAPHMIND_REPLAY_FILE: otherApp }, /replay: run run_\w+ was recorded by the app "someone-else", not "node-openai-agent"; running live/],
  ];
  for (const [env, warning] of cases) {
    await fake.reset();
    await fake.script(...SCRIPT);
    const { out, stderr } = runAgent(env);
    assert.deepEqual(out, EXPECTED, stderr);
    assert.equal((await fake.requests()).length, 4, `${JSON.stringify(env)}: live`);
    assert.match(stderr, warning);
    await newestRun();
  }
});

test('/testing replay() answers a run in-process and reports it', async () => {
  const { replay, ReplayDiverged } = require('../testing.js');
  const { graphmind } = require('../openai.js');
  const { main } = require(AGENT);
  process.env.OPENAI_BASE_URL = fake.baseURL;
  const gm = graphmind({ app: APP, url: srv.url, env: {} });
  try {
    await gm.ready({ timeoutMs: 5000 });
    const r = await replay(recorded.file, () => main(gm), { session: gm, strict: true });
    assert.deepEqual(r.result, EXPECTED);
    assert.equal(r.replayed, 6);
    assert.equal(r.replayOf, recorded.run);
    assert.equal(r.live, null);
    assert.deepEqual(await fake.requests(), []);
    known.add(r.runId);

    await fake.script(SCRIPT[2], SCRIPT[3]);
    const forked = await replay(recorded.run, () => main(gm), { session: gm.session, from: 'llm:step#3', strict: true });
    assert.deepEqual(forked.live, { reason: 'fork', at: 'llm:step#3' });
    assert.equal(forked.replayed, 4);
    known.add(forked.runId);

    await fake.reset();
    await fake.script(...SCRIPT);
    await assert.rejects(replay(path.join(dir, 'missing.ndjson'), () => main(gm), { session: gm, strict: true }), ReplayDiverged);
    await assert.rejects(replay(recorded.file, () => {}, {}), TypeError, 'no session: a clear error');
  } finally {
    await gm.dispose();
  }
});
