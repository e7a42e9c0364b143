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
const { spawn } = require('node:child_process');
const { z } = require('zod');
const { graphmind, liftInjected } = require('../mcp.js');
const { serverAndDebugger, connectStdio, connectHttp, sleep, ROOT, BIN } = require('./helpers');
const { of } = require('./provider-helpers');

/** The stdio MCP server of examples/node. */
const EXAMPLE = path.join(ROOT, 'examples', 'node', 'mcp-server.js');

const env = serverAndDebugger(test);

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

/** When each attached app was made: its finished runs are looked up among runs started since. */
const attachedAt = new WeakMap();

async function attached(extra = {}) {
  const lines = [];
  const since = Date.now();
  const gm = graphmind({ app: 'mcp-test', url: env.srv.url, env: {}, logger: (l) => lines.push(l), ...extra });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  attachedAt.set(gm, since);
  return { gm, lines };
}

/** Sets breakpoints and lets them reach the attached apps (as the other suites do). */
async function arm(...matchers) {
  for (const m of matchers) env.dbg.breakpoint(m);
  await sleep(BREAKPOINT_SETTLE_MS);
}
const BREAKPOINT_SETTLE_MS = 200;

/** The first exec.paused at `nodeId` not yet resumed, in any running run: `{runId, pauseId}`. */
async function pausedAt(nodeId, point) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { body } = await env.srv.get('/api/runs');
    for (const run of (body && body.runs) || []) {
      if (run.status !== 'running') continue;
      const events = await env.srv.events(run.id, 1);
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
  if (gm) gm.session.flushSync(5000);
  // Earlier tests' servers may have finished a run of the same name (tools/call:echo): only
  // runs started since this app attached are its own.
  const since = (gm && attachedAt.get(gm)) || 0;
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { body } = await env.srv.get('/api/runs');
    for (const run of (body && body.runs) || []) {
      if (run.status === 'running' || run.startedAt < since) continue;
      const events = await env.srv.events(run.id, 1);
      const started = events.find((e) => e.type === 'run.started');
      if (started && started.payload.meta && started.payload.meta.name === name && events.at(-1).type === 'run.finished') return events;
    }
    if (Date.now() > deadline) throw new Error(`no finished run ${name}`);
    await sleep(30);
  }
}

// The rule is the core's (graphmind_core::mcp, the one mcp-proxy applies); this checks the
// binding reaches it with each kind's method and a resource's uri.
test('liftInjected: a result passes, a string is text, an object is structuredContent plus text', () => {
  const result = { content: [{ type: 'text', text: 'x' }], isError: true };
  assert.deepEqual(liftInjected('tool', result), result);
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
  env.dbg.resume(runId, pauseId, 'continue');
  assert.deepEqual(await answer, { content: [{ type: 'text', text: '5' }] });
  assert.ok(calls.add[0] >= releasedAt && calls.add[0] - asked >= 1100, 'the body ran after the release');
  env.dbg.clear({ kind: 'tool', name: 'add', point: 'before' });
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
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'typed by hand' });
    assert.deepEqual(await answer, { content: [{ type: 'text', text: 'typed by hand' }] });

    answer = client.callTool({ name: 'add', arguments: { a: 1, b: 1 } });
    p = await pausedAt('tool:add');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: { price: 42 } });
    assert.deepEqual(await answer, { content: [{ type: 'text', text: '{"price":42}' }], structuredContent: { price: 42 } });
    assert.equal(calls.add.length, 0, 'an injected request never ran the handler');

    answer = client.readResource({ uri: 'note://7' });
    p = await pausedAt('resource:note');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'not found, really' });
    assert.deepEqual(await answer, { contents: [{ uri: 'note://7', text: 'not found, really' }] });

    answer = client.getPrompt({ name: 'greet', arguments: { who: 'Ada' } });
    p = await pausedAt('prompt:greet');
    env.dbg.resume(p.runId, p.pauseId, 'continue');
    assert.equal((await answer).messages[0].content.text, 'hello Ada');
    answer = client.getPrompt({ name: 'greet', arguments: { who: 'Ada' } });
    p = await pausedAt('prompt:greet');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'be terse' });
    assert.deepEqual((await answer).messages, [{ role: 'user', content: { type: 'text', text: 'be terse' } }]);
  } finally {
    for (const kind of ['tool', 'resource', 'prompt']) env.dbg.clear({ kind, point: 'before' });
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
    env.dbg.resume(p.runId, p.pauseId, 'retry');
    assert.deepEqual(await answer, { content: [{ type: 'text', text: 'recovered' }] });
    assert.equal(calls.fail, 2);

    calls.fail = 0;
    const again = client.callTool({ name: 'flaky', arguments: {} });
    const q = await pausedAt('tool:flaky', 'error');
    env.dbg.resume(q.runId, q.pauseId, 'continue');
    const result = await again;
    assert.equal(result.isError, true);
    assert.match(result.content[0].text, /flaky failed/);
  } finally {
    env.dbg.clear({ kind: 'tool', name: 'flaky', point: 'error' });
  }
  await client.close();
  await gm.dispose();
});

