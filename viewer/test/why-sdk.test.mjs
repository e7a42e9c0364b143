// "Why it held" on holds a real SDK raised: the Node SDK's loop guard (three identical search
// calls), its error gate twice on the same arguments (the server's default pause-on-error),
// and a smart hold on a truncated tool call (the `/openai` wrapClient over the npm `openai`
// client, a non-streamed answer cut at the token limit by the fake provider). Each hold is
// released from the viewer's Continue button, and the app goes on.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { nodeSdk, startFakeProvider, startServer, launch, newPage, shot, waitFor, closePages } from './harness.mjs';

let need, OpenAI;
let browser, srv, page, fake, gm;
const why = () => page.locator('#inspector [data-testid=why-held]');
const held = (n) => () => page.locator('#cards [data-testid=held]').count().then((c) => c === n);
const cont = (id) => page.locator(`.card[data-id="${id}"] .act-continue`).click();

before(async () => {
  need = nodeSdk({ openai: true });
  OpenAI = need('openai');
  srv = await startServer();
  fake = await startFakeProvider();
  browser = await launch();
  page = await newPage(browser);
  await page.goto(srv.viewerUrl);
  await page.locator('#bar [data-testid=conn]').filter({ hasText: 'connected' }).waitFor();
});
after(async () => {
  await gm?.dispose();
  await closePages();
  await browser?.close();
  fake?.stop();
  await srv?.stop();
});

test('the loop guard, the error gate twice on the same arguments, a truncated tool call: why each held', async () => {
  const { graphmind } = need('./openai.js');
  gm = graphmind({ app: 'why-sdk', url: `ws://127.0.0.1:${srv.port}/ingest`, env: {} });
  assert.equal(await gm.ready({ timeoutMs: 5000 }), true);
  const search = gm.tool('search', async (args) => ({ hits: [], q: args.q }));
  let tries = 0;
  const book = gm.tool('book', async () => {
    tries++;
    throw new Error('seat map timed out');
  });
  const openai = gm.wrapClient(new OpenAI({ apiKey: 'sk-test', baseURL: fake.baseURL, maxRetries: 0 }));
  // cut at the token limit while asking for a tool call whose arguments end mid-string
  await fake.script({ status: 200, json: { id: 'chatcmpl-t', object: 'chat.completion', created: 1, model: 'gpt-4o', choices: [{ index: 0, finish_reason: 'length', logprobs: null, message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'write_file', arguments: '{"path": "notes.txt", "text": "Dear Ol' } }] } }], usage: { prompt_tokens: 50, completion_tokens: 4096, total_tokens: 4146 } } });
  let runId;
  const done = gm.run('why', async (ctx) => {
    runId = ctx.runId;
    for (let k = 0; k < 3; k++) await search({ q: 'oslo flights', page: 1 });
    for (let k = 0; k < 2; k++) await book({ flight: 'GM101', seat: '7F' }).catch(() => {});
    const r = await openai.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'write the letter' }], tools: [{ type: 'function', function: { name: 'write_file', parameters: { type: 'object' } } }] });
    return r.choices[0].finish_reason;
  });
  await waitFor(() => runId, 5000, 'the run');
  await page.goto(`${srv.viewerUrl}&/run/${runId}`);

  // 1. the loop guard holds the third identical call
  await waitFor(held(1), 10000, 'the loop hold');
  await page.locator('.card[data-id="tool:search"] .card-head').click();
  await why().waitFor();
  assert.match(await why().locator('[data-testid=why-rule]').textContent(), /identical arguments/);
  assert.match(await why().locator('[data-testid=why-laps]').textContent(), /3×/);
  assert.match(await why().locator('[data-testid=why-seq]').textContent(), /first \d+ · last \d+/);
  assert.match(await why().locator('[data-testid=why-same-keys]').textContent(), /page, q/);
  assert.equal(await why().locator('[data-testid=why-calls] .why-call').count(), 3);
  await shot(page, 'why-sdk-loop');
  await cont('tool:search');

  // 2. the error gate, twice on the same arguments
  await waitFor(async () => (await page.locator('.card[data-id="tool:book"] [data-testid=held]').count()) === 1, 10000, 'the first error hold');
  await page.locator('.card[data-id="tool:book"] .card-head').click();
  await why().locator('[data-testid=why-error]').waitFor();
  assert.match(await why().locator('[data-testid=why-error]').textContent(), /seat map timed out/);
  assert.match(await why().locator('[data-testid=why-repeat]').textContent(), /first failure with these arguments/);
  await cont('tool:book');
  await waitFor(() => tries === 2, 10000, 'the second call');
  await waitFor(async () => (await page.locator('.card[data-id="tool:book"] [data-testid=held]').count()) === 1, 10000, 'the second error hold');
  await page.locator('.card[data-id="tool:book"] .card-head').click();
  await waitFor(() => why().locator('[data-testid=why-repeat]').textContent().then((t) => /failed before: 1× \(call 1\)/.test(t)).catch(() => false), 5000, 'same arguments failed before');
  await shot(page, 'why-sdk-error-repeat');
  await cont('tool:book');

  // 3. the smart hold after the truncated answer
  await waitFor(async () => (await page.locator('.card[data-id="llm:step"] [data-testid=held]').count()) === 1, 10000, 'the smart hold');
  await page.locator('.card[data-id="llm:step"] .card-head').click();
  await why().locator('[data-testid=why-evidence]').waitFor();
  assert.match(await why().locator('[data-testid=why-rule]').textContent(), /tool call was cut off/);
  const evidence = await why().locator('[data-testid=why-evidence]').textContent();
  assert.ok(evidence.length > 5 && !evidence.includes('Dear Ol'), `the detail counts, never quotes: ${evidence}`);
  await shot(page, 'why-sdk-smart');
  await cont('llm:step');
  assert.equal(await done, 'length', 'the app got the answer as the provider sent it');
  assert.deepEqual(page.errors, []);
});
