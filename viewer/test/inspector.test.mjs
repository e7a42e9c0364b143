// Inspector markers on a run written straight to /ingest: streaming preview, usage,
// truncation marker, error with stack, injected output, redaction summary, edited input.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, newPage, shot, ingest, waitFor } from './harness.mjs';

let browser, srv, page, ws;
const runId = 'run_markers0001';
before(async () => {
  browser = await launch();
  srv = await startServer();
  const t0 = Date.now() - 5000;
  let seq = 1;
  const e = (type, payload, dt = 10) => ({ gm: 1, seq: seq++, ts: t0 + seq * dt, runId, type, payload });
  ws = await ingest(srv.port, [
    e('run.started', { app: 'markers', sdk: { name: 'test', version: '0' } }),
    e('node.started', { nodeId: 'agent:markers', kind: 'agent', name: 'markers', instanceId: runId }),
    e('node.started', { nodeId: 'tool:fetch', kind: 'tool', name: 'fetch', instanceId: 'c1', parentId: 'agent:markers', input: { url: 'https://example.com', apiKey: '__REDACTED__' }, redaction: { count: 1, keys: ['input'] } }),
    e('node.finished', { nodeId: 'tool:fetch', instanceId: 'c1', status: 'ok', durationMs: 900, heldMs: 400, output: { __graphmindTruncated: true, bytes: 700000, preview: '{"body":"<html>…' } }),
    e('node.started', { nodeId: 'tool:parse', kind: 'tool', name: 'parse', instanceId: 'c2', parentId: 'agent:markers', input: { text: 'x' } }),
    e('node.error', { nodeId: 'tool:parse', instanceId: 'c2', error: { name: 'TypeError', message: 'cannot read properties of undefined', stack: 'TypeError: cannot read properties of undefined\n    at parse (parse.js:10:5)' } }),
    e('node.started', { nodeId: 'tool:lookup', kind: 'tool', name: 'lookup', instanceId: 'c3', parentId: 'agent:markers', input: { id: 1 } }),
    e('node.finished', { nodeId: 'tool:lookup', instanceId: 'c3', status: 'ok', durationMs: 5, output: { id: 1, name: 'injected value' }, injected: true }),
    e('node.started', { nodeId: 'llm:step', kind: 'llm', name: 'step', instanceId: 's1', parentId: 'agent:markers', input: { messages: [{ role: 'user', content: 'hi' }] } }),
    e('node.finished', { nodeId: 'llm:step', instanceId: 's1', status: 'ok', durationMs: 1200, output: { text: 'hello' }, usage: { inputTokens: 1200, outputTokens: 85, cacheReadTokens: 1000 } }),
    e('node.started', { nodeId: 'llm:step', kind: 'llm', name: 'step', instanceId: 's2', parentId: 'agent:markers', input: { messages: [] } }),
    e('node.token', { nodeId: 'llm:step', instanceId: 's2', deltas: [{ t: 'text', v: 'The cheapest flight ' }, { t: 'text', v: 'is GM101 at $420' }] }),
  ]);
  await waitFor(async () => (await fetch(`${srv.url}/api/runs`).then((x) => x.json())).runs.find((r) => r.id === runId)?.eventCount === 12, 10000, 'stored');
  page = await newPage(browser);
  await page.goto(`${srv.url}/#/run/${runId}`);
  await page.locator('#cards .card').first().waitFor();
});
after(async () => {
  ws?.close();
  await browser?.close();
  await srv?.stop();
});

test('the running step streams its tokens on its card', async () => {
  const preview = page.locator('.card[data-id="llm:step"] [data-testid=token-preview]');
  await preview.waitFor();
  assert.match(await preview.textContent(), /is GM101 at \$420$/);
  assert.match(await page.locator('.card[data-id="llm:step"]').getAttribute('class'), /st-running/);
  await shot(page, 'markers-streaming');
});

test('redacted input chip, truncated output, ran · held', async () => {
  await page.locator('.card[data-id="tool:fetch"]').click();
  const insp = page.locator('#inspector');
  await insp.locator('h2').waitFor();
  assert.match(await insp.locator('.chip-hidden').textContent(), /hidden by hideToolArgs or hideInputs/);
  assert.match(await insp.locator('.chip-trunc').textContent(), /truncated · 700,000 bytes/);
  assert.equal(await insp.locator('[data-testid=times]').textContent(), 'ran 500 ms · held 400 ms');
  await shot(page, 'markers-truncated');
});

