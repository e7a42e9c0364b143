'use strict';
// The graphmind() facade with the real `ai` package: a mock provider (ai/test's
// MockLanguageModelV3) calls a wrapped tool through generateText; the tool is a gated step,
// the model call the core's LLM step, and the debugger can inject the tool's result. Then
// wrapModel over HTTP (below). Also runs examples/node/agent.js.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { generateText, streamText, simulateReadableStream, tool, jsonSchema, stepCountIs } = require('ai');
const { MockLanguageModelV3 } = require('ai/test');
const { graphmind } = require('..');
const { startServer, startFakeProvider, Debugger, sleep, ROOT } = require('./helpers');

let srv;
test.before(async () => { srv = await startServer(['--pause-on-error', 'off']); });
test.after(() => srv.stop());

function mockModel() {
  let step = 0;
  const usage = { inputTokens: { total: 10, noCache: 10 }, outputTokens: { total: 5, text: 5 } };
  return new MockLanguageModelV3({
    modelId: 'mock-model',
    doGenerate: async () => {
      step += 1;
      if (step === 1) {
        return {
          content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'weather', input: JSON.stringify({ city: 'Lisbon' }) }],
          finishReason: { unified: 'tool-calls', raw: 'tool_use' },
          usage,
          warnings: [],
        };
      }
      return { content: [{ type: 'text', text: 'It is sunny.' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
    },
  });
}

test('generateText with a wrapped model and tools: recorded, and an injected tool result reaches the model', async () => {
  const dbg = await Debugger.open(srv);
  dbg.breakpoint({ name: 'weather', point: 'after' });
  await sleep(150);
  const gm = graphmind({ app: 'ai-test', url: srv.url, env: {} });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  const tools = gm.wrapTools({
    weather: tool({
      description: 'Weather for a city',
      inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
      execute: async ({ city }) => ({ city, sky: 'rain' }),
    }),
  });
  const model = gm.wrapModel(mockModel());
  let runId;
  const done = gm.run('weather-agent', async (ctx) => {
    runId = ctx.runId;
    dbg.watch(ctx.runId);
    return generateText({ model, tools, prompt: 'Weather in Lisbon?', stopWhen: stepCountIs(3), abortSignal: ctx.signal });
  });
  const paused = await dbg.next('exec.paused');
  assert.equal(paused.payload.nodeId, 'tool:weather');
  dbg.resume(runId, paused.payload.pauseId, 'inject', { output: { city: 'Lisbon', sky: 'sunny' } });
  const result = await done;
  assert.equal(result.text, 'It is sunny.');
  assert.deepEqual(result.steps[0].toolResults[0].output, { city: 'Lisbon', sky: 'sunny' });
  const events = await srv.events(runId, 10);
  const started = events.filter((e) => e.type === 'node.started').map((e) => e.payload.nodeId);
  assert.deepEqual(started, ['agent:weather-agent', 'llm:step', 'tool:weather', 'llm:step']);
  const llmDone = events.find((e) => e.type === 'node.finished' && e.payload.nodeId === 'llm:step');
  assert.deepEqual(llmDone.payload.output.toolCalls, [{ id: 'c1', name: 'weather', input: { city: 'Lisbon' } }]);
  assert.equal(llmDone.payload.output.finishReason, 'tool-calls');
  const toolDone = events.find((e) => e.type === 'node.finished' && e.payload.nodeId === 'tool:weather');
  assert.equal(toolDone.payload.injected, true);
  await srv.run(runId, (r) => r.status === 'ok');
  dbg.close();
  await gm.dispose();
});

test('an edited tool argument is re-checked against the tool\'s zod schema: a refused edit keeps the gate held, a valid one runs', async () => {
  const { z } = require('zod');
  const dbg = await Debugger.open(srv);
  dbg.clear({ name: 'weather', point: 'after' }); // the test above leaves it set on the server
  dbg.breakpoint({ name: 'weather', point: 'before' });
  await sleep(150);
  const gm = graphmind({ app: 'ai-schema-test', url: srv.url, env: {} });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  const ran = [];
  const tools = gm.wrapTools({
    weather: tool({
      description: 'Weather for a city',
      inputSchema: z.object({ city: z.string().min(2) }),
      execute: async ({ city }) => { ran.push(city); return { city, sky: 'rain' }; },
    }),
  });
  let runId;
  const done = gm.run('schema-agent', async (ctx) => {
    runId = ctx.runId;
    dbg.watch(ctx.runId);
    return generateText({ model: gm.wrapModel(mockModel()), tools, prompt: 'Weather in Lisbon?', stopWhen: stepCountIs(3), abortSignal: ctx.signal });
  });
  const paused = await dbg.next('exec.paused');
  assert.equal(paused.payload.nodeId, 'tool:weather');
  assert.equal(paused.payload.editable, true);
  dbg.resume(runId, paused.payload.pauseId, 'continue', { input: { city: 12345 } });
  const refused = await dbg.nextWithin('exec.refused', 3000);
  assert.ok(refused, 'the app refused the edit');
  assert.equal(refused.payload.code, 'schema');
  assert.match(refused.payload.message, /\/city/);
  assert.doesNotMatch(refused.payload.message, /12345/, 'the refusal does not quote the value');
  await sleep(100);
  assert.deepEqual(ran, [], 'still held: the tool has not run');
  dbg.resume(runId, paused.payload.pauseId, 'continue', { input: { city: 'Porto' } });
  const again = await dbg.nextWithin('exec.refused', 1000);
  assert.equal(again, null, `a valid edit runs (${again && JSON.stringify(again.payload)})`);
  const result = await done;
  assert.deepEqual(ran, ['Porto']);
  assert.deepEqual(result.steps[0].toolResults[0].output, { city: 'Porto', sky: 'rain' });
  dbg.clear({ name: 'weather', point: 'before' });
  await sleep(100);
  dbg.close();
  await gm.dispose();
});

/** A model whose provider runs a web search itself (a provider-executed tool call and its result), then answers. */
function searchingModel() {
  const usage = { inputTokens: { total: 10, noCache: 10 }, outputTokens: { total: 5, text: 5 } };
  const call = { type: 'tool-call', toolCallId: 'ws_1', toolName: 'web_search', input: JSON.stringify({ query: 'faro' }), providerExecuted: true, dynamic: true };
  const result = { type: 'tool-result', toolCallId: 'ws_1', toolName: 'web_search', result: [{ url: 'https://example.test' }], dynamic: true };
  const finish = { unified: 'stop', raw: 'stop' };
  return new MockLanguageModelV3({
    modelId: 'mock-search',
    doGenerate: async () => ({ content: [call, result, { type: 'text', text: 'Sunny.' }], finishReason: finish, usage, warnings: [] }),
    doStream: async () => ({
      stream: simulateReadableStream({
        chunks: [
          { type: 'stream-start', warnings: [] }, call, result,
          { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'Sun' }, { type: 'text-delta', id: 't', delta: 'ny.' }, { type: 'text-end', id: 't' },
          { type: 'finish', finishReason: finish, usage },
        ],
      }),
    }),
  });
}

test('provider-executed tools are observed: generateText and streamText record tool:web_search under the step, not as a tool call', async () => {
  const gm = graphmind({ app: 'ai-builtin-test', url: srv.url, env: {} });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  const model = gm.wrapModel(searchingModel());
  let runId;
  const texts = await gm.run('search', async (ctx) => {
    runId = ctx.runId;
    const a = await generateText({ model, prompt: 'weather?' });
    const b = streamText({ model, prompt: 'weather again?' });
    return [a.text, await b.text];
  });
  assert.deepEqual(texts, ['Sunny.', 'Sunny.']);
  gm.session.flushSync(5000);
  await srv.run(runId, (r) => r.status === 'ok');
  const events = await srv.events(runId, 1);
  const started = events.filter((e) => e.type === 'node.started' && e.payload.nodeId === 'tool:web_search').map((e) => e.payload);
  assert.equal(started.length, 2, 'one observed node per model call');
  for (const s of started) {
    assert.deepEqual([s.instanceId, s.parentId, s.input, s.providerExecuted, s.ungated], ['ws_1', 'llm:step', { query: 'faro' }, true, true]);
  }
  const done = events.filter((e) => e.type === 'node.finished' && e.payload.nodeId === 'tool:web_search').map((e) => e.payload);
  assert.deepEqual(done.map((d) => [d.status, d.output]), [['ok', [{ url: 'https://example.test' }]], ['ok', [{ url: 'https://example.test' }]]]);
  const steps = events.filter((e) => e.type === 'node.finished' && e.payload.nodeId === 'llm:step').map((e) => e.payload.output);
  assert.deepEqual(steps.map((o) => [o.text, o.toolCalls]), [['Sunny.', undefined], ['Sunny.', undefined]], 'the provider\'s tool is not a call the app runs');
  await gm.dispose();
});

test('examples/node/agent.js runs against the server and exits', () => {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'examples', 'node', 'agent.js')], {
    encoding: 'utf8',
    timeout: 20_000,
    env: { ...process.env, GRAPHMIND_URL: srv.url, NODE_ENV: 'development' },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /attached to the debugger/);
  assert.match(r.stdout, /"booked":true/);
});

