// A run recorded through the real C ABI (libgraphmind.so, test/c_run.c compiled with cc):
// the C ABI records no root node, so the viewer draws the run as the root, its top-level
// calls under it in call order, and a call whose parent is given under that parent.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { viewerDir, startServer, launch, newPage, shot, geometry, overlaps, waitFor, closePages } from './harness.mjs';

// libgraphmind.so and its header: this tree's release build (`make test-viewer` builds it;
// GM_C_ROOT names another checkout's).
const ROOT = process.env.GM_C_ROOT ?? resolve(viewerDir, '..');
let browser, srv;
after(async () => {
  await closePages();
  await browser?.close();
  await srv?.stop();
});

test('a C-ABI run with no root reads as a graph: the run as root, its calls in call order', async () => {
  assert.ok(existsSync(join(ROOT, 'target/release/libgraphmind.so')), `no ${ROOT}/target/release/libgraphmind.so: run cargo build --release -p graphmind-ffi (make test-viewer does)`);
  const exe = join(mkdtempSync(join(tmpdir(), 'gm-c-')), 'c_run');
  const cc = spawnSync('cc', ['-std=c99', '-Wall', '-Wextra', '-Werror', '-pedantic', '-I', join(ROOT, 'include'), join(viewerDir, 'test/c_run.c'), '-o', exe, '-L', join(ROOT, 'target/release'), '-lgraphmind'], { encoding: 'utf8' });
  assert.equal(cc.status, 0, cc.stderr);
  srv = await startServer();
  const env = { PATH: process.env.PATH, LD_LIBRARY_PATH: join(ROOT, 'target/release'), GRAPHMIND_URL: `ws://127.0.0.1:${srv.port}/ingest`, GRAPHMIND_TELEMETRY: '0' };
  const run = spawnSync(exe, [], { encoding: 'utf8', env, timeout: 30000 });
  assert.equal(run.status, 0, run.stderr);
  const runId = /RUN (\S+)/.exec(run.stdout)[1];
  const events = await waitFor(async () => {
    const r = await (await fetch(`${srv.url}/api/runs/${runId}/events`)).json();
    return r.events?.some((e) => e.type === 'run.finished') && r.events;
  }, 10000, 'the C run stored');
  // What the C ABI recorded: no parentId at the top level, and the parent's *instance* id
  // (not its node id, as docs/protocol.md has it) on the nested call.
  const started = events.filter((e) => e.type === 'node.started').map((e) => [e.payload.nodeId, e.payload.parentId ?? null]);
  assert.deepEqual(started, [['tool:search', null], ['llm:draft', null], ['tool:check', events.find((e) => e.type === 'node.started' && e.payload.nodeId === 'llm:draft').payload.instanceId], ['tool:save', null]]);
  browser = await launch();
  const p = await newPage(browser);
  await p.goto(`${srv.viewerUrl}&/run/${runId}`);
  const root = p.locator('.card[data-virtual=run]');
  await root.waitFor();
  assert.match(await root.locator('.card-head').textContent(), /run\s*c-app/);
  assert.match(await root.textContent(), /3 top-level nodes, in call order/);
  for (const id of ['tool:search', 'llm:draft', 'tool:check', 'tool:save']) await p.locator(`.card[data-id="${id}"]`).waitFor();
  // Edges: run -> each top-level call, draft -> check.
  const edges = await p.locator('#edges path').evaluateAll((ps) => ps.map((q) => `${q.dataset.from}>${q.dataset.to}`).sort());
  assert.deepEqual(edges, ['llm:draft>tool:check', '⟨run⟩>llm:draft', '⟨run⟩>tool:save', '⟨run⟩>tool:search']);
  // Call order left to right under the run.
  const x = async (id) => (await p.locator(`.card[data-id="${id}"]`).boundingBox()).x;
  const xs = [await x('tool:search'), await x('llm:draft'), await x('tool:save')];
  assert.ok(xs[0] < xs[1] && xs[1] < xs[2], `call order: ${xs}`);
  await p.waitForTimeout(400);
  assert.equal(overlaps((await geometry(p)).cards).length, 0);
  assert.equal(await p.locator('#foldinfo').textContent(), '4 of 4 nodes shown');
  await shot(p, 'c-abi-run');
  assert.deepEqual(p.errors, []);
});
