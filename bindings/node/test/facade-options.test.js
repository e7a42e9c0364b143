'use strict';
// The options every provider facade (`/openai`, `/anthropic`, `/ai-sdk`) takes beside the
// session's, with the real clients against the fake provider (tests/fake_provider/server.py)
// and a real `graphmind serve`:
// - `waitForAttach`: the first model call (made outside any run) waits for the debugger's
//   handshake, and sends nothing before it; when no debugger answers it waits at most the
//   given milliseconds, once (the next call does not wait);
// - `tokenFlushIntervalMs` (the reference's name for `tokenIntervalMs`): a stream paced
//   80 ms a piece is four `node.token` batches by default and one under a 60 s interval.
const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const OpenAI = require('openai');
const Anthropic = require('@anthropic-ai/sdk').default;
const { generateText, streamText } = require('ai');
const { createOpenAICompatible } = require('@ai-sdk/openai-compatible');
const { startServer, serverAndProvider } = require('./helpers');
const { chat, chunk, message, of, runEvents } = require('./provider-helpers');

/** The pieces every paced stream carries, one SSE event (and one delta) each. */
const PIECES = ['Sun', 'ny ', 'in ', 'Faro'];
/** The fake provider's pause between two events of a paced stream. */
const PACE_MS = 80;
/** How long the held-first-call test keeps the debugger stopped. */
const STOPPED_MS = 700;
/** The bounded wait: a debugger that never answers delays the first call at most this. */
const BOUNDED_MS = 400;
/** Slack for this loaded machine on top of a bound. */
const SLACK_MS = 1500;

const env = serverAndProvider(test);

/** A paced Chat Completions stream of PIECES. */
function chatPaced() {
  return {
    status: 200,
    delay_ms: PACE_MS,
    sse: [
      ...PIECES.map((content, i) => chunk(i === 0 ? { role: 'assistant', content } : { content })),
      chunk({}, { finish: 'stop' }),
      chunk(null, { usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 } }),
      [null, '[DONE]'],
    ],
  };
}

/** A paced Anthropic Messages stream of PIECES. */
function messagePaced() {
  const ev = (type, data) => [type, { type, ...data }];
  return {
    status: 200,
    delay_ms: PACE_MS,
    sse: [
      ev('message_start', { message: { id: 'msg_p', type: 'message', role: 'assistant', model: 'claude-test', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 } } }),
      ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
      ...PIECES.map((text) => ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text } })),
      ev('content_block_stop', { index: 0 }),
      ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 4 } }),
      ev('message_stop', {}),
    ],
  };
}

/**
 * Each facade: `make(options)` its graphmind(), `ask(gm)` one complete model call returning
 * its text (`answer` scripts it), `stream(gm)` one streamed call read to the end (`paced`).
 */
const FACADES = {
  openai: {
    make: (options) => require('../openai.js').graphmind({ app: 'opts-openai', ...options }),
    answer: () => chat('Sunny.'),
    async ask(gm) {
      const client = gm.wrapClient(new OpenAI({ apiKey: 'sk-test', baseURL: env.fake.baseURL, maxRetries: 0 }));
      return (await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] })).choices[0].message.content;
    },
    paced: chatPaced,
    async stream(gm) {
      const client = gm.wrapClient(new OpenAI({ apiKey: 'sk-test', baseURL: env.fake.baseURL, maxRetries: 0 }));
      let text = '';
      const s = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], stream: true });
      for await (const c of s) text += (c.choices[0] && c.choices[0].delta.content) || '';
      return text;
    },
  },
  anthropic: {
    make: (options) => require('../anthropic.js').graphmind({ app: 'opts-anthropic', ...options }),
    answer: () => message([{ type: 'text', text: 'Sunny.' }]),
    async ask(gm) {
      const client = gm.wrapClient(new Anthropic({ apiKey: 'sk-test', baseURL: env.fake.baseURL.replace(/\/v1$/, ''), maxRetries: 0 }));
      return (await client.messages.create({ model: 'claude-test', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] })).content[0].text;
    },
    paced: messagePaced,
    async stream(gm) {
      const client = gm.wrapClient(new Anthropic({ apiKey: 'sk-test', baseURL: env.fake.baseURL.replace(/\/v1$/, ''), maxRetries: 0 }));
      let text = '';
      const s = await client.messages.create({ model: 'claude-test', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }], stream: true });
      for await (const e of s) if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
      return text;
    },
  },
  'ai-sdk': {
    make: (options) => require('../ai-sdk.js').graphmind({ app: 'opts-ai', ...options }),
    answer: () => chat('Sunny.'),
    model: (gm) => gm.wrapModel(createOpenAICompatible({ name: 'fake', baseURL: env.fake.baseURL, apiKey: 'k', includeUsage: true }).chatModel('fake-model')),
    async ask(gm) {
      return (await generateText({ model: this.model(gm), prompt: 'hi', maxRetries: 0 })).text;
    },
    paced: chatPaced,
    async stream(gm) {
      let text = '';
      for await (const piece of streamText({ model: this.model(gm), prompt: 'hi', maxRetries: 0 }).textStream) text += piece;
      return text;
    },
  },
};

