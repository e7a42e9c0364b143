'use strict';
// Every MCP surface (tools/call, resources/read, prompts/get) held, injected, errored and
// retried, over each transport: the SDK's in-memory pair, stdio (test/fixtures/
// mcp-matrix-server.js in a child process, its stdout only JSON-RPC) and Streamable HTTP on
// 127.0.0.1. The real @modelcontextprotocol/sdk client and server, a real `graphmind serve`.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const http = require('node:http');
const { randomUUID } = require('node:crypto');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { InMemoryTransport } = require('@modelcontextprotocol/sdk/inMemory.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { graphmind } = require('../mcp.js');
const { build } = require('./fixtures/mcp-matrix-server.js');
const { startServer, Debugger, sleep } = require('./helpers');
const { of } = require('./provider-helpers');

const FIXTURE = path.join(__dirname, 'fixtures', 'mcp-matrix-server.js');
/** How long a breakpoint change takes to reach the attached apps. */
const BREAKPOINT_SETTLE_MS = 200;
const KINDS = ['tool', 'resource', 'prompt'];

let srv;
let dbg;
test.before(async () => {
  srv = await startServer(['--pause-on-error', 'off']);
  dbg = await Debugger.open(srv);
});
test.after(() => { dbg.close(); srv.stop(); });

async function arm(point) {
  for (const kind of KINDS) dbg.breakpoint({ kind, point });
  await sleep(BREAKPOINT_SETTLE_MS);
}
async function disarm(point) {
  for (const kind of KINDS) dbg.clear({ kind, point });
  await sleep(BREAKPOINT_SETTLE_MS);
}

/** The first open exec.paused at `nodeId` and `point`, in any running run. */
async function pausedAt(nodeId, point) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { body } = await srv.get('/api/runs');
    for (const run of (body && body.runs) || []) {
      if (run.status !== 'running') continue;
      const events = await srv.events(run.id, 1);
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
      dbg.resume(p.runId, p.pauseId, 'inject', { output: `injected ${kind} over ${label}` });
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
      dbg.resume(p.runId, p.pauseId, 'retry');
      assert.equal(s.text(await answer), s.real(key), `${kind} over ${label}: retried`);
      const events = await srv.events(p.runId, 1);
      assert.equal(of(events, 'node.error', s.nodeId).length, 1, `${kind} over ${label}: one node.error`);
    }
  } finally {
    await disarm('error');
  }
}

async function attached() {
  const gm = graphmind({ app: 'mcp-matrix', url: srv.url, env: {}, logger: () => {} });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  return gm;
}

test('in-memory transport: every surface held, injected, errored and retried', async () => {
  const gm = await attached();
  const server = build(gm);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'matrix-memory', version: '1.0.0' });
  await client.connect(clientSide);
  await everySurface(client, 'memory');
  await client.close();
  await gm.dispose();
});

test('stdio: every surface held, injected, errored and retried; stdout carries only JSON-RPC', async () => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [FIXTURE],
    env: { ...process.env, GRAPHMIND_URL: srv.url },
    stderr: 'pipe',
  });
  const errors = [];
  const client = new Client({ name: 'matrix-stdio', version: '1.0.0' });
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  await everySurface(client, 'stdio');
  await client.close();
  assert.deepEqual(errors, [], 'every stdout line was a JSON-RPC message');
});

test('Streamable HTTP on 127.0.0.1: every surface held, injected, errored and retried', async () => {
  const gm = await attached();
  const server = build(gm);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
  await server.connect(transport);
  const listener = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => transport.handleRequest(req, res, body ? JSON.parse(body) : undefined));
  });
  await new Promise((r) => listener.listen(0, '127.0.0.1', r));
  const client = new Client({ name: 'matrix-http', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${listener.address().port}/mcp`)));
  await everySurface(client, 'http');
  await client.close();
  await new Promise((r) => listener.close(r));
  await gm.dispose();
});