// -- wrapModel on the core's LLM step: the real `ai` + `@ai-sdk/openai-compatible` over HTTP
// against tests/fake_provider/server.py, recorded by a real `graphmind serve`. (The server's
// breakpoints outlive a test: the first test's `weather` breakpoint is why the tool here is
// `forecast`, and each test below clears its own.)

const { createOpenAICompatible } = require('@ai-sdk/openai-compatible');
// streamText comes from the require at the top.

let fake;
test.before(async () => { fake = await startFakeProvider(); });
test.after(() => fake && fake.stop());

const USAGE = { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 };

function chat(message, finishReason = 'stop') {
  return { status: 200, json: { id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'fake-model', choices: [{ index: 0, message, finish_reason: finishReason }], usage: USAGE } };
}

function chunk(delta, finishReason = null, usage = undefined) {
  return [null, { id: 'chatcmpl-2', object: 'chat.completion.chunk', created: 1, model: 'fake-model', choices: [{ index: 0, delta, finish_reason: finishReason }], ...(usage ? { usage } : {}) }];
}

function fakeModel(gm) {
  const provider = createOpenAICompatible({ name: 'fake', baseURL: fake.baseURL, apiKey: 'test-key', includeUsage: true });
  return gm.wrapModel(provider.chatModel('fake-model'));
}

