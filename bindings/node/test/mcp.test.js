'use strict';
// wrapServer over a real `@modelcontextprotocol/sdk` McpServer, driven by the SDK's real
// client over the in-memory transport and over stdio (examples/node/mcp-server.js in a
// child process), attached to a real `graphmind serve`.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { McpServer, ResourceTemplate } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { InMemoryTransport } = require('@modelcontextprotocol/sdk/inMemory.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { z } = require('zod');
const { graphmind, liftInjected } = require('../mcp.js');
const { startServer, Debugger, sleep, ROOT } = require('./helpers');
const { of } = require('./provider-helpers');

let srv;
let dbg;
test.before(async () => {
  srv = await startServer(['--pause-on-error', 'off']);
  dbg = await Debugger.open(srv);
});
test.after(() => { dbg.close(); srv.stop(); });

/** A server with one tool, one resource template, one prompt; `calls` counts handler bodies. */
function build(gm, calls = { add: [], fail: 0 }) {
  const server = gm.wrapServer(new McpServer({ name: 'calc', version: '1.2.3' }));
  server.registerTool('add', { description: 'Adds', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
    calls.add.push(Date.now());
    return { content: [{ type: 'text', text: String(a + b) }] };
  });
  server.registerTool('flaky', { description: 'Fails once' }, async () => {
    calls.fail += 1;
    if (calls.fail === 1) throw new Error('flaky failed');
    return { content: [{ type: 'text', text: 'recovered' }] };
  });
  server.registerResource('note', new ResourceTemplate('note://{id}', { list: undefined }), {}, async (uri, { id }) => ({
    contents: [{ uri: uri.href, text: `note ${id}` }],
  }));
  server.registerPrompt('greet', { argsSchema: { who: z.string() } }, ({ who }) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `hello ${who}` } }],
  }));
  return server;
}

async function connected(server) {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'test-client', version: '1.0.0' });
  await client.connect(clientSide);
  return client;
}

async function attached(extra = {}) {
  const lines = [];
  const gm = graphmind({ app: 'mcp-test', url: srv.url, env: {}, logger: (l) => lines.push(l), ...extra });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  return { gm, lines };
}

/** Sets breakpoints and lets them reach the attached apps (as the other suites do). */
async function arm(...matchers) {
  for (const m of matchers) dbg.breakpoint(m);
  await sleep(BREAKPOINT_SETTLE_MS);
}
const BREAKPOINT_SETTLE_MS = 200;

/** The first exec.paused at `nodeId` not yet resumed, in any running run: `{runId, pauseId}`. */
async function pausedAt(nodeId, point) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { body } = await srv.get('/api/runs');
    for (const run of (body && body.runs) || []) {
      if (run.status !== 'running') continue;
      const events = await srv.events(run.id, 1);
      const resumed = new Set(of(events, 'exec.resumed').map((p) => p.pauseId));
      const p = of(events, 'exec.paused', nodeId).find((x) => !resumed.has(x.pauseId) && (!point || x.point === point));
      if (p) return { runId: run.id, pauseId: p.pauseId };
    }
    if (Date.now() > deadline) throw new Error(`no pause at ${nodeId}`);
    await sleep(30);
  }
}

/** The stored events of the newest finished run whose run.started names `name`. */
async function finishedRun(gm, name) {
  gm.session.flushSync(5000);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { body } = await srv.get('/api/runs');
    for (const run of (body && body.runs) || []) {
      if (run.status === 'running') continue;
      const events = await srv.events(run.id, 1);
      const started = events.find((e) => e.type === 'run.started');
      if (started && started.payload.meta && started.payload.meta.name === name && events.at(-1).type === 'run.finished') return events;
    }
    if (Date.now() > deadline) throw new Error(`no finished run ${name}`);
    await sleep(30);
  }
}

