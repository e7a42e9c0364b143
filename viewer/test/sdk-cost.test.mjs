// Context and cost on a run recorded by a real SDK: the Node SDK's `/openai` wrapClient over
// the real npm `openai` client, talking HTTP to the repo's fake provider
// (tests/fake_provider/server.py), attached to a real `graphmind serve`. Two streamed chat
// calls of one node, the second with a changed system prompt, two more messages, a tool,
// and its cached tokens down from 1,024 to 0. The inspector's tokens and cost must equal
// genai-prices' own calculation on the usage the provider sent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { calcPrice } from '@pydantic/genai-prices';
import { nodeSdk, startFakeProvider, startServer, launch, newPage, shot, waitFor, closePages } from './harness.mjs';

let need, OpenAI;
let browser, srv, fake;

const MODEL = 'gpt-4o';
/** A streamed Chat Completions answer of `text` in two chunks, then the usage chunk. */
const streamed = (text, usage) => {
  const c = (delta, extra = {}) => [null, { id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model: MODEL, choices: delta === null ? [] : [{ index: 0, delta, finish_reason: extra.finish ?? null }], ...(extra.usage ? { usage: extra.usage } : {}) }];
  const half = Math.ceil(text.length / 2);
  return { status: 200, sse: [c({ role: 'assistant', content: text.slice(0, half) }), c({ content: text.slice(half) }, { finish: 'stop' }), c(null, { usage }), [null, '[DONE]']] };
};
const usage1 = { prompt_tokens: 1800, completion_tokens: 120, total_tokens: 1920, prompt_tokens_details: { cached_tokens: 1024 } };
const usage2 = { prompt_tokens: 2100, completion_tokens: 90, total_tokens: 2190, prompt_tokens_details: { cached_tokens: 0 } };
// OpenAI's prompt_tokens include the cached ones: genai-prices takes them the same way.
const price = (u) => calcPrice({ input_tokens: u.prompt_tokens, output_tokens: u.completion_tokens, cache_read_tokens: u.prompt_tokens_details.cached_tokens }, MODEL, { providerId: 'openai' }).total_price;

before(async () => {
  need = nodeSdk({ openai: true });
  OpenAI = need('openai');
  srv = await startServer();
  fake = await startFakeProvider();
  browser = await launch();
});
after(async () => {
  await closePages();
  await browser?.close();
  fake?.stop();
  await srv?.stop();
});

let recorded;

/** The app: two streamed calls of one node in a run `trip` (`options` adds e.g. `replay`). */
async function trip(options = {}) {
  const { graphmind } = need('./openai.js');
  const gm = graphmind({ app: 'sdk-cost', url: `ws://127.0.0.1:${srv.port}/ingest`, env: {}, ...options });
  assert.equal(await gm.ready({ timeoutMs: 5000 }), true);
  const openai = gm.wrapClient(new OpenAI({ apiKey: 'sk-test', baseURL: fake.baseURL, maxRetries: 0 }));
  const WEATHER = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };
  let runId;
  const texts = await gm.run('trip', async (ctx) => {
    runId = ctx.runId;
    const read = async (body) => {
      let t = '';
      for await (const ch of await openai.chat.completions.create({ model: MODEL, stream: true, stream_options: { include_usage: true }, ...body })) t += ch.choices[0]?.delta?.content ?? '';
      return t;
    };
    const a = await read({ messages: [{ role: 'system', content: 'You are a travel agent.' }, { role: 'user', content: 'Weather in Oslo?' }] });
    const b = await read({
      messages: [{ role: 'system', content: 'You are a careful travel agent.' }, { role: 'user', content: 'Weather in Oslo?' }, { role: 'assistant', content: a }, { role: 'user', content: 'Book it.' }],
      tools: [WEATHER],
    });
    return [a, b];
  });
  assert.deepEqual(texts, ['Sunny in Oslo.', 'Booked.'], 'the app read both streams unchanged');
  await gm.dispose();
  await waitFor(async () => (await (await fetch(`${srv.url}/api/runs`)).json()).runs?.find((r) => r.id === runId && r.status === 'ok'), 10000, 'the run stored');
  return runId;
}

