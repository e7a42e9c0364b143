'use strict';
// The LangGraph facade with a real chat model: @langchain/openai's ChatOpenAI streaming from
// the fake provider (tests/fake_provider/server.py) inside a real StateGraph + ToolNode,
// attached to a real `graphmind serve` (pause-on-error on: every error gate holds). The LLM
// step under chain:<node>, streamed text and tool-call chunks as node.token, a wrapped tool
// retried at its error gate, one pause per failure, parallel Send branches held one by one,
// and a callback gate asked to inject (warned once, the graph goes on).
const test = require('node:test');
const assert = require('node:assert/strict');
const { StateGraph, Annotation, MessagesAnnotation, Send, START, END } = require('@langchain/langgraph');
const { ToolNode, toolsCondition } = require('@langchain/langgraph/prebuilt');
const { tool: lcTool } = require('@langchain/core/tools');
const { ChatOpenAI } = require('@langchain/openai');
const { z } = require('zod');
const { graphmind } = require('../langgraph.js');
const { startServer, startFakeProvider, Debugger, sleep } = require('./helpers');
const { chunk: sseChunk, of, runEvents, streamed } = require('./provider-helpers');

let srv;
let dbg;
let fake;
test.before(async () => {
  srv = await startServer();
  dbg = await Debugger.open(srv);
  fake = await startFakeProvider();
});
test.after(() => { dbg.close(); srv.stop(); fake.stop(); });
test.beforeEach(() => fake.reset());

/** Streamed answers, each its own completion id (the messages reducer merges equal ids). */
let streamNo = 0;
function chunk(delta, options) {
  const [event, data] = sseChunk(delta, options);
  return [event, { ...data, id: `chatcmpl-${streamNo}` }];
}

/** A streamed answer calling `lookup({q})`, its arguments in two pieces. */
function toolCallStream(q) {
  streamNo += 1;
  const call = (fn, extra = {}) => chunk({ tool_calls: [{ index: 0, ...extra, function: fn }] });
  return {
    status: 200,
    sse: [
      chunk({ role: 'assistant', content: 'Let me look.' }),
      call({ name: 'lookup', arguments: '' }, { id: 'call_1', type: 'function' }),
      call({ arguments: '{"q":' }),
      call({ arguments: `"${q}"}` }),
      chunk({}, { finish: 'tool_calls' }),
      chunk(null, { usage: { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 } }),
      [null, '[DONE]'],
    ],
  };
}

/** A streamed plain answer. */
function textStream(text) {
  streamNo += 1;
  return {
    status: 200,
    sse: [
      chunk({ role: 'assistant', content: text.slice(0, 3) }),
      chunk({ content: text.slice(3) }, { finish: 'stop' }),
      chunk(null, { usage: { prompt_tokens: 20, completion_tokens: 4, total_tokens: 24 } }),
      [null, '[DONE]'],
    ],
  };
}

/**
 * The agent node's body: the model's answer streamed and gathered (`invoke` with
 * `streaming: true` would also count tokens with tiktoken, fetched from the network).
 */
async function ask(model, messages, config) {
  let full;
  for await (const piece of await model.stream(messages, config)) full = full === undefined ? piece : full.concat(piece);
  return full;
}

function chatModel(lookup) {
  return new ChatOpenAI({ model: 'gpt-test', apiKey: 'sk-test', maxRetries: 0, configuration: { baseURL: fake.baseURL } }).bindTools([lookup]);
}

/** agent (ChatOpenAI, tools bound) -> tools (ToolNode of the wrapped lookup) -> agent. */
function agentGraph(gm, body) {
  return graphOf(gm.wrapStructuredTool(lcTool(body, { name: 'lookup', description: 'Looks up', schema: z.object({ q: z.string() }) })));
}

/** agent (ChatOpenAI, `lookup` bound) -> tools (ToolNode of `lookup`) -> agent. */
function graphOf(lookup) {
  const model = chatModel(lookup);
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (s, config) => ({ messages: [await ask(model, s.messages, config)] }))
    .addNode('tools', new ToolNode([lookup]))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', toolsCondition)
    .addEdge('tools', 'agent')
    .compile();
}

async function runIds() { return (await srv.get('/api/runs')).body.runs.map((r) => r.id); }

/** The open pauses (not resumed yet) of run `runId`. */
async function openPauses(runId) {
  const events = (await srv.get(`/api/runs/${runId}/events?limit=1000`)).body.events;
  const resumed = new Set(events.filter((e) => e.type === 'exec.resumed').map((e) => e.payload.pauseId));
  return events.filter((e) => e.type === 'exec.paused' && !resumed.has(e.payload.pauseId)).map((e) => e.payload);
}

