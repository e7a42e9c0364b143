// The minimap sits over the stage's bottom-right corner: no card may be left under it (it
// would take the card's clicks), on first fit or when the inspector opening narrows the stage.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, newPage, shot, ingest, waitFor } from './harness.mjs';

let browser, srv, page, ws;
const runId = 'run_minimap0001';
before(async () => {
  browser = await launch();
  srv = await startServer();
  const t0 = Date.now() - 5000;
  let seq = 1;
  const e = (type, payload) => ({ gm: 1, seq: seq++, ts: t0 + seq, runId, type, payload });
  const evs = [e('run.started', { app: 'minimap', sdk: { name: 'test', version: '0' } }), e('node.started', { nodeId: 'agent:root', kind: 'agent', name: 'root', instanceId: runId })];
  // a run wide and deep enough that a plain centred fit reaches the bottom-right corner
  for (let i = 0; i < 4; i++) {
    evs.push(e('node.started', { nodeId: `chain:c${i}`, kind: 'chain', name: `c${i}`, instanceId: `c${i}`, parentId: 'agent:root', input: {} }));
    for (let j = 0; j < 12; j++) evs.push(e('node.started', { nodeId: `tool:t${i}_${j}`, kind: 'tool', name: `t${i}_${j}`, instanceId: `t${i}_${j}`, parentId: `chain:c${i}`, input: { q: 'x' } }));
  }
  ws = await ingest(srv.port, evs);
  await waitFor(async () => (await fetch(`${srv.url}/api/runs`).then((x) => x.json())).runs.find((r) => r.id === runId)?.eventCount === evs.length, 10000, 'stored');
  page = await newPage(browser);
  await page.goto(`${srv.url}/#/run/${runId}`);
  await page.locator('#cards .card').first().waitFor();
});
after(async () => {
  ws?.close();
  await browser?.close();
  await srv?.stop();
});

/** Ids of the cards whose on-screen box meets the minimap's. */
const underMinimap = () =>
  page.evaluate(() => {
    const m = document.getElementById('minimap').getBoundingClientRect();
    return [...document.querySelectorAll('#cards .card')]
      .filter((c) => {
        const r = c.getBoundingClientRect();
        return r.left < m.right && r.right > m.left && r.top < m.bottom && r.bottom > m.top;
      })
      .map((c) => c.dataset.id);
  });

test('the first fit leaves no card under the minimap', async () => {
  await page.waitForTimeout(400);
  assert.deepEqual(await underMinimap(), []);
  await shot(page, 'minimap-first-fit');
});

test('opening the inspector refits a run shown whole, still clear of the minimap; every card takes its click', async () => {
  await page.locator('.card[data-id="agent:root"]').click();
  await page.locator('#inspector h2').waitFor();
  await page.waitForTimeout(400);
  assert.deepEqual(await underMinimap(), []);
  await shot(page, 'minimap-inspector-open');
  for (const id of await page.locator('#cards .card').evaluateAll((cs) => cs.map((c) => c.dataset.id))) {
    await page.locator(`.card[data-id="${id}"]`).click({ timeout: 3000 });
  }
  assert.deepEqual(page.errors, []);
});

test('a camera the user moved stays where they put it when the stage resizes', async () => {
  const cam = () => page.locator('#world').evaluate((w) => w.style.transform);
  const box = await page.locator('#stage').boundingBox();
  await page.mouse.move(box.x + 30, box.y + 80);
  await page.mouse.down();
  await page.mouse.move(box.x + 130, box.y + 120, { steps: 4 });
  await page.mouse.up();
  const moved = await cam();
  const width = () => page.locator('#stage').evaluate((s) => s.getBoundingClientRect().width);
  const narrow = await width();
  await page.keyboard.press('Escape');
  await waitFor(() => width().then((w) => w > narrow), 5000, 'the stage widens as the inspector closes');
  await page.waitForTimeout(300);
  assert.equal(await cam(), moved);
  await shot(page, 'minimap-camera-kept');
});