test('abort at a held tools/call: the handler never runs, the client gets an error, the run ends aborted', async () => {
  const { gm } = await attached();
  const calls = { add: [], fail: 0 };
  const client = await connected(build(gm, calls));
  await arm({ kind: 'tool', name: 'add', point: 'before' });
  try {
    const answer = client.callTool({ name: 'add', arguments: { a: 4, b: 4 } }).then((r) => r, (e) => e);
    const p = await pausedAt('tool:add', 'before');
    env.dbg.resume(p.runId, p.pauseId, 'abort');
    const result = await answer;
    // The SDK answers a handler's throw as an isError result (v1), or rejects (a protocol error).
    const text = result instanceof Error ? result.message : (result.isError ? result.content[0].text : '');
    assert.match(text, /abort/i, JSON.stringify(result));
    assert.equal(calls.add.length, 0, 'the handler body never ran');
    await env.srv.run(p.runId, (r) => r.status === 'aborted');
  } finally {
    env.dbg.clear({ kind: 'tool', name: 'add', point: 'before' });
  }
  await client.close();
  await gm.dispose();
});

test('update(): a callback swapped in later runs gated (tool, resource, prompt); a renamed tool holds under its new name; remove() leaves the hint', async () => {
  const { gm } = await attached();
  const server = gm.wrapServer(new McpServer({ name: 'updater', version: '1.0.0' }));
  const ran = [];
  const text = (t) => ({ content: [{ type: 'text', text: t }] });
  const echo = server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text: t }) => { ran.push(`v1:${t}`); return text(`v1:${t}`); });
  const note = server.registerResource('memo', 'memo://one', {}, async (uri) => { ran.push('memo v1'); return { contents: [{ uri: uri.href, text: 'v1' }] }; });
  const greet = server.registerPrompt('greet', { argsSchema: { who: z.string() } }, ({ who }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `v1 ${who}` } }] }));
  const gone = server.registerTool('gone', {}, async () => text('gone'));
  assert.equal(typeof echo.update, 'function');
  assert.equal(echo.enabled, true, 'the rest of the registration reads through');
  echo.update({ callback: async ({ text: t }) => { ran.push(`v2:${t}`); return text(`v2:${t}`); } });
  note.update({ callback: async (uri) => { ran.push('memo v2'); return { contents: [{ uri: uri.href, text: 'v2' }] }; } });
  greet.update({ callback: ({ who }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `v2 ${who}` } }] }) });
  gone.remove();
  const client = await connected(server);
  const hint = of(await finishedRun(gm, 'mcp:connect updater'), 'graph.hint')[0];
  assert.deepEqual(hint.nodes.map((n) => n.nodeId), ['server:updater', 'tool:echo', 'resource:memo', 'prompt:greet']);
  await arm(...['tool', 'resource', 'prompt'].map((kind) => ({ kind, point: 'before' })));
  try {
    // The new tool callback is held before its body, then runs.
    let answer = client.callTool({ name: 'echo', arguments: { text: 'a' } });
    let p = await pausedAt('tool:echo', 'before');
    await sleep(300);
    assert.deepEqual(ran, [], 'held before the new body');
    env.dbg.resume(p.runId, p.pauseId, 'continue');
    assert.deepEqual(await answer, text('v2:a'));
    assert.deepEqual(ran, ['v2:a']);
    // Injected there: the new body never runs.
    answer = client.callTool({ name: 'echo', arguments: { text: 'b' } });
    p = await pausedAt('tool:echo', 'before');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'from the debugger' });
    assert.deepEqual(await answer, text('from the debugger'));
    assert.deepEqual(ran, ['v2:a']);
    // The resource and prompt callbacks swapped in are gated too.
    answer = client.readResource({ uri: 'memo://one' });
    p = await pausedAt('resource:memo', 'before');
    env.dbg.resume(p.runId, p.pauseId, 'continue');
    assert.equal((await answer).contents[0].text, 'v2');
    answer = client.getPrompt({ name: 'greet', arguments: { who: 'Ada' } });
    p = await pausedAt('prompt:greet', 'before');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'injected prompt' });
    assert.equal((await answer).messages[0].content.text, 'injected prompt');
    // Renamed (and its body swapped in the same update): held as tool:shout.
    echo.update({ name: 'shout', callback: async ({ text: t }) => { ran.push(`v3:${t}`); return text(`V3:${t.toUpperCase()}`); } });
    answer = client.callTool({ name: 'shout', arguments: { text: 'c' } });
    p = await pausedAt('tool:shout', 'before');
    env.dbg.resume(p.runId, p.pauseId, 'continue');
    assert.deepEqual(await answer, text('V3:C'));
    const events = await finishedRun(gm, 'tools/call:shout');
    assert.equal(of(events, 'node.started', 'tool:shout')[0].parentId, 'server:updater');
    assert.equal(of(events, 'node.started', 'tool:echo').length, 0);
  } finally {
    for (const kind of ['tool', 'resource', 'prompt']) env.dbg.clear({ kind, point: 'before' });
  }
  assert.deepEqual(ran, ['v2:a', 'memo v2', 'v3:c']);
  await client.close();
  await gm.dispose();
});