test('liftInjected: a result passes, a string is text, an object is structuredContent plus text', () => {
  const result = { content: [{ type: 'text', text: 'x' }] };
  assert.equal(liftInjected('tool', result), result);
  assert.deepEqual(liftInjected('tool', 'hi'), { content: [{ type: 'text', text: 'hi' }] });
  assert.deepEqual(liftInjected('tool', { price: 42 }), { content: [{ type: 'text', text: '{"price":42}' }], structuredContent: { price: 42 } });
  assert.deepEqual(liftInjected('tool', undefined), { content: [] });
  assert.deepEqual(liftInjected('resource', 'body', 'note://1'), { contents: [{ uri: 'note://1', text: 'body' }] });
  assert.deepEqual(liftInjected('prompt', 'say'), { messages: [{ role: 'user', content: { type: 'text', text: 'say' } }] });
});

test('identity when disabled; a Proxy that never mutates the server; wrapping twice is the identity', async () => {
  const raw = new McpServer({ name: 'x', version: '1' });
  assert.equal(graphmind({ enabled: false }).wrapServer(raw), raw);
  const gm = graphmind({ url: 'ws://127.0.0.1:9/ingest', env: {}, logger: () => {} });
  const keys = Reflect.ownKeys(raw);
  const wrapped = gm.wrapServer(raw);
  assert.notEqual(wrapped, raw);
  assert.ok(wrapped instanceof McpServer);
  assert.equal(gm.wrapServer(wrapped), wrapped);
  wrapped.registerTool('t', {}, async () => ({ content: [{ type: 'text', text: 'ok' }] }));
  assert.deepEqual(Reflect.ownKeys(raw), keys, 'no property of ours written onto the server');
  assert.equal(raw.registerTool, McpServer.prototype.registerTool);
  // Detached: the request answers as it would without GraphMind.
  const client = await connected(wrapped);
  assert.deepEqual(await client.callTool({ name: 't', arguments: {} }), { content: [{ type: 'text', text: 'ok' }] });
  await client.close();
  await gm.dispose();
});

test('tools/call: one run per request under server:<name>, graph.hint on connect, held before the body for a second', async () => {
  const { gm, lines } = await attached();
  const calls = { add: [], fail: 0 };
  const client = await connected(build(gm, calls));
  const hint = of(await finishedRun(gm, 'mcp:connect calc'), 'graph.hint')[0];
  assert.deepEqual(hint.nodes.map((n) => n.nodeId), ['server:calc', 'tool:add', 'tool:flaky', 'resource:note', 'prompt:greet']);
  assert.equal(hint.nodes[1].parentId, 'server:calc');

  await arm({ kind: 'tool', name: 'add', point: 'before' });
  const asked = Date.now();
  const answer = client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
  const { runId, pauseId } = await pausedAt('tool:add', 'before');
  await sleep(1100);
  assert.equal(calls.add.length, 0, 'the handler body has not started while held');
  const releasedAt = Date.now();
  dbg.resume(runId, pauseId, 'continue');
  assert.deepEqual(await answer, { content: [{ type: 'text', text: '5' }] });
  assert.ok(calls.add[0] >= releasedAt && calls.add[0] - asked >= 1100, 'the body ran after the release');
  dbg.clear({ kind: 'tool', name: 'add', point: 'before' });
  assert.equal(lines.filter((l) => l.includes('held for over')).length, 1, `one hold warning: ${lines}`);

  const events = await finishedRun(gm, 'tools/call:add');
  const server = of(events, 'node.started', 'server:calc')[0];
  const tool = of(events, 'node.started', 'tool:add')[0];
  assert.equal(server.kind, 'server');
  assert.equal(tool.parentId, 'server:calc');
  assert.deepEqual(tool.input, { a: 2, b: 3 });
  assert.equal(of(events, 'node.finished', 'tool:add')[0].output.content[0].text, '5');
  await client.close();
  await gm.dispose();
});