const llmEvents = (events) => events.filter((e) => e.payload && e.payload.nodeId === 'llm:step');

/** The stored LLM step events of a run, once the run is stored as finished. */
async function storedLlmEvents(runId) {
  await srv.run(runId, (r) => r.status === 'ok');
  return llmEvents(await srv.events(runId, 1));
}

async function session(dbg) {
  const gm = graphmind({ app: 'ai-llm-test', url: srv.url, env: {} });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  return gm;
}

test('wrapModel: a tool-using generateText is two LLM steps of one invocation, with tools, tool calls and usage', async () => {
  await fake.reset();
  await fake.script(
    chat({ role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'forecast', arguments: '{"city":"Lisbon"}' } }] }, 'tool_calls'),
    chat({ role: 'assistant', content: 'Sunny in Lisbon.' }),
  );
  const dbg = await Debugger.open(srv);
  const gm = await session(dbg);
  const tools = gm.wrapTools({
    forecast: tool({
      description: 'Weather for a city',
      inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
      execute: async ({ city }) => ({ city, sky: 'sun' }),
    }),
  });
  let runId;
  const result = await gm.run('llm-agent', async (ctx) => {
    runId = ctx.runId;
    return generateText({ model: fakeModel(gm), tools, prompt: 'Weather in Lisbon?', stopWhen: stepCountIs(3), maxRetries: 0 });
  });
  assert.equal(result.text, 'Sunny in Lisbon.');
  const events = await storedLlmEvents(runId);
  const started = events.filter((e) => e.type === 'node.started');
  const finished = events.filter((e) => e.type === 'node.finished');
  assert.equal(started.length, 2);
  assert.equal(finished.length, 2);
  const [inv0, s0] = started[0].payload.instanceId.split(':');
  assert.equal(s0, 's0');
  assert.equal(started[1].payload.instanceId, `${inv0}:s1`, 'the second step continues the invocation');
  assert.equal(started[0].payload.sdk, 'ai-sdk');
  assert.equal(started[0].payload.parentId, 'agent:llm-agent');
  assert.equal(started[0].payload.input.model, 'fake-model');
  assert.equal(started[0].payload.input.tools[0].name, 'forecast');
  assert.ok(started[0].payload.input.toolSchemas, 'the tool definition is recorded once per run');
  assert.equal(started[1].payload.input.toolSchemas, undefined);
  assert.deepEqual(finished[0].payload.output.toolCalls, [{ id: 'call_1', name: 'forecast', input: { city: 'Lisbon' } }]);
  assert.equal(finished[0].payload.output.finishReason, 'tool-calls');
  assert.equal(finished[1].payload.output.text, 'Sunny in Lisbon.');
  assert.equal(finished[1].payload.usage.inputTokens, 12);
  assert.equal(finished[1].payload.usage.outputTokens, 4);
  const hint = (await srv.events(runId, 1)).find((e) => e.type === 'graph.hint');
  assert.ok(hint.payload.nodes.some((n) => n.nodeId === 'tool:forecast' && n.parentId === 'llm:step'));
  dbg.close();
  await gm.dispose();
});

