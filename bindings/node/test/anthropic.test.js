'use strict';
// wrapClient over the real npm `@anthropic-ai/sdk` client, talking HTTP to the fake
// provider (tests/fake_provider/server.py), attached to a real `graphmind serve`.
const test = require('node:test');
const assert = require('node:assert/strict');
const Anthropic = require('@anthropic-ai/sdk').default;
const { graphmind } = require('../anthropic.js');
const { serverAndProvider, sleep, armedDebugger } = require('./helpers');
const { message, messageStream, of, runEvents, streamed } = require('./provider-helpers');

const env = serverAndProvider(test);

const WEATHER = { name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } };
const body = (content, extra = {}) => ({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content }], ...extra });

function client() {
  return new Anthropic({ apiKey: 'sk-test', baseURL: env.fake.baseURL.replace(/\/v1$/, ''), maxRetries: 0 });
}

async function attached() {
  const gm = graphmind({ app: 'anthropic-test', url: env.srv.url, env: {} });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  return gm;
}

test('the entry point; identity when disabled; a Proxy that keeps instanceof and leaves the client alone', async () => {
  assert.equal(require('@graphmind/node/anthropic').graphmind, graphmind);
  const raw = client();
  assert.equal(graphmind({ enabled: false }).wrapClient(raw), raw);
  const gm = graphmind({ url: 'ws://127.0.0.1:9/ingest', env: {}, logger: () => {} });
  const wrapped = gm.wrapClient(raw);
  assert.ok(wrapped instanceof Anthropic);
  assert.equal(gm.wrapClient(wrapped), wrapped);
  assert.equal(raw.messages.create, Object.getPrototypeOf(raw.messages).create);
  assert.equal(wrapped.models, raw.models, 'a resource it does not instrument is the real one');
  assert.equal(typeof wrapped.messages.countTokens, 'function');
  await gm.dispose();
});

test('messages.create: text and tool_use blocks recorded, the tool gated under the tool_use id', async () => {
  const gm = await attached();
  await env.fake.script(
    message([{ type: 'text', text: 'Let me check.' }, { type: 'tool_use', id: 'toolu_9', name: 'get_weather', input: { city: 'Lisbon' } }], {
      stop: 'tool_use',
      usage: { input_tokens: 12, output_tokens: 4, cache_read_input_tokens: 5, cache_creation_input_tokens: 2 },
    }),
    message([{ type: 'text', text: 'Sunny.' }]),
  );
  const anthropic = gm.wrapClient(client());
  const tools = gm.wrapTools({ get_weather: async ({ city }) => `${city}: sun` });
  let runId;
  const text = await gm.run('claude-loop', async (ctx) => {
    runId = ctx.runId;
    const messages = [{ role: 'user', content: 'Weather?' }];
    for (;;) {
      const msg = await anthropic.messages.create({ model: 'claude-test', max_tokens: 100, tools: [WEATHER], messages });
      messages.push({ role: 'assistant', content: msg.content });
      if (msg.stop_reason !== 'tool_use') return msg.content[0].text;
      const results = await Promise.all(msg.content.filter((b) => b.type === 'tool_use').map(async (b) => ({
        type: 'tool_result', tool_use_id: b.id, content: await tools[b.name](b.input, b),
      })));
      messages.push({ role: 'user', content: results });
    }
  });
  assert.equal(text, 'Sunny.');
  const events = await runEvents(env.srv, gm, runId);
  const started = of(events, 'node.started', 'llm:step');
  assert.equal(started[0].sdk, 'anthropic');
  assert.equal(started[0].input.provider, 'anthropic');
  assert.equal(started[1].instanceId, started[0].instanceId.replace(/:s0$/, ':s1'));
  const done = of(events, 'node.finished', 'llm:step');
  assert.deepEqual(done[0].output.toolCalls, [{ id: 'toolu_9', name: 'get_weather', input: { city: 'Lisbon' } }]);
  assert.equal(done[0].output.finishReason, 'tool-calls');
  assert.deepEqual(done[0].usage, { inputTokens: 19, outputTokens: 4, inclusive: true, cacheReadTokens: 5, cacheWriteTokens: 2 });
  assert.equal(of(events, 'node.started', 'tool:get_weather')[0].instanceId, 'toolu_9');
  await gm.dispose();
});

