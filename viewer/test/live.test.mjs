// The viewer against the real server and the reference Python SDK (graphmind-ai 0.5.1):
// a tiny agent whose third identical tool call is held by the loop guard.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, newPage, shot, runPython, waitFor, closePages } from './harness.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

async function heldRun(env = {}) {
  const srv = await startServer();
  const page = await newPage(browser);
  await page.goto(srv.viewerUrl); // the link the server's redirect file opens: full control
  await waitFor(() => page.locator('[data-testid=conn]').textContent().then((t) => t === 'connected'), 10000, 'connected');
  const py = runPython('agent_loop.py', srv.port, env);
  try {
    await waitFor(() => page.locator('#cards [data-testid=held]').count(), 30000, 'a held card');
  } catch (e) {
    py.kill();
    throw new Error(`${e.message}; agent exit ${py.exitCode}, stdout ${JSON.stringify(py.out)}, stderr ${JSON.stringify(py.err.slice(-600))}; viewer: ${await page.evaluate(() => JSON.stringify({ runs: [...window.__gm.S.runs.keys()], sel: window.__gm.S.selectedRun, conn: window.__gm.connLog }))}; server: ${srv.logs().slice(-600)}`);
  }
  return { srv, page, py };
}

async function finish(page, py) {
  // release any later holds so the agent can end
  const code = await Promise.race([py.done, new Promise((r) => setTimeout(() => r('timeout'), 15000))]);
  if (code === 'timeout') py.kill();
  return code;
}

test('empty state says how to start the demo', async () => {
  const srv = await startServer();
  try {
    const page = await newPage(browser);
    await page.goto(srv.url + '/');
    const empty = page.locator('[data-testid=empty]');
    await empty.waitFor();
    assert.match(await empty.textContent(), /make demo/);
    await shot(page, 'empty-state');
    assert.deepEqual(page.errors, []);
  } finally {
    await closePages();
    await srv.stop();
  }
});

test('a loop hold reads right, Continue resumes, the run finishes ok', async () => {
  const { srv, page, py } = await heldRun();
  try {
    const held = page.locator('#cards [data-testid=held]');
    assert.match(await held.textContent(), /Loop: 3× search_flights with identical arguments/);
    // the rail lists the live run as running, with its nodes and held time
    const item = page.locator('[data-testid=run-item]').first();
    assert.equal(await item.locator('.pill').textContent(), 'running');
    await waitFor(() => item.textContent().then((t) => /2 nodes/.test(t)), 5000, 'node count in the rail');
    // the agent is the tool's parent: one edge, drawn
    assert.equal(await page.locator('#edges path').count(), 1);
    // focus moved to Continue
    await waitFor(() => page.evaluate(() => document.activeElement?.classList.contains('act-continue')), 5000, 'focus on Continue');
    await shot(page, 'loop-held');
    await held.locator('.act-continue').click();
    assert.equal(await finish(page, py), 0, py.err);
    assert.equal(py.out.trim().split('\n').length, 3);
    await waitFor(() => item.locator('.pill').textContent().then((t) => t === 'ok'), 10000, 'run status ok');
    assert.equal(await page.locator('#cards [data-testid=held]').count(), 0);
    // the inspector on the tool: three instances, "ran X · held Y", the resume recorded
    await page.locator('.card[data-id="tool:search_flights"]').click();
    const times = page.locator('#inspector [data-testid=times]');
    assert.match(await times.textContent(), /^ran .+ · held .+/);
    assert.match(await page.locator('#inspector').textContent(), /loop → continue/);
    await shot(page, 'loop-finished-inspector');
    assert.deepEqual(page.errors, []);
  } finally {
    py.kill();
    await closePages();
    await srv.stop();
  }
});

