// Folding for real graphs: the MCP proxy's recorded session (its protocol traffic under one
// folded "MCP protocol" card), `node.started.collapsed`, and fold by sub-agent / by chain into
// summary cards with counts, each unfolded again: on frames written to /ingest, and on a run
// the Node SDK recorded (test/fold_app.cjs: a sub-agent and two chains around wrapped calls).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NODE_SDK, nodeSdk, startServer, launch, newPage, shot, ingest, waitFor, closePages } from './harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));

let browser, srv;
before(async () => {
  browser = await launch();
  srv = await startServer();
});
after(async () => {
  await closePages();
  await browser?.close();
  await srv?.stop();
});
const card = (p, id) => p.locator(`.card[data-id="${id}"]`);

test('an MCP session recorded by the proxy: protocol traffic folded under one "MCP protocol" card, unfolded and folded again', async () => {
  const p = await newPage(browser);
  await p.goto(`${srv.url}/?fixture=mcp`);
  await card(p, 'mcp:session').waitFor();
  const proto = p.locator('.card[data-virtual=protocol]');
  await proto.waitFor();
  assert.match(await proto.locator('.card-head').textContent(), /MCP protocol4 messages/);
  assert.equal(await proto.locator('[data-testid=fold-expander]').textContent(), '▸ 4 folded');
  assert.equal(await proto.locator('[data-testid=fold-summary]').textContent(), '4 custom');
  for (const id of ['mcp:initialize', 'mcp:tools/list']) assert.equal(await card(p, id).count(), 0, `${id} is folded away`);
  for (const id of ['tool:echo', 'tool:get-sum']) await card(p, id).waitFor();
  await proto.locator('[data-testid=fold-expander]').click();
  await card(p, 'mcp:initialize').waitFor();
  await card(p, 'mcp:notifications/initialized').waitFor();
  await shot(p, 'fold-mcp-open');
  await proto.locator('[data-testid=fold-toggle]').click();
  await card(p, 'mcp:initialize').waitFor({ state: 'detached' });
  assert.deepEqual(p.errors, []);
});

test('collapsed nodes open folded; fold by sub-agent and by chain make summary cards with counts; each unfolds', async () => {
  const runId = 'run_fold000001';
  let seq = 1;
  const ts = Date.now();
  const e = (type, payload) => ({ gm: 1, seq: seq++, ts: ts + seq, runId, type, payload });
  const call = (nodeId, parentId, extra = {}, end = { status: 'ok', output: 'fine' }) => [
    e('node.started', { nodeId, kind: nodeId.split(':')[0], name: nodeId.split(':')[1], instanceId: `${nodeId}#1`, parentId, input: {}, ...extra }),
    ...(end.status === 'error' ? [e('node.error', { nodeId, instanceId: `${nodeId}#1`, error: { name: 'Boom', message: 'no' } })] : []),
    e('node.finished', { nodeId, instanceId: `${nodeId}#1`, durationMs: 3, ...end }),
  ];
  const envs = [
    e('run.started', { app: 'folds', sdk: { name: 't', version: '0' } }),
    e('node.started', { nodeId: 'agent:top', kind: 'agent', name: 'top', instanceId: 'top#1', input: {} }),
    e('node.started', { nodeId: 'agent:research', kind: 'agent', name: 'research', instanceId: 'r#1', parentId: 'agent:top', input: {} }),
    ...call('tool:search', 'agent:research'),
    ...call('tool:fetch', 'agent:research'),
    ...call('llm:summarise', 'agent:research'),
    e('node.finished', { nodeId: 'agent:research', instanceId: 'r#1', durationMs: 20, status: 'ok' }),
    e('node.started', { nodeId: 'chain:pipe', kind: 'chain', name: 'pipe', instanceId: 'c#1', parentId: 'agent:top', input: {} }),
    ...call('llm:draft', 'chain:pipe'),
    ...call('tool:check', 'chain:pipe', {}, { status: 'error' }),
    e('node.finished', { nodeId: 'chain:pipe', instanceId: 'c#1', durationMs: 20, status: 'ok' }),
    e('node.started', { nodeId: 'tool:bulk', kind: 'tool', name: 'bulk', instanceId: 'b#1', parentId: 'agent:top', input: {}, collapsed: true }),
    ...call('tool:part1', 'tool:bulk'),
    ...call('tool:part2', 'tool:bulk'),
    e('node.finished', { nodeId: 'tool:bulk', instanceId: 'b#1', durationMs: 9, status: 'ok' }),
  ];
  const ws = await ingest(srv.port, envs, 'folds-app');
  const p = await newPage(browser);
  await p.goto(`${srv.viewerUrl}&/run/${runId}`);
  await card(p, 'tool:search').waitFor();
  // collapsed: true — folded from the start, with its summary
  const bulk = card(p, 'tool:bulk');
  assert.equal(await bulk.locator('[data-testid=fold-expander]').textContent(), '▸ 2 folded');
  assert.equal(await bulk.locator('[data-testid=fold-summary]').textContent(), '2 tool');
  assert.equal(await card(p, 'tool:part1').count(), 0);
  // fold by sub-agent: research folds, the top agent stays open
  await p.keyboard.press('Shift+G');
  await card(p, 'tool:search').waitFor({ state: 'detached' });
  const research = card(p, 'agent:research');
  assert.equal(await research.locator('[data-testid=fold-expander]').textContent(), '▸ 3 folded');
  assert.equal(await research.locator('[data-testid=fold-summary]').textContent(), '2 tool · 1 llm');
  assert.equal(await card(p, 'agent:top').locator('[data-testid=fold-toggle]').count(), 1, 'the top agent is open');
  await card(p, 'llm:draft').waitFor();
  // fold by chain (from the palette)
  await p.keyboard.press('>');
  await p.locator('#pal-input').fill('>fold every chain');
  await p.keyboard.press('Enter');
  await card(p, 'llm:draft').waitFor({ state: 'detached' });
  assert.equal(await card(p, 'chain:pipe').locator('[data-testid=fold-summary]').textContent(), '1 llm · 1 tool · 1 error');
  await p.waitForTimeout(400); // the cards' slide to their new places
  await shot(p, 'fold-summaries');
  // a live node under the folded chain updates its summary
  ws.send(JSON.stringify(e('node.started', { nodeId: 'tool:late', kind: 'tool', name: 'late', instanceId: 'l#1', parentId: 'chain:pipe', input: {} })));
  await waitFor(async () => (await card(p, 'chain:pipe').locator('[data-testid=fold-summary]').textContent()) === '2 tool · 1 llm · 1 error · 1 running', 5000, 'the live summary');
  // unfold each
  await research.locator('[data-testid=fold-expander]').click();
  await card(p, 'tool:search').waitFor();
  await bulk.locator('[data-testid=fold-expander]').click();
  await card(p, 'tool:part2').waitFor();
  ws.close();
  assert.deepEqual(p.errors, []);
});

