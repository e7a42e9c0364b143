'use strict';
// Every MCP surface (tools/call, resources/read, prompts/get, and the server's
// sampling/createMessage to the client) held, injected, errored and retried, over each
// transport: the SDK's in-memory pair, stdio (test/fixtures/
// mcp-matrix-server.js in a child process, its stdout only JSON-RPC) and Streamable HTTP on
// 127.0.0.1. The real @modelcontextprotocol/sdk client and server, a real `graphmind serve`.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { InMemoryTransport } = require('@modelcontextprotocol/sdk/inMemory.js');
const { CreateMessageRequestSchema } = require('@modelcontextprotocol/sdk/types.js');
const { graphmind } = require('../mcp.js');
const { build } = require('./fixtures/mcp-matrix-server.js');
const { serverAndDebugger, connectStdio, connectHttp, sleep } = require('./helpers');
const { of } = require('./provider-helpers');

const FIXTURE = path.join(__dirname, 'fixtures', 'mcp-matrix-server.js');
/** How long a breakpoint change takes to reach the attached apps. */
const BREAKPOINT_SETTLE_MS = 200;
const KINDS = ['tool', 'resource', 'prompt'];

const env = serverAndDebugger(test);

async function arm(point, kinds = KINDS) {
  for (const kind of kinds) env.dbg.breakpoint({ kind, point });
  await sleep(BREAKPOINT_SETTLE_MS);
}
async function disarm(point, kinds = KINDS) {
  for (const kind of kinds) env.dbg.clear({ kind, point });
  await sleep(BREAKPOINT_SETTLE_MS);
}

/**
 * A client that can sample: its handler answers `client says <key>`, and fails the first
 * request of a key starting with "flaky" (so the server's llm:sampling meets its error gate).
 */
function samplingClient(name) {
  const client = new Client({ name, version: '1.0.0' }, { capabilities: { sampling: {} } });
  const seen = new Map();
  client.sampled = [];
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    const key = req.params.messages[0].content.text;
    client.sampled.push(key);
    const n = (seen.get(key) ?? 0) + 1;
    seen.set(key, n);
    if (key.startsWith('flaky') && n === 1) throw new Error(`sampling ${key} failed`);
    return { role: 'assistant', model: 'client-model', content: { type: 'text', text: `client says ${key}` } };
  });
  return client;
}

/** The server's sampling request: held and injected, then failing once, held at error and retried. */
async function sampling(client, label) {
  await arm('before', ['llm']);
  try {
    const answer = client.callTool({ name: 'ask', arguments: { key: `held-${label}` } });
    const p = await pausedAt('llm:sampling', 'before');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: `injected sampling over ${label}` });
    assert.equal((await answer).content[0].text, `ask:injected sampling over ${label}`, `sampling over ${label}: inject`);
    assert.ok(!client.sampled.includes(`held-${label}`), 'the injected request never reached the client');
    const events = await env.srv.events(p.runId, 1);
    assert.equal(of(events, 'node.started', 'llm:sampling')[0].parentId, 'tool:ask');
  } finally {
    await disarm('before', ['llm']);
  }
  await arm('error', ['llm']);
  try {
    const key = `flaky-${label}`;
    const answer = client.callTool({ name: 'ask', arguments: { key } });
    const p = await pausedAt('llm:sampling', 'error');
    env.dbg.resume(p.runId, p.pauseId, 'retry');
    assert.equal((await answer).content[0].text, `ask:client says ${key}`, `sampling over ${label}: retried`);
    assert.deepEqual(client.sampled.filter((k) => k === key), [key, key], 'sent to the client twice');
    await env.srv.run(p.runId, (r) => r.status === 'ok');
    const events = await env.srv.events(p.runId, 1);
    assert.equal(of(events, 'node.error', 'llm:sampling').length, 1, `sampling over ${label}: one node.error`);
    const done = of(events, 'node.finished', 'llm:sampling');
    assert.equal(done.length, 1, 'one execution');
    assert.equal(done[0].status, 'ok');
    assert.equal(done[0].output.content.text, `client says ${key}`);
  } finally {
    await disarm('error', ['llm']);
  }
}