test('Inject (keyboard I, ⌘↵) returns the injected value to the app', async () => {
  const { srv, page, py } = await heldRun();
  try {
    await waitFor(() => page.evaluate(() => document.activeElement?.classList.contains('act-continue')), 5000, 'focus');
    await page.keyboard.press('i');
    const editor = page.locator('#modal textarea');
    await editor.waitFor();
    // a value still carrying a placeholder is refused in the viewer
    await editor.fill('{"flights": "__REDACTED__"}');
    await page.keyboard.press('Control+Enter');
    assert.match(await page.locator('.editor-error').textContent(), /Refused/);
    await editor.fill('{"flights": [{"id": "INJECTED", "price": 1}]}');
    await shot(page, 'inject-editor');
    await page.keyboard.press('Control+Enter');
    assert.equal(await finish(page, py), 0, py.err);
    const lines = py.out.trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(lines[2], { flights: [{ id: 'INJECTED', price: 1 }] });
    await page.locator('.card[data-id="tool:search_flights"]').click();
    await waitFor(() => page.locator('#inspector').textContent().then((t) => /injected/.test(t)), 5000, 'injected marker');
    await shot(page, 'inject-done');
  } finally {
    py.kill();
    await closePages();
    await srv.stop();
  }
});

test('Abort ends the run as aborted; Retry (keyboard R) runs the call again', async () => {
  const { srv, page, py } = await heldRun();
  try {
    await page.locator('#cards [data-testid=held] .act-abort').click();
    assert.equal(await finish(page, py), 0, py.err);
    assert.match(py.out, /^aborted$/m, 'the agent sees the abort');
    const item = page.locator('[data-testid=run-item]').first();
    await waitFor(() => item.locator('.pill').textContent().then((t) => t === 'aborted'), 10000, 'run status aborted');
    assert.match(await page.locator('.card[data-id="tool:search_flights"]').getAttribute('class'), /st-aborted/);
    await shot(page, 'aborted');
  } finally {
    py.kill();
    await closePages();
    await srv.stop();
  }
  const second = await heldRun();
  try {
    await waitFor(() => second.page.evaluate(() => document.activeElement?.classList.contains('act-continue')), 5000, 'focus');
    await second.page.keyboard.press('r');
    assert.equal(await finish(second.page, second.py), 0, second.py.err);
    assert.equal(second.py.out.trim().split('\n').length, 3);
  } finally {
    second.py.kill();
    await closePages();
    await second.srv.stop();
  }
});

test('GRAPHMIND_HIDE_TOOL_RESULTS=1: the hidden output shows its chip', async () => {
  const { srv, page, py } = await heldRun({ GRAPHMIND_HIDE_TOOL_RESULTS: '1' });
  try {
    await page.locator('#cards [data-testid=held] .act-continue').click();
    assert.equal(await finish(page, py), 0, py.err);
    await page.locator('.card[data-id="tool:search_flights"]').click();
    const chip = page.locator('#inspector .chip-hidden');
    await chip.first().waitFor();
    assert.match(await chip.first().textContent(), /hidden by hideToolResults/);
    // the input is not hidden by this switch
    assert.match(await page.locator('#inspector').textContent(), /"NYC"/);
    await shot(page, 'redacted-chip');
  } finally {
    py.kill();
    await closePages();
    await srv.stop();
  }
});

test('debug state: Step mode and Pause all round-trip through the server; deep links open a node', async () => {
  const { srv, page, py } = await heldRun();
  try {
    await page.locator('[data-testid=mode-step]').click();
    await waitFor(() => page.locator('[data-testid=mode-step]').getAttribute('class').then((c) => c.includes('on')), 5000, 'step mode on');
    await page.locator('[data-testid=pause-all]').click();
    await waitFor(() => page.locator('[data-testid=bp-chip]').allTextContents().then((t) => t.some((x) => /every node/.test(x))), 5000, 'pause-all chip');
    await shot(page, 'debug-state');
    // a second viewer sees the same state and opens a deep link
    const runId = await page.evaluate(() => window.__gm.S.selectedRun);
    const other = await newPage(browser, { colorScheme: 'light' });
    await other.goto(`${srv.url}/#/run/${encodeURIComponent(runId)}/node/${encodeURIComponent('tool:search_flights')}`);
    await other.locator('#inspector h2').waitFor();
    assert.equal(await other.locator('#inspector h2').textContent(), 'search_flights');
    assert.equal(await other.locator('[data-testid=mode-step]').getAttribute('class').then((c) => c.includes('on')), true);
    await shot(other, 'deep-link-light');
    // back to run mode, clear pause-all, release
    await page.locator('[data-testid=mode-run]').click();
    await page.locator('[data-testid=pause-all]').click();
    await waitFor(() => page.locator('[data-testid=bp-chip]').allTextContents().then((t) => !t.some((x) => /every node/.test(x))), 5000, 'pause-all cleared');
    await page.locator('#cards [data-testid=held] .act-continue').click();
    assert.equal(await finish(page, py), 0, py.err);
  } finally {
    py.kill();
    await closePages();
    await srv.stop();
  }
});

