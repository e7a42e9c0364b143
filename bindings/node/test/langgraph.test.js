'use strict';
// The LangGraph facade over a real @langchain/langgraph graph, attached to a real `graphmind serve`.
const test = require('node:test');
const assert = require('node:assert/strict');
const { StateGraph, Annotation, START, END } = require('@langchain/langgraph');
const { tool: lcTool } = require('@langchain/core/tools');
const { RunnableLambda, RunnableSequence } = require('@langchain/core/runnables');
const { z } = require('zod');
const { graphmind, isAbortError } = require('../langgraph.js');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { serverAndDebugger, sleep, ROOT } = require('./helpers');

const env = serverAndDebugger(test);

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

async function runs() { return (await env.srv.get('/api/runs')).body.runs; }

async function pausedAt(nodeId) {
  for (let i = 0; i < 300; i += 1) {
    for (const run of await runs()) {
      const events = (await env.srv.get(`/api/runs/${run.id}/events?limit=1000`)).body.events;
      const resumed = new Set(events.filter((e) => e.type === 'exec.resumed').map((e) => e.payload.pauseId));
      const p = events.find((e) => e.type === 'exec.paused' && e.payload.nodeId === nodeId && !resumed.has(e.payload.pauseId));
      if (p) return { runId: run.id, pauseId: p.payload.pauseId, ts: p.ts };
    }
    await sleep(30);
  }
  throw new Error(`no pause at ${nodeId}`);
}

/** The stored events of the finished run whose run.started is named `name` (after `gm`'s flush). */
async function runNamed(gm, name) {
  gm.session.flushSync(5000);
  for (let i = 0; i < 300; i += 1) {
    for (const run of await runs()) {
      const events = (await env.srv.get(`/api/runs/${run.id}/events?limit=1000`)).body.events;
      const started = events.find((e) => e.type === 'run.started');
      if (started && started.payload.meta && started.payload.meta.name === name && events.at(-1).type === 'run.finished') return events;
    }
    await sleep(30);
  }
  throw new Error(`no finished run ${name}`);
}

/** `nodeId -> parentId` of the nodes a run started. */
function parents(events) {
  return Object.fromEntries(events.filter((e) => e.type === 'node.started').map((e) => [e.payload.nodeId, e.payload.parentId ?? null]));
}

test('a graph run: nodes with parentage, the hint, a held tool released by inject', async () => {
  const gm = graphmind({ app: 'lg-test', url: env.srv.url, waitForAttach: 2000 });
  const calls = [];
  const graph = build(gm, calls);
  gm.hintGraph(graph);
  env.dbg.breakpoint({ kind: 'tool', name: 'lookup' });
  const out = graph.invoke({ q: 'x' }, gm.config());
  const p = await pausedAt('tool:lookup');
  await sleep(1000);
  assert.equal(calls.length, 0, 'the tool body has not started while held');
  env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'injected!' });
  const result = await out;
  assert.equal(result.answer, 'injected!');
  assert.equal(calls.length, 0);
  env.dbg.clear({ kind: 'tool', name: 'lookup' });
  const events = await env.srv.events(p.runId, 1);
  const started = Object.fromEntries(events.filter((e) => e.type === 'node.started').map((e) => [e.payload.nodeId, e.payload.parentId]));
  assert.equal(started['agent:LangGraph'], undefined);
  assert.equal(started['chain:plan'], 'agent:LangGraph');
  assert.equal(started['chain:act'], 'agent:LangGraph');
  assert.equal(started['tool:lookup'], 'chain:act');
  assert.ok(!Object.keys(started).some((id) => id.includes('__start__') || id.includes('ChannelWrite') || id.includes('Branch')), Object.keys(started).join());
  const hint = events.find((e) => e.type === 'graph.hint');
  assert.ok(hint, 'graph.hint recorded');
  assert.deepEqual(hint.payload.nodes.map((n) => n.nodeId).sort(), ['agent:LangGraph', 'chain:act', 'chain:plan']);
  await env.srv.run(p.runId, (r) => r.status === 'ok');
  await gm.dispose();
});

test('abort at a held node ends the run as aborted', async () => {
  const gm = graphmind({ app: 'lg-test', url: env.srv.url, waitForAttach: 2000 });
  const calls = [];
  const graph = build(gm, calls);
  env.dbg.breakpoint({ kind: 'chain', name: 'act' });
  const out = graph.invoke({ q: 'y' }, gm.config()).then(() => null, (e) => e);
  const p = await pausedAt('chain:act');
  env.dbg.resume(p.runId, p.pauseId, 'abort');
  const error = await out;
  assert.ok(error && isAbortError(error), String(error));
  assert.equal(calls.length, 0);
  env.dbg.clear({ kind: 'chain', name: 'act' });
  await env.srv.run(p.runId, (r) => r.status === 'aborted');
  await gm.dispose();
});

