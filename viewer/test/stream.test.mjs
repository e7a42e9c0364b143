// Stream trust on a real server: a gap the Node SDK really lost (buffer of 20 events, no
// server while it ran), "behind N s" for live events that arrive late, "catching up" while a
// stored run replays, and the "imported" badge on a run `graphmind import` stored.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN, NODE_SDK, startServer, launch, newPage, shot, ingest, waitFor, closePages } from './harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
let browser;
const servers = [];
after(async () => {
  await closePages();
  await browser?.close();
  for (const s of servers) await s.stop();
});
async function server(env, opts) {
  const s = await startServer(env, opts);
  servers.push(s);
  return s;
}
async function page() {
  browser ??= await launch();
  return newPage(browser);
}
function freePort() {
  return new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

test('a gap the Node SDK lost reads "N events lost between seq a and b", in the bar, over the graph and on the timeline', async () => {
  assert.ok(NODE_SDK, 'no built Node SDK in bindings/node (make test-node builds it; GM_NODE_SDK names another)');
  const port = await freePort();
  const app = spawn(process.execPath, [join(here, 'gap_app.cjs')], { env: { ...process.env, GM_NODE_SDK: NODE_SDK, GRAPHMIND_URL: `ws://127.0.0.1:${port}/ingest`, GRAPHMIND_TELEMETRY: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  app.stdout.on('data', (d) => (out += d));
  app.stderr.on('data', (d) => (err += d));
  const exited = new Promise((r) => app.on('exit', r));
  await waitFor(() => out.includes('emitted'), 15000, `the app's offline calls (${err})`);
  const srv = await server({}, { port });
  assert.equal(await exited, 0, err);
  const runId = /run (\S+)/.exec(out)[1];
  // The marker as the server stored it: what the viewer must show.
  const events = await waitFor(async () => {
    const r = await (await fetch(`${srv.url}/api/runs/${runId}/events?limit=1000`)).json();
    return r.events?.some((e) => e.type === 'run.finished') && r.events;
  }, 15000, 'the run stored');
  const gaps = events.filter((e) => e.type === 'graph.hint' && e.payload.gap).map((e) => e.payload.gap);
  assert.equal(gaps.length, 1, JSON.stringify(gaps));
  const g = gaps[0];
  assert.ok(g.droppedCount > 50 && g.toSeq - g.fromSeq + 1 === g.droppedCount, JSON.stringify(g));
  const p = await page();
  await p.goto(`${srv.viewerUrl}&/run/${runId}`);
  const line = `${g.droppedCount} events lost between seq ${g.fromSeq} and ${g.toSeq}`;
  await p.locator('[data-testid=gap-line]').waitFor();
  assert.equal(await p.locator('[data-testid=gap-line]').textContent(), `⚠ ${line}`);
  assert.equal(await p.locator('#bar [data-testid=gap-chip]').textContent(), `${g.droppedCount} events lost`);
  assert.match(await p.locator('#bar [data-testid=gap-chip]').getAttribute('title'), new RegExp(line));
  await p.keyboard.press('Shift+T');
  const mark = p.locator('#timeline [data-testid=tl-gap]');
  await mark.waitFor();
  assert.equal(await mark.getAttribute('title'), line);
  // The lost events are the oldest (the run's start among them): the marker sits at the first
  // event that survived them, at or before every bar.
  const x = (await mark.boundingBox()).x;
  const bars = await p.locator('#timeline .tl-bar').evaluateAll((els) => els.map((e) => e.getBoundingClientRect().x));
  assert.ok(bars.length >= 3 && bars.every((b) => b >= x - 1), `marker at ${x}, bars ${bars.join(',')}`);
  await shot(p, 'stream-gap');
  assert.deepEqual(p.errors, []);
});

test('live events that arrive late read "behind N s" until a current one arrives', async () => {
  const srv = await server();
  const runId = 'run_behind0001';
  let seq = 1;
  const env = (type, payload, ts = Date.now()) => ({ gm: 1, seq: seq++, ts, runId, type, payload });
  const ws = await ingest(srv.port, [env('run.started', { app: 'late', sdk: { name: 't', version: '0' } }), env('node.started', { nodeId: 'agent:late', kind: 'agent', name: 'late', instanceId: 'a1' })], 'late-app');
  const p = await page();
  await p.goto(`${srv.viewerUrl}&/run/${runId}`);
  await p.locator('.card[data-id="agent:late"]').waitFor();
  assert.equal(await p.locator('[data-testid=behind]').count(), 0, 'current events: not behind');
  ws.send(JSON.stringify(env('node.started', { nodeId: 'tool:t', kind: 'tool', name: 't', instanceId: 't1', parentId: 'agent:late' }, Date.now() - 6000)));
  await p.locator('[data-testid=behind]').waitFor({ timeout: 5000 });
  assert.match(await p.locator('[data-testid=behind]').textContent(), /^behind [67] s$/);
  await shot(p, 'stream-behind');
  ws.send(JSON.stringify(env('node.finished', { nodeId: 'tool:t', instanceId: 't1', status: 'ok', durationMs: 1 })));
  await p.locator('[data-testid=behind]').waitFor({ state: 'detached', timeout: 5000 });
  ws.close();
  assert.deepEqual(p.errors, []);
});

test('a stored run replays with "catching up · k / N events", then the chip goes', async () => {
  const srv = await server();
  const runId = 'run_catchup001';
  const N = 6000;
  const envs = [{ gm: 1, seq: 1, ts: Date.now(), runId, type: 'run.started', payload: { app: 'big', sdk: { name: 't', version: '0' } } }];
  envs.push({ gm: 1, seq: 2, ts: Date.now(), runId, type: 'node.started', payload: { nodeId: 'agent:big', kind: 'agent', name: 'big', instanceId: 'a' } });
  for (let k = 0; envs.length < N - 1; k++) {
    envs.push({ gm: 1, seq: envs.length + 1, ts: Date.now(), runId, type: 'node.started', payload: { nodeId: `tool:t${k % 50}`, kind: 'tool', name: `t${k % 50}`, instanceId: `i${k}`, parentId: 'agent:big', input: { k } } });
    envs.push({ gm: 1, seq: envs.length + 1, ts: Date.now(), runId, type: 'node.finished', payload: { nodeId: `tool:t${k % 50}`, instanceId: `i${k}`, status: 'ok', durationMs: 1, output: k } });
  }
  envs.push({ gm: 1, seq: envs.length + 1, ts: Date.now(), runId, type: 'run.finished', payload: { status: 'ok' } });
  const ws = await ingest(srv.port, envs, 'big-app');
  await waitFor(async () => (await (await fetch(`${srv.url}/api/runs`)).json()).runs?.find((r) => r.id === runId && r.eventCount === envs.length), 30000, 'the run stored');
  ws.close();
  const p = await page();
  // Every text the chip shows, recorded as the DOM changes (a replay is over in well under a second).
  await p.addInitScript(() => {
    window.__catching = [];
    new MutationObserver(() => {
      const c = document.querySelector('[data-testid=catching-up]');
      if (c && window.__catching.at(-1) !== c.textContent) window.__catching.push(c.textContent);
    }).observe(document, { subtree: true, childList: true, characterData: true });
  });
  await p.goto(`${srv.viewerUrl}&/run/${runId}`);
  await p.locator('.card[data-id="agent:big"]').waitFor();
  await p.locator('[data-testid=catching-up]').waitFor({ state: 'detached' });
  const seen = await p.evaluate(() => window.__catching);
  assert.ok(seen.length >= 1, 'the chip was drawn during the replay');
  console.log(`catching-up texts: ${seen.join(' | ')}`);
  for (const s of seen) assert.match(s, new RegExp(`^catching up · [\\d,]+ / ${envs.length.toLocaleString('en-US')} events$`));
  assert.equal(await p.locator('#bar').getByText(`${envs.length.toLocaleString('en-US')} events`).count(), 0);
  await shot(p, 'stream-caught-up');
  assert.deepEqual(p.errors, []);
});

test('a run stored by `graphmind import` carries an "imported" badge in the rail and the bar; a live one does not', async () => {
  const srv = await server();
  const ws = await ingest(srv.port, [
    { gm: 1, seq: 1, ts: Date.now(), runId: 'run_live000001', type: 'run.started', payload: { app: 'live-app', sdk: { name: 't', version: '0' } } },
    { gm: 1, seq: 2, ts: Date.now(), runId: 'run_live000001', type: 'run.finished', payload: { status: 'ok' } },
  ]);
  const file = join(srv.home, '..', 'trace.otlp.json');
  const span = (id, parent, name, op, a, b) => ({ traceId: 't', spanId: id, ...(parent ? { parentSpanId: parent } : {}), name, startTimeUnixNano: `${a}000000000`, endTimeUnixNano: `${b}000000000`, attributes: [{ key: 'gen_ai.operation.name', value: { stringValue: op } }, ...(op === 'invoke_agent' ? [{ key: 'gen_ai.agent.name', value: { stringValue: 'planner' } }] : [])] });
  writeFileSync(file, JSON.stringify({ resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'traced-svc' } }] }, scopeSpans: [{ spans: [span('a', null, 'agent', 'invoke_agent', 1, 5), span('b', 'a', 'chat', 'chat', 2, 3)] }] }] }));
  const o = spawnSync(BIN, ['import', file, '--db', srv.db], { encoding: 'utf8', env: { ...process.env, GRAPHMIND_HOME: srv.home, GRAPHMIND_TELEMETRY: '0' } });
  assert.equal(o.status, 0, o.stderr);
  const id = /as run (imp_[0-9a-f]+)/.exec(o.stdout)[1];
  await waitFor(async () => (await (await fetch(`${srv.url}/api/runs`)).json()).runs?.find((r) => r.id === 'run_live000001'), 10000, 'the live run');
  ws.close();
  const p = await page();
  await p.goto(`${srv.viewerUrl}&/run/${id}`);
  const item = p.locator(`.run-item[data-run-id="${id}"]`);
  await item.locator('[data-testid=imported]').waitFor();
  assert.equal(await p.locator('.run-item[data-run-id="run_live000001"] [data-testid=imported]').count(), 0);
  await p.locator('#bar [data-testid=imported]').waitFor();
  await p.locator('.card[data-id="agent:planner"]').waitFor();
  await shot(p, 'stream-imported');
  assert.deepEqual(p.errors, []);
});