/** Waits for `count` open pauses in a run not in `known`: `{runId, pauses}`. */
async function paused(known, count = 1) {
  for (let i = 0; i < 300; i += 1) {
    for (const id of await runIds()) {
      if (known.includes(id)) continue;
      const pauses = await openPauses(id);
      if (pauses.length >= count) return { runId: id, pauses };
    }
    await sleep(30);
  }
  throw new Error(`no ${count} pauses`);
}

/** The next open pause at `nodeId` in run `runId`. */
async function nextPause(runId, nodeId) {
  for (let i = 0; i < 300; i += 1) {
    const p = (await openPauses(runId)).find((x) => x.nodeId === nodeId);
    if (p) return p;
    await sleep(30);
  }
  throw new Error(`no pause at ${nodeId}`);
}

async function attached(options = {}) {
  const lines = [];
  const gm = graphmind({ app: 'lg-agent', url: srv.url, env: {}, logger: (l) => lines.push(String(l)), ...options });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  return { gm, lines };
}

test('ChatOpenAI in a StateGraph: llm:step under chain:agent, streamed text and tool-call chunks, the tool under chain:tools', async () => {
  const { gm } = await attached();
  await fake.script(toolCallStream('Faro'), textStream('Sunny in Faro.'));
  const graph = agentGraph(gm, async ({ q }) => `weather:${q}`);
  const before = await runIds();
  const result = await graph.invoke({ messages: [{ role: 'user', content: 'Weather in Faro?' }] }, gm.config());
  assert.equal(result.messages.at(-1).content, 'Sunny in Faro.');
  const [runId] = (await runIds()).filter((id) => !before.includes(id));
  const events = await runEvents(srv, gm, runId);
  const started = of(events, 'node.started');
  const models = started.filter((p) => p.nodeId === 'llm:step');
  assert.equal(models.length, 2, 'two model calls');
  assert.ok(models.every((p) => p.parentId === 'chain:agent'), JSON.stringify(models.map((p) => p.parentId)));
  assert.equal(started.find((p) => p.nodeId === 'tool:lookup').parentId, 'chain:tools');
  assert.equal(streamed(events, 'text'), 'Let me look.Sunny in Faro.');
  assert.equal(streamed(events, 'tool-args'), '{"q":"Faro"}');
  // Batched: fewer node.token events than deltas streamed.
  const tokens = of(events, 'node.token', 'llm:step');
  assert.ok(tokens.length < tokens.flatMap((t) => t.deltas).length, `${tokens.length} batches`);
  const finished = of(events, 'node.finished', 'llm:step');
  assert.equal(finished[0].output.toolCalls[0].name, 'lookup');
  assert.equal(finished[1].output.text, 'Sunny in Faro.');
  const toolDone = of(events, 'node.finished', 'tool:lookup')[0];
  assert.equal(toolDone.output, 'weather:Faro');
  await gm.dispose();
});

test('a wrapped tool that throws holds at its error gate once; retry runs it again and the graph goes on', async () => {
  const { gm } = await attached();
  await fake.script(toolCallStream('Lisbon'), textStream('Done now.'));
  let calls = 0;
  const graph = agentGraph(gm, async ({ q }) => {
    calls += 1;
    if (calls === 1) throw new Error('lookup down');
    return `ok:${q}`;
  });
  const known = await runIds();
  const out = graph.invoke({ messages: [{ role: 'user', content: 'x' }] }, gm.config());
  const { runId, pauses } = await paused(known);
  assert.equal(pauses.length, 1);
  assert.equal(pauses[0].nodeId, 'tool:lookup');
  dbg.resume(runId, pauses[0].pauseId, 'retry');
  const result = await out;
  assert.equal(calls, 2);
  assert.equal(result.messages.at(-1).content, 'Done now.');
  const events = await runEvents(srv, gm, runId);
  assert.equal(of(events, 'exec.paused').length, 1);
  assert.equal(of(events, 'node.finished', 'tool:lookup')[0].output, 'ok:Lisbon');
  await gm.dispose();
});