test('examples/node/langgraph-agent.js: held at its tool from the viewer, injected, the graph answers with it', async () => {
  env.dbg.breakpoint({ kind: 'tool', name: 'weather' });
  const child = spawn(process.execPath, [path.join(ROOT, 'examples', 'node', 'langgraph-agent.js'), 'Lisbon'], {
    env: { ...process.env, GRAPHMIND_URL: env.srv.url, OPENAI_API_KEY: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const p = await pausedAt('tool:weather');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'snowing' });
    assert.equal(await exited, 0);
    assert.match(out, /^Lisbon: snowing - /);
    const events = await env.srv.events(p.runId, 1);
    const started = Object.fromEntries(events.filter((e) => e.type === 'node.started').map((e) => [e.payload.nodeId, e.payload.parentId]));
    assert.equal(started['tool:weather'], 'chain:lookup');
    assert.equal(started['llm:step'], 'chain:respond');
    await env.srv.run(p.runId, (r) => r.status === 'ok');
  } finally {
    env.dbg.clear({ kind: 'tool', name: 'weather' });
    child.kill();
  }
});

test('a breakpoint on chain:<node> holds the node a full second; its body starts after the release from the debugger', async () => {
  const gm = graphmind({ app: 'lg-test', url: env.srv.url, env: {}, waitForAttach: 2000 });
  const began = [];
  const State = Annotation.Root({ n: Annotation() });
  const graph = new StateGraph(State)
    .addNode('slowpoke', async (s) => { began.push(Date.now()); return { n: s.n + 1 }; })
    .addEdge(START, 'slowpoke')
    .addEdge('slowpoke', END)
    .compile();
  env.dbg.breakpoint({ kind: 'chain', name: 'slowpoke' });
  try {
    const out = graph.invoke({ n: 1 }, gm.config());
    const p = await pausedAt('chain:slowpoke');
    assert.equal(typeof p.ts, 'number', 'the pause carries its time');
    await sleep(1000);
    assert.deepEqual(began, [], 'the node body has not started while held');
    const releasedAt = Date.now();
    env.dbg.resume(p.runId, p.pauseId, 'continue');
    assert.deepEqual(await out, { n: 2 });
    assert.equal(began.length, 1);
    assert.ok(began[0] >= releasedAt, `the body started ${releasedAt - began[0]} ms before the release`);
    assert.ok(began[0] - p.ts >= 1000, `the body started ${began[0] - p.ts} ms after the hold began`);
    await env.srv.run(p.runId, (r) => r.status === 'ok');
  } finally {
    env.dbg.clear({ kind: 'chain', name: 'slowpoke' });
  }
  await gm.dispose();
});

test('abortMode "signal": abort at a held node aborts the config\'s signal (merged with the caller\'s, which stays untouched); invoke rejects with the AbortError', async () => {
  const gm = graphmind({ app: 'lg-test', url: env.srv.url, env: {}, waitForAttach: 2000, abortMode: 'signal' });
  const graph = build(gm, []);
  const own = new AbortController();
  const config = gm.config({ signal: own.signal });
  assert.notEqual(config.signal, own.signal, 'merged: a signal of its own');
  env.dbg.breakpoint({ kind: 'chain', name: 'act' });
  try {
    const out = graph.invoke({ q: 'z' }, config).then(() => null, (e) => e);
    const p = await pausedAt('chain:act');
    assert.equal(config.signal.aborted, false);
    env.dbg.resume(p.runId, p.pauseId, 'abort');
    const error = await out;
    assert.ok(error && isAbortError(error), String(error));
    assert.equal(config.signal.aborted, true, 'the config\'s signal fired');
    assert.ok(isAbortError(config.signal.reason), String(config.signal.reason));
    assert.equal(own.signal.aborted, false, 'the caller\'s own signal is only listened to');
    await env.srv.run(p.runId, (r) => r.status === 'aborted');
  } finally {
    env.dbg.clear({ kind: 'chain', name: 'act' });
  }
  await gm.dispose();
});

