// The inspector's "why it held" panel on a raw app's holds: a loop (the repeated calls side by
// side, identical keys, repeats, first/last seq), an error repeat (the same arguments failed
// before), a smart truncated-tool-call hold (rule and evidence).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, newPage, shot, ingest, waitFor } from './harness.mjs';

let browser, srv, page, ws;
const runId = 'run_why00000001';
let seq = 1;
const send = (type, payload) => ws.send(JSON.stringify({ gm: 1, seq: seq++, ts: Date.now(), runId, type, payload }));
const why = () => page.locator('#inspector [data-testid=why-held]');
const heldCount = (n) => () => page.locator('#cards [data-testid=held]').count().then((c) => c === n);

before(async () => {
  browser = await launch();
  srv = await startServer();
  ws = await ingest(srv.port, [], 'why-app', ['pause', 'inject', 'retry', 'abort']);
  send('run.started', { app: 'why', sdk: { name: 'test', version: '0' } });
  send('node.started', { nodeId: 'agent:why', kind: 'agent', name: 'why', instanceId: runId });
  page = await newPage(browser);
  await page.goto(`${srv.viewerUrl}&/run/${runId}`);
  await page.locator('.card[data-id="agent:why"]').waitFor();
});
after(async () => {
  ws?.close();
  await browser?.close();
  await srv?.stop();
});

test('a loop hold: the repeated calls side by side, the identical keys, repeats and first/last seq', async () => {
  const firstSeq = seq;
  for (let k = 1; k <= 3; k++) {
    send('node.started', { nodeId: 'tool:search', kind: 'tool', name: 'search', instanceId: `s${k}`, parentId: 'agent:why', input: { q: 'oslo flights', page: 1 } });
    if (k < 3) send('node.finished', { nodeId: 'tool:search', instanceId: `s${k}`, status: 'ok', durationMs: 5, output: [] });
  }
  const lastSeq = seq - 1;
  send('exec.paused', { pauseId: 'p_loop', nodeId: 'tool:search', point: 'before', reason: 'loop', loop: { repeats: 3, firstSeq, lastSeq, fingerprint: 'abc' } });
  await waitFor(heldCount(1), 5000, 'the loop hold');
  await page.locator('.card[data-id="tool:search"]').click();
  await why().waitFor();
  assert.match(await why().locator('[data-testid=why-rule]').textContent(), /identical arguments/);
  assert.match(await why().locator('[data-testid=why-laps]').textContent(), /3×/);
  assert.match(await why().locator('[data-testid=why-seq]').textContent(), new RegExp(`first ${firstSeq} · last ${lastSeq}`));
  assert.match(await why().locator('[data-testid=why-same-keys]').textContent(), /page, q/);
  const calls = why().locator('[data-testid=why-calls] .why-call');
  assert.equal(await calls.count(), 3);
  assert.match(await calls.nth(2).textContent(), /call 3 \(held\)[\s\S]*"q":"oslo flights"/);
  await shot(page, 'why-loop');
  send('exec.resumed', { pauseId: 'p_loop', action: 'continue' });
  send('node.finished', { nodeId: 'tool:search', instanceId: 's3', status: 'ok', durationMs: 5, output: [] });
  await waitFor(heldCount(0), 5000, 'released');
});

test('an error hold: the error, and whether the same arguments failed before', async () => {
  send('node.started', { nodeId: 'tool:book', kind: 'tool', name: 'book', instanceId: 'b1', parentId: 'agent:why', input: { flight: 'GM101', seat: '7F' } });
  send('node.error', { nodeId: 'tool:book', instanceId: 'b1', error: { name: 'ToolError', message: 'seat map timed out' } });
  send('exec.paused', { pauseId: 'p_e1', nodeId: 'tool:book', point: 'error', reason: 'error' });
  await waitFor(heldCount(1), 5000, 'the first error hold');
  await page.locator('.card[data-id="tool:book"]').click();
  await why().waitFor();
  assert.match(await why().locator('[data-testid=why-error]').textContent(), /ToolError: seat map timed out/);
  assert.match(await why().locator('[data-testid=why-repeat]').textContent(), /first failure with these arguments/);
  send('exec.resumed', { pauseId: 'p_e1', action: 'continue' });
  await waitFor(heldCount(0), 5000, 'released');
  // the agent calls it again with the same arguments (key order differs): it fails again
  send('node.started', { nodeId: 'tool:book', kind: 'tool', name: 'book', instanceId: 'b2', parentId: 'agent:why', input: { seat: '7F', flight: 'GM101' } });
  send('node.error', { nodeId: 'tool:book', instanceId: 'b2', error: { name: 'ToolError', message: 'seat map timed out' } });
  send('exec.paused', { pauseId: 'p_e2', nodeId: 'tool:book', point: 'error', reason: 'error' });
  await waitFor(heldCount(1), 5000, 'the second error hold');
  await page.locator('.card[data-id="tool:book"]').click();
  await waitFor(() => why().locator('[data-testid=why-repeat]').textContent().then((t) => /failed before: 1× \(call 1\)/.test(t)), 5000, 'same args failed before');
  await shot(page, 'why-error-repeat');
  send('exec.resumed', { pauseId: 'p_e2', action: 'continue' });
  await waitFor(heldCount(0), 5000, 'released');
});

test('a smart hold: the rule and the evidence', async () => {
  send('node.started', { nodeId: 'tool:write', kind: 'tool', name: 'write', instanceId: 'w1', parentId: 'agent:why', input: { path: 'a.txt' } });
  send('exec.paused', { pauseId: 'p_s', nodeId: 'tool:write', point: 'before', smart: { rule: 'truncated-tool-call', detail: 'finish_reason length: the arguments JSON ends mid-string' } });
  await waitFor(heldCount(1), 5000, 'the smart hold');
  await page.locator('.card[data-id="tool:write"]').click();
  await why().waitFor();
  assert.match(await why().locator('[data-testid=why-rule]').textContent(), /tool call was cut off/);
  assert.match(await why().locator('[data-testid=why-evidence]').textContent(), /finish_reason length/);
  await shot(page, 'why-smart');
  send('exec.resumed', { pauseId: 'p_s', action: 'abort' });
  assert.deepEqual(page.errors, []);
});
