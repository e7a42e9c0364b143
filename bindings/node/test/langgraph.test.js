'use strict';
// The LangGraph facade over a real @langchain/langgraph graph, attached to a real `graphmind serve`.
const test = require('node:test');
const assert = require('node:assert/strict');
const { StateGraph, Annotation, START, END } = require('@langchain/langgraph');
const { tool: lcTool } = require('@langchain/core/tools');
const { z } = require('zod');
const { graphmind, isAbortError } = require('../langgraph.js');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { startServer, Debugger, sleep, ROOT } = require('./helpers');

let srv;
let dbg;
test.before(async () => {
  srv = await startServer(['--pause-on-error', 'off']);
  dbg = await Debugger.open(srv);
});
test.after(() => { dbg.close(); srv.stop(); });

function build(gm, calls) {
  const lookup = gm.wrapStructuredTool(lcTool(async ({ q }) => { calls.push(Date.now()); return `real:${q}`; }, {
    name: 'lookup', description: 'Looks up', schema: z.object({ q: z.string() }),
  }));
  const State = Annotation.Root({ q: Annotation(), answer: Annotation() });
  return new StateGraph(State)
    .addNode('plan', async (s) => ({ q: s.q.toUpperCase() }))
    .addNode('act', async (s, config) => ({ answer: await lookup.invoke({ q: s.q }, config) }))
    .addEdge(START, 'plan')
    .addConditionalEdges('plan', (s) => (s.q ? 'act' : END))
    .addEdge('act', END)
    .compile();
}

async function runs() { return (await srv.get('/api/runs')).body.runs; }

async function pausedAt(nodeId) {
  for (let i = 0; i < 300; i += 1) {
    for (const run of await runs()) {
      const events = (await srv.get(`/api/runs/${run.id}/events?limit=1000`)).body.events;
      const resumed = new Set(events.filter((e) => e.type === 'exec.resumed').map((e) => e.payload.pauseId));
      const p = events.find((e) => e.type === 'exec.paused' && e.payload.nodeId === nodeId && !resumed.has(e.payload.pauseId));
      if (p) return { runId: run.id, pauseId: p.payload.pauseId };
    }
    await sleep(30);
  }
  throw new Error(`no pause at ${nodeId}`);
}

test('a graph run: nodes with parentage, the hint, a held tool released by inject', async () => {
  const gm = graphmind({ app: 'lg-test', url: srv.url, waitForAttach: 2000 });
  const calls = [];
  const graph = build(gm, calls);
  gm.hintGraph(graph);
  dbg.breakpoint({ kind: 'tool', name: 'lookup' });
  const out = graph.invoke({ q: 'x' }, gm.config());
  const p = await pausedAt('tool:lookup');
  await sleep(1000);
  assert.equal(calls.length, 0, 'the tool body has not started while held');
  dbg.resume(p.runId, p.pauseId, 'inject', { output: 'injected!' });
  const result = await out;
  assert.equal(result.answer, 'injected!');
  assert.equal(calls.length, 0);
  dbg.clear({ kind: 'tool', name: 'lookup' });
  const events = await srv.events(p.runId, 1);
  const started = Object.fromEntries(events.filter((e) => e.type === 'node.started').map((e) => [e.payload.nodeId, e.payload.parentId]));
  assert.equal(started['agent:LangGraph'], undefined);
  assert.equal(started['chain:plan'], 'agent:LangGraph');
  assert.equal(started['chain:act'], 'agent:LangGraph');
  assert.equal(started['tool:lookup'], 'chain:act');
  assert.ok(!Object.keys(started).some((id) => id.includes('__start__') || id.includes('ChannelWrite') || id.includes('Branch')), Object.keys(started).join());
  const hint = events.find((e) => e.type === 'graph.hint');
  assert.ok(hint, 'graph.hint recorded');
  assert.deepEqual(hint.payload.nodes.map((n) => n.nodeId).sort(), ['agent:LangGraph', 'chain:act', 'chain:plan']);
  await srv.run(p.runId, (r) => r.status === 'ok');
  await gm.dispose();
});

test('abort at a held node ends the run as aborted', async () => {
  const gm = graphmind({ app: 'lg-test', url: srv.url, waitForAttach: 2000 });
  const calls = [];
  const graph = build(gm, calls);
  dbg.breakpoint({ kind: 'chain', name: 'act' });
  const out = graph.invoke({ q: 'y' }, gm.config()).then(() => null, (e) => e);
  const p = await pausedAt('chain:act');
  dbg.resume(p.runId, p.pauseId, 'abort');
  const error = await out;
  assert.ok(error && isAbortError(error), String(error));
  assert.equal(calls.length, 0);
  dbg.clear({ kind: 'chain', name: 'act' });
  await srv.run(p.runId, (r) => r.status === 'aborted');
  await gm.dispose();
});

test('examples/node/langgraph-agent.js: held at its tool from the viewer, injected, the graph answers with it', async () => {
  dbg.breakpoint({ kind: 'tool', name: 'weather' });
  const child = spawn(process.execPath, [path.join(ROOT, 'examples', 'node', 'langgraph-agent.js'), 'Lisbon'], {
    env: { ...process.env, GRAPHMIND_URL: srv.url, OPENAI_API_KEY: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const p = await pausedAt('tool:weather');
    dbg.resume(p.runId, p.pauseId, 'inject', { output: 'snowing' });
    assert.equal(await exited, 0);
    assert.match(out, /^Lisbon: snowing - /);
    const events = await srv.events(p.runId, 1);
    const started = Object.fromEntries(events.filter((e) => e.type === 'node.started').map((e) => [e.payload.nodeId, e.payload.parentId]));
    assert.equal(started['tool:weather'], 'chain:lookup');
    assert.equal(started['llm:step'], 'chain:respond');
    await srv.run(p.runId, (r) => r.status === 'ok');
  } finally {
    dbg.clear({ kind: 'tool', name: 'weather' });
    child.kill();
  }
});
