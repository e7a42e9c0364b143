// The viewer's one store: everything the panels read and the actions write, typed, plus the
// frame scheduler that redraws the parts marked dirty. Panels import `S` and `invalidate`.
import type { RunModel } from './model';
import type { FoldState } from './project';

/** A run as `/api/runs` and the hub announce it. */
export interface RunInfo {
  id: string;
  app: string;
  startedAt: number;
  finishedAt: number | null;
  status: string;
  eventCount: number;
  errorCount: number;
  live: boolean;
  durationMs: number | null;
  source?: string;
}

/** Lazy rail figures of a run not subscribed to (from its events over HTTP). */
export interface Summary {
  nodes: number;
  heldMs: number;
  atEvents: number;
  /** `run.started.meta.replayOf`: the run it replays, if it is a replay. */
  replayOf?: string;
}

/** Node kinds the filter chips offer. */
export const KINDS = ['agent', 'llm', 'tool', 'chain', 'retriever', 'server', 'resource', 'prompt', 'custom'];

/** The viewer state; one object so every panel reads the same truth. */
export const S = {
  runs: new Map<string, RunInfo>(),
  runsLoaded: false,
  models: new Map<string, RunModel>(),
  summaries: new Map<string, Summary>(),
  subscribed: new Set<string>(),
  replaying: new Set<string>(),
  selectedRun: undefined as string | undefined,
  selectedNode: undefined as string | undefined,
  selectedInstance: undefined as string | undefined,
  folds: new Map<string, FoldState>(),
  userFolded: new Set<string>(),
  filters: { errored: false, errorPath: false, slow: false, paused: false, kinds: new Set<string>() },
  breakpoints: [] as any[],
  mode: 'run',
  conn: 'connecting' as string,
  authNeeded: false,
  /** `welcome.control` from a server with control tokens (absent from older servers). */
  control: undefined as undefined | { principal?: string; editInput?: boolean; hubCapabilities?: string[] },
  rail: true,
  showTimeline: false,
  /** The timeline alone, the graph hidden. */
  timelineOnly: false,
  /** Timeline zoom factor (1 = the run fits the width; wheel over the timeline changes it). */
  tlZoom: 1,
  /** The compare view (an original and its replay side by side) in the graph's place. */
  compare: false,
  /** The compare view lists the executions before the fork point too. */
  compareAll: false,
  theme: 'system' as 'system' | 'dark' | 'light',
  cam: { x: 40, y: 40, k: 1 },
  follow: false,
  stress: false,
  /** An exported run (`graphmind record --html`): read-only, no server, no network. */
  embedded: false,
  /** The exported run's last event time: "now" for the clocks of a frozen run. */
  frozenAt: undefined as number | undefined,
  /** Why the page's embedded run could not be read. */
  embeddedError: undefined as string | undefined,
  lastSeenShape: new Map<string, string>(),
  principal: new Map<string, string>(),
};

// ---------------------------------------------------------------------------------------
// scheduling

/** The parts of the page that redraw on the next animation frame. */
export type Parts = { bar: boolean; rail: boolean; graph: boolean; inspector: boolean; timeline: boolean };

let renderer: (d: Parts) => void = () => {};
/** Registers the function that draws the dirty parts (main.ts, once). */
export function setRenderer(fn: (d: Parts) => void): void {
  renderer = fn;
}

let dirty: Parts = { bar: true, rail: true, graph: true, inspector: true, timeline: true };
let frame = 0;
/** Marks parts dirty and schedules one frame to redraw them. */
export function invalidate(parts: Partial<Parts> = { bar: true, rail: true, graph: true, inspector: true, timeline: true }): void {
  dirty = { bar: dirty.bar || !!parts.bar, rail: dirty.rail || !!parts.rail, graph: dirty.graph || !!parts.graph, inspector: dirty.inspector || !!parts.inspector, timeline: dirty.timeline || !!parts.timeline };
  if (!frame) frame = requestAnimationFrame(flush);
}

function flush(): void {
  frame = 0;
  const d = dirty;
  dirty = { bar: false, rail: false, graph: false, inspector: false, timeline: false };
  renderer(d);
}
