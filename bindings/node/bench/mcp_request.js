'use strict';
// `make bench-node`: what `wrapServer` adds to one MCP request. A bare `McpServer` and the
// same server through `graphmind('/mcp').wrapServer` (a detached session, as a server runs
// with no debugger) each answer `tools/call` from a real SDK `Client` over the SDK's
// in-memory transport, interleaved in rounds of CALLS_PER_BLOCK. Added per request =
// wrapped - bare, in wall time and in the process's CPU time (process.cpuUsage: the
// JavaScript thread and the core's worker). The medians of ROUNDS rounds are printed.
const { performance } = require('node:perf_hooks');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { InMemoryTransport } = require('@modelcontextprotocol/sdk/inMemory.js');
const { z } = require('zod');
const { graphmind } = require('../mcp.js');

const ROUNDS = 10;
const CALLS_PER_BLOCK = 200;
const WARMUP = 100;
/** Nothing listens here: the session stays detached, as with no debugger running. */
const DETACHED_URL = 'ws://127.0.0.1:9/ingest';

async function client(wrap) {
  const server = wrap(new McpServer({ name: 'bench', version: '1.0.0' }));
  server.registerTool('add', { inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({
    content: [{ type: 'text', text: String(a + b) }],
  }));
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const c = new Client({ name: 'bench-client', version: '1.0.0' });
  await c.connect(clientSide);
  return c;
}

async function block(c, n) {
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i += 1) await c.callTool({ name: 'add', arguments: { a: i, b: 1 } });
  const wallUs = ((performance.now() - t0) * 1000) / n;
  const used = process.cpuUsage(cpu);
  return { wallUs, cpuUs: (used.user + used.system) / n };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const gm = graphmind({ app: 'mcp-bench', url: DETACHED_URL, env: {}, logger: () => {} });
  const bare = await client((s) => s);
  const wrapped = await client((s) => gm.wrapServer(s));
  await block(bare, WARMUP);
  await block(wrapped, WARMUP);
  const rows = { bare: [], wrapped: [] };
  for (let r = 0; r < ROUNDS; r += 1) {
    rows.bare.push(await block(bare, CALLS_PER_BLOCK));
    rows.wrapped.push(await block(wrapped, CALLS_PER_BLOCK));
  }
  const m = (k, f) => median(rows[k].map((x) => x[f]));
  const fmt = (x) => x.toFixed(1).padStart(8);
  console.log(`MCP tools/call over the in-memory transport, ${ROUNDS} x ${CALLS_PER_BLOCK} requests each, medians (µs per request):`);
  console.log(`                 wall      cpu`);
  console.log(`  bare       ${fmt(m('bare', 'wallUs'))} ${fmt(m('bare', 'cpuUs'))}`);
  console.log(`  wrapped    ${fmt(m('wrapped', 'wallUs'))} ${fmt(m('wrapped', 'cpuUs'))}   (detached session)`);
  console.log(`  added      ${fmt(m('wrapped', 'wallUs') - m('bare', 'wallUs'))} ${fmt(m('wrapped', 'cpuUs') - m('bare', 'cpuUs'))}`);
  await bare.close();
  await wrapped.close();
  await gm.dispose();
}

main().then(() => process.exit(0), (error) => { console.error(error); process.exit(1); });