test('wrapModel: a streamed answer records node.token deltas and the whole text', async () => {
  await fake.reset();
  await fake.script({
    status: 200,
    sse: [
      chunk({ role: 'assistant', content: '' }),
      chunk({ content: 'Hel' }),
      chunk({ content: 'lo, ' }),
      chunk({ content: 'world' }),
      chunk({}, 'stop'),
      [null, { id: 'chatcmpl-2', object: 'chat.completion.chunk', created: 1, model: 'fake-model', choices: [], usage: USAGE }],
      [null, '[DONE]'],
    ],
  });
  const dbg = await Debugger.open(srv);
  const gm = await session(dbg);
  let runId;
  const text = await gm.run('llm-stream', async (ctx) => {
    runId = ctx.runId;
    const r = streamText({ model: fakeModel(gm), prompt: 'Say hello', maxRetries: 0 });
    let out = '';
    for await (const piece of r.textStream) out += piece;
    return out;
  });
  assert.equal(text, 'Hello, world');
  const events = await storedLlmEvents(runId);
  const deltas = events.filter((e) => e.type === 'node.token').flatMap((e) => e.payload.deltas);
  assert.equal(deltas.filter((d) => d.t === 'text').map((d) => d.v).join(''), 'Hello, world');
  const done = events.find((e) => e.type === 'node.finished');
  assert.equal(done.payload.streaming, true);
  assert.equal(done.payload.status, 'ok');
  assert.equal(done.payload.output.text, 'Hello, world');
  assert.equal(done.payload.output.finishReason, 'stop');
  assert.equal(done.payload.usage.inputTokens, 12);
  assert.equal(events.find((e) => e.type === 'node.started').payload.input.stream, true);
  dbg.close();
  await gm.dispose();
});