test('the #token= link: taken out of the URL, kept per tab, full control', async () => {
  const srv = await startServer();
  try {
    assert.ok(srv.token, 'this server writes a redirect file with a viewer token');
    const page = await newPage(browser);
    await page.goto(srv.viewerUrl);
    await waitFor(() => page.locator('[data-testid=conn]').textContent().then((t) => t === 'connected'), 15000, 'connected');
    assert.equal(await page.evaluate(() => location.hash), '');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('graphmind.viewerToken')), srv.token);
    assert.equal(await page.evaluate(() => window.__gm.S.control?.principal), 'viewer');
    assert.equal(await page.locator('[data-testid=watch-only]').count(), 0);
    assert.equal(await page.locator('[data-testid=pause-all]').isDisabled(), false);
    // a reload keeps control (sessionStorage), without the token in the address bar
    await page.reload();
    await waitFor(() => page.evaluate(() => window.__gm.S.control?.principal), 10000, 'welcome').then((p) => assert.equal(p, 'viewer'));
    await shot(page, 'live-token-link');
  } finally {
    await closePages();
    await srv.stop();
  }
});

test('a stale token is dropped: the tab watches, and the controls it may not use are disabled', async () => {
  const srv = await startServer();
  const page = await newPage(browser);
  let py;
  try {
    await page.goto(`${srv.url}/#token=gmv_00000000000000000000000000000000`);
    await waitFor(() => page.locator('[data-testid=conn]').textContent().then((t) => t === 'connected'), 15000, 'connected without the token');
    py = runPython('agent_loop.py', srv.port);
    await waitFor(() => page.locator('#cards [data-testid=held]').count(), 30000, 'a held card');
    await waitFor(() => page.evaluate(() => sessionStorage.getItem('graphmind.viewerToken') === null), 5000, 'stale token dropped');
    assert.equal(await page.evaluate(() => window.__gm.S.control?.principal), 'anonymous');
    await page.locator('[data-testid=watch-only]').waitFor();
    assert.equal(await page.locator('[data-testid=pause-all]').isDisabled(), true);
    assert.equal(await page.locator('#cards [data-testid=held] .act-inject').isDisabled(), true);
    assert.equal(await page.locator('#cards [data-testid=held] .act-step').isDisabled(), true);
    assert.equal(await page.locator('#cards [data-testid=held] .act-retry').isDisabled(), false);
    await shot(page, 'watch-only');
    // continue is still allowed without a credential
    await page.locator('#cards [data-testid=held] .act-continue').click();
    assert.equal(await finish(page, py), 0, py.err);
  } finally {
    py?.kill();
    await closePages();
    await srv.stop();
  }
});

test('the binary serves its embedded viewer when GRAPHMIND_VIEWER_DIST is not set', async () => {
  const srv = await startServer({ GRAPHMIND_VIEWER_DIST: '' });
  try {
    const res = await fetch(srv.url + '/');
    const html = await res.text();
    assert.match(res.headers.get('content-type'), /text\/html/);
    assert.ok(!/viewer is not built/.test(html), 'this binary was built before viewer/dist existed: run `make viewer` then cargo build');
    const page = await newPage(browser);
    await page.goto(srv.url + '/');
    await waitFor(() => page.locator('[data-testid=conn]').textContent().then((t) => t === 'connected'), 10000, 'connected');
    assert.equal((await fetch(srv.url + '/../../etc/passwd')).status, 404);
    assert.deepEqual(page.errors, []);
  } finally {
    await closePages();
    await srv.stop();
  }
});
