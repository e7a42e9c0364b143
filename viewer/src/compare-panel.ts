// Replays in the viewer: the run bar's links between a replay and its original ("replay of
// <run>", "replays: <run>, ..."), and the compare view, which puts the original and the
// replay side by side, execution by execution, from the fork point on (the rules are in
// `replay.ts`; this draws them).
import { el } from './json';
import { invalidate, S } from './store';
import type { RunModel } from './model';
import { compareRuns, type CompareRow, keysText, liveText, markText, replaysOf, shortJson } from './replay';
import { selectNode, selectRun, subscribe } from './routing';

const $ = (id: string) => document.getElementById(id)!;

/** Every run the viewer knows as a replay of another: loaded models and the rail's summaries. */
function knownReplays(): { runId: string; replayOf?: string; startedAt?: number }[] {
  const out: { runId: string; replayOf?: string; startedAt?: number }[] = [];
  for (const m of S.models.values()) if (m.replayOf) out.push({ runId: m.runId, replayOf: m.replayOf, startedAt: S.runs.get(m.runId)?.startedAt ?? m.startTs });
  for (const [id, s] of S.summaries) if (s.replayOf) out.push({ runId: id, replayOf: s.replayOf, startedAt: S.runs.get(id)?.startedAt });
  return out;
}

/** The (original, replay) pair the compare view shows for run `m`: its original when it is a
 * replay, else its newest replay. */
export function comparePair(m: RunModel): { original: string; replay: string } | undefined {
  if (m.replayOf) return { original: m.replayOf, replay: m.runId };
  const newest = replaysOf(m.runId, knownReplays())[0];
  return newest ? { original: m.runId, replay: newest } : undefined;
}

function runLink(id: string, testid: string): HTMLElement {
  if (S.embedded && !S.runs.has(id)) {
    // an exported page holds one run: the other is named, not linked
    const t = el('span', 'mono', id);
    t.dataset.testid = testid;
    return t;
  }
  const b = el('button', 'chip chip-link', id);
  b.dataset.testid = testid;
  b.dataset.runId = id;
  b.title = `Open run ${id}`;
  b.onclick = () => selectRun(id);
  return b;
}

/** The run bar's replay chips for run `m`: what it replays (and from where), the runs that
 * replay it, and the compare toggle. */
export function replayChips(m: RunModel): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (m.replayOf) {
    const c = el('span', 'chip chip-replay', 'replay of');
    c.dataset.testid = 'replay-of';
    c.append(runLink(m.replayOf, 'replay-of-link'));
    if (m.replayFrom) c.append(el('span', 'mono', `from ${m.replayFrom}`));
    out.push(c);
  }
  const replays = replaysOf(m.runId, knownReplays());
  if (replays.length) {
    const c = el('span', 'chip chip-replay', 'replays:');
    c.dataset.testid = 'replays';
    for (const id of replays) c.append(runLink(id, 'replays-link'));
    out.push(c);
  }
  if ((m.replayOf && (!S.embedded || S.runs.has(m.replayOf))) || replays.length) {
    const b = el('button', `btn small${S.compare ? ' on' : ''}`, S.compare ? 'graph' : 'compare');
    b.dataset.testid = 'compare-toggle';
    b.title = 'The original and its replay side by side, execution by execution, from the fork point on';
    b.onclick = () => toggleCompare();
    out.push(b);
  }
  return out;
}

/** Shows or hides the compare view (it takes the graph's place). */
export function toggleCompare(on = !S.compare): void {
  S.compare = on;
  $('main').classList.toggle('compare-on', S.compare);
  $('compare').hidden = !S.compare;
  invalidate({ bar: true, graph: true });
}

let stamp = '';

