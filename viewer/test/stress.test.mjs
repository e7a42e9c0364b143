// A 300-node, ~5,000-event run written straight to /ingest, then opened in the viewer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, newPage, shot, ingest, waitFor, geometry, overlaps, edgesThroughCards } from './harness.mjs';
import { buildLib } from '../bench/build-lib.mjs';

let browser, srv, lib, runId, page;
before(async () => {
  lib = await import(await buildLib());
  browser = await launch();
  srv = await startServer();
  runId = 'run_5000ev300nd';
  const envs = lib.stressRun(300, 5000, runId, Date.now() - 60_000);
  const ws = await ingest(srv.port, envs, 'stress-ingest');
  await waitFor(async () => {
    const r = await fetch(`${srv.url}/api/runs`).then((x) => x.json());
    return r.runs.find((x) => x.id === runId)?.eventCount === envs.length;
  }, 30000, 'all events stored');
  ws.close();
  page = await newPage(browser);
  await page.goto(`${srv.url}/#/run/${runId}`);
  await page.locator('#cards .card').first().waitFor();
  await page.waitForTimeout(500);
});
after(async () => {
  await browser?.close();
  await srv?.stop();
});

function assertClean(geo, label) {
  assert.deepEqual(overlaps(geo.cards), [], `${label}: overlapping cards`);
  assert.deepEqual(edgesThroughCards(geo), [], `${label}: edges through cards`);
}

test('opens folded with at most 60 cards, no overlaps, no edge through a card', async () => {
  const geo = await geometry(page);
  assert.ok(geo.cards.length <= 60, `${geo.cards.length} cards`);
  assert.ok(geo.cards.length >= 20, `${geo.cards.length} cards`);
  assert.equal(geo.edges.length, geo.cards.length - 1);
  assertClean(geo, 'folded');
  assert.match(await page.locator('#foldinfo').textContent(), /of 300 nodes shown · \d+ folded/);
  assert.ok((await page.locator('[data-testid=fold-expander]').count()) > 0);
  await shot(page, 'stress-300-folded');
  assert.deepEqual(page.errors, []);
});

test('stays interactive: a fold expander opens its nodes quickly, layout stays clean', async () => {
  const before = await page.locator('#cards .card').count();
  const t0 = Date.now();
  // A DOM click: which expander comes first depends on where the camera settled, and one
  // outside the viewport cannot be scrolled to on a panned canvas (Playwright gives up).
  await page.locator('[data-testid=fold-expander]').first().evaluate((el) => el.click());
  await waitFor(() => page.locator('#cards .card').count().then((n) => n > before), 10000, 'more cards');
  const ms = Date.now() - t0;
  console.log(`expand: ${before} -> ${await page.locator('#cards .card').count()} cards in ${ms} ms (including the test's polling)`);
  assert.ok(ms < 5000, `expanding took ${ms} ms`); // generous: the build machine runs at load 10-18
  await page.waitForTimeout(350); // card transitions
  assertClean(await geometry(page), 'expanded');
  // the per-node fold control folds it back
  await page.locator('[data-testid=fold-toggle]').first().evaluate((el) => el.click());
  await page.waitForTimeout(350);
  assertClean(await geometry(page), 'refolded');
  await shot(page, 'stress-refolded');
});

test('the palette finds a folded node, reveals and inspects it', async () => {
  const target = await page.evaluate(() => {
    const S = window.__gm.S;
    const m = S.models.get(S.selectedRun);
    const shown = new Set([...document.querySelectorAll('#cards .card')].map((c) => c.dataset.id));
    return [...m.nodes.values()].find((n) => !shown.has(n.id) && n.kind === 'tool')?.name;
  });
  assert.ok(target, 'a hidden tool node');
  await page.keyboard.press('/');
  await page.keyboard.type(target);
  await page.waitForTimeout(100);
  assert.match(await page.locator('.pal-item.sel').textContent(), new RegExp(target));
  await shot(page, 'stress-palette');
  await page.keyboard.press('Enter');
  await page.locator('#inspector h2').waitFor();
  assert.equal(await page.locator('#inspector h2').textContent(), target);
  await waitFor(() => page.locator(`#cards .card.sel`).count(), 3000, 'the card is drawn and selected');
  await page.waitForTimeout(350);
  assertClean(await geometry(page), 'revealed');
  await shot(page, 'stress-revealed');
  assert.match(await page.evaluate(() => location.hash), /\/node\//);
});

test('the minimap pans the camera', async () => {
  const cam0 = await page.evaluate(() => ({ ...window.__gm.S.cam }));
  const box = await page.locator('#minimap').boundingBox();
  await page.mouse.click(box.x + 20, box.y + box.height - 20);
  const cam1 = await page.evaluate(() => ({ ...window.__gm.S.cam }));
  assert.ok(Math.abs(cam1.x - cam0.x) + Math.abs(cam1.y - cam0.y) > 50, JSON.stringify({ cam0, cam1 }));
  await page.mouse.move(box.x + 20, box.y + 20);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width - 20, box.y + 30, { steps: 5 });
  await page.mouse.up();
  const cam2 = await page.evaluate(() => ({ ...window.__gm.S.cam }));
  assert.ok(Math.abs(cam2.x - cam1.x) > 50, 'dragging the minimap pans');
  await shot(page, 'stress-minimap-panned');
});