test('sampling/createMessage from a handler: a gated llm:sampling node under the tool, in its run; inject lifts a string', async () => {
  const { CreateMessageRequestSchema } = require('@modelcontextprotocol/sdk/types.js');
  const { gm } = await attached();
  const server = gm.wrapServer(new McpServer({ name: 'sampler', version: '1.0.0' }));
  server.registerTool('summarize', { description: 'Summarizes', inputSchema: { text: z.string() } }, async ({ text }, extra) => {
    const viaServer = await server.server.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: `summarize: ${text}` } }], maxTokens: 50 });
    const viaExtra = await extra.sendRequest(
      { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'again' } }], maxTokens: 5 } },
      require('@modelcontextprotocol/sdk/types.js').CreateMessageResultSchema,
    );
    return { content: [{ type: 'text', text: `summary: ${viaServer.content.text} / ${viaExtra.content.text}` }] };
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'sampling-client', version: '1.0.0' }, { capabilities: { sampling: {} } });
  let sampled = 0;
  client.setRequestHandler(CreateMessageRequestSchema, async () => {
    sampled += 1;
    return { role: 'assistant', model: 'client-model', content: { type: 'text', text: 'from the client' } };
  });
  await client.connect(clientSide);
  await arm({ kind: 'llm', point: 'before' });
  try {
    const answer = client.callTool({ name: 'summarize', arguments: { text: 'a long document' } });
    const p = await pausedAt('llm:sampling', 'before');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'injected model answer' });
    const q = await pausedAt('llm:sampling', 'before');
    assert.equal(q.runId, p.runId, 'both sampling requests in the request\'s run');
    env.dbg.resume(q.runId, q.pauseId, 'continue');
    const result = await answer;
    assert.equal(result.content[0].text, 'summary: injected model answer / from the client');
    assert.equal(sampled, 1, 'the injected request never reached the client');
    const events = await env.srv.events(p.runId, 1);
    const started = of(events, 'node.started', 'llm:sampling');
    assert.equal(started.length, 2);
    assert.ok(started.every((n) => n.parentId === 'tool:summarize'), JSON.stringify(started.map((n) => n.parentId)));
    assert.match(JSON.stringify(started[0].input), /a long document/);
  } finally {
    env.dbg.clear({ kind: 'llm', point: 'before' });
  }
  await client.close();
  await gm.dispose();
});