/** Draws the compare view of the selected run and its replay (or original). */
export function renderCompare(): void {
  const box = $('compare');
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  const pair = m && S.compare ? comparePair(m) : undefined;
  if (!m || !pair) {
    if (S.compare && m) toggleCompare(false);
    stamp = '';
    return;
  }
  for (const id of [pair.original, pair.replay]) subscribe(id);
  const o = S.models.get(pair.original)!;
  const r = S.models.get(pair.replay)!;
  const now = `${pair.original}|${o.version}|${pair.replay}|${r.version}|${S.compareAll}|${S.selectedRun}`;
  if (now === stamp) return;
  stamp = now;
  const c = compareRuns(o, r);
  box.replaceChildren();
  const head = el('div', 'cmp-head');
  head.append(el('strong', '', 'Original and replay'), runLink(pair.original, 'compare-original'), el('span', 'muted', '↔'), runLink(pair.replay, 'compare-replay'));
  if (r.replayFrom) head.append(el('span', 'mono muted', `from ${r.replayFrom}`));
  const sum = el('span', 'muted', `${c.replayed} replayed · ${c.liveCalls} live · ${c.changedOutputs} output${c.changedOutputs === 1 ? '' : 's'} differ`);
  sum.dataset.testid = 'compare-summary';
  head.append(sum);
  box.append(head);
  if (c.live) {
    const at = c.rows[c.forkIndex];
    const l = el('div', `cmp-live mark-${at.mark}`, `${markText(at.mark)}: ${liveText(c.live)}`);
    l.dataset.testid = 'compare-live';
    l.title = keysText(c.live) ?? '';
    box.append(l);
  } else if (!r.eventCount || !o.eventCount) box.append(el('div', 'muted', 'loading the two runs…'));
  else box.append(el('div', 'muted', 'the replay never went live: every call was answered from the recording'));
  const table = el('div', 'cmp-table');
  table.dataset.testid = 'compare-table';
  const hdr = el('div', 'cmp-row cmp-hdr');
  hdr.append(el('span', '', 'execution'), el('span', '', 'in the replay'), el('span', '', `original (${pair.original})`), el('span', '', `replay (${pair.replay})`), el('span', '', 'differs'));
  table.append(hdr);
  const before = c.rows.slice(0, c.forkIndex);
  if (before.length && !S.compareAll) {
    const fold = el('button', 'cmp-row cmp-fold', `▸ ${before.length} execution${before.length === 1 ? '' : 's'} before the fork point (${before.filter((x) => x.mark === 'replayed' || x.mark === 'edited').length} answered from the recording, ${before.filter((x) => x.same === false).length} with another output)`);
    fold.dataset.testid = 'compare-before';
    fold.onclick = () => ((S.compareAll = true), invalidate({ graph: true }));
    table.append(fold);
  }
  const shown = S.compareAll ? c.rows : c.rows.slice(c.forkIndex);
  shown.forEach((row) => table.append(rowEl(row, row === c.rows[c.forkIndex], pair.replay === S.selectedRun)));
  box.append(table);
}

function side(i: CompareRow['original']): string {
  if (!i) return '—';
  if (i.status === 'error') return `error · ${i.error?.name ?? 'Error'}: ${i.error?.message ?? ''}`;
  return `${i.status} · ${shortJson(i.output)}`;
}

function rowEl(row: CompareRow, fork: boolean, inReplay: boolean): HTMLElement {
  const e = el('button', `cmp-row mark-${row.mark}${fork ? ' cmp-fork' : ''}${row.same === false ? ' cmp-changed' : ''}`);
  e.dataset.testid = 'compare-row';
  e.dataset.key = row.key;
  e.dataset.mark = row.mark;
  e.dataset.same = row.same === undefined ? '' : String(row.same);
  const diffs = [...(row.inputDiffers ?? []).map((p) => `input ${p}`), ...(row.outputDiffers ?? []).map((p) => `output ${p}`)];
  e.append(
    el('span', 'mono', row.key),
    el('span', `cmp-mark mark-${row.mark}`, markText(row.mark)),
    el('span', 'mono cmp-val', side(row.original)),
    el('span', 'mono cmp-val', side(row.replay)),
    el('span', 'mono cmp-diff', row.same === true ? 'same' : diffs.length ? diffs.join(', ') : '—'),
  );
  e.title = `${row.key}: click to inspect it in this run`;
  const here = inReplay ? row.replay : row.original;
  e.onclick = () => {
    if (!here) return;
    selectNode(row.nodeId, false);
    S.selectedInstance = here.instanceId;
    invalidate({ inspector: true });
  };
  return e;
}
