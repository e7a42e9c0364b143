// Replays, as data (docs/replay.md): which runs replay which, what a replayed execution is
// (answered from the recording, answered with the edited output, where the replay went
// live and why), and the two runs aligned execution by execution for the compare view.
// Pure: no DOM, so Node tests and the benchmark use it as the panels do.
import type { GNode, Instance, ReplayLive, RunModel } from './model';
import { stableJson } from './why';

/** At most this many differing paths listed for one pair of outputs. */
export const MAX_DIFF_PATHS = 8;
/** A value longer than this (as JSON) is shown cut, with an ellipsis. */
export const MAX_SHOWN_CHARS = 160;
/** The kinds a replay answers; other nodes (agents, chains, spans) always run their own code. */
export const REPLAYABLE_KINDS = ['tool', 'llm'];

/**
 * What the replay did with one execution:
 * - `replayed`: answered from the recording, nothing ran;
 * - `edited`: answered with the edited output (the call just before the fork point);
 * - `fork`, `diverged`, `unrecorded`, `unfinished`, `unsupported`: the call where it went
 *   live, and why (`replayLive.reason`);
 * - `live`: a tool or model call after that, run for real;
 * - `own-code`: an agent, chain or span, which runs its own code in a replay too;
 * - `not-run`: in the original only (the replay never got there, or took another path).
 */
export type Mark = 'replayed' | 'edited' | 'fork' | 'diverged' | 'unrecorded' | 'unfinished' | 'unsupported' | 'live' | 'own-code' | 'not-run';

/** The mark of one execution of a replay run. */
export function markOf(n: GNode, i: Instance): Mark {
  if (i.replayEdited) return 'edited';
  if (i.replayed) return 'replayed';
  if (i.replayLive) return (['fork', 'diverged', 'unrecorded', 'unfinished', 'unsupported'] as const).find((r) => r === i.replayLive!.reason) ?? 'live';
  return REPLAYABLE_KINDS.includes(n.kind) ? 'live' : 'own-code';
}

/** Words for a mark, as the card, the inspector and the compare view write it. */
export function markText(m: Mark): string {
  switch (m) {
    case 'replayed':
      return 'replayed';
    case 'edited':
      return 'replayed · edited output';
    case 'fork':
      return 'live from the fork point';
    case 'diverged':
      return 'diverged: live from here';
    case 'unrecorded':
      return 'live: not in the recording';
    case 'unfinished':
      return 'live: unfinished in the recording';
    case 'unsupported':
      return 'live: replay cannot answer this call';
    case 'live':
      return 'live';
    case 'own-code':
      return 'ran its own code';
    case 'not-run':
      return 'not run in the replay';
  }
}

/** The card's replay marker for a node of a replay run (the last execution's mark: a short
 * label, the words as its title), or undefined when the run is no replay or the node ran live
 * as any other. */
export function cardMark(m: RunModel, n: GNode): { mark: Mark; text: string; title: string } | undefined {
  if (!m.replayOf) return undefined;
  const last = n.instances[n.instances.length - 1];
  if (!last) return undefined;
  const k = markOf(n, last);
  if (k === 'own-code' || k === 'live') return undefined;
  const replayed = n.instances.filter((i) => i.replayed).length;
  const text = k === 'replayed' ? `↺ replayed${replayed > 1 ? ` ×${replayed}` : ''}` : k === 'edited' ? '↺ edited' : k === 'fork' || k === 'diverged' ? `⚡ ${k}` : '⚡ live';
  return { mark: k, text, title: last.replayLive ? `${markText(k)}: ${liveText(last.replayLive)}` : markText(k) };
}

/** "match key recorded 5f0c… · live a91e…" for a divergence that carries its keys. */
export function keysText(l: ReplayLive): string | undefined {
  return l.recordedKey && l.liveKey ? `match key recorded ${l.recordedKey} · live ${l.liveKey}` : undefined;
}

/** "went live at tool:book#1 (diverged) · differs: input.passenger" for a `replayLive` record. */
export function liveText(l: ReplayLive): string {
  const why = l.reason === 'fork' ? 'the fork point' : l.reason;
  return `went live at ${l.at || 'this call'} (${why})${l.differs?.length ? ` · differs: ${l.differs.join(', ')}` : ''}`;
}

/** The ids of the runs that replay `runId`, newest first, from what the viewer holds: the
 * loaded runs' models and the rail's summaries (`replayOf` read from `run.started.meta`). */
export function replaysOf(runId: string, known: Iterable<{ runId: string; replayOf?: string; startedAt?: number }>): string[] {
  const out = new Map<string, number>();
  for (const r of known) if (r.replayOf === runId && r.runId !== runId) out.set(r.runId, Math.max(out.get(r.runId) ?? 0, r.startedAt ?? 0));
  return [...out.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? 1 : -1)).map(([id]) => id);
}