test('stream: true and messages.stream(): thinking on the reasoning channel, tool_use input on tool-args, the app sees every event', async () => {
  const gm = await attached();
  const bare = client();
  await env.fake.script(messageStream(), messageStream(), messageStream());
  const plain = [];
  for await (const e of await bare.messages.create(body('x', { stream: true }))) plain.push(e);
  const anthropic = gm.wrapClient(client());
  let runId;
  const got = await gm.run('claude-stream', async (ctx) => {
    runId = ctx.runId;
    const events = [];
    for await (const e of await anthropic.messages.create(body('y', { stream: true }))) events.push(e);
    const helper = anthropic.messages.stream(body('z'));
    let text = '';
    helper.on('text', (d) => { text += d; });
    const final = await helper.finalMessage();
    return { events, text, blocks: final.content.map((b) => b.type) };
  });
  assert.deepEqual(got.events, plain);
  assert.equal(got.text, 'Checking the weather.');
  assert.deepEqual(got.blocks, ['thinking', 'text', 'tool_use']);
  const events = await runEvents(env.srv, gm, runId);
  assert.equal(streamed(events, 'reasoning'), 'Let me think.Let me think.');
  assert.equal(streamed(events, 'text'), 'Checking the weather.Checking the weather.');
  assert.equal(streamed(events, 'tool-args'), '{"city":"Faro"}{"city":"Faro"}');
  const done = of(events, 'node.finished', 'llm:step');
  assert.equal(done.length, 2);
  for (const d of done) {
    assert.equal(d.streaming, true);
    assert.deepEqual(d.output.toolCalls, [{ id: 'toolu_1', name: 'get_weather', input: { city: 'Faro' } }]);
    assert.equal(d.usage.outputTokens, 15);
  }
  await gm.dispose();
});

test('beta.messages.create and beta.messages.stream() are recorded calls', async () => {
  const gm = await attached();
  await env.fake.script(message([{ type: 'text', text: 'beta' }]), messageStream());
  const anthropic = gm.wrapClient(client());
  let runId;
  await gm.run('beta', async (ctx) => {
    runId = ctx.runId;
    const m = await anthropic.beta.messages.create(body('a'));
    assert.equal(m.content[0].text, 'beta');
    const final = await anthropic.beta.messages.stream(body('b')).finalMessage();
    assert.equal(final.content.length, 3);
  });
  const events = await runEvents(env.srv, gm, runId);
  const done = of(events, 'node.finished', 'llm:step');
  assert.deepEqual(done.map((d) => d.output.text), ['beta', 'Checking the weather.']);
  await gm.dispose();
});