test('wrapModel: streamText of a reasoning model calling a tool: reasoning and tool-args node.token deltas, the tool call recorded', async () => {
  await fake.reset();
  const call = (fn, extra = {}) => chunk({ tool_calls: [{ index: 0, ...extra, function: fn }] });
  await fake.script({
    status: 200,
    sse: [
      chunk({ role: 'assistant', content: '', reasoning_content: 'The user wants ' }),
      chunk({ reasoning_content: 'the forecast.' }),
      chunk({ content: 'Checking.' }),
      call({ name: 'forecast', arguments: '' }, { id: 'call_7', type: 'function' }),
      call({ arguments: '{"city":' }),
      call({ arguments: '"Faro"}' }),
      chunk({}, 'tool_calls'),
      [null, { id: 'chatcmpl-2', object: 'chat.completion.chunk', created: 1, model: 'fake-model', choices: [], usage: USAGE }],
      [null, '[DONE]'],
    ],
  });
  const dbg = await Debugger.open(srv);
  const gm = await session(dbg);
  // A client-side tool (no execute): the step ends at its call.
  const tools = { forecast: tool({ inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }) }) };
  let runId;
  const seen = await gm.run('llm-reasoning', async (ctx) => {
    runId = ctx.runId;
    const r = streamText({ model: fakeModel(gm), tools, prompt: 'Forecast for Faro?', maxRetries: 0 });
    const parts = { reasoning: '', toolInput: '', calls: [] };
    for await (const part of r.fullStream) {
      if (part.type === 'reasoning-delta') parts.reasoning += part.text;
      if (part.type === 'tool-input-delta') parts.toolInput += part.delta;
      if (part.type === 'tool-call') parts.calls.push(part.input);
    }
    return parts;
  });
  // What the app read through the wrapped model is the provider's stream, unchanged.
  assert.equal(seen.reasoning, 'The user wants the forecast.');
  assert.equal(seen.toolInput, '{"city":"Faro"}');
  assert.deepEqual(seen.calls, [{ city: 'Faro' }]);
  const events = await storedLlmEvents(runId);
  const deltas = events.filter((e) => e.type === 'node.token').flatMap((e) => e.payload.deltas);
  const channel = (t) => deltas.filter((d) => d.t === t).map((d) => d.v).join('');
  assert.equal(channel('reasoning'), 'The user wants the forecast.');
  assert.equal(channel('tool-args'), '{"city":"Faro"}');
  assert.equal(channel('text'), 'Checking.');
  const done = events.find((e) => e.type === 'node.finished');
  assert.equal(done.payload.streaming, true);
  assert.deepEqual(done.payload.output.toolCalls, [{ id: 'call_7', name: 'forecast', input: { city: 'Faro' } }]);
  assert.equal(done.payload.output.finishReason, 'tool-calls');
  dbg.close();
  await gm.dispose();
});

test('wrapModel: an error part in a streamed answer is the step\'s node.error (through the core\'s LLM step)', async () => {
  await fake.reset();
  await fake.script({
    status: 200,
    sse: [
      chunk({ role: 'assistant', content: '' }),
      chunk({ content: 'Half an ans' }),
      [null, { error: { message: 'overloaded mid-stream', type: 'server_error', code: 'overloaded' } }],
      [null, '[DONE]'],
    ],
  });
  const dbg = await Debugger.open(srv);
  const gm = await session(dbg);
  let runId;
  const seen = [];
  const parts = await gm.run('llm-stream-error', async (ctx) => {
    runId = ctx.runId;
    const r = streamText({ model: fakeModel(gm), prompt: 'Say hello', maxRetries: 0, onError: ({ error }) => seen.push(error) });
    const types = [];
    for await (const part of r.fullStream) types.push(part.type);
    return types;
  });
  assert.ok(parts.includes('error'), `the app saw the error part (${parts})`);
  assert.equal(seen.length, 1);
  const events = await storedLlmEvents(runId);
  const errors = events.filter((e) => e.type === 'node.error');
  assert.equal(errors.length, 1);
  assert.equal(errors[0].payload.error.message, 'overloaded mid-stream');
  const done = events.find((e) => e.type === 'node.finished');
  assert.equal(done.payload.status, 'error');
  assert.equal(done.payload.streaming, true);
  assert.equal(done.payload.output.text, 'Half an ans');
  const deltas = events.filter((e) => e.type === 'node.token').flatMap((e) => e.payload.deltas);
  assert.equal(deltas.map((d) => d.v).join(''), 'Half an ans');
  dbg.close();
  await gm.dispose();
});

