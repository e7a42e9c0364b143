// `graphmind record --html`: the real binary exports a stored run as one page; Chromium
// opens it from a file:// URL with the server stopped and shows the run read-only, with
// no request beyond the file itself.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BIN, viewerDir, startServer, launch, newPage, shot, ingest, waitFor, closePages } from './harness.mjs';

const runId = 'run_export00001';
const SECRETS = ['sk-live-EXPORT-1', 'Bearer tok-EXPORT-2', 'fp-EXPORT-3'];
let browser, dir, file, html, stderr;

before(async () => {
  browser = await launch();
  const srv = await startServer();
  try {
    const t0 = Date.now() - 60_000;
    let seq = 1;
    const e = (type, payload) => ({ gm: 1, seq: seq++, ts: t0 + seq * 100, runId, type, payload });
    const ws = await ingest(srv.port, [
      e('run.started', { app: 'exporter', sdk: { name: 'test', version: '0' }, meta: { api_key: SECRETS[0] } }),
      e('node.started', { nodeId: 'agent:exp', kind: 'agent', name: 'exp', instanceId: runId }),
      e('node.started', { nodeId: 'tool:search', kind: 'tool', name: 'search', instanceId: 'c1', parentId: 'agent:exp', input: { q: 'flights', headers: { Authorization: SECRETS[1] } } }),
      e('node.finished', { nodeId: 'tool:search', instanceId: 'c1', status: 'ok', durationMs: 300, output: { html: '</script><b>bold</b>' } }),
      e('node.started', { nodeId: 'llm:answer', kind: 'llm', name: 'answer', instanceId: 'l1', parentId: 'agent:exp', input: { max_tokens: 64 } }),
      e('node.finished', { nodeId: 'llm:answer', instanceId: 'l1', status: 'ok', durationMs: 800, output: { text: 'GM101' }, usage: { inputTokens: 10, outputTokens: 3 } }),
      e('node.started', { nodeId: 'tool:refund', kind: 'tool', name: 'refund', instanceId: 'r1', parentId: 'agent:exp', input: { amount: 900 } }),
      e('exec.paused', { pauseId: 'p_1', nodeId: 'tool:refund', instanceId: 'r1', point: 'before', reason: 'loop', loop: { repeats: 3, firstSeq: 1, lastSeq: 2, fingerprint: SECRETS[2] } }),
    ], 'exporter');
    await waitFor(async () => (await fetch(`${srv.url}/api/runs`).then((x) => x.json())).runs.find((r) => r.id === runId)?.eventCount === 8, 10000, 'stored');
    ws.close();
    dir = mkdtempSync(join(tmpdir(), 'gm-export-'));
    file = join(dir, 'run.html');
    const r = spawnSync(BIN, ['record', runId, '--html', '--out', file, '--db', srv.db], {
      env: { ...process.env, GRAPHMIND_HOME: srv.home, GRAPHMIND_TELEMETRY: '0', GRAPHMIND_VIEWER_DIST: join(viewerDir, 'dist') },
      encoding: 'utf8',
    });
    stderr = r.stderr;
    assert.equal(r.status, 0, r.stderr);
    html = readFileSync(file, 'utf8');
  } finally {
    await srv.stop(); // the page must not need it
  }
});
after(async () => {
  await closePages();
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the exported page is one self-contained, redacted file', () => {
  assert.match(stderr, /redacted 2 values under 2 distinct keys \(--no-redact-secrets keeps them\)/);
  for (const s of SECRETS) assert.ok(!html.includes(s), `${s} must not be in the page`);
  assert.ok(html.includes('__REDACTED__'));
  const refs = [...html.matchAll(/<[a-z]+\b[^>]*?\s(?:src|href)\s*=\s*["']?([^"'\s>]*)/gi)].map((m) => m[1]);
  assert.deepEqual(refs.filter((u) => !u.startsWith('data:')), [], 'no external src or href');
  assert.match(html, /<meta http-equiv="Content-Security-Policy" content="default-src 'none';/);
  assert.match(html, /<script type="application\/json" id="graphmind-run">/);
  assert.ok(!html.includes('</script><b>'), 'payload text cannot close the data element');
});

test('Chromium opens it from file:// and shows the run, read-only, with no network', async () => {
  const page = await newPage(browser);
  const url = pathToFileURL(file).href;
  const requests = [];
  const sockets = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('websocket', (w) => sockets.push(w.url()));
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  await page.goto(url);
  await waitFor(() => page.locator('#cards .card').count().then((n) => n === 4), 10000, 'four cards');
  const ids = await page.locator('#cards .card').evaluateAll((cs) => cs.map((c) => c.dataset.id).sort());
  assert.deepEqual(ids, ['agent:exp', 'llm:answer', 'tool:refund', 'tool:search']);
  assert.equal(await page.locator('[data-testid=conn]').textContent(), 'recorded run');
  assert.equal(await page.locator('[data-testid=read-only]').count(), 1);
  // the held gate is shown as a record: no button releases it, no debugging controls
  const held = page.locator('#cards [data-testid=held]');
  assert.match(await held.textContent(), /Loop: 3× refund/);
  assert.match(await held.locator('[data-testid=held-readonly]').textContent(), /held .* when exported · read-only record/);
  assert.equal(await page.locator('button.act').count(), 0);
  assert.equal(await page.locator('[data-testid=mode-run], [data-testid=pause-all]').count(), 0);
  // the rail: the exported run with its app and node count
  const item = page.locator('[data-testid=run-item]');
  assert.equal(await item.count(), 1);
  assert.match(await item.textContent(), /exporter/);
  assert.match(await item.textContent(), /4 nodes/);
  // the escaped payload reads back exactly; the redacted header shows as hidden
  await page.locator('.card[data-id="tool:search"]').click();
  await waitFor(() => page.locator('#inspector h2').textContent().then((t) => t === 'search'), 5000, 'inspector');
  const insp = await page.locator('#inspector').textContent();
  assert.ok(insp.includes('</script><b>bold</b>'), insp);
  assert.match(insp, /"Authorization": hidden by/, 'the redacted header reads as hidden');
  await page.keyboard.press('c'); // the Continue key does nothing on a record
  await shot(page, 'exported-run');
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(sockets, [], 'no WebSocket');
  assert.deepEqual(requests, [url], 'no request beyond the file itself');
  assert.deepEqual(await page.evaluate(() => window.__csp), [], 'nothing blocked by the page policy either');
  assert.deepEqual(page.errors, []);
});