/** A 127.0.0.1 port nothing listens on (a debugger that is not there). */
async function closedPort() {
  const probe = net.createServer();
  await new Promise((r) => probe.listen(0, '127.0.0.1', r));
  const { port } = probe.address();
  await new Promise((r) => probe.close(r));
  return port;
}

for (const [name, facade] of Object.entries(FACADES)) {
  test(`${name}: waitForAttach holds the first model call until the debugger's handshake, and sends nothing before it`, async () => {
    const own = await startServer(['--pause-on-error', 'off']);
    try {
      process.kill(own.pid, 'SIGSTOP'); // the socket connects, the handshake waits
      const gm = facade.make({ url: own.url, env: {}, waitForAttach: 10_000, handshakeTimeoutMs: 10_000, logger: () => {} });
      await env.fake.script(facade.answer(), facade.answer());
      let settledAt = null;
      const first = facade.ask(gm).then((text) => { settledAt = Date.now(); return text; });
      await new Promise((r) => setTimeout(r, STOPPED_MS));
      assert.equal(settledAt, null, 'still waiting for the debugger');
      assert.equal((await env.fake.requests()).length, 0, 'nothing sent before the handshake');
      const releasedAt = Date.now();
      process.kill(own.pid, 'SIGCONT');
      assert.equal(await first, 'Sunny.');
      assert.ok(settledAt >= releasedAt, 'answered after the debugger came');
      assert.equal(gm.session.attached, true);
      assert.equal((await env.fake.requests()).length, 1);
      assert.equal(await facade.ask(gm), 'Sunny.', 'later calls go straight through');
      await gm.dispose();
    } finally {
      try { process.kill(own.pid, 'SIGCONT'); } catch { /* gone */ }
      own.stop();
    }
  });

  test(`${name}: waitForAttach with no debugger waits at most its milliseconds, once`, async () => {
    const port = await closedPort();
    const gm = facade.make({ url: `ws://127.0.0.1:${port}/ingest`, env: {}, waitForAttach: BOUNDED_MS, logger: () => {} });
    await env.fake.script(facade.answer(), facade.answer());
    let t = Date.now();
    assert.equal(await facade.ask(gm), 'Sunny.');
    const firstMs = Date.now() - t;
    assert.ok(firstMs >= BOUNDED_MS - 20, `the first call waited ${firstMs} ms`);
    assert.ok(firstMs < BOUNDED_MS + SLACK_MS, `the first call waited ${firstMs} ms`);
    t = Date.now();
    assert.equal(await facade.ask(gm), 'Sunny.');
    const secondMs = Date.now() - t;
    assert.ok(secondMs < BOUNDED_MS, `the second call waited ${secondMs} ms`);
    assert.equal(gm.session.attached, false);
    await gm.dispose();
  });

  test(`${name}: tokenFlushIntervalMs sets the node.token batching (a paced stream: one batch per piece by default, one in all under 60 s)`, async () => {
    const batches = {};
    for (const [label, options] of [['default', {}], ['60 s', { tokenFlushIntervalMs: 60_000 }]]) {
      const gm = facade.make({ url: env.srv.url, env: {}, ...options });
      assert.equal(await gm.ready({ timeoutMs: 3000 }), true);
      assert.equal(gm.session.config().tokenIntervalMs, options.tokenFlushIntervalMs ?? 34);
      await env.fake.script(facade.paced());
      let runId;
      const text = await gm.run(`paced-${label}`, async (ctx) => { runId = ctx.runId; return facade.stream(gm); });
      assert.equal(text, PIECES.join(''));
      const events = await runEvents(env.srv, gm, runId);
      const tokens = of(events, 'node.token', 'llm:step');
      assert.equal(tokens.flatMap((b) => b.deltas).map((d) => d.v).join(''), PIECES.join(''), label);
      batches[label] = tokens.length;
      await gm.dispose();
    }
    assert.ok(batches.default >= PIECES.length - 1, `default (34 ms): ${batches.default} batches`);
    assert.equal(batches['60 s'], 1, 'one batch under a 60 s interval');
  });
}