test('a low-level Server (setRequestHandler, no McpServer): tools/call and resources/read gated, other methods untouched', async () => {
  const { Server } = require('@modelcontextprotocol/sdk/server/index.js');
  const { CallToolRequestSchema, ListToolsRequestSchema, ReadResourceRequestSchema } = require('@modelcontextprotocol/sdk/types.js');
  const { gm } = await attached();
  const calls = [];
  const raw = new Server({ name: 'hand-rolled', version: '0.4.0' }, { capabilities: { tools: {}, resources: {} } });
  const server = gm.wrapServer(raw);
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'echo', inputSchema: { type: 'object' } }] }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    calls.push('echo');
    if (req.params.arguments && req.params.arguments.fail) throw new Error('echo failed');
    return { content: [{ type: 'text', text: `echo: ${req.params.arguments.message}` }] };
  });
  server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
    calls.push('read');
    return { contents: [{ uri: req.params.uri, text: 'raw contents' }] };
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'c', version: '1' });
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);

  assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['echo']);
  assert.equal((await client.callTool({ name: 'echo', arguments: { message: 'hi' } })).content[0].text, 'echo: hi');
  let events = await finishedRun(gm, 'tools/call:echo');
  const tool = of(events, 'node.started', 'tool:echo')[0];
  assert.equal(tool.parentId, 'server:hand-rolled');
  assert.deepEqual(tool.input, { message: 'hi' });
  assert.equal((await client.readResource({ uri: 'file:///notes.txt' })).contents[0].text, 'raw contents');
  events = await finishedRun(gm, 'resources/read:file:///notes.txt');
  assert.equal(of(events, 'node.started', 'resource:file:///notes.txt')[0].kind, 'resource');

  await arm({ kind: 'tool', name: 'echo', point: 'before' }, { kind: 'tool', name: 'echo', point: 'error' });
  try {
    calls.length = 0;
    let answer = client.callTool({ name: 'echo', arguments: { message: 'hi' } });
    let p = await pausedAt('tool:echo', 'before');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'substituted' });
    assert.deepEqual(await answer, { content: [{ type: 'text', text: 'substituted' }] });
    assert.equal(calls.length, 0, 'an injected request never ran the handler');

    answer = client.callTool({ name: 'echo', arguments: { message: 'x', fail: true } });
    p = await pausedAt('tool:echo', 'before');
    env.dbg.resume(p.runId, p.pauseId, 'continue', { input: { message: 'edited', fail: false } });
    assert.equal((await answer).content[0].text, 'echo: edited', 'the edit replaced params.arguments');

    answer = client.callTool({ name: 'echo', arguments: { message: 'y', fail: true } });
    p = await pausedAt('tool:echo', 'before');
    env.dbg.resume(p.runId, p.pauseId, 'continue');
    p = await pausedAt('tool:echo', 'error');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'recovered by hand' });
    assert.equal((await answer).content[0].text, 'recovered by hand');
  } finally {
    env.dbg.clear({ kind: 'tool', name: 'echo', point: 'before' });
    env.dbg.clear({ kind: 'tool', name: 'echo', point: 'error' });
  }
  await client.ping();
  await client.close();
  await gm.dispose();
});