test('error with stack, injected marker, token usage', async () => {
  await page.locator('.card[data-id="tool:parse"]').click();
  await waitFor(() => page.locator('#inspector h2').textContent().then((t) => t === 'parse'), 10000, 'parse');
  assert.match(await page.locator('#inspector .stack').textContent(), /at parse \(parse\.js:10:5\)/);
  assert.match(await page.locator('.card[data-id="tool:parse"]').getAttribute('class'), /st-error/);
  await page.locator('.card[data-id="tool:lookup"]').click();
  await waitFor(() => page.locator('#inspector h2').textContent().then((t) => t === 'lookup'), 10000, 'lookup');
  assert.match(await page.locator('#inspector .marks').textContent(), /injected/);
  await page.locator('.card[data-id="llm:step"]').click();
  await waitFor(() => page.locator('#inspector h2').textContent().then((t) => t === 'step'), 10000, 'step');
  await page.locator('#inspector .inst-list .chip', { hasText: '#1' }).click();
  await waitFor(() => page.locator('#inspector [data-testid=call-tokens]').count(), 10000, 'usage');
  // the usage is not marked inclusive, so the 1,000 cached tokens are added to the input
  assert.match(await page.locator('#inspector [data-testid=call-tokens]').textContent(), /in 2,200 · out 85 · cached 1,000/);
  await shot(page, 'markers-usage');
  assert.deepEqual(page.errors, []);
});

test('a growing run is laid out incrementally: the card in view stays where it was', async () => {
  await page.keyboard.press('Escape');
  const pos = () => page.locator('.card[data-id="agent:markers"]').evaluate((c) => c.style.transform);
  const other = () => page.locator('.card[data-id="tool:fetch"]').evaluate((c) => c.style.transform);
  const before = await pos();
  const otherBefore = await other();
  let seq = 100;
  const t = Date.now();
  for (let k = 0; k < 4; k++)
    ws.send(JSON.stringify({ gm: 1, seq: seq++, ts: t + k, runId, type: 'node.started', payload: { nodeId: `tool:more${k}`, kind: 'tool', name: `more${k}`, instanceId: `m${k}`, parentId: k === 3 ? 'tool:more0' : 'agent:markers', input: {} } }));
  await waitFor(() => page.locator('#cards .card').count().then((n) => n === 9), 5000, 'four more cards');
  // the children no longer stack (one has a child), so the tree re-centres: the other
  // cards move, the anchor (the root) does not
  assert.notEqual(await other(), otherBefore);
  assert.equal(await pos(), before);
  await page.waitForTimeout(350);
  const { geometry, overlaps, edgesThroughCards } = await import('./harness.mjs');
  const geo = await geometry(page);
  assert.deepEqual(overlaps(geo.cards), []);
  assert.deepEqual(edgesThroughCards(geo), []);
  await shot(page, 'markers-grown');
});

test('switching runs with the same node ids redraws every card and edge', async () => {
  const other = 'run_markers0002';
  let seq = 1;
  const t = Date.now() - 1000;
  const e = (type, payload) => ({ gm: 1, seq: seq++, ts: t + seq, runId: other, type, payload });
  const ws2 = await ingest(srv.port, [
    e('run.started', { app: 'markers-2', sdk: { name: 'test', version: '0' } }),
    e('node.started', { nodeId: 'agent:markers', kind: 'agent', name: 'markers', instanceId: other }),
    e('node.started', { nodeId: 'tool:fetch', kind: 'tool', name: 'fetch', instanceId: 'x1', parentId: 'agent:markers', input: {} }),
    e('node.error', { nodeId: 'tool:fetch', instanceId: 'x1', error: { name: 'Error', message: 'boom' } }),
    e('run.finished', { status: 'error' }),
  ], 'markers-2');
  try {
    const item = page.locator(`[data-testid=run-item][data-run-id="${other}"]`);
    await item.waitFor();
    await item.click();
    await waitFor(() => page.locator('.card[data-id="tool:fetch"]').getAttribute('class').then((c) => /st-error/.test(c)), 5000, 'run 2 card');
    assert.equal(await page.locator('#cards .card').count(), 2);
    assert.equal(await page.locator('#edges path').count(), 1);
    await page.locator(`[data-testid=run-item][data-run-id="${runId}"]`).click();
    await waitFor(() => page.locator('.card[data-id="tool:fetch"]').getAttribute('class').then((c) => /st-ok/.test(c)), 5000, 'run 1 card');
    assert.equal(await page.locator('#cards .card').count(), 9);
    assert.equal(await page.locator('#edges path').count(), 8);
    await shot(page, 'inspector-switched-run');
  } finally {
    ws2.close();
  }
});
