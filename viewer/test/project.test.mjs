// The pure rules behind folding and stream trust (Node, no browser): the run card over several
// roots, the MCP protocol card, `collapsed` folded once, fold by sub-agent / chain, the fold
// summary, a parentId naming an execution, and where a gap marker falls.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { buildLib } from '../bench/build-lib.mjs';

let L;
before(async () => { L = await import(await buildLib()); });

function run(envs) {
  const m = L.newRun('run_t');
  let seq = 1;
  for (const [type, payload, ts] of envs) L.apply(m, { gm: 1, seq: seq++, ts: ts ?? seq, runId: 'run_t', type, payload });
  return m;
}
const start = (nodeId, parentId, extra = {}) => ['node.started', { nodeId, kind: nodeId.split(':')[0], name: nodeId.split(':')[1], instanceId: `${nodeId}#1`, parentId, ...extra }];
const end = (nodeId) => ['node.finished', { nodeId, instanceId: `${nodeId}#1`, status: 'ok', durationMs: 1 }];

test('one root: no run card; several roots: one run card over them, in call order', () => {
  const one = L.buildTree(run([start('agent:a'), start('tool:x', 'agent:a'), end('tool:x'), end('agent:a')]));
  assert.deepEqual(one.roots, ['agent:a']);
  assert.equal(one.virtual.size, 0);
  const m = run([start('tool:b'), end('tool:b'), start('llm:c'), end('llm:c'), start('tool:a'), end('tool:a')]);
  const t = L.buildTree(m);
  assert.deepEqual(t.roots, [L.RUN_ROOT]);
  assert.deepEqual(t.children.get(L.RUN_ROOT), ['tool:b', 'llm:c', 'tool:a']);
  assert.equal(t.descendants.get(L.RUN_ROOT), 3);
  assert.equal(t.parent.get('llm:c'), L.RUN_ROOT);
});

test('a parentId that names an execution (the C ABI) is that execution\'s node', () => {
  const m = run([start('llm:draft'), ['node.started', { nodeId: 'tool:check', kind: 'tool', name: 'check', instanceId: 'i2', parentId: 'llm:draft#1' }]]);
  assert.equal(m.nodes.get('tool:check').parentId, 'llm:draft');
  // an unknown id stays as it is (its node may arrive later)
  const late = run([['node.started', { nodeId: 'tool:x', kind: 'tool', name: 'x', instanceId: 'i', parentId: 'agent:later' }]]);
  assert.equal(late.nodes.get('tool:x').parentId, 'agent:later');
});

test('MCP protocol traffic goes under one folded protocol card; tools stay under the session; reveal opens it', () => {
  const m = run([
    ['node.started', { nodeId: 'mcp:session', kind: 'server', name: 'srv', instanceId: 's' }],
    start('mcp:initialize', 'mcp:session', { kind: 'custom', name: 'initialize' }),
    start('tool:echo', 'mcp:session'),
    start('mcp:tools/list', 'mcp:session', { kind: 'custom', name: 'tools/list' }),
  ]);
  const t = L.buildTree(m);
  const g = L.PROTOCOL_PREFIX + 'mcp:session';
  assert.deepEqual(t.children.get('mcp:session'), [g, 'tool:echo']);
  assert.deepEqual(t.children.get(g), ['mcp:initialize', 'mcp:tools/list']);
  const f = L.initialFolds(t, m.nodes.size, m);
  assert.equal(L.isOpen(f, g), false);
  const p = L.project(m, f, t);
  assert.deepEqual(p.visible, ['mcp:session', g, 'tool:echo']);
  assert.equal(p.folded.get(g), 2);
  L.reveal(f, m, 'mcp:initialize');
  assert.equal(L.isOpen(f, g), true);
  // once unfolded, the defaults do not fold it again
  L.foldDefaults(f, t, m);
  assert.equal(L.isOpen(f, g), true);
});

test('collapsed: true folds once; fold by sub-agent leaves the top agent; fold by chain; summaries count by kind', () => {
  const m = run([
    start('agent:top'),
    start('agent:sub', 'agent:top'), start('tool:a', 'agent:sub'), end('tool:a'), start('llm:b', 'agent:sub'), end('llm:b'),
    start('chain:c', 'agent:top'), start('tool:d', 'chain:c'),
    start('tool:bulk', 'agent:top', { collapsed: true }), start('tool:part', 'tool:bulk'),
  ]);
  const t = L.buildTree(m);
  const f = L.initialFolds(t, m.nodes.size, m);
  assert.equal(L.isOpen(f, 'tool:bulk'), false);
  assert.equal(L.isOpen(f, 'agent:sub'), true);
  assert.equal(L.foldKind(f, t, m, 'agent'), 1);
  assert.equal(L.isOpen(f, 'agent:top'), true);
  assert.equal(L.isOpen(f, 'agent:sub'), false);
  assert.equal(L.foldKind(f, t, m, 'chain'), 1);
  assert.equal(L.isOpen(f, 'chain:c'), false);
  const s = L.foldSummary(t, m, 'agent:sub');
  assert.deepEqual([...s.kinds].sort(), [['llm', 1], ['tool', 1]]);
  assert.equal(L.foldSummary(t, m, 'chain:c').running, 1);
  L.setOpen(f, 'tool:bulk', true);
  L.foldDefaults(f, t, m);
  assert.equal(L.isOpen(f, 'tool:bulk'), true, 'the user unfolded it: it stays open');
});

test('a gap marker is placed between the events around it, live (before them) or stored (after them)', () => {
  const gap = { droppedCount: 3, fromSeq: 3, toSeq: 5, reason: 'buffer-overflow' };
  // stored order: events 1, 2, 6, 7, then the marker (fresh seq 8)
  const m = L.newRun('r');
  for (const [seq, ts] of [[1, 100], [2, 200], [6, 600], [7, 700]]) L.apply(m, { gm: 1, seq, ts, runId: 'r', type: 'node.started', payload: { nodeId: `tool:t${seq}`, kind: 'tool', name: 't', instanceId: `i${seq}` } });
  L.apply(m, { gm: 1, seq: 8, ts: 900, runId: 'r', type: 'graph.hint', payload: { nodes: [], gap } });
  assert.deepEqual(m.gapList.map((g) => [g.dropped, g.fromSeq, g.toSeq, g.beforeTs, g.afterTs]), [[3, 3, 5, 200, 600]]);
  assert.equal(m.gaps, 3);
  // live order: the marker first, the survivors after it
  const n = L.newRun('r');
  L.apply(n, { gm: 1, seq: 8, ts: 900, runId: 'r', type: 'graph.hint', payload: { nodes: [], gap } });
  for (const [seq, ts] of [[6, 600], [7, 700]]) L.apply(n, { gm: 1, seq, ts, runId: 'r', type: 'node.started', payload: { nodeId: `tool:t${seq}`, kind: 'tool', name: 't', instanceId: `i${seq}` } });
  assert.deepEqual(n.gapList.map((g) => [g.beforeTs, g.afterTs]), [[undefined, 600]]);
});
