// Replays in the viewer, on runs a real SDK recorded and replayed against a real server: the
// Node SDK's trip agent (test/replay_app.cjs, wrapped tools) is recorded; the inspector's
// "Re-run from here" line is run as printed, with `--output` and `--exec` (replayed up to the
// fork point, the quote's output edited, live from the booking); a second replay by run id
// with another passenger diverges at the booking. The viewer marks replayed, edited and live
// cards, links each replay to its original and back, and its compare view lists the two
// runs side by side from the fork point on.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN, NODE_SDK, nodeSdk, startServer, launch, newPage, shot, waitFor, closePages } from './harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const APP = join(here, 'replay_app.cjs');
let browser, srv, page;
const known = new Set();

/** Runs `cmd` through sh with the SDK and the server's ingest URL in the environment. */
function sh(cmd, env = {}) {
  const child = spawn('sh', ['-c', cmd], {
    env: { ...process.env, PATH: `${dirname(BIN)}:${process.env.PATH}`, GM_NODE_SDK: NODE_SDK, GRAPHMIND_URL: `ws://127.0.0.1:${srv.port}/ingest`, GRAPHMIND_TELEMETRY: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const timer = setTimeout(() => child.kill(), 30_000);
  return new Promise((res) => child.on('exit', (code) => (clearTimeout(timer), res({ code, out, err }))));
}

/** The id of the newest finished run of the trip agent not seen before. */
async function newRun() {
  return waitFor(async () => {
    const { runs } = await (await fetch(`${srv.url}/api/runs`)).json();
    const r = runs.find((x) => x.app === 'viewer-replay' && x.status !== 'running' && !known.has(x.id));
    if (r) known.add(r.id);
    return r?.id;
  }, 10_000, 'the new run');
}

/**
 * The viewer redraws a frame (or a fetch) after a click or a new run: reads `read()` until
 * `ok(value)` holds (5 s at most) and returns the last value, which the caller asserts.
 */
async function settled(read, ok) {
  let value;
  try {
    await waitFor(async () => ok((value = await read())), 5000, 'the view to settle');
  } catch {
    // the caller's assertion says what was seen
  }
  return value;
}
const is = (want) => (v) => JSON.stringify(v) === JSON.stringify(want);

const card = (id) => page.locator(`#cards .card[data-id="${id}"]`);
const mark = (id) => card(id).locator('[data-testid=replay-mark]');
const openRun = async (id) => {
  await page.locator(`#rail [data-testid=run-item][data-run-id="${id}"]`).click();
  await page.locator('#bar .run-title').filter({ hasText: id }).waitFor();
};

before(async () => {
  nodeSdk();
  srv = await startServer();
  browser = await launch();
  page = await newPage(browser);
  await page.goto(srv.viewerUrl);
  await page.locator('#bar [data-testid=conn]').filter({ hasText: 'connected' }).waitFor();
});
after(async () => {
  await closePages();
  await browser?.close();
  await srv?.stop();
});

test('Re-run from here, run as printed; a divergence; markers, links both ways and the compare view', async () => {
  const rec = await sh(`"${process.execPath}" "${APP}"`);
  assert.equal(rec.code, 0, rec.err);
  assert.match(rec.out, /result: \{"sent":"GM-Ada-105"\}/);
  const orig = await newRun();
  await openRun(orig);

  // the inspector's line: the n-th execution of the node, the viewer's port
  await card('tool:search').click();
  const line = page.locator('#inspector [data-testid=rerun] code');
  assert.equal(await line.textContent(), `graphmind replay ${orig} --from tool:search#2 --port ${srv.port}`);
  await page.locator('#inspector .inst-list button', { hasText: '#1' }).click();
  await page.locator('#inspector [data-testid=rerun] code').filter({ hasText: 'tool:search#1' }).waitFor();
  await card('tool:book').click();
  await line.filter({ hasText: 'tool:book#1' }).waitFor();
  const printed = await line.textContent();
  assert.equal(printed, `graphmind replay ${orig} --from tool:book#1 --port ${srv.port}`);
  assert.match(await page.locator('#inspector [data-testid=rerun]').textContent(), /this call \(#1\) and what follows run live/);
  await card('agent:trip').click();
  await page.locator('#inspector h2').filter({ hasText: 'trip' }).waitFor();
  assert.equal(await page.locator('#inspector [data-testid=rerun]').count(), 0, 'an agent runs its own code: no line');
  await card('tool:book').click();
  await line.filter({ hasText: 'tool:book#1' }).waitFor();
  await shot(page, 'replay-rerun-line');

  // run it as printed, the quote's output edited, the app started by --exec
  const forked = await sh(`${printed} --output '{"total":80}' --exec '"${process.execPath}" "${APP}"'`);
  assert.equal(forked.code, 0, forked.err);
  assert.match(forked.out, /result: \{"sent":"GM-Ada-80"\}/, 'the edited output reached the booking, which ran live');
  const fork = await newRun();
  // a replay by run id with another passenger: the booking's arguments differ
  const div = await sh(`"${process.execPath}" "${APP}"`, { GRAPHMIND_REPLAY: orig, PASSENGER: 'Grace' });
  assert.equal(div.code, 0, div.err);
  assert.match(div.err, /tool:book#1 diverged/);
  const diverged = await newRun();
  // the original, still on screen, learns its replays from the rail's summaries (their
  // run.started.meta), before either replay is opened
  const listed = page.locator('#bar [data-testid=replays] [data-testid=replays-link]');
  await waitFor(async () => (await listed.count()) === 2, 10_000, 'the replays listed on the original');

  // the forked replay: replayed, edited and fork markers, the link to its original
  await openRun(fork);
  await mark('tool:search').filter({ hasText: '↺ replayed ×2' }).waitFor();
  assert.equal(await settled(() => mark('tool:quote').getAttribute('data-mark'), is('edited')), 'edited');
  assert.equal(await settled(() => mark('tool:book').getAttribute('data-mark'), is('fork')), 'fork');
  assert.equal(await mark('tool:mail').count(), 0, 'a live call after the fork carries no marker');
  const of = page.locator('#bar [data-testid=replay-of]');
  assert.match(await of.textContent(), new RegExp(`replay of${orig}from tool:book#1`));
  const marker = page.locator('#inspector [data-testid=replay-marker]');
  await card('tool:book').click();
  const live = 'live from the fork point · went live at tool:book#1 (the fork point)';
  assert.equal(await settled(() => marker.textContent(), is(live)), live);
  await card('tool:quote').click();
  const edited = `replayed · edited output from ${orig}`;
  assert.equal(await settled(() => marker.textContent(), is(edited)), edited);
  await shot(page, 'replay-forked');

  // the diverged replay side by side with its original, from the fork point on
  await openRun(diverged);
  // The bar names the run before the cards are redrawn: wait for this run's card (the
  // forked run's booking, still on screen for a frame, is marked `fork`).
  await card('tool:book').locator('[data-testid=replay-mark][data-mark=diverged]').waitFor({ timeout: 10_000 });
  await page.locator('#bar [data-testid=compare-toggle]').click();
  await page.locator('#compare [data-testid=compare-live]').waitFor();
  assert.ok(await page.locator('#stage').isHidden(), 'the compare view takes the graph’s place');
  const wentLive = 'diverged: live from here: went live at tool:book#1 (diverged) · differs: input.passenger';
  assert.equal(await settled(() => page.locator('#compare [data-testid=compare-live]').textContent(), is(wentLive)), wentLive);
  const rows = page.locator('#compare [data-testid=compare-row]');
  await waitFor(async () => (await rows.count()) === 2, 5000, 'the two rows from the fork point');
  const row = async (i) => ({ key: await rows.nth(i).getAttribute('data-key'), mark: await rows.nth(i).getAttribute('data-mark'), same: await rows.nth(i).getAttribute('data-same'), text: await rows.nth(i).textContent() });
  // The rows fill in as the original run loads.
  const book = await settled(() => row(0), (r) => is(['tool:book#1', 'diverged', 'false'])([r.key, r.mark, r.same]));
  assert.deepEqual([book.key, book.mark, book.same], ['tool:book#1', 'diverged', 'false']);
  assert.match(book.text, /GM-Ada-105/);
  assert.match(book.text, /GM-Grace-105/);
  assert.match(book.text, /input input\.passenger, output output\.ref/);
  const mail = await settled(() => row(1), (r) => is(['tool:mail#1', 'live', 'false'])([r.key, r.mark, r.same]));
  assert.deepEqual([mail.key, mail.mark, mail.same], ['tool:mail#1', 'live', 'false']);
  const summary = /3 replayed · 2 live · 2 outputs differ/;
  assert.match(await settled(() => page.locator('#compare [data-testid=compare-summary]').textContent(), (t) => summary.test(t)), summary);
  const before = page.locator('#compare [data-testid=compare-before]');
  const folded = /▸ 4 executions before the fork point \(3 answered from the recording, 0 with another output\)/;
  assert.match(await settled(() => before.textContent(), (t) => folded.test(t)), folded);
  await shot(page, 'replay-compare');
  await before.click();
  await waitFor(async () => (await rows.count()) === 6, 5000, 'every row');
  const allRows = async () => {
    const out = [];
    for (let i = 0; i < 6; i++) out.push([(await row(i)).key, (await row(i)).mark, (await row(i)).same]);
    return out;
  };
  const all = await settled(allRows, (rs) => rs.slice(0, 4).every((r) => r[1] && r[2]));
  // the run's own node ran its code; the three calls before the fork were answered, same outputs
  assert.deepEqual(all.slice(0, 4).map((r) => r[1]), ['own-code', 'replayed', 'replayed', 'replayed']);
  assert.deepEqual(all.slice(1, 4), [['tool:search#1', 'replayed', 'true'], ['tool:search#2', 'replayed', 'true'], ['tool:quote#1', 'replayed', 'true']]);
  // a row opens its execution in the inspector
  await page.locator('#compare [data-testid=compare-row][data-key="tool:book#1"]').click();
  await page.locator('#inspector [data-testid=replay-marker]').filter({ hasText: 'differs: input.passenger' }).waitFor();
  await shot(page, 'replay-compare-all');

  // back to the original: it lists both replays, and compares with the newest
  await page.locator('#bar [data-testid=replay-of-link]').click();
  await page.locator('#bar .run-title').filter({ hasText: orig }).waitFor();
  const replays = page.locator('#bar [data-testid=replays] [data-testid=replays-link]');
  await waitFor(async () => (await replays.count()) === 2, 5000, 'both replays listed');
  assert.deepEqual((await replays.allTextContents()).sort(), [fork, diverged].sort());
  assert.equal(await settled(() => page.locator('#compare [data-testid=compare-replay]').textContent(), is(diverged)), diverged);
  await shot(page, 'replay-original');
  // the palette's action leaves the comparison too
  await page.keyboard.press('>');
  await page.locator('#pal-input').fill('>back to the graph');
  await page.keyboard.press('Enter');
  await page.locator('#stage').waitFor({ state: 'visible' });
  assert.equal(await settled(() => mark('tool:book').count(), is(0)), 0, 'the original carries no replay marker');
  assert.deepEqual(page.errors, []);

  // a fresh tab opened on the replay: the compare view loads the original it has not seen
  const fresh = await newPage(browser);
  await fresh.goto(`${srv.viewerUrl}&/run/${diverged}`);
  await fresh.locator('#bar [data-testid=compare-toggle]').click();
  await fresh.locator('#compare [data-testid=compare-live]').filter({ hasText: 'differs: input.passenger' }).waitFor();
  await waitFor(async () => (await fresh.locator('#compare [data-testid=compare-row]').count()) === 2, 5000, 'the rows from the fork point');
  // the row is drawn before the original's outputs arrive (data-same is '' until then)
  const firstSame = () => fresh.locator('#compare [data-testid=compare-row]').first().getAttribute('data-same');
  assert.equal(await settled(firstSame, is('false')), 'false');
  assert.deepEqual(fresh.errors, []);
});