test('a run the Node SDK recorded: fold by sub-agent and by chain, the summaries, each unfolded', async () => {
  nodeSdk();
  const app = spawn(process.execPath, [join(here, 'fold_app.cjs')], { env: { ...process.env, GM_NODE_SDK: NODE_SDK, GRAPHMIND_URL: `ws://127.0.0.1:${srv.port}/ingest`, GRAPHMIND_TELEMETRY: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  app.stdout.on('data', (d) => (out += d));
  app.stderr.on('data', (d) => (err += d));
  const code = await new Promise((r) => app.on('exit', r));
  assert.equal(code, 0, err);
  const runId = /run (\S+)/.exec(out)[1];
  const p = await newPage(browser);
  await p.goto(`${srv.viewerUrl}&/run/${runId}`);
  for (const id of ['agent:planner', 'agent:researcher', 'chain:lookup', 'tool:search', 'tool:fetch', 'retriever:docs', 'chain:finalize', 'tool:book']) await card(p, id).waitFor();
  await shot(p, 'fold-sdk-open');
  await p.keyboard.press('Shift+G');
  await card(p, 'tool:search').waitFor({ state: 'detached' });
  const researcher = card(p, 'agent:researcher');
  assert.equal(await researcher.locator('[data-testid=fold-expander]').textContent(), '▸ 4 folded');
  assert.equal(await researcher.locator('[data-testid=fold-summary]').textContent(), '2 tool · 1 chain · 1 retriever');
  assert.equal(await card(p, 'agent:planner').locator('[data-testid=fold-toggle]').count(), 1, 'the top agent is open');
  await card(p, 'tool:book').waitFor();
  await p.keyboard.press('Shift+H');
  await card(p, 'tool:book').waitFor({ state: 'detached' });
  assert.equal(await card(p, 'chain:finalize').locator('[data-testid=fold-summary]').textContent(), '1 tool');
  await p.waitForTimeout(400); // the cards' slide to their new places
  await shot(p, 'fold-sdk-summaries');
  await researcher.locator('[data-testid=fold-expander]').click();
  await card(p, 'chain:lookup').waitFor();
  await card(p, 'chain:lookup').locator('[data-testid=fold-expander]').click();
  await card(p, 'tool:fetch').waitFor();
  await card(p, 'chain:finalize').locator('[data-testid=fold-expander]').click();
  await card(p, 'tool:book').waitFor();
  // the same run on the timeline, alone: one row per execution, each bar inside its parent's
  await p.keyboard.press('Shift+O');
  await waitFor(async () => (await p.locator('#timeline .tl-row').count()) === 8, 5000, 'eight rows');
  const span = async (name) => {
    const b = await p.locator('#timeline .tl-row').filter({ hasText: new RegExp(`^${name}$`) }).locator('.tl-bar').boundingBox();
    return [b.x, b.x + b.width];
  };
  const [rs, re] = await span('researcher');
  const [ss, se] = await span('search');
  assert.ok(ss >= rs - 1 && se <= re + 1, `search [${ss}, ${se}] inside researcher [${rs}, ${re}]`);
  await shot(p, 'fold-sdk-timeline');
  await p.keyboard.press('Shift+O');
  assert.deepEqual(p.errors, []);
});