test('the caller\'s own signal given to gm.config() aborts the invocation at a held node: its reason rejects invoke, the gate is released, the run ends aborted', async () => {
  const gm = graphmind({ app: 'lg-test', url: env.srv.url, env: {}, waitForAttach: 2000 });
  const calls = [];
  const graph = build(gm, calls);
  const own = new AbortController();
  const config = gm.config({ signal: own.signal });
  env.dbg.breakpoint({ kind: 'chain', name: 'act' });
  try {
    const out = graph.invoke({ q: 'w' }, config).then(() => null, (e) => e);
    const p = await pausedAt('chain:act');
    own.abort(new Error('the caller gave up'));
    const error = await out;
    assert.equal(error && error.message, 'the caller gave up');
    assert.equal(config.signal.aborted, true);
    assert.deepEqual(calls, [], 'the held node\'s body never ran');
    await env.srv.run(p.runId, (r) => r.status === 'aborted');
    const events = await env.srv.events(p.runId, 1);
    assert.ok(events.some((e) => e.type === 'exec.resumed' && e.payload.pauseId === p.pauseId), 'the held gate was released');
    const act = events.find((e) => e.type === 'node.finished' && e.payload.nodeId === 'chain:act');
    assert.equal(act && act.payload.status, 'aborted');
  } finally {
    env.dbg.clear({ kind: 'chain', name: 'act' });
  }
  await gm.dispose();
});

test('chains: "all" draws every chain run, "langgraph" only graph nodes, "none" no chain (a tool hangs off the agent)', async () => {
  const got = {};
  for (const chains of ['all', 'langgraph', 'none']) {
    const gm = graphmind({ app: 'lg-chains', url: env.srv.url, env: {}, waitForAttach: 2000, chains });
    // An unwrapped LangChain tool: recorded by the handler (callback-only).
    const probe = lcTool(async ({ q }) => `probe:${q}`, { name: 'probe', description: 'Probes', schema: z.object({ q: z.string() }) });
    const State = Annotation.Root({ q: Annotation(), answer: Annotation() });
    const graph = new StateGraph(State)
      .addNode('plan', async (s) => ({ q: s.q.toUpperCase() }))
      .addNode('act', async (s, config) => ({ answer: await probe.invoke({ q: s.q }, config) }))
      .addEdge(START, 'plan')
      .addEdge('plan', 'act')
      .addEdge('act', END)
      .compile();
    assert.equal((await graph.invoke({ q: 'x' }, gm.config({}, { runName: `graph-${chains}` }))).answer, 'probe:X');
    const chain = RunnableSequence.from([
      RunnableLambda.from((x) => x.toUpperCase()).withConfig({ runName: 'upper' }),
      RunnableLambda.from((x) => `${x}!`).withConfig({ runName: 'exclaim' }),
    ]);
    assert.equal(await chain.invoke('hi', gm.config({}, { runName: `lcel-${chains}` })), 'HI!');
    got[chains] = {
      graph: parents(await runNamed(gm, `graph-${chains}`)),
      lcel: parents(await runNamed(gm, `lcel-${chains}`)),
    };
    await gm.dispose();
  }
  assert.deepEqual(got.all.graph, { 'agent:graph-all': null, 'chain:plan': 'agent:graph-all', 'chain:act': 'agent:graph-all', 'tool:probe': 'chain:act' });
  assert.deepEqual(got.all.lcel, { 'agent:lcel-all': null, 'chain:upper': 'agent:lcel-all', 'chain:exclaim': 'agent:lcel-all' });
  assert.deepEqual(got.langgraph.graph, { 'agent:graph-langgraph': null, 'chain:plan': 'agent:graph-langgraph', 'chain:act': 'agent:graph-langgraph', 'tool:probe': 'chain:act' });
  assert.deepEqual(got.langgraph.lcel, { 'agent:lcel-langgraph': null }, 'chains outside a graph are not drawn');
  assert.deepEqual(got.none.graph, { 'agent:graph-none': null, 'tool:probe': 'agent:graph-none' });
  assert.deepEqual(got.none.lcel, { 'agent:lcel-none': null });
});

test('autoRun: false: inside gm.run the graph records in that run under its agent node; outside, no run of its own', async () => {
  const gm = graphmind({ app: 'lg-autorun', url: env.srv.url, env: {}, waitForAttach: 2000, autoRun: false });
  const graph = build(gm, []);
  const before = (await runs()).length;
  assert.equal((await gm.run('outer', () => graph.invoke({ q: 'in' }, gm.config()))).answer, 'real:IN');
  const inside = parents(await runNamed(gm, 'outer'));
  assert.equal(inside['agent:outer'], null);
  assert.equal(inside['agent:LangGraph'], 'agent:outer');
  assert.equal(inside['chain:act'], 'agent:LangGraph');
  assert.equal(inside['tool:lookup'], 'chain:act');
  assert.equal((await graph.invoke({ q: 'out' }, gm.config({}, { runName: 'no-run-of-its-own' }))).answer, 'real:OUT');
  gm.session.flushSync(5000);
  await sleep(300);
  const named = [];
  for (const run of await runs()) {
    const events = (await env.srv.get(`/api/runs/${run.id}/events?limit=1000`)).body.events;
    const started = events.find((e) => e.type === 'run.started');
    if (started && started.payload.meta) named.push(started.payload.meta.name);
  }
  assert.ok(!named.includes('no-run-of-its-own'), named.join());
  assert.ok((await runs()).length <= before + 2, 'one run for gm.run, at most the session\'s implicit one besides');
  await gm.dispose();
});

