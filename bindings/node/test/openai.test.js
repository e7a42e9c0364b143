'use strict';
// wrapClient over the real npm `openai` client, talking HTTP to the fake provider
// (tests/fake_provider/server.py), attached to a real `graphmind serve`: what each method
// records, that streams reach the app unchanged, the gates (a held `before` sends nothing),
// parallel tool calls, a debugger that dies mid-hold, and a script that exits on its own.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const OpenAI = require('openai');
const { graphmind } = require('../openai.js');
const { startServer, serverAndProvider, Debugger, sleep, armedDebugger } = require('./helpers');
const { chat, chatStream, response, responseStream, of, runEvents, streamed } = require('./provider-helpers');

const env = serverAndProvider(test);

const WEATHER = {
  type: 'function',
  function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};
const user = (content) => [{ role: 'user', content }];

function client(options = {}) {
  return new OpenAI({ apiKey: 'sk-test', baseURL: env.fake.baseURL, maxRetries: 0, ...options });
}

async function attached(options = {}) {
  const gm = graphmind({ app: 'openai-test', url: env.srv.url, env: {}, ...options });
  assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
  return gm;
}

test('the package entry point and its kill switch: identity when disabled, a Proxy that never mutates when enabled', async () => {
  const { graphmind: viaExports } = require('@graphmind/node/openai');
  assert.equal(viaExports, graphmind);
  const raw = client();
  const off = graphmind({ env: { GRAPHMIND_DISABLED: '1' } });
  assert.equal(off.wrapClient(raw), raw);
  const tools = { f: () => 1 };
  assert.equal(off.wrapTools(tools), tools);
  const prod = graphmind({ env: { NODE_ENV: 'production' } });
  assert.equal(prod.wrapClient(raw), raw);

  const gm = graphmind({ url: 'ws://127.0.0.1:9/ingest', env: {}, logger: () => {} });
  const before = Object.getOwnPropertyNames(raw).sort();
  const wrapped = gm.wrapClient(raw);
  assert.notEqual(wrapped, raw);
  assert.ok(wrapped instanceof OpenAI, 'instanceof holds');
  assert.equal(gm.wrapClient(wrapped), wrapped, 'idempotent');
  assert.equal(gm.wrapClient(null), null);
  assert.equal(gm.wrapClient('x'), 'x');
  assert.deepEqual(Object.getOwnPropertyNames(raw).sort(), before);
  assert.equal(raw.chat.completions.create, Object.getPrototypeOf(raw.chat.completions).create, 'the real resource is untouched');
  assert.notEqual(wrapped.chat.completions.create, raw.chat.completions.create);
  // An untouched method is the real one bound to the real object (#private fields work).
  assert.equal(wrapped.buildURL('/x', null), raw.buildURL('/x', null));
  assert.equal(wrapped.embeddings, raw.embeddings, 'a resource it does not instrument is the real one');
  assert.equal(wrapped.apiKey, 'sk-test');
  await gm.dispose();
});