/** The first open exec.paused at `nodeId` and `point`, in any running run. */
async function pausedAt(nodeId, point) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { body } = await env.srv.get('/api/runs');
    for (const run of (body && body.runs) || []) {
      if (run.status !== 'running') continue;
      const events = await env.srv.events(run.id, 1);
      const resumed = new Set(of(events, 'exec.resumed').map((p) => p.pauseId));
      const p = of(events, 'exec.paused', nodeId).find((x) => !resumed.has(x.pauseId) && x.point === point);
      if (p) return { runId: run.id, pauseId: p.pauseId };
    }
    if (Date.now() > deadline) throw new Error(`no ${point} pause at ${nodeId}`);
    await sleep(30);
  }
}

/** Each surface's request, the node it holds at, and what its result says. */
const SURFACES = {
  tool: {
    nodeId: 'tool:sum',
    call: (c, key) => c.callTool({ name: 'sum', arguments: { a: 1, b: 2, key } }),
    text: (r) => r.content[0].text,
    real: () => 'sum:3',
  },
  resource: {
    nodeId: 'resource:doc',
    call: (c, key) => c.readResource({ uri: `doc://${key}` }),
    text: (r) => r.contents[0].text,
    real: (key) => `doc ${key}`,
  },
  prompt: {
    nodeId: 'prompt:brief',
    call: (c, key) => c.getPrompt({ name: 'brief', arguments: { key } }),
    text: (r) => r.messages[0].content.text,
    real: (key) => `brief ${key}`,
  },
};

/** Held at `before` and injected, then errored and retried at `error`, on every surface. */
async function everySurface(client, label) {
  await arm('before');
  try {
    for (const [kind, s] of Object.entries(SURFACES)) {
      const answer = s.call(client, `held-${label}`);
      const p = await pausedAt(s.nodeId, 'before');
      env.dbg.resume(p.runId, p.pauseId, 'inject', { output: `injected ${kind} over ${label}` });
      assert.equal(s.text(await answer), `injected ${kind} over ${label}`, `${kind} over ${label}: inject`);
    }
  } finally {
    await disarm('before');
  }
  await arm('error');
  try {
    for (const [kind, s] of Object.entries(SURFACES)) {
      const key = `flaky-${label}`;
      const answer = s.call(client, key);
      const p = await pausedAt(s.nodeId, 'error');
      env.dbg.resume(p.runId, p.pauseId, 'retry');
      assert.equal(s.text(await answer), s.real(key), `${kind} over ${label}: retried`);
      const events = await env.srv.events(p.runId, 1);
      assert.equal(of(events, 'node.error', s.nodeId).length, 1, `${kind} over ${label}: one node.error`);
    }
  } finally {
    await disarm('error');
  }
}

async function attached() {
  const gm = graphmind({ app: 'mcp-matrix', url: env.srv.url, env: {}, logger: () => {} });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  return gm;
}

test('in-memory transport: every surface and sampling held, injected, errored and retried', async () => {
  const gm = await attached();
  const server = build(gm);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = samplingClient('matrix-memory');
  await client.connect(clientSide);
  await everySurface(client, 'memory');
  await sampling(client, 'memory');
  await client.close();
  await gm.dispose();
});

test('stdio: every surface and sampling held, injected, errored and retried; stdout carries only JSON-RPC', async () => {
  const client = samplingClient('matrix-stdio');
  const errors = await connectStdio(client, FIXTURE, env.srv);
  await everySurface(client, 'stdio');
  await sampling(client, 'stdio');
  await client.close();
  assert.deepEqual(errors, [], 'every stdout line was a JSON-RPC message');
});

test('Streamable HTTP on 127.0.0.1: every surface and sampling held, injected, errored and retried', async () => {
  const gm = await attached();
  const server = build(gm);
  const client = samplingClient('matrix-http');
  const closeListener = await connectHttp(server, client);
  await everySurface(client, 'http');
  await sampling(client, 'http');
  await client.close();
  await closeListener();
  await gm.dispose();
});