test('messages.parse() and beta.messages.parse(): one recorded call each, parsed_output from the real answer and from an injected one', async () => {
  const { zodOutputFormat } = require('@anthropic-ai/sdk/helpers/zod');
  const { z } = require('zod');
  const format = zodOutputFormat(z.object({ answer: z.number() }));
  const ask = (content) => body(content, { output_config: { format } });
  const gm = await attached();
  await env.fake.script(message([{ type: 'text', text: '{"answer":4}' }]), message([{ type: 'text', text: '{"answer":5}' }]));
  const anthropic = gm.wrapClient(client());
  let runId;
  const parsed = await gm.run('parse', async (ctx) => {
    runId = ctx.runId;
    const plain = await anthropic.messages.parse(ask('2+2?'));
    const beta = await anthropic.beta.messages.parse(ask('2+3?'));
    return [plain.parsed_output, beta.parsed_output];
  });
  assert.deepEqual(parsed, [{ answer: 4 }, { answer: 5 }]);
  const sent = await env.fake.requests();
  assert.equal(sent.length, 2, 'each parse() is one request');
  assert.match(String(sent[1].headers['anthropic-beta'] || sent[1].headers['Anthropic-Beta']), /structured-outputs/, 'beta.messages.parse() kept its own headers');
  const events = await runEvents(env.srv, gm, runId);
  const started = of(events, 'node.started', 'llm:step');
  assert.equal(started.length, 2, 'recorded once each (the helper\'s inner create is the gated one)');
  assert.deepEqual(of(events, 'node.finished', 'llm:step').map((d) => d.output.text), ['{"answer":4}', '{"answer":5}']);

  // Held before it is sent, injected: parse() reads the injected Message as it would the real one.
  const dbg = await armedDebugger(env.srv, { kind: 'llm', point: 'before' });
  await env.fake.reset();
  let heldRun;
  const done = gm.run('parse-held', async (ctx) => {
    heldRun = ctx.runId;
    dbg.watch(ctx.runId);
    const plain = await anthropic.messages.parse(ask('2+2?'));
    const beta = await anthropic.beta.messages.parse(ask('2+3?'));
    return [plain.parsed_output, beta.parsed_output];
  });
  try {
    for (const answer of ['{"answer":40}', '{"answer":50}']) {
      const paused = await dbg.next('exec.paused');
      assert.equal(paused.payload.nodeId, 'llm:step');
      dbg.resume(heldRun, paused.payload.pauseId, 'inject', { output: answer });
    }
    assert.deepEqual(await done, [{ answer: 40 }, { answer: 50 }]);
    assert.equal((await env.fake.requests()).length, 0, 'nothing sent: both answers were injected');
  } finally {
    dbg.clear({ kind: 'llm', point: 'before' });
    dbg.close();
  }
  await gm.dispose();
});

test('a held before gate sends nothing until released; inject returns a Message; after-gate inject replaces the answer', async () => {
  const gm = await attached();
  const dbg = await armedDebugger(env.srv, { kind: 'llm', point: 'before' });
  await env.fake.script(message([{ type: 'text', text: 'real' }]));
  const anthropic = gm.wrapClient(client());
  let runId;
  const done = gm.run('held', async (ctx) => {
    runId = ctx.runId;
    dbg.watch(ctx.runId);
    const a = await anthropic.messages.create(body('a'));
    const b = await anthropic.messages.create(body('b'));
    return [a.content[0].text, b.content[0].text, b.type];
  });
  const first = await dbg.next('exec.paused');
  await sleep(200);
  assert.equal((await env.fake.requests()).length, 0, 'nothing sent while held');
  dbg.resume(runId, first.payload.pauseId, 'continue');
  const second = await dbg.next('exec.paused');
  dbg.resume(runId, second.payload.pauseId, 'inject', { output: 'injected' });
  assert.deepEqual(await done, ['real', 'injected', 'message']);
  assert.equal((await env.fake.requests()).length, 1);
  dbg.clear({ kind: 'llm', point: 'before' });
  dbg.close();
  await gm.dispose();
});

test('a provider error meets the error gate: retry sends the request again as one execution', async () => {
  const gm = await attached();
  const dbg = await armedDebugger(env.srv, { kind: 'llm', point: 'error' });
  await env.fake.script({ status: 500, json: { type: 'error', error: { type: 'api_error', message: 'boom' } } }, message([{ type: 'text', text: 'second try' }]));
  const anthropic = gm.wrapClient(client());
  let runId;
  const done = gm.run('retry', async (ctx) => {
    runId = ctx.runId;
    dbg.watch(ctx.runId);
    return (await anthropic.messages.create(body('a'))).content[0].text;
  });
  const paused = await dbg.next('exec.paused');
  assert.equal(paused.payload.point, 'error');
  dbg.resume(runId, paused.payload.pauseId, 'retry');
  assert.equal(await done, 'second try');
  const events = await runEvents(env.srv, gm, runId);
  assert.equal(of(events, 'node.started', 'llm:step').length, 1);
  const [fin] = of(events, 'node.finished', 'llm:step');
  assert.equal(fin.attempts, 2);
  assert.equal(fin.output.text, 'second try');
  dbg.clear({ kind: 'llm', point: 'error' });
  dbg.close();
  await gm.dispose();
});

