// The timeline-only view, drag-a-range to zoom the timeline, and the run bar's control levels
// (this tab's principal, the agent token's --allow-control level), against a real server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, newPage, shot, ingest, waitFor, closePages } from './harness.mjs';

let browser, srv, ws;
const runId = 'run_views00001';
before(async () => {
  browser = await launch();
  srv = await startServer({}, { args: ['--allow-control', 'inject'] });
  // 40 tool calls of 10 ms, one after the other, 1 s in all (ts as recorded).
  const t0 = Date.now() - 5000;
  let seq = 1;
  const e = (type, payload, ts) => ({ gm: 1, seq: seq++, ts, runId, type, payload });
  const envs = [e('run.started', { app: 'views', sdk: { name: 't', version: '0' } }, t0), e('node.started', { nodeId: 'agent:v', kind: 'agent', name: 'v', instanceId: 'a' }, t0)];
  for (let k = 0; k < 40; k++) {
    envs.push(e('node.started', { nodeId: `tool:t${k}`, kind: 'tool', name: `t${k}`, instanceId: `i${k}`, parentId: 'agent:v', input: { k } }, t0 + k * 25));
    envs.push(e('node.finished', { nodeId: `tool:t${k}`, instanceId: `i${k}`, status: 'ok', durationMs: 10, output: k }, t0 + k * 25 + 10));
  }
  envs.push(e('node.finished', { nodeId: 'agent:v', instanceId: 'a', status: 'ok', durationMs: 1000 }, t0 + 1000));
  envs.push(e('run.finished', { status: 'ok' }, t0 + 1000));
  ws = await ingest(srv.port, envs, 'views-app');
});
after(async () => {
  ws?.close();
  await closePages();
  await browser?.close();
  await srv?.stop();
});

test('timeline only hides the graph and gives the timeline the main area; dragging a range zooms to it', async () => {
  const p = await newPage(browser);
  await p.goto(`${srv.viewerUrl}&/run/${runId}`);
  await p.locator('.card[data-id="agent:v"]').waitFor();
  await p.keyboard.press('Shift+O');
  await p.locator('#main.tl-only').waitFor();
  assert.equal(await p.locator('#stage').isVisible(), false, 'the graph is hidden');
  const tl = await p.locator('#timeline').boundingBox();
  const main = await p.locator('#main').boundingBox();
  assert.ok(tl.height > main.height * 0.9, `timeline ${tl.height} of ${main.height}`);
  // every row of 41 executions fits in the taller panel
  await waitFor(async () => (await p.locator('#timeline .tl-row').count()) === 41, 5000, 'all rows drawn');
  // drag from a quarter to a half of the bar area: about 250..500 ms of the 1 s run
  const sc = await p.locator('#tl-scroll').boundingBox();
  const area = sc.width - 200;
  const y = sc.y + 100;
  await p.mouse.move(sc.x + 200 + area * 0.25, y);
  await p.mouse.down();
  await p.mouse.move(sc.x + 200 + area * 0.4, y, { steps: 4 });
  assert.equal(await p.locator('#tl-sel').isVisible(), true, 'the range is drawn while dragging');
  await p.mouse.move(sc.x + 200 + area * 0.5, y, { steps: 4 });
  await p.mouse.up();
  await waitFor(async () => /showing/.test(await p.locator('#tl-info').textContent()), 5000, 'the zoomed range');
  const info = await p.locator('#tl-info').textContent();
  const m = /showing (\d+) ms–(\d+) ms \(×([\d.]+)\)/.exec(info);
  assert.ok(m, info);
  const [a, b, zoom] = [Number(m[1]), Number(m[2]), Number(m[3])];
  assert.ok(Math.abs(a - 250) <= 30 && Math.abs(b - 500) <= 30 && zoom > 3.5 && zoom < 4.5, info);
  assert.equal(await p.locator('#inspector').isVisible(), false, 'the drag selected no row');
  // t10 (250..260 ms) starts at the left edge of the bar area now, t20 (500 ms) at the right
  const bar = async (k) => p.locator('#timeline .tl-row').filter({ hasText: new RegExp(`^t${k}$`) }).locator('.tl-bar').boundingBox();
  const b10 = await bar(10);
  assert.ok(Math.abs(b10.x - (sc.x + 200)) < area * 0.05, `t10 at ${b10.x}, area from ${sc.x + 200}`);
  await shot(p, 'timeline-only-zoomed');
  await p.locator('#tl-fit').click();
  await waitFor(async () => !/showing/.test(await p.locator('#tl-info').textContent()), 5000, 'fit');
  await p.locator('#tl-only').click();
  await p.locator('#stage').waitFor({ state: 'visible' });
  assert.equal(await p.locator('#timeline').isVisible(), true, 'the timeline stays open under the graph');
  assert.deepEqual(p.errors, []);
});

test('the run bar names this tab’s control level and the agent token’s', async () => {
  const p = await newPage(browser);
  await p.goto(`${srv.viewerUrl}&/run/${runId}`);
  const you = p.locator('#bar [data-testid=level-viewer]');
  await you.waitFor();
  assert.equal(await you.textContent(), 'this tab: viewer · full control');
  assert.match(await you.getAttribute('title'), /inject, edit input, breakpoints/);
  const agent = p.locator('#bar [data-testid=level-agent]');
  assert.equal(await agent.textContent(), 'agent token: inject');
  assert.match(await agent.getAttribute('title'), /--allow-control inject\) may continue, retry, abort, inject, breakpoints and step mode \(no input edits\)/);
  await shot(p, 'bar-levels');
  // without the token: the tab is anonymous, the agent level the same
  const q = await newPage(browser);
  await q.goto(`${srv.url}/#/run/${runId}`);
  await q.locator('#bar [data-testid=level-viewer]').waitFor();
  assert.equal(await q.locator('#bar [data-testid=level-viewer]').textContent(), 'this tab: no token · watch + release');
  assert.equal(await q.locator('#bar [data-testid=level-agent]').textContent(), 'agent token: inject');
  assert.deepEqual(p.errors, []);
});