test('an agent loop: chat.completions.create, tool calls gated through wrapTools with the call id as instance id', async () => {
  const gm = await attached();
  await env.fake.script(
    chat(null, {
      toolCalls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lisbon"}' } }],
      finish: 'tool_calls',
      usage: { prompt_tokens: 30, completion_tokens: 7, total_tokens: 37, prompt_tokens_details: { cached_tokens: 10 } },
    }),
    chat('It is sunny.'),
  );
  const openai = gm.wrapClient(client());
  const tools = gm.wrapTools({ get_weather: async ({ city }) => ({ city, sky: 'sun' }) });
  let runId;
  const answer = await gm.run('loop', async (ctx) => {
    runId = ctx.runId;
    const messages = user('Weather in Lisbon?');
    for (;;) {
      const completion = await openai.chat.completions.create({ model: 'gpt-test', messages, tools: [WEATHER], temperature: 0.1 });
      const msg = completion.choices[0].message;
      if (!msg.tool_calls) return msg.content;
      messages.push(msg);
      for (const call of msg.tool_calls) {
        const out = await tools[call.function.name](JSON.parse(call.function.arguments), call);
        messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify(out) });
      }
    }
  });
  assert.equal(answer, 'It is sunny.');
  const events = await runEvents(env.srv, gm, runId);
  const started = of(events, 'node.started', 'llm:step');
  assert.equal(started.length, 2);
  assert.match(started[0].instanceId, /:s0$/);
  assert.equal(started[1].instanceId, started[0].instanceId.replace(/:s0$/, ':s1'), 'one invocation');
  assert.equal(started[0].sdk, 'openai');
  assert.equal(started[0].parentId, 'agent:loop');
  assert.equal(started[0].input.temperature, 0.1);
  assert.equal(started[0].input.tools[0].name, 'get_weather');
  const done = of(events, 'node.finished', 'llm:step');
  assert.deepEqual(done[0].output.toolCalls, [{ id: 'call_1', name: 'get_weather', input: { city: 'Lisbon' } }]);
  assert.deepEqual(done[0].usage, { inputTokens: 30, outputTokens: 7, inclusive: true, cacheReadTokens: 10 });
  assert.equal(done[1].output.text, 'It is sunny.');
  const tool = of(events, 'node.started', 'tool:get_weather');
  assert.equal(tool.length, 1);
  assert.equal(tool[0].instanceId, 'call_1', 'the tool call id is the instance id');
  assert.deepEqual(tool[0].input, { city: 'Lisbon' });
  const hints = of(events, 'graph.hint');
  assert.deepEqual(hints[0].nodes.map((n) => n.nodeId), ['agent:loop', 'llm:step', 'tool:get_weather']);
  await gm.dispose();
});

test('stream: true is teed: the app reads every chunk unchanged, the call records tokens and usage', async () => {
  const gm = await attached();
  const bare = client();
  await env.fake.script(chatStream(), chatStream());
  const body = { model: 'gpt-test', messages: user('hi'), stream: true, stream_options: { include_usage: true } };
  const plain = [];
  for await (const c of await bare.chat.completions.create(body)) plain.push(c);
  const openai = gm.wrapClient(client());
  let runId;
  const seen = await gm.run('stream', async (ctx) => {
    runId = ctx.runId;
    const stream = await openai.chat.completions.create(body);
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    return chunks;
  });
  assert.deepEqual(seen, plain, 'the app sees what the bare client sees');
  const events = await runEvents(env.srv, gm, runId);
  assert.equal(streamed(events, 'text'), 'Sunny');
  const [done] = of(events, 'node.finished', 'llm:step');
  assert.equal(done.output.text, 'Sunny');
  assert.equal(done.output.chunks, 3);
  assert.equal(done.streaming, true);
  assert.deepEqual(done.usage, { inputTokens: 20, outputTokens: 9, inclusive: true });
  await gm.dispose();
});

test('a stream the app abandons half-way is still recorded to its end', async () => {
  const gm = await attached();
  await env.fake.script(chatStream());
  const openai = gm.wrapClient(client());
  let runId;
  await gm.run('abandon', async (ctx) => {
    runId = ctx.runId;
    const stream = await openai.chat.completions.create({ model: 'gpt-test', messages: user('hi'), stream: true });
    for await (const c of stream) { void c; break; }
  });
  const events = await runEvents(env.srv, gm, runId);
  const [done] = of(events, 'node.finished', 'llm:step');
  assert.equal(done.output.text, 'Sunny');
  await gm.dispose();
});