test('one pause per failure: a tool error continued past its gate climbs chain:tools and the agent without pausing again', async () => {
  const { gm } = await attached();
  await fake.script(toolCallStream('Porto'));
  const failure = new Error('lookup broken');
  // ToolNode turns tool errors into ToolMessages by default: let this one climb.
  const lookup = gm.wrapStructuredTool(lcTool(async () => { throw failure; }, { name: 'lookup', description: 'Looks up', schema: z.object({ q: z.string() }) }));
  const model = chatModel(lookup);
  const graph = new StateGraph(MessagesAnnotation)
    .addNode('agent', async (s, config) => ({ messages: [await ask(model, s.messages, config)] }))
    .addNode('tools', new ToolNode([lookup], { handleToolErrors: false }))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', toolsCondition)
    .addEdge('tools', END)
    .compile();
  const known = await runIds();
  const out = graph.invoke({ messages: [{ role: 'user', content: 'x' }] }, gm.config()).then(() => null, (e) => e);
  const { runId, pauses } = await paused(known);
  assert.equal(pauses[0].nodeId, 'tool:lookup');
  dbg.resume(runId, pauses[0].pauseId, 'continue');
  const error = await out;
  assert.ok(error && /lookup broken/.test(error.message), String(error));
  const events = await runEvents(srv, gm, runId);
  assert.deepEqual(of(events, 'exec.paused').map((p) => p.nodeId), ['tool:lookup'], 'one pause, at the innermost level');
  const errored = of(events, 'node.error').map((p) => p.nodeId);
  assert.ok(errored.includes('tool:lookup') && errored.includes('chain:tools'), errored.join());
  await srv.run(runId, (r) => r.status === 'error');
  await gm.dispose();
});

test('parallel Send branches gate independently: one released while the other stays held', async () => {
  const { gm } = await attached();
  const began = {};
  const State = Annotation.Root({
    items: Annotation(),
    done: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  });
  const graph = new StateGraph(State)
    .addNode('work', async ({ item }) => { began[item] = Date.now(); return { done: [item] }; })
    .addConditionalEdges(START, (s) => s.items.map((item) => new Send('work', { item })))
    .addEdge('work', END)
    .compile();
  dbg.breakpoint({ kind: 'chain', name: 'work' });
  const known = await runIds();
  const out = graph.invoke({ items: ['a', 'b'] }, gm.config());
  const { runId, pauses } = await paused(known, 2);
  assert.equal(pauses.length, 2, 'both branches held at once');
  assert.ok(pauses.every((p) => p.nodeId === 'chain:work'));
  dbg.resume(runId, pauses[0].pauseId, 'continue');
  await sleep(400);
  assert.equal(Object.keys(began).length, 1, 'one branch ran, the other is still held');
  assert.equal((await openPauses(runId)).length, 1);
  dbg.resume(runId, pauses[1].pauseId, 'continue');
  const result = await out;
  assert.deepEqual([...result.done].sort(), ['a', 'b']);
  dbg.clear({ kind: 'chain', name: 'work' });
  await srv.run(runId, (r) => r.status === 'ok');
  await gm.dispose();
});

test('a callback gate asked to inject warns once and continues with the real work', async () => {
  const { gm, lines } = await attached();
  let ran = 0;
  const State = Annotation.Root({ n: Annotation() });
  const graph = new StateGraph(State)
    .addNode('plan', async (s) => { ran += 1; return { n: s.n + 1 }; })
    .addEdge(START, 'plan')
    .addEdge('plan', END)
    .compile();
  dbg.breakpoint({ kind: 'chain', name: 'plan' });
  for (const n of [1, 10]) {
    const known = await runIds();
    const out = graph.invoke({ n }, gm.config());
    const { runId, pauses } = await paused(known);
    dbg.resume(runId, pauses[0].pauseId, 'inject', { output: { n: 999 } });
    const result = await out;
    assert.equal(result.n, n + 1, 'the node really ran; nothing pretended');
    const events = await runEvents(srv, gm, runId);
    assert.ok(!of(events, 'node.finished', 'chain:plan')[0].injected, 'not recorded as injected');
  }
  dbg.clear({ kind: 'chain', name: 'plan' });
  assert.equal(ran, 2);
  const warned = lines.filter((l) => /inject/.test(l) && /LangGraph/.test(l));
  assert.equal(warned.length, 1, lines.join('\n'));
  assert.match(warned[0], /wrapStructuredTool/);
  await gm.dispose();
});

test('maxPayloadChars: longer node inputs and outputs are recorded as a preview, the graph gets the full values', async () => {
  const { gm } = await attached({ maxPayloadChars: 40 });
  const long = 'x'.repeat(500);
  const State = Annotation.Root({ text: Annotation() });
  const graph = new StateGraph(State)
    .addNode('grow', async () => ({ text: long }))
    .addNode('keep', async (s) => ({ text: s.text }))
    .addEdge(START, 'grow')
    .addEdge('grow', 'keep')
    .addEdge('keep', END)
    .compile();
  const before = await runIds();
  const result = await graph.invoke({ text: 'short' }, gm.config());
  assert.equal(result.text, long, 'the app sees the real state');
  const [runId] = (await runIds()).filter((id) => !before.includes(id));
  const events = await runEvents(srv, gm, runId);
  const grown = of(events, 'node.finished', 'chain:grow')[0].output;
  assert.equal(grown.__graphmind, 'truncated');
  assert.equal(grown.preview.length, 40);
  assert.ok(grown.chars > 500, String(grown.chars));
  const kept = of(events, 'node.started', 'chain:keep')[0].input;
  assert.equal(kept.__graphmind, 'truncated');
  assert.deepEqual(of(events, 'node.started', 'chain:grow')[0].input, { text: 'short' }, 'within the cap: as it was');
  await gm.dispose();
});