test('two streamed calls through wrapClient: tokens, cached tokens, cost = genai-prices, the prompt diff and the cache miss', async () => {
  await fake.script(streamed('Sunny in Oslo.', usage1), streamed('Booked.', usage2));
  const runId = (recorded = await trip());
  const p = await newPage(browser);
  await p.goto(`${srv.viewerUrl}&/run/${runId}`);
  const llm = p.locator('.card[data-kind], .card').filter({ has: p.locator('.kind-badge', { hasText: /^llm$/ }) }).first();
  await llm.waitFor();
  assert.match(await llm.textContent(), /×2/, 'one LLM node, two calls');
  await llm.click();
  const insp = p.locator('#inspector [data-testid=context-cost]');
  await waitFor(() => insp.locator('[data-testid=prompt-diff]').count().then((c) => c === 1), 5000, 'the prompt diff of call 2');
  assert.match(await insp.locator('[data-testid=call-tokens]').textContent(), /in 2,100 · out 90/);
  const usd = Number(await insp.locator('[data-testid=call-cost]').getAttribute('data-usd'));
  assert.ok(Math.abs(usd - price(usage2)) < 1e-12, `${usd} vs genai-prices ${price(usage2)}`);
  assert.match(await insp.locator('[data-testid=context-fill]').textContent(), /context 2% of 128,000/);
  const diff = await insp.locator('[data-testid=prompt-diff]').textContent();
  assert.match(diff, /system prompt changed: “You are a travel agent\.” → “You are a careful travel agent\.”/);
  // the system message is the system prompt; the others are numbered from 0 after it
  assert.match(diff, /1 message unchanged/);
  assert.match(diff, /\+ message 1 \(assistant\): Sunny in Oslo\./);
  assert.match(diff, /\+ message 2 \(user\): Book it\./);
  assert.match(diff, /tools added: get_weather/);
  assert.match(await insp.locator('[data-testid=cache-miss]').textContent(), /cached tokens dropped from 1,024 to 0/);
  const chip = p.locator('#bar [data-testid=run-cost]');
  await waitFor(() => chip.textContent().then((t) => /2 LLM calls/.test(t)), 5000, 'the run total');
  const total = Number(await chip.getAttribute('data-usd'));
  assert.ok(Math.abs(total - (price(usage1) + price(usage2))) < 1e-12, `${total} vs ${price(usage1) + price(usage2)}`);
  await shot(p, 'sdk-context-cost');
  assert.deepEqual(p.errors, []);
});

test('the run replayed by run id: both calls answered from the recording, nothing charged, what they cost when recorded', async () => {
  assert.ok(recorded, 'the recorded run of the test above');
  // nothing scripted: a call that reached the fake provider would fail
  const runId = await trip({ replay: recorded });
  const p = await newPage(browser);
  await p.goto(`${srv.viewerUrl}&/run/${runId}`);
  const llm = p.locator('.card').filter({ has: p.locator('.kind-badge', { hasText: /^llm$/ }) }).first();
  await llm.locator('[data-testid=replay-mark]').filter({ hasText: '↺ replayed ×2' }).waitFor();
  const chip = p.locator('#bar [data-testid=run-cost]');
  await waitFor(() => chip.textContent().then((t) => t === '0 LLM calls · 0 tok · $0 · 2 replayed, not charged'), 5000, 'the replayed calls counted apart');
  assert.equal(Number(await chip.getAttribute('data-usd')), 0);
  const saved = price(usage1) + price(usage2);
  const said = /2 calls were answered from the recording: nothing sent, nothing charged \(they cost \$([\d.]+) when recorded\)/.exec(await chip.getAttribute('title'));
  assert.ok(said && Math.abs(Number(said[1]) - saved) < 1e-4, `${said?.[1]} vs genai-prices ${saved}`);
  await llm.click();
  const cost = p.locator('#inspector [data-testid=call-cost]');
  await cost.waitFor();
  assert.match(await cost.textContent(), /^cost: \$0, answered from the recording \(recorded: \$[\d.]+ \(input/);
  assert.equal(Number(await cost.getAttribute('data-usd')), 0);
  await shot(p, 'sdk-cost-replayed');
  assert.deepEqual(p.errors, []);
});
