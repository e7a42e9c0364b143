// The first five minutes in real Chromium: `graphmind demo` in a fresh HOME, its printed
// link opened, both holds released with the viewer's own buttons; the viewer's empty state
// starts the demo with its token; without a token it says how to get one; ?fixture=.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, viewerDir, startServer, launch, newPage, shot, waitFor, requireTools } from './harness.mjs';

let browser;
before(async () => {
  requireTools();
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

/** A fresh HOME and nothing else of ours in the environment. */
function freshEnv(home) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GRAPHMIND_') && k !== 'CI' && k !== 'DISPLAY' && k !== 'BROWSER'));
  return { ...env, HOME: home, GRAPHMIND_TELEMETRY: '0', GRAPHMIND_VIEWER_DIST: join(viewerDir, 'dist') };
}

async function runStatus(port, run) {
  const r = await fetch(`http://127.0.0.1:${port}/api/runs`);
  return (await r.json()).runs.find((x) => x.id === run)?.status;
}

async function releaseBothHolds(page) {
  const held = page.locator('#cards [data-testid=held]');
  await held.waitFor({ timeout: 20000 });
  assert.match(await held.textContent(), /searchFlights/);
  await held.locator('.act-inject').click();
  const editor = page.locator('#modal textarea');
  await editor.waitFor();
  await editor.fill('[{"flight":"GM101","to":"Oslo","price":129.5,"note":"injected from the viewer"}]');
  await page.keyboard.press('Control+Enter');
  // the booking fails next: the error hold, released with Retry
  await waitFor(async () => /bookFlight/.test((await held.first().textContent({ timeout: 500 }).catch(() => '')) ?? ''), 20000, 'the error hold');
  await held.first().locator('.act-retry').click();
}

test('graphmind demo in a fresh HOME: the printed link, both holds released in the viewer, the run finishes ok', async () => {
  const home = mkdtempSync(join(tmpdir(), 'gm-first-'));
  const env = freshEnv(home);
  const demo = spawn(BIN, ['demo', '--no-open', '--interactive', '--port', '0'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  demo.stdout.on('data', (d) => (out += d));
  demo.stderr.on('data', () => {});
  try {
    await waitFor(() => /viewer {3}(\S+)/.test(out), 15000, 'the viewer link');
    const link = /viewer {3}(\S+)/.exec(out)[1];
    assert.match(link, /^http:\/\/127\.0\.0\.1:\d+\/#token=gmv_[0-9a-f]+&\/run\/run_/);
    const port = Number(/127\.0\.0\.1:(\d+)/.exec(link)[1]);
    const run = /\/run\/(run_[0-9a-f]+)/.exec(link)[1];
    const page = await newPage(browser);
    await page.goto(link);
    await releaseBothHolds(page);
    await waitFor(async () => (await runStatus(port, run)) === 'ok', 20000, 'run ok');
    await waitFor(() => out.includes(`run ${run} finished: ok`) && out.includes('press Ctrl-C'), 10000, 'the demo reports the end and keeps serving');
    await shot(page, 'first-run-demo');
    assert.deepEqual(page.errors, []);
    // the run is in ~/.graphmind/graphmind.db, as `graphmind runs` shows
    const listed = execFileSync(BIN, ['runs'], { env }).toString();
    assert.match(listed, new RegExp(`${run}\\s+trip-planner\\s+ok`));
  } finally {
    demo.kill('SIGINT');
    await new Promise((r) => (demo.exitCode !== null ? r() : demo.on('exit', r)));
    rmSync(home, { recursive: true, force: true });
  }
  assert.equal(demo.exitCode, 0, 'Ctrl-C stops the demo server cleanly');
});

test('the empty viewer starts the demo with its token; without one it says how to get one', async () => {
  const srv = await startServer();
  try {
    const anon = await newPage(browser);
    await anon.goto(srv.url + '/');
    const empty = anon.locator('[data-testid=empty]');
    await empty.waitFor();
    assert.ok(await anon.locator('[data-testid=start-demo]').isDisabled(), 'no token: the button is off');
    assert.match(await empty.textContent(), /graphmind open/);

    const page = await newPage(browser);
    await page.goto(srv.viewerUrl);
    await page.locator('[data-testid=start-demo]').click();
    await waitFor(async () => /#\/run\/run_/.test(await page.evaluate(() => location.hash)), 10000, 'the demo run opened');
    await releaseBothHolds(page);
    const run = /run_[0-9a-f]+/.exec(await page.evaluate(() => location.hash))[0];
    await waitFor(async () => (await runStatus(srv.port, run)) === 'ok', 20000, 'run ok');
    // the token-less tab watches the same run and says how to get control
    await anon.goto(`${srv.url}/#/run/${run}`);
    await anon.locator('[data-testid=watch-only]').waitFor();
    assert.match(await anon.locator('[data-testid=watch-only]').textContent(), /graphmind open/);
    await shot(anon, 'first-run-watch-only');
    assert.deepEqual(page.errors, []);
  } finally {
    await srv.stop();
  }
});

test('?fixture=demo and ?fixture=mcp open a recorded run with no server', async () => {
  const srv = await startServer();
  try {
    const page = await newPage(browser);
    await page.goto(`${srv.url}/?fixture=demo`);
    await page.locator('[data-testid=read-only]').waitFor();
    await waitFor(async () => (await page.locator('#cards .card').count()) >= 3, 5000, 'demo cards');
    assert.match(await page.locator('#cards').textContent(), /searchFlights[\s\S]*bookFlight/);
    await page.goto(`${srv.url}/?fixture=mcp`);
    await waitFor(async () => /get-sum/.test(await page.locator('#cards').textContent()), 5000, 'mcp cards');
    await shot(page, 'first-run-fixture-mcp');
    await page.goto(`${srv.url}/?fixture=nope`);
    assert.match(await page.locator('[data-testid=empty]').textContent(), /no fixture "nope"/);
    assert.deepEqual(page.errors, []);
  } finally {
    await srv.stop();
  }
});