test('a retriever inside a node: retriever:<name> under chain:<node>, held before it runs, its documents recorded', async () => {
  const { gm } = await attached();
  const { FakeRetriever } = require('@langchain/core/utils/testing');
  const { Document } = require('@langchain/core/documents');
  let fetched = 0;
  class Notes extends FakeRetriever {
    async _getRelevantDocuments(query) { fetched += 1; return [new Document({ pageContent: `note about ${query}` })]; }
  }
  const retriever = new Notes();
  const State = Annotation.Root({ q: Annotation(), docs: Annotation() });
  const graph = new StateGraph(State)
    .addNode('search', async (s, config) => ({ docs: (await retriever.invoke(s.q, config)).map((d) => d.pageContent) }))
    .addEdge(START, 'search')
    .addEdge('search', END)
    .compile();
  dbg.breakpoint({ kind: 'retriever', point: 'before' });
  const known = await runIds();
  const out = graph.invoke({ q: 'faro' }, gm.config());
  const { runId, pauses } = await paused(known);
  assert.match(pauses[0].nodeId, /^retriever:/);
  await sleep(300);
  assert.equal(fetched, 0, 'held before the retriever ran');
  dbg.resume(runId, pauses[0].pauseId, 'continue');
  const result = await out;
  dbg.clear({ kind: 'retriever', point: 'before' });
  assert.deepEqual(result.docs, ['note about faro']);
  const events = await runEvents(srv, gm, runId);
  const started = of(events, 'node.started').find((p) => p.nodeId.startsWith('retriever:'));
  assert.equal(started.parentId, 'chain:search');
  assert.deepEqual(started.input, { query: 'faro' });
  const done = of(events, 'node.finished', started.nodeId)[0];
  assert.match(JSON.stringify(done.output), /note about faro/);
  await gm.dispose();
});

test('a chat model (llm:step) and an unwrapped tool held at their callback gates: inject warns once and the real call goes on', async () => {
  const { gm, lines } = await attached();
  await fake.script(toolCallStream('Faro'), textStream('Real answer.'));
  let looked = 0;
  // Not wrapped: the handler sees this tool through its callbacks only.
  const graph = graphOf(lcTool(async ({ q }) => { looked += 1; return `weather:${q}`; }, { name: 'lookup', description: 'Looks up', schema: z.object({ q: z.string() }) }));
  dbg.breakpoint({ kind: 'llm', point: 'before' });
  dbg.breakpoint({ kind: 'tool', name: 'lookup', point: 'before' });
  await sleep(200);
  const known = await runIds();
  const out = graph.invoke({ messages: [{ role: 'user', content: 'Weather in Faro?' }] }, gm.config());
  let runId;
  try {
    // The first model call: held before anything is sent, then asked to inject.
    const first = await paused(known);
    runId = first.runId;
    assert.equal(first.pauses[0].nodeId, 'llm:step');
    await sleep(300);
    assert.equal((await fake.requests()).length, 0, 'nothing sent while the model call is held');
    dbg.resume(runId, first.pauses[0].pauseId, 'inject', { output: 'pretend answer' });
    // The tool the real answer asked for: held, then asked to inject.
    const toolPause = await nextPause(runId, 'tool:lookup');
    assert.equal(looked, 0, 'the tool has not run while held');
    dbg.resume(runId, toolPause.pauseId, 'inject', { output: 'pretend weather' });
    // The second model call: continued.
    const second = await nextPause(runId, 'llm:step');
    dbg.resume(runId, second.pauseId, 'continue');
    const result = await out;
    assert.equal(result.messages.at(-1).content, 'Real answer.', 'the graph got the real answers, never the injected ones');
    assert.equal(looked, 1, 'the tool really ran');
    assert.ok(result.messages.some((m) => m.content === 'weather:Faro'), 'the real tool result reached the graph');
    assert.equal((await fake.requests()).length, 2, 'both model requests were sent');
  } finally {
    dbg.clear({ kind: 'llm', point: 'before' });
    dbg.clear({ kind: 'tool', name: 'lookup', point: 'before' });
  }
  const events = await runEvents(srv, gm, runId);
  const finished = of(events, 'node.finished');
  assert.ok(finished.every((p) => !p.injected), 'nothing recorded as injected');
  assert.equal(of(events, 'node.finished', 'tool:lookup')[0].output, 'weather:Faro');
  const warned = lines.filter((l) => /inject/.test(l) && /LangGraph/.test(l));
  assert.equal(warned.length, 1, lines.join('\n'));
  await gm.dispose();
});
