// Stream trust: is what the viewer shows complete and current? Four signals, per run:
// "catching up" while the server replays a run's history, "behind N s" when live events
// arrive late, one line per gap marker ("N events lost between seq a and b"), and a badge on
// runs that were imported rather than recorded live.
import { el } from './json';
import { fmtMs } from './format';
import type { Envelope, Gap, RunModel } from './model';
import type { RunInfo } from './store';

/** A live event that arrives this much later than its `ts` makes the run read "behind". */
export const BEHIND_MS = 2000;

/** What the viewer knows about one run's stream (not part of the run's data). */
interface StreamState {
  /** `replay.start.count` while a replay is in progress. */
  replayTotal?: number;
  /** Events received since `replay.start`. */
  replayed: number;
  /** Arrival lag of the newest live (not replayed) event, in ms. */
  lagMs?: number;
}

const streams = new Map<string, StreamState>();

function state(runId: string): StreamState {
  let s = streams.get(runId);
  if (!s) streams.set(runId, (s = { replayed: 0 }));
  return s;
}

/** `replay.start`: the server is about to send `count` stored events of the run. */
export function replayStarted(runId: string, count: unknown): void {
  const s = state(runId);
  s.replayTotal = Math.max(0, Number(count) || 0);
  s.replayed = 0;
}

/** `replay.end`: the history is in; what follows is live. */
export function replayEnded(runId: string): void {
  const s = state(runId);
  s.replayTotal = undefined;
  s.replayed = 0;
}

/** Whether a replay of the run is in progress. */
export function catchingUp(runId: string): boolean {
  return streams.get(runId)?.replayTotal !== undefined;
}

/** Notes one received event: replay progress, or the arrival lag of a live event. */
export function noteEvent(env: Envelope, arrivedAt = Date.now()): void {
  const s = state(env.runId);
  if (s.replayTotal !== undefined) s.replayed++;
  else if (typeof env.ts === 'number') s.lagMs = Math.max(0, arrivedAt - env.ts);
}

/** How far behind the run's live stream is (ms), or undefined when it is current or finished. */
export function behindMs(m: RunModel): number | undefined {
  const s = streams.get(m.runId);
  if (!s || s.replayTotal !== undefined || m.status !== 'running' || s.lagMs === undefined) return undefined;
  return s.lagMs >= BEHIND_MS ? s.lagMs : undefined;
}

/** "180 events lost between seq 21 and 200" (one event: "1 event lost at seq 21"). */
export function gapText(g: Gap): string {
  if (g.dropped === 1 && g.fromSeq === g.toSeq) return `1 event lost at seq ${g.fromSeq}`;
  return `${g.dropped.toLocaleString('en-US')} event${g.dropped === 1 ? '' : 's'} lost between seq ${g.fromSeq} and ${g.toSeq}`;
}

/** Where a gap falls in time (ms since epoch): between the events around it, as far as known. */
export function gapTime(g: Gap): number | undefined {
  if (g.beforeTs !== undefined && g.afterTs !== undefined) return (g.beforeTs + g.afterTs) / 2;
  return g.afterTs ?? g.beforeTs;
}

/** Whether the run was imported (`graphmind import`), not recorded live. */
export function imported(r: RunInfo | undefined): boolean {
  return r?.source === 'import';
}

/** One chip of the run bar, as data: its text, class, test id and tooltip. */
export interface Chip {
  text: string;
  cls: string;
  testid: string;
  title: string;
}

/** The stream chips of a run as data: catching up, behind, lost events, imported. */
export function streamFacts(m: RunModel, info: RunInfo | undefined): Chip[] {
  const out: Chip[] = [];
  const s = streams.get(m.runId);
  if (s && s.replayTotal !== undefined) {
    out.push({
      text: `catching up · ${Math.min(s.replayed, s.replayTotal).toLocaleString('en-US')} / ${s.replayTotal.toLocaleString('en-US')} events`,
      cls: 'chip chip-stream',
      testid: 'catching-up',
      title: 'The server is replaying this run’s stored history; the graph is drawn when it is in',
    });
  }
  const behind = behindMs(m);
  if (behind !== undefined) {
    out.push({ text: `behind ${fmtBehind(behind)}`, cls: 'chip chip-hidden', testid: 'behind', title: `The newest event arrived ${fmtMs(behind)} after the app stamped it: the app, the server or this tab is lagging` });
  }
  if (m.gapList.length || m.gaps) {
    const lost = m.gaps;
    out.push({
      text: `${lost.toLocaleString('en-US')} event${lost === 1 ? '' : 's'} lost`,
      cls: 'chip chip-mark',
      testid: 'gap-chip',
      title: `${m.gapList.map(gapText).join('\n')}\nThe app’s buffer overflowed while no debugger was attached; the graph may miss nodes or show executions without a start.`,
    });
  }
  if (imported(info)) out.push(IMPORTED);
  return out;
}

const IMPORTED: Chip = { text: 'imported', cls: 'chip chip-trunc', testid: 'imported', title: 'Imported from a trace file (graphmind import): a read-only record, not a live run' };

/** A chip's element. */
export function chipEl(c: Chip): HTMLElement {
  const e = el('span', c.cls, c.text);
  e.dataset.testid = c.testid;
  e.title = c.title;
  return e;
}

/** The run bar's stream chips for the selected run. */
export function streamChips(m: RunModel, info: RunInfo | undefined): HTMLElement[] {
  return streamFacts(m, info).map(chipEl);
}

/** The "imported" badge (run bar and runs rail). */
export function importedBadge(): HTMLElement {
  return chipEl(IMPORTED);
}

/** One line of text per gap marker, for the strip over the graph. */
export function gapLines(m: RunModel | undefined): { text: string; title: string }[] {
  return m ? m.gapList.map((g) => ({ text: `⚠ ${gapText(g)}`, title: `reason: ${g.reason}` })) : [];
}

/** One line per gap marker, for the strip over the graph. */
export function gapNotices(m: RunModel | undefined): HTMLElement[] {
  return gapLines(m).map((g) => {
    const line = el('div', 'gap-line', g.text);
    line.dataset.testid = 'gap-line';
    line.title = g.title;
    return line;
  });
}

function fmtBehind(ms: number): string {
  return ms < 60_000 ? `${Math.round(ms / 1000)} s` : fmtMs(ms);
}