test('inject lifting: a string and an object at tools/call, resources/read and prompts/get', async () => {
  const { gm } = await attached();
  const calls = { add: [], fail: 0 };
  const client = await connected(build(gm, calls));
  await arm(...['tool', 'resource', 'prompt'].map((kind) => ({ kind, point: 'before' })));
  try {
    let answer = client.callTool({ name: 'add', arguments: { a: 1, b: 1 } });
    let p = await pausedAt('tool:add');
    dbg.resume(p.runId, p.pauseId, 'inject', { output: 'typed by hand' });
    assert.deepEqual(await answer, { content: [{ type: 'text', text: 'typed by hand' }] });

    answer = client.callTool({ name: 'add', arguments: { a: 1, b: 1 } });
    p = await pausedAt('tool:add');
    dbg.resume(p.runId, p.pauseId, 'inject', { output: { price: 42 } });
    assert.deepEqual(await answer, { content: [{ type: 'text', text: '{"price":42}' }], structuredContent: { price: 42 } });
    assert.equal(calls.add.length, 0, 'an injected request never ran the handler');

    answer = client.readResource({ uri: 'note://7' });
    p = await pausedAt('resource:note');
    dbg.resume(p.runId, p.pauseId, 'inject', { output: 'not found, really' });
    assert.deepEqual(await answer, { contents: [{ uri: 'note://7', text: 'not found, really' }] });

    answer = client.getPrompt({ name: 'greet', arguments: { who: 'Ada' } });
    p = await pausedAt('prompt:greet');
    dbg.resume(p.runId, p.pauseId, 'continue');
    assert.equal((await answer).messages[0].content.text, 'hello Ada');
    answer = client.getPrompt({ name: 'greet', arguments: { who: 'Ada' } });
    p = await pausedAt('prompt:greet');
    dbg.resume(p.runId, p.pauseId, 'inject', { output: 'be terse' });
    assert.deepEqual((await answer).messages, [{ role: 'user', content: { type: 'text', text: 'be terse' } }]);
  } finally {
    for (const kind of ['tool', 'resource', 'prompt']) dbg.clear({ kind, point: 'before' });
  }
  const resource = of(await finishedRun(gm, 'resources/read:note'), 'node.started', 'resource:note')[0];
  assert.deepEqual(resource.input, { uri: 'note://7', variables: { id: '7' } });
  await client.close();
  await gm.dispose();
});

test('a handler that throws: paused at error, retried; continue rethrows into the SDK (isError)', async () => {
  const { gm } = await attached();
  const calls = { add: [], fail: 0 };
  const client = await connected(build(gm, calls));
  await arm({ kind: 'tool', name: 'flaky', point: 'error' });
  try {
    const answer = client.callTool({ name: 'flaky', arguments: {} });
    const p = await pausedAt('tool:flaky', 'error');
    dbg.resume(p.runId, p.pauseId, 'retry');
    assert.deepEqual(await answer, { content: [{ type: 'text', text: 'recovered' }] });
    assert.equal(calls.fail, 2);

    calls.fail = 0;
    const again = client.callTool({ name: 'flaky', arguments: {} });
    const q = await pausedAt('tool:flaky', 'error');
    dbg.resume(q.runId, q.pauseId, 'continue');
    const result = await again;
    assert.equal(result.isError, true);
    assert.match(result.content[0].text, /flaky failed/);
  } finally {
    dbg.clear({ kind: 'tool', name: 'flaky', point: 'error' });
  }
  await client.close();
  await gm.dispose();
});

test('stdio: the example server answers over a clean stdout, and is held and injected from the viewer', async () => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [path.join(ROOT, 'examples', 'node', 'mcp-server.js')],
    env: { ...process.env, GRAPHMIND_URL: srv.url },
    stderr: 'pipe',
  });
  const errors = [];
  const client = new Client({ name: 'stdio-client', version: '1.0.0' });
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ['lookup', 'weather']);
  assert.deepEqual(await client.callTool({ name: 'weather', arguments: { city: 'Lisbon' } }), { content: [{ type: 'text', text: 'Lisbon: sunny, 21 C' }] });
  await arm({ kind: 'tool', name: 'weather', point: 'before' });
  try {
    const answer = client.callTool({ name: 'weather', arguments: { city: 'Oslo' } });
    const p = await pausedAt('tool:weather');
    dbg.resume(p.runId, p.pauseId, 'inject', { output: 'snowing (injected)' });
    assert.deepEqual(await answer, { content: [{ type: 'text', text: 'snowing (injected)' }] });
  } finally {
    dbg.clear({ kind: 'tool', name: 'weather', point: 'before' });
  }
  await client.close();
  assert.deepEqual(errors, [], 'every stdout line was a JSON-RPC message');
});
