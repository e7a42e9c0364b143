// Context and cost in the inspector and the run bar, on an LLM node's two calls sent to /ingest
// in the shape the core records (docs/llm.md): tokens, the genai-prices cost (checked against
// genai-prices' own calculation for the same usage), the context fill, the prompt diff (system
// prompt changed, a message added, a tool added) with the cache-miss note, and "no price known".
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { calcPrice } from '@pydantic/genai-prices';
import { startServer, launch, newPage, shot, ingest, waitFor } from './harness.mjs';

let browser, srv, page, ws;
const runId = 'run_cost0000001';
let seq = 1;
const send = (type, payload) => ws.send(JSON.stringify({ gm: 1, seq: seq++, ts: Date.now(), runId, type, payload }));
const insp = () => page.locator('#inspector [data-testid=context-cost]');
const u1 = { inputTokens: 1800, outputTokens: 120, inclusive: true, cacheReadTokens: 1024, reasoningTokens: 64 };
const u2 = { inputTokens: 2100, outputTokens: 90, inclusive: true, cacheReadTokens: 0 };
const price = (u, model) => calcPrice({ input_tokens: u.inputTokens, output_tokens: u.outputTokens, cache_read_tokens: u.cacheReadTokens ?? 0, cache_write_tokens: 0 }, model, { providerId: 'openai' }).total_price;
const input = (system, n, tools) => ({
  provider: 'openai', model: 'gpt-4o', stream: true,
  messages: [{ role: 'system', content: system }, ...Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i}` }))],
  tools: tools.map((name) => ({ name, schemaHash: `h_${name}` })),
});
const call = (id, inp, usage) => {
  send('node.started', { nodeId: 'llm:step', kind: 'llm', name: 'step', instanceId: id, parentId: 'agent:cost', sdk: 'openai', input: inp });
  send('node.token', { nodeId: 'llm:step', instanceId: id, deltas: [{ t: 'text', v: 'ok' }] });
  send('node.finished', { nodeId: 'llm:step', instanceId: id, status: 'ok', durationMs: 40, streaming: true, output: { text: 'ok', finishReason: 'stop' }, usage });
};

before(async () => {
  browser = await launch();
  srv = await startServer();
  ws = await ingest(srv.port, [], 'cost-app');
  send('run.started', { app: 'cost', sdk: { name: 'test', version: '0' } });
  send('node.started', { nodeId: 'agent:cost', kind: 'agent', name: 'cost', instanceId: runId });
  page = await newPage(browser);
  await page.goto(`${srv.viewerUrl}&/run/${runId}`);
  await page.locator('.card[data-id="agent:cost"]').waitFor();
});
after(async () => {
  ws?.close();
  await browser?.close();
  await srv?.stop();
});

test('tokens, cost and context fill of a call; the prompt diff and cache miss against the previous call; the run total', async () => {
  call('c1', input('You are a travel agent.', 3, ['search']), u1);
  call('c2', input('You are a careful travel agent.', 5, ['search', 'book']), u2);
  await page.locator('.card[data-id="llm:step"]').click();
  await waitFor(() => insp().locator('[data-testid=prompt-diff]').count().then((c) => c === 1), 5000, 'the prompt diff of call 2');
  assert.match(await insp().locator('[data-testid=call-tokens]').textContent(), /in 2,100 · out 90/);
  const usd = Number(await insp().locator('[data-testid=call-cost]').getAttribute('data-usd'));
  assert.ok(Math.abs(usd - price(u2, 'gpt-4o')) < 1e-12, `${usd} vs genai-prices ${price(u2, 'gpt-4o')}`);
  assert.match(await insp().locator('[data-testid=context-fill]').textContent(), /context 2% of 128,000/);
  const diff = await insp().locator('[data-testid=prompt-diff]').textContent();
  assert.match(diff, /system prompt changed: “You are a travel agent\.” → “You are a careful travel agent\.”/);
  assert.match(diff, /3 messages unchanged/);
  assert.match(diff, /\+ message 3 \(assistant\): turn 3/);
  assert.match(diff, /\+ message 4 \(user\): turn 4/);
  assert.match(diff, /tools added: book/);
  assert.match(await insp().locator('[data-testid=cache-miss]').textContent(), /cached tokens dropped from 1,024 to 0/);
  const chip = page.locator('#bar [data-testid=run-cost]');
  await waitFor(() => chip.textContent().then((t) => /2 LLM calls/.test(t)), 5000, 'the run total');
  const total = Number(await chip.getAttribute('data-usd'));
  const want = price(u1, 'gpt-4o') + price(u2, 'gpt-4o');
  assert.ok(Math.abs(total - want) < 1e-12, `${total} vs ${want}`);
  assert.match(await chip.textContent(), /4,110 tok/);
  await shot(page, 'context-cost');
});

test('a model genai-prices does not know says "no price known"', async () => {
  send('node.started', { nodeId: 'llm:local', kind: 'llm', name: 'local', instanceId: 'l1', parentId: 'agent:cost', sdk: 'openai', input: { provider: 'openai', model: 'my-local-model-7b', messages: [{ role: 'user', content: 'hi' }] } });
  send('node.finished', { nodeId: 'llm:local', instanceId: 'l1', status: 'ok', durationMs: 5, output: { text: 'hi' }, usage: { inputTokens: 10, outputTokens: 2, inclusive: true } });
  await page.locator('.card[data-id="llm:local"]').click();
  await waitFor(() => insp().locator('[data-testid=call-cost]').textContent().then((t) => /no price known for my-local-model-7b/.test(t)).catch(() => false), 5000, 'no price known');
  assert.equal(await insp().locator('[data-testid=context-fill]').count(), 0);
  const chip = page.locator('#bar [data-testid=run-cost]');
  await waitFor(() => chip.textContent().then((t) => /3 LLM calls .* \+ 1 unpriced/.test(t)), 5000, 'the run total counts the unpriced call');
  await shot(page, 'cost-unpriced');
});