test('the helpers: chat.completions.stream() and .parse(), responses.create / .stream() / .parse() are recorded calls', async () => {
  const gm = await attached();
  await env.fake.script(chatStream(), chat('{"city":"Faro"}'), response('hi'), responseStream('hello there'), response('{"n":1}'));
  const openai = gm.wrapClient(client());
  let runId;
  const got = await gm.run('helpers', async (ctx) => {
    runId = ctx.runId;
    const helper = openai.chat.completions.stream({ model: 'gpt-test', messages: user('a') });
    const deltas = [];
    helper.on('content', (d) => deltas.push(d));
    const final = await helper.finalChatCompletion();
    const parsed = await openai.chat.completions.parse({
      model: 'gpt-test',
      messages: user('b'),
      response_format: { type: 'json_schema', json_schema: { name: 'w', schema: { type: 'object' } } },
    });
    const r = await openai.responses.create({ model: 'gpt-test', input: 'c' });
    const rs = openai.responses.stream({ model: 'gpt-test', input: 'd' });
    const rfinal = await rs.finalResponse();
    const rp = await openai.responses.parse({ model: 'gpt-test', input: 'e' });
    return { deltas, final: final.choices[0].message.content, parsed: parsed.choices[0].message.parsed, r: r.output_text, rs: rfinal.output_text, rp: rp.output_text };
  });
  assert.deepEqual(got, { deltas: ['Sun', 'ny'], final: 'Sunny', parsed: { city: 'Faro' }, r: 'hi', rs: 'hello there', rp: '{"n":1}' });
  const events = await runEvents(env.srv, gm, runId);
  const started = of(events, 'node.started', 'llm:step');
  assert.equal(started.length, 5, 'each helper request recorded once');
  assert.deepEqual(started.map((s) => s.input.provider), ['openai', 'openai', 'openai', 'openai', 'openai']);
  const done = of(events, 'node.finished', 'llm:step');
  assert.deepEqual(done.map((d) => d.output.text), ['Sunny', '{"city":"Faro"}', 'hi', 'hello there', '{"n":1}']);
  assert.equal(done[3].streaming, true);
  assert.equal(streamed(events, 'text'), 'Sunnyhello there');
  await gm.dispose();
});