test('stdio: the example server answers over a clean stdout, and is held and injected from the viewer', async () => {
  const client = new Client({ name: 'stdio-client', version: '1.0.0' });
  const errors = await connectStdio(client, EXAMPLE, env.srv);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ['lookup', 'weather']);
  assert.deepEqual(await client.callTool({ name: 'weather', arguments: { city: 'Lisbon' } }), { content: [{ type: 'text', text: 'Lisbon: sunny, 21 C' }] });
  await arm({ kind: 'tool', name: 'weather', point: 'before' });
  try {
    const answer = client.callTool({ name: 'weather', arguments: { city: 'Oslo' } });
    const p = await pausedAt('tool:weather');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'snowing (injected)' });
    assert.deepEqual(await answer, { content: [{ type: 'text', text: 'snowing (injected)' }] });
  } finally {
    env.dbg.clear({ kind: 'tool', name: 'weather', point: 'before' });
  }
  await client.close();
  assert.deepEqual(errors, [], 'every stdout line was a JSON-RPC message');
});

test('stdout purity: every byte the stdio example writes to stdout is a JSON-RPC line', async () => {
  const child = spawn(process.execPath, [EXAMPLE], { env: { ...process.env, GRAPHMIND_URL: env.srv.url }, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const send = (m) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...m })}\n`);
  send({ id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
  send({ method: 'notifications/initialized' });
  send({ id: 2, method: 'tools/call', params: { name: 'weather', arguments: { city: 'Oslo' } } });
  send({ id: 3, method: 'tools/call', params: { name: 'nope', arguments: {} } });
  const deadline = Date.now() + 10_000;
  while (out.split('\n').filter(Boolean).length < 3 && Date.now() < deadline) await sleep(20);
  child.stdin.end();
  await new Promise((r) => child.once('exit', r));
  const lines = out.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => l.id).sort(), [1, 2, 3], 'one answer per request (the unknown tool may answer first)');
  assert.ok(lines.every((l) => l.jsonrpc === '2.0'));
  assert.equal(lines.find((l) => l.id === 2).result.content[0].text, 'Oslo: cloudy, 4 C');
  assert.ok(out.endsWith('\n'));
});

test('Streamable HTTP on 127.0.0.1: the same server held and injected', async () => {
  const { gm } = await attached();
  const server = build(gm);
  const client = new Client({ name: 'http-client', version: '1.0.0' });
  const closeListener = await connectHttp(server, client);
  await arm({ kind: 'tool', name: 'add', point: 'before' });
  try {
    const answer = client.callTool({ name: 'add', arguments: { a: 4, b: 4 } });
    const p = await pausedAt('tool:add');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: { sum: 9 } });
    assert.deepEqual(await answer, { content: [{ type: 'text', text: '{"sum":9}' }], structuredContent: { sum: 9 } });
  } finally {
    env.dbg.clear({ kind: 'tool', name: 'add', point: 'before' });
  }
  await sleep(BREAKPOINT_SETTLE_MS);
  assert.deepEqual(await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } }), { content: [{ type: 'text', text: '3' }] });
  await client.close();
  await closeListener();
  await gm.dispose();
});

test('the stdio example behind `graphmind mcp-proxy`: both views record the same call', async () => {
  const transport = new StdioClientTransport({
    command: BIN,
    args: ['mcp-proxy', '--port', String(env.srv.port), '--', process.execPath, EXAMPLE],
    env: { ...process.env, GRAPHMIND_URL: env.srv.url, GRAPHMIND_HOME: path.join(path.dirname(env.srv.dbPath), 'gmhome') },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'proxied-client', version: '1.0.0' });
  await client.connect(transport);
  const result = await client.callTool({ name: 'weather', arguments: { city: 'Lisbon' } });
  assert.deepEqual(result, { content: [{ type: 'text', text: 'Lisbon: sunny, 21 C' }] });
  await client.close();
  const inProcess = await finishedRun(null, 'tools/call:weather');
  assert.equal(of(inProcess, 'node.finished', 'tool:weather')[0].output.content[0].text, 'Lisbon: sunny, 21 C');
  const { body } = await env.srv.get('/api/runs');
  const apps = new Set();
  for (const run of body.runs) apps.add((await env.srv.events(run.id, 1)).find((e) => e.type === 'run.started')?.payload.app);
  assert.ok(apps.has('mcp-weather'), 'the in-process view');
  assert.ok([...apps].some((a) => a && a !== 'mcp-weather' && a !== 'mcp-test' && a !== 'mcp-server'), `the proxy's view: ${[...apps]}`);
});