test('server tools are observed: server_tool_use and its result block are a tool node under the step, providerExecuted', async () => {
  const gm = await attached();
  const results = [{ type: 'web_search_result', url: 'https://example.test', title: 'Faro', encrypted_content: 'x' }];
  await env.fake.script(message([
    { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'weather faro' } },
    { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: results },
    { type: 'text', text: 'Sunny.' },
  ]));
  const anthropic = gm.wrapClient(client());
  let runId;
  const text = await gm.run('server-tool', async (ctx) => {
    runId = ctx.runId;
    const m = await anthropic.messages.create(body('weather?', { tools: [{ type: 'web_search_20250305', name: 'web_search' }] }));
    return m.content.map((b) => b.type).join(',');
  });
  assert.equal(text, 'server_tool_use,web_search_tool_result,text');
  const events = await runEvents(env.srv, gm, runId);
  const started = of(events, 'node.started', 'tool:web_search');
  assert.equal(started.length, 1);
  assert.deepEqual(
    [started[0].instanceId, started[0].parentId, started[0].input, started[0].providerExecuted, started[0].ungated],
    ['srvtoolu_1', 'llm:step', { query: 'weather faro' }, true, true],
  );
  const done = of(events, 'node.finished', 'tool:web_search');
  assert.deepEqual([done[0].status, done[0].output], ['ok', results]);
  assert.equal(of(events, 'node.finished', 'llm:step')[0].output.text, 'Sunny.');
  await gm.dispose();
});

test('a raw stream: true read without finalMessage records its server tools (the core decoder follows the blocks)', async () => {
  const gm = await attached();
  const ev = (type, data) => [type, { type, ...data }];
  const results = [{ type: 'web_search_result', url: 'https://example.test', title: 'Faro' }];
  await env.fake.script({
    status: 200,
    sse: [
      ev('message_start', { message: { id: 'msg_r', type: 'message', role: 'assistant', model: 'claude-test', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 4, output_tokens: 1 } } }),
      ev('content_block_start', { index: 0, content_block: { type: 'server_tool_use', id: 'srvtoolu_9', name: 'web_search', input: {} } }),
      ev('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: '{"query":' } }),
      ev('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: '"faro"}' } }),
      ev('content_block_stop', { index: 0 }),
      ev('content_block_start', { index: 1, content_block: { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_9', content: results } }),
      ev('content_block_stop', { index: 1 }),
      ev('content_block_start', { index: 2, content_block: { type: 'text', text: '' } }),
      ev('content_block_delta', { index: 2, delta: { type: 'text_delta', text: 'Sunny.' } }),
      ev('content_block_stop', { index: 2 }),
      ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 7 } }),
      ev('message_stop', {}),
    ],
  });
  const anthropic = gm.wrapClient(client());
  let runId;
  const types = await gm.run('raw-server-tool', async (ctx) => {
    runId = ctx.runId;
    const seen = [];
    for await (const e of await anthropic.messages.create(body('weather?', { stream: true, tools: [{ type: 'web_search_20250305', name: 'web_search' }] }))) seen.push(e.type);
    return seen;
  });
  assert.equal(types.length, 12, 'the app read every event');
  const events = await runEvents(env.srv, gm, runId);
  const started = of(events, 'node.started', 'tool:web_search');
  assert.equal(started.length, 1);
  assert.deepEqual(
    [started[0].instanceId, started[0].parentId, started[0].input, started[0].providerExecuted, started[0].ungated],
    ['srvtoolu_9', 'llm:step', { query: 'faro' }, true, true],
  );
  const done = of(events, 'node.finished', 'tool:web_search');
  assert.deepEqual([done[0].status, done[0].output], ['ok', results]);
  const step = of(events, 'node.finished', 'llm:step')[0];
  assert.equal(step.output.text, 'Sunny.');
  assert.equal(step.output.toolCalls, undefined, 'a server tool is not a call for the app');
  await gm.dispose();
});