test('runTools: each model turn is a recorded call, the tool a gated wrapTools function', async () => {
  const gm = await attached();
  await env.fake.script(
    chat(null, { toolCalls: [{ id: 'call_7', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Porto"}' } }], finish: 'tool_calls' }),
    chat('Porto is sunny.'),
  );
  const openai = gm.wrapClient(client());
  const tools = gm.wrapTools({ get_weather: async ({ city }) => ({ city, sky: 'sun' }) });
  let runId;
  const text = await gm.run('run-tools', async (ctx) => {
    runId = ctx.runId;
    const runner = openai.chat.completions.runTools({
      model: 'gpt-test',
      messages: user('Weather in Porto?'),
      tools: [{ type: 'function', function: { ...WEATHER.function, function: tools.get_weather, parse: JSON.parse } }],
    });
    return runner.finalContent();
  });
  assert.equal(text, 'Porto is sunny.');
  const events = await runEvents(env.srv, gm, runId);
  const started = of(events, 'node.started', 'llm:step');
  assert.equal(started.length, 2);
  assert.equal(started[1].instanceId, started[0].instanceId.replace(/:s0$/, ':s1'));
  assert.deepEqual(of(events, 'node.finished', 'tool:get_weather')[0].output, { city: 'Porto', sky: 'sun' });
  await gm.dispose();
});

test('a held before gate sends no HTTP request until released; inject at before returns a completion', async () => {
  const gm = await attached();
  const dbg = await armedDebugger(env.srv, { kind: 'llm', point: 'before' });
  await env.fake.script(chat('real'));
  const openai = gm.wrapClient(client());
  let runId;
  const done = gm.run('held', async (ctx) => {
    runId = ctx.runId;
    dbg.watch(ctx.runId);
    const a = await openai.chat.completions.create({ model: 'gpt-test', messages: user('a') });
    const b = await openai.chat.completions.create({ model: 'gpt-test', messages: user('b') });
    return [a.choices[0].message.content, b.choices[0].message.content];
  });
  const first = await dbg.next('exec.paused');
  await sleep(200);
  assert.equal((await env.fake.requests()).length, 0, 'nothing sent while held');
  dbg.resume(runId, first.payload.pauseId, 'continue');
  const second = await dbg.next('exec.paused');
  assert.equal((await env.fake.requests()).length, 1);
  dbg.resume(runId, second.payload.pauseId, 'inject', { output: 'made up' });
  assert.deepEqual(await done, ['real', 'made up']);
  assert.equal((await env.fake.requests()).length, 1, 'the injected call sent nothing');
  dbg.clear({ kind: 'llm', point: 'before' });
  dbg.close();
  await gm.dispose();
});

test('parallel tool calls gate independently: one held, the other returns', async () => {
  const gm = await attached();
  const dbg = await armedDebugger(env.srv, { name: 'slow', point: 'before' });
  const tools = gm.wrapTools({ slow: async (x) => `slow ${x.n}`, fast: async (x) => `fast ${x.n}` });
  let runId;
  let fastDone = false;
  const all = gm.run('parallel', async (ctx) => {
    runId = ctx.runId;
    dbg.watch(ctx.runId);
    return Promise.all([
      tools.slow({ n: 1 }, { id: 'call_s', type: 'function' }),
      tools.fast({ n: 2 }, { id: 'call_f', type: 'function' }).then((v) => { fastDone = true; return v; }),
    ]);
  });
  const paused = await dbg.next('exec.paused');
  assert.equal(paused.payload.nodeId, 'tool:slow');
  for (let i = 0; i < 100 && !fastDone; i += 1) await sleep(10);
  assert.equal(fastDone, true, 'the other call ran while one was held');
  dbg.resume(runId, paused.payload.pauseId, 'continue');
  assert.deepEqual(await all, ['slow 1', 'fast 2']);
  const events = await runEvents(env.srv, gm, runId);
  assert.deepEqual(of(events, 'node.started').filter((s) => s.nodeId.startsWith('tool:')).map((s) => s.instanceId).sort(), ['call_f', 'call_s']);
  dbg.clear({ name: 'slow', point: 'before' });
  dbg.close();
  await gm.dispose();
});

test('a debugger that dies mid-hold releases the held request within 100 ms', async () => {
  const own = await startServer(['--pause-on-error', 'off']);
  try {
    const gm = graphmind({ app: 'dies', url: own.url, env: {}, logger: () => {} });
    assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
    const dbg = await Debugger.open(own);
    dbg.breakpoint({ kind: 'llm', point: 'before' });
    await sleep(150);
    await env.fake.script(chat('after the crash'));
    let sentAt = 0;
    const fetchSpy = (url, init) => { sentAt = performance.now(); return fetch(url, init); };
    const openai = gm.wrapClient(client({ fetch: fetchSpy }));
    const done = gm.run('dies', async (ctx) => {
      dbg.watch(ctx.runId);
      return openai.chat.completions.create({ model: 'gpt-test', messages: user('x') });
    });
    await dbg.next('exec.paused');
    const killedAt = performance.now();
    process.kill(own.pid, 'SIGKILL');
    const answer = await done;
    assert.equal(answer.choices[0].message.content, 'after the crash');
    assert.ok(sentAt - killedAt < 100, `released ${Math.round(sentAt - killedAt)} ms after the debugger died`);
    dbg.close();
    await gm.dispose();
  } finally {
    own.stop();
  }
});

test('a script using wrapClient exits on its own when its work is done', () => {
  const pkg = path.resolve(__dirname, '..');
  const script = `
    const OpenAI = require(${JSON.stringify(require.resolve('openai'))});
    const { graphmind } = require(${JSON.stringify(path.join(pkg, 'openai.js'))});
    const gm = graphmind({ app: 'exits', url: ${JSON.stringify(env.srv.url)}, env: {} });
    const openai = gm.wrapClient(new OpenAI({ apiKey: 'sk', baseURL: ${JSON.stringify(env.fake.baseURL)}, maxRetries: 0 }));
    gm.run('exits', async () => {
      const s = await openai.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }], stream: true });
      let text = '';
      for await (const c of s) text += c.choices[0] ? c.choices[0].delta.content || '' : '';
      const a = await openai.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'y' }] });
      console.log(text + '|' + a.choices[0].message.content);
    });
  `;
  return env.fake.script(chatStream(), chat('done')).then(() => {
    const started = Date.now();
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 15_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim().split('\n').pop(), 'Sunny|done');
    assert.ok(Date.now() - started < 10_000);
  });
});

test('built-in tools are observed: a Responses web_search_call is a tool node under the step, providerExecuted, never gated', async () => {
  const gm = await attached();
  const searched = response('Sunny in Faro');
  const item = { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: 'weather faro' } };
  searched.json.output.unshift(item);
  const streamedAnswer = responseStream('ok');
  const last = streamedAnswer.sse[streamedAnswer.sse.length - 1][1];
  last.response.output.unshift({ type: 'file_search_call', id: 'fs_1', status: 'failed', queries: ['q'] });
  await env.fake.script(searched, streamedAnswer);
  const openai = gm.wrapClient(client());
  let runId;
  const got = await gm.run('builtin', async (ctx) => {
    runId = ctx.runId;
    const r = await openai.responses.create({ model: 'gpt-test', input: 'weather?', tools: [{ type: 'web_search' }] });
    const s = await openai.responses.stream({ model: 'gpt-test', input: 'files?' }).finalResponse();
    return [r.output_text, r.output[0].type, s.output_text];
  });
  assert.deepEqual(got, ['Sunny in Faro', 'web_search_call', 'ok'], 'the app sees the answer unchanged');
  const events = await runEvents(env.srv, gm, runId);
  const ws = of(events, 'node.started', 'tool:web_search');
  assert.equal(ws.length, 1);
  assert.deepEqual(
    { kind: ws[0].kind, instanceId: ws[0].instanceId, parentId: ws[0].parentId, input: ws[0].input, providerExecuted: ws[0].providerExecuted, ungated: ws[0].ungated },
    { kind: 'tool', instanceId: 'ws_1', parentId: 'llm:step', input: item.action, providerExecuted: true, ungated: true },
  );
  const wsDone = of(events, 'node.finished', 'tool:web_search');
  assert.deepEqual([wsDone[0].status, wsDone[0].providerExecuted], ['ok', true]);
  const fsDone = of(events, 'node.finished', 'tool:file_search');
  assert.equal(fsDone.length, 1, 'a streamed answer\'s built-in tools are observed from its final event');
  assert.equal(fsDone[0].status, 'error', 'a failed built-in tool item finishes as error');
  assert.deepEqual(of(events, 'node.started', 'tool:file_search')[0].input, ['q']);
  await gm.dispose();
});

test('an edit of a plain wrapTools({fn}) tool is checked against the parameters the request declared for it', async () => {
  const gm = await attached();
  const dbg = await armedDebugger(env.srv, { name: 'get_weather', point: 'before' });
  const declared = {
    type: 'function',
    function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string', minLength: 2 } }, required: ['city'] } },
  };
  await env.fake.script(
    chat(null, { toolCalls: [{ id: 'call_7', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lisbon"}' } }], finish: 'tool_calls' }),
    chat('Done.'),
  );
  const openai = gm.wrapClient(client());
  const ran = [];
  const tools = gm.wrapTools({ get_weather: async ({ city }) => { ran.push(city); return { city, sky: 'sun' }; } });
  let runId;
  const done = gm.run('declared-schema', async (ctx) => {
    runId = ctx.runId;
    dbg.watch(ctx.runId);
    const messages = user('Weather?');
    for (;;) {
      const completion = await openai.chat.completions.create({ model: 'gpt-test', messages, tools: [declared] });
      const msg = completion.choices[0].message;
      if (!msg.tool_calls) return msg.content;
      messages.push(msg);
      for (const call of msg.tool_calls) {
        const out = await tools[call.function.name](JSON.parse(call.function.arguments), call);
        messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify(out) });
      }
    }
  });
  const paused = await dbg.next('exec.paused');
  assert.equal(paused.payload.nodeId, 'tool:get_weather');
  assert.equal(paused.payload.editable, true);
  dbg.resume(runId, paused.payload.pauseId, 'continue', { input: { city: 12345 } });
  const refused = await dbg.nextWithin('exec.refused', 3000);
  assert.ok(refused, 'the edit was refused');
  assert.equal(refused.payload.code, 'schema');
  assert.match(refused.payload.message, /\/city/);
  assert.doesNotMatch(refused.payload.message, /12345/);
  await sleep(100);
  assert.deepEqual(ran, [], 'still held');
  dbg.resume(runId, paused.payload.pauseId, 'continue', { input: { city: 'Porto' } });
  assert.equal(await done, 'Done.');
  assert.deepEqual(ran, ['Porto']);
  dbg.clear({ name: 'get_weather', point: 'before' });
  await sleep(100);
  dbg.close();
  await gm.dispose();
});
