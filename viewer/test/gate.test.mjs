// A held gate driven by a raw app on /ingest (the reference SDK 0.5.1 does not offer input
// edits): Edit args where `editable`, refusals, who resumed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, newPage, shot, ingest, waitFor } from './harness.mjs';

let browser, srv, page, ws;
const runId = 'run_gate0000001';
const resumes = [];
let seq = 1;
const send = (type, payload) => ws.send(JSON.stringify({ gm: 1, seq: seq++, ts: Date.now(), runId, type, payload }));

before(async () => {
  browser = await launch();
  srv = await startServer();
  ws = await ingest(srv.port, [], 'gate-app', ['pause', 'inject', 'retry', 'abort', 'edit-input']);
  ws.on('message', (m) => {
    const e = JSON.parse(String(m));
    if (e.type === 'exec.resume') resumes.push(e.payload);
  });
  send('run.started', { app: 'gate', sdk: { name: 'test', version: '0' } });
  send('node.started', { nodeId: 'agent:gate', kind: 'agent', name: 'gate', instanceId: runId });
  send('node.started', { nodeId: 'tool:refund', kind: 'tool', name: 'refund', instanceId: 'r1', parentId: 'agent:gate', input: { orderId: 'A-1', amount: 900, note: { __graphmindTruncated: true, bytes: 90000, preview: '…' } } });
  send('exec.paused', { pauseId: 'p_1', nodeId: 'tool:refund', point: 'before', reason: 'breakpoint', editable: true });
  page = await newPage(browser);
  // the redirect file's link with a deep link after the token
  await page.goto(`${srv.viewerUrl}&/run/${runId}`);
  await page.locator('#cards [data-testid=held]').waitFor();
});
after(async () => {
  ws?.close();
  await browser?.close();
  await srv?.stop();
});

test('a breakpoint hold offers Edit args; placeholders and truncation markers are refused', async () => {
  const held = page.locator('#cards [data-testid=held]');
  assert.match(await held.textContent(), /Breakpoint before refund/);
  await held.locator('.act-edit').click();
  const editor = page.locator('#modal textarea');
  await editor.waitFor();
  assert.deepEqual(JSON.parse(await editor.inputValue()).orderId, 'A-1');
  await page.keyboard.press('Control+Enter');
  assert.match(await page.locator('.editor-error').textContent(), /truncation marker/);
  await editor.fill('{"orderId": "A-1", "amount": "__REDACTED__"}');
  await page.keyboard.press('Control+Enter');
  assert.match(await page.locator('.editor-error').textContent(), /__REDACTED__/);
  await editor.fill('{"orderId": "A-1", "amount": 90}');
  await shot(page, 'gate-edit-args');
  await page.keyboard.press('Control+Enter');
  await waitFor(() => resumes.length === 1, 5000, 'exec.resume at the app');
  assert.equal(resumes[0].pauseId, 'p_1');
  assert.equal(resumes[0].action, 'continue');
  assert.match(resumes[0].requestId, /^vw_/);
  assert.deepEqual(resumes[0].input, { orderId: 'A-1', amount: 90 }, 'the edit reaches the app');
  assert.equal(await page.evaluate(() => location.hash), `#/run/${runId}/node/tool%3Arefund`);
});

test('an app refusal shows on the banner; the server stamps who released the gate', async () => {
  send('exec.refused', { pauseId: 'p_1', code: 'schema', message: 'amount must be a number', requestId: resumes[0].requestId });
  await waitFor(() => page.locator('#cards .held-refused').count(), 5000, 'refusal shown');
  assert.match(await page.locator('#cards .held-refused').textContent(), /schema — amount must be a number/);
  // the gate still holds: edit again, and this time the app runs it
  await page.locator('#cards [data-testid=held] .act-edit').click();
  await page.locator('#modal textarea').fill('{"orderId": "A-1", "amount": 95}');
  await page.keyboard.press('Control+Enter');
  await waitFor(() => resumes.length === 2, 5000, 'the second exec.resume');
  assert.deepEqual(resumes[1].input, { orderId: 'A-1', amount: 95 });
  send('exec.resumed', { pauseId: 'p_1', action: 'continue', requestId: resumes[1].requestId, edited: { after: { orderId: 'A-1', amount: 95 } } });
  send('node.finished', { nodeId: 'tool:refund', instanceId: 'r1', status: 'ok', durationMs: 1500, heldMs: 1400, output: { refunded: 95 } });
  await waitFor(() => page.locator('#cards [data-testid=held]').count().then((n) => n === 0), 5000, 'released');
  await page.locator('.card[data-id="tool:refund"]').click();
  const insp = page.locator('#inspector');
  await waitFor(() => insp.textContent().then((t) => /continue by viewer/.test(t)), 5000, 'principal stamped by the server');
  assert.match(await insp.textContent(), /edited arguments/);
  assert.match(await insp.textContent(), /Edited input \(what ran\)/);
  assert.equal(await insp.locator('[data-testid=times]').textContent(), 'ran 100 ms · held 1.40 s');
  await shot(page, 'gate-principal');
  assert.deepEqual(page.errors, []);
});

test('a node held at its error gate reads as held, not as run (live, after a retry, and finished)', async () => {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  send('node.started', { nodeId: 'tool:book', kind: 'tool', name: 'book', instanceId: 'b1', parentId: 'agent:gate', input: { flight: 'GM101' } });
  await sleep(100);
  send('node.error', { nodeId: 'tool:book', instanceId: 'b1', error: { name: 'ToolError', message: 'seat map timed out' } });
  send('exec.paused', { pauseId: 'p_2', nodeId: 'tool:book', point: 'error', reason: 'error', editable: true });
  await waitFor(() => page.locator('#cards [data-testid=held]').count().then((n) => n === 1), 5000, 'the error hold');
  await page.locator('.card[data-id="tool:book"]').click();
  const times = page.locator('#inspector [data-testid=times]');
  await sleep(1200);
  await page.locator('.card[data-id="tool:book"]').click();
  // while held: the held time, at the error gate, not "ran … · held 0 ms"
  await waitFor(() => times.textContent().then((t) => /^held [1-9][\d.]* s at the error gate/.test(t)), 5000, 'held time while at the error gate');
  await shot(page, 'gate-error-held');
  // the app retries: the call runs again, and the hold so far counts as held
  send('exec.resumed', { pauseId: 'p_2', action: 'retry' });
  await waitFor(() => page.locator('#cards [data-testid=held]').count().then((n) => n === 0), 5000, 'released');
  const sub = page.locator('.card[data-id="tool:book"] .card-sub');
  await waitFor(() => sub.textContent().then((t) => /running/.test(t)), 5000, 'retry shows running');
  await sleep(100);
  // the core stamps the whole execution's held time on the node.finished that follows
  send('node.finished', { nodeId: 'tool:book', instanceId: 'b1', status: 'ok', durationMs: 1450, heldMs: 1250, output: { booking: 'GM101-7F' } });
  await waitFor(() => sub.textContent().then((t) => /ran 200 ms · held 1\.25 s/.test(t)), 5000, 'card: ran and held');
  await page.locator('.card[data-id="tool:book"]').click();
  assert.equal(await times.textContent(), 'ran 200 ms · held 1.25 s');
  assert.deepEqual(page.errors, []);
});