test('filters dim, the timeline is virtualised, shortcuts switch theme', async () => {
  await page.keyboard.press('Shift+F');
  await page.locator('[data-testid=filter-kind-agent]').click();
  const dimmed = await waitFor(() => page.locator('#cards .card.dim').count(), 3000, 'dimmed cards');
  const all = await page.locator('#cards .card').count();
  assert.ok(dimmed > 0 && dimmed < all, `${dimmed} of ${all} dimmed`);
  await page.locator('[data-testid=filter-kind-agent]').click();
  await waitFor(() => page.locator('#cards .card.dim').count().then((n) => n === 0), 3000, 'no dimmed cards');
  await page.locator('[data-testid=filter-errored]').click();
  await waitFor(() => page.locator('#cards .card.dim').count(), 3000, 'errored filter dims');
  await page.locator('[data-testid=filter-errored]').click();
  await waitFor(() => page.locator('#cards .card.dim').count().then((n) => n === 0), 3000, 'filters cleared');
  // ⇧E: the error path keeps failures and their ancestors lit
  await page.keyboard.press('Shift+E');
  await waitFor(() => page.locator('#cards .card.dim').count(), 3000, 'error path dims');
  const lit = await page.evaluate(() => [...document.querySelectorAll('#cards .card:not(.dim)')].map((c) => c.dataset.id));
  assert.ok(lit.includes('agent:stress'), 'the root leads to every failure');
  await page.keyboard.press('Shift+E');
  await waitFor(() => page.locator('#cards .card.dim').count().then((n) => n === 0), 3000, 'error path off');
  await page.keyboard.press('Shift+T');
  await page.locator('#timeline .tl-row').first().waitFor();
  const rows = await page.locator('#timeline .tl-row').count();
  const bars = await page.evaluate(() => {
    const S = window.__gm.S;
    let k = 0;
    for (const n of S.models.get(S.selectedRun).nodes.values()) k += n.instances.length;
    return k;
  });
  assert.ok(bars >= 300 && rows < 60, `${rows} rows drawn for ${bars} executions`);
  await shot(page, 'stress-timeline');
  const before = await page.evaluate(() => document.documentElement.dataset.theme);
  await page.keyboard.press('d');
  await page.keyboard.press('d');
  const afterTheme = await page.evaluate(() => document.documentElement.dataset.theme);
  assert.notEqual(before, afterTheme);
  await shot(page, 'stress-light');
  assert.deepEqual(page.errors, []);
});

test('everything open (⇧C): 300 cards, still no overlap and no edge through a card', async () => {
  await page.keyboard.press('Escape');
  const t0 = Date.now();
  await page.keyboard.press('Shift+C');
  await waitFor(() => page.locator('#cards .card').count().then((n) => n === 300), 5000, '300 cards');
  console.log(`unfold all: 300 cards in ${Date.now() - t0} ms (including the test's polling)`);
  await page.waitForTimeout(350);
  const geo = await geometry(page);
  assert.equal(geo.cards.length, 300);
  assert.equal(geo.edges.length, 299);
  assertClean(geo, 'all open');
  await shot(page, 'stress-300-open');
  await page.keyboard.press('Shift+C');
  await waitFor(() => page.locator('#cards .card').count().then((n) => n < 60), 5000, 'folded again');
});

test('keyboard: > opens palette actions, B toggles the run list, Esc closes and deselects', async () => {
  await page.keyboard.press('Escape');
  const tlOpen = await page.locator('#timeline').isVisible();
  await page.keyboard.press('>');
  await page.locator('#palette').waitFor();
  assert.equal(await page.locator('#pal-input').inputValue(), '>');
  await page.keyboard.type('timeline');
  assert.match(await page.locator('.pal-item.sel').textContent(), /Toggle the timeline/);
  await page.keyboard.press('Enter');
  await waitFor(() => page.locator('#timeline').isVisible().then((v) => v !== tlOpen), 3000, 'timeline toggled');
  assert.equal(await page.locator('#palette').isVisible(), false);
  await page.keyboard.press('b');
  await waitFor(() => page.locator('#rail').isVisible().then((v) => !v), 3000, 'rail hidden');
  await page.keyboard.press('b');
  await waitFor(() => page.locator('#rail').isVisible(), 3000, 'rail shown');
  await page.keyboard.press('Control+k');
  await page.locator('#palette').waitFor();
  await page.keyboard.press('Escape');
  assert.equal(await page.locator('#palette').isVisible(), false);
  await shot(page, 'stress-keyboard');
});

test('?stress=N renders a synthetic run without a server run', async () => {
  const p = await newPage(browser);
  await p.goto(`${srv.url}/?stress=1000`);
  await p.locator('#cards .card').first().waitFor();
  assert.ok((await p.locator('#cards .card').count()) <= 60);
  assert.match(await p.locator('[data-testid=conn]').textContent(), /synthetic/);
  assertClean(await geometry(p), 'stress=1000');
  await shot(p, 'stress-1000-synthetic');
});