/** One execution of a node in both runs: the `n`-th (from 1, in start order) of `nodeId`. */
export interface CompareRow {
  /** `<nodeId>#<n>`, the numbering `--from` and `replayLive.at` use. */
  key: string;
  nodeId: string;
  kind: string;
  name: string;
  n: number;
  original?: Instance;
  replay?: Instance;
  mark: Mark;
  /** Status and output (or error) equal in both runs; undefined when one side is missing. */
  same?: boolean;
  /** Paths where the outputs (or errors) differ, at most `MAX_DIFF_PATHS`. */
  outputDiffers?: string[];
  /** The inputs' differing paths the core recorded where the replay diverged. */
  inputDiffers?: string[];
}

/** The two runs aligned, and where the replay left the recording. */
export interface Comparison {
  rows: CompareRow[];
  /** Index of the first row from the fork point on (the first live call), or rows.length. */
  forkIndex: number;
  /** The first live call's record (`replayLive`), when the replay went live. */
  live?: ReplayLive;
  replayed: number;
  liveCalls: number;
  changedOutputs: number;
}

/** A call's outcome as one comparable value. */
function outcome(i: Instance): unknown {
  return i.status === 'error' ? { error: { name: i.error?.name, message: i.error?.message } } : { status: i.status, output: i.output };
}

/** Paths (`output.flights[0].price`) where `a` and `b` differ, at most `max`. */
export function diffPaths(a: unknown, b: unknown, path = '', max = MAX_DIFF_PATHS, out: string[] = []): string[] {
  if (out.length >= max) return out;
  const isObj = (v: unknown) => v !== null && typeof v === 'object';
  if (isObj(a) && isObj(b) && Array.isArray(a) === Array.isArray(b)) {
    const keys = Array.isArray(a) ? [...Array(Math.max(a.length, (b as unknown[]).length)).keys()].map(String) : [...new Set([...Object.keys(a as object), ...Object.keys(b as object)])].sort();
    for (const k of keys) {
      const sub = Array.isArray(a) ? `${path}[${k}]` : path ? `${path}.${k}` : k;
      diffPaths((a as any)[k], (b as any)[k], sub, max, out);
      if (out.length >= max) break;
    }
    return out;
  }
  if (stableJson(a) !== stableJson(b)) out.push(path || '(the value)');
  return out;
}

/** `v` as short JSON for a table cell. */
export function shortJson(v: unknown): string {
  const s = v === undefined ? '—' : typeof v === 'string' ? v : stableJson(v);
  return s.length > MAX_SHOWN_CHARS ? `${s.slice(0, MAX_SHOWN_CHARS - 1)}…` : s;
}

/** The executions of `original` and `replay` aligned per node and per-node order, in the
 * replay's start order (executions only the original has come last, in its order). */
export function compareRuns(original: RunModel, replay: RunModel): Comparison {
  const rows: CompareRow[] = [];
  const order = (i: Instance) => i.startSeq ?? i.startTs;
  const ids = new Set([...replay.nodes.keys(), ...original.nodes.keys()]);
  for (const id of ids) {
    const r = replay.nodes.get(id);
    const o = original.nodes.get(id);
    const node = (r ?? o)!;
    const count = Math.max(r?.instances.length ?? 0, o?.instances.length ?? 0);
    for (let k = 0; k < count; k++) {
      const ri = r?.instances[k];
      const oi = o?.instances[k];
      const row: CompareRow = { key: `${id}#${k + 1}`, nodeId: id, kind: node.kind, name: node.name, n: k + 1, original: oi, replay: ri, mark: ri ? markOf(r!, ri) : 'not-run' };
      if (ri && oi && ri.status !== 'running' && oi.status !== 'running') {
        row.outputDiffers = diffPaths(outcome(oi), outcome(ri));
        row.same = row.outputDiffers.length === 0;
      }
      if (ri?.replayLive?.differs) row.inputDiffers = ri.replayLive.differs;
      rows.push(row);
    }
  }
  rows.sort((a, b) => {
    if (a.replay && b.replay) return order(a.replay) - order(b.replay);
    if (a.replay || b.replay) return a.replay ? -1 : 1;
    return order(a.original!) - order(b.original!);
  });
  let forkIndex = rows.findIndex((x) => x.replay?.replayLive);
  if (forkIndex < 0) forkIndex = rows.findIndex((x) => x.mark === 'live');
  if (forkIndex < 0) forkIndex = rows.length;
  return {
    rows,
    forkIndex,
    live: rows[forkIndex]?.replay?.replayLive,
    replayed: rows.filter((x) => x.mark === 'replayed' || x.mark === 'edited').length,
    liveCalls: rows.filter((x) => x.replay && REPLAYABLE_KINDS.includes(x.kind) && !x.replay.replayed).length,
    changedOutputs: rows.filter((x) => x.same === false).length,
  };
}