test('wrapModel: a stream part that does not parse is an Error object, recorded by its name and message', async () => {
  await fake.reset();
  await fake.script({
    status: 200,
    sse: [chunk({ role: 'assistant', content: '' }), [null, { choices: 'not a list' }], [null, '[DONE]']],
  });
  const dbg = await Debugger.open(srv);
  const gm = await session(dbg);
  let runId;
  await gm.run('llm-stream-bad-part', async (ctx) => {
    runId = ctx.runId;
    const r = streamText({ model: fakeModel(gm), prompt: 'Say hello', maxRetries: 0, onError: () => {} });
    for await (const _part of r.fullStream) { /* read it all */ }
  });
  const events = await storedLlmEvents(runId);
  const error = events.find((e) => e.type === 'node.error');
  assert.ok(error, 'node.error recorded');
  assert.match(error.payload.error.name, /TypeValidationError/);
  assert.ok(error.payload.error.message.length > 0);
  assert.equal(events.find((e) => e.type === 'node.finished').payload.status, 'error');
  dbg.close();
  await gm.dispose();
});

test('wrapModel: an HTTP error held at `error`, retried, is one execution with attempts: 2', async () => {
  await fake.reset();
  await fake.script({ status: 500, json: { error: { message: 'upstream down' } } }, chat({ role: 'assistant', content: 'Second time lucky.' }));
  const dbg = await Debugger.open(srv);
  dbg.breakpoint({ name: 'step', point: 'error' });
  await sleep(150);
  const gm = await session(dbg);
  let runId;
  const done = gm.run('llm-retry', async (ctx) => {
    runId = ctx.runId;
    dbg.watch(ctx.runId);
    return generateText({ model: fakeModel(gm), prompt: 'Try', maxRetries: 0 });
  });
  const paused = await dbg.next('exec.paused');
  assert.equal(paused.payload.nodeId, 'llm:step');
  dbg.resume(runId, paused.payload.pauseId, 'retry');
  assert.equal((await done).text, 'Second time lucky.');
  const events = await storedLlmEvents(runId);
  assert.equal(events.filter((e) => e.type === 'node.started').length, 1);
  assert.equal(events.filter((e) => e.type === 'node.error').length, 1);
  const finished = events.filter((e) => e.type === 'node.finished');
  assert.equal(finished.length, 1);
  assert.equal(finished[0].payload.attempts, 2);
  assert.equal(finished[0].payload.output.text, 'Second time lucky.');
  dbg.clear({ name: 'step', point: 'error' });
  dbg.close();
  await gm.dispose();
});

for (const point of ['before', 'error']) {
  test(`wrapModel: a reply injected at \`${point}\` is what generateText returns`, async () => {
    await fake.reset();
    if (point === 'error') await fake.script({ status: 500, json: { error: { message: 'down' } } });
    const dbg = await Debugger.open(srv);
    dbg.breakpoint({ name: 'step', point });
    await sleep(150);
    const gm = await session(dbg);
    let runId;
    const done = gm.run(`llm-inject-${point}`, async (ctx) => {
      runId = ctx.runId;
      dbg.watch(ctx.runId);
      return generateText({ model: fakeModel(gm), prompt: 'Hi', maxRetries: 0 });
    });
    const paused = await dbg.next('exec.paused');
    // The held gate waits on the event loop (the viewer above is in this process too).
    let ticks = 0;
    const timer = setInterval(() => { ticks += 1; }, 10);
    await sleep(120);
    clearInterval(timer);
    assert.ok(ticks >= 3, `the event loop ran while the model call was held (${ticks} ticks)`);
    dbg.resume(runId, paused.payload.pauseId, 'inject', { output: `injected at ${point}` });
    assert.equal((await done).text, `injected at ${point}`);
    const finished = (await storedLlmEvents(runId)).find((e) => e.type === 'node.finished');
    assert.equal(finished.payload.injected, true);
    if (point === 'error') assert.equal(finished.payload.recoveredFromError, true);
    assert.equal((await fake.requests()).length, point === 'before' ? 0 : 1, 'an inject at `before` sends nothing');
    dbg.clear({ name: 'step', point });
    dbg.close();
    await gm.dispose();
  });
}