test('gm.tool(), wrapTools({fn, lcTool}), callbacks() and handler(): each gated or recorded where it runs', async () => {
  const gm = graphmind({ app: 'lg-paths', url: env.srv.url, env: {}, waitForAttach: 2000 });
  const ran = [];
  const fmt = gm.tool('fmt', async ({ q }) => { ran.push('fmt'); return `fmt:${q}`; });
  const tools = gm.wrapTools({
    shout: async ({ q }) => { ran.push('shout'); return q.toUpperCase(); },
    find: lcTool(async ({ q }) => { ran.push('find'); return `found:${q}`; }, { name: 'find', description: 'Finds', schema: z.object({ q: z.string() }) }),
  });
  const [listed] = gm.wrapTools([lcTool(async () => 'x', { name: 'listed', description: 'Listed', schema: z.object({}) })]);
  assert.equal(listed.name, 'listed', 'an array of tools is wrapped too');
  const State = Annotation.Root({ q: Annotation(), out: Annotation() });
  const graph = new StateGraph(State)
    .addNode('act', async (s, config) => {
      const a = await fmt({ q: s.q });
      const b = await tools.shout({ q: a });
      const c = await tools.find.invoke({ q: b }, config);
      return { out: c };
    })
    .addEdge(START, 'act')
    .addEdge('act', END)
    .compile();

  // gm.tool(): held at tool:fmt under chain:act of the graph's own run, injected.
  env.dbg.breakpoint({ kind: 'tool', name: 'fmt' });
  try {
    const out = graph.invoke({ q: 'a' }, { callbacks: gm.callbacks({ runName: 'via-callbacks' }) });
    const p = await pausedAt('tool:fmt');
    env.dbg.resume(p.runId, p.pauseId, 'inject', { output: 'injected' });
    assert.equal((await out).out, 'found:INJECTED');
    assert.deepEqual(ran, ['shout', 'find'], 'the injected gm.tool() body never ran');
  } finally {
    env.dbg.clear({ kind: 'tool', name: 'fmt' });
  }
  const viaCallbacks = parents(await runNamed(gm, 'via-callbacks'));
  assert.equal(viaCallbacks['chain:act'], 'agent:via-callbacks');
  assert.equal(viaCallbacks['tool:fmt'], 'chain:act', 'a gated function called in a node hangs under it, in its run');
  assert.equal(viaCallbacks['tool:shout'], 'chain:act');
  assert.equal(viaCallbacks['tool:find'], 'chain:act');

  // handler(): the same graph with [gm.handler()], a wrapTools'd LangChain tool retried at its error gate.
  ran.length = 0;
  let fails = 1;
  const flaky = gm.wrapTools({
    flaky: lcTool(async ({ q }) => { ran.push('flaky'); if (fails > 0) { fails -= 1; throw new Error('flaky down'); } return `ok:${q}`; }, { name: 'flaky', description: 'Fails once', schema: z.object({ q: z.string() }) }),
  }).flaky;
  const retrying = new StateGraph(State)
    .addNode('act', async (s, config) => ({ out: await flaky.invoke({ q: s.q }, config) }))
    .addEdge(START, 'act')
    .addEdge('act', END)
    .compile();
  env.dbg.breakpoint({ kind: 'tool', name: 'flaky', point: 'error' });
  try {
    const out = retrying.invoke({ q: 'b' }, { callbacks: [gm.handler({ runName: 'via-handler' })] });
    const p = await pausedAt('tool:flaky');
    env.dbg.resume(p.runId, p.pauseId, 'retry');
    assert.equal((await out).out, 'ok:b');
    assert.deepEqual(ran, ['flaky', 'flaky']);
  } finally {
    env.dbg.clear({ kind: 'tool', name: 'flaky', point: 'error' });
  }
  const viaHandler = parents(await runNamed(gm, 'via-handler'));
  assert.equal(viaHandler['tool:flaky'], 'chain:act');
  await gm.dispose();
});