// A streamed step has no `after` gate in the core (its answer is already flowing to the
// app: docs/llm.md), so only generateText is held for it.
test('the after-gate truncation hold: a generateText step cut at the token limit while calling a tool holds at llm:step after', async () => {
  const usage = { inputTokens: { total: 10, noCache: 10 }, outputTokens: { total: 100, text: 100 } };
  const cut = { unified: 'length', raw: 'max_tokens' };
  const call = { type: 'tool-call', toolCallId: 'c9', toolName: 'weather', input: '{"city":"Lis' };
  const model = new MockLanguageModelV3({
    modelId: 'mock-cut',
    doGenerate: async () => ({ content: [call], finishReason: cut, usage, warnings: [] }),
  });
  const dbg = await Debugger.open(srv);
  const gm = graphmind({ app: 'ai-truncated', url: srv.url, env: {} });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  const ran = [];
  const tools = gm.wrapTools({
    weather: tool({ inputSchema: jsonSchema({ type: 'object' }), execute: async (input) => { ran.push(input); return 'sun'; } }),
  });
  for (const mode of ['generate']) {
    let runId;
    const done = gm.run(`cut-${mode}`, async (ctx) => {
      runId = ctx.runId;
      dbg.watch(ctx.runId);
      const opts = { model: gm.wrapModel(model), tools, prompt: 'Weather?', maxRetries: 0 };
      return (await generateText(opts)).finishReason;
    });
    const paused = await dbg.nextWithin('exec.paused', 5000);
    assert.ok(paused, `${mode}: held`);
    assert.equal(paused.payload.nodeId, 'llm:step', mode);
    assert.equal(paused.payload.point, 'after', mode);
    assert.equal(paused.payload.reason, 'breakpoint', mode);
    assert.equal(paused.payload.smart.rule, 'truncated-tool-call', mode);
    dbg.resume(runId, paused.payload.pauseId, 'continue');
    assert.equal(await done, 'length', mode);
  }
  dbg.close();
  await gm.dispose();
});

test('while attached, an AbortSignal.timeout() the app passed does not time out a request held longer than it (warned once); the app\'s own abort still aborts', async () => {
  await fake.reset();
  await fake.script(chat({ role: 'assistant', content: 'Held, then answered.' }), chat({ role: 'assistant', content: 'Second.' }));
  const dbg = await Debugger.open(srv);
  dbg.breakpoint({ kind: 'llm', point: 'before' });
  await sleep(150);
  const lines = [];
  const gm = graphmind({ app: 'ai-timeout', url: srv.url, env: {}, logger: (l) => lines.push(l) });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  let runId;
  const done = gm.run('timeout-agent', async (ctx) => {
    runId = ctx.runId;
    dbg.watch(ctx.runId);
    const first = await generateText({ model: fakeModel(gm), prompt: 'hi', maxRetries: 0, abortSignal: AbortSignal.timeout(250) });
    const second = await generateText({ model: fakeModel(gm), prompt: 'again', maxRetries: 0, abortSignal: AbortSignal.timeout(250) });
    return [first.text, second.text];
  });
  for (let i = 0; i < 2; i += 1) {
    const paused = await dbg.next('exec.paused');
    await sleep(600); // held well past the 250 ms timeout
    assert.equal((await fake.requests()).length, i, 'nothing sent while held');
    dbg.resume(runId, paused.payload.pauseId, 'continue');
  }
  assert.deepEqual(await done, ['Held, then answered.', 'Second.']);
  const warnings = lines.filter((l) => l.includes('timeout abort'));
  assert.equal(warnings.length, 1, `warned once: ${JSON.stringify(lines)}`);

  // The app's own abort is not a timeout: it still aborts the held call.
  const own = new AbortController();
  const aborted = gm.run('own-abort', async (ctx) => {
    dbg.watch(ctx.runId);
    return generateText({ model: fakeModel(gm), prompt: 'stop me', maxRetries: 0, abortSignal: own.signal });
  });
  const held = await dbg.next('exec.paused');
  const ownRun = held.runId;
  own.abort(new Error('the app gave up'));
  await sleep(100);
  // The debugger still holds the gate; once released, the request meets the aborted signal.
  dbg.clear({ kind: 'llm', point: 'before' });
  dbg.resume(ownRun, held.payload.pauseId, 'continue');
  await assert.rejects(aborted, /gave up|abort/i);
  assert.equal((await fake.requests()).length, 2, 'the aborted request was never answered');
  dbg.close();
  await gm.dispose();
});
