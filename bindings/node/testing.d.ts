// Types of @graphmind/node/testing: recorded runs as offline tests (docs/replay.md).
import type { Session } from './index';

/** Where a replay went live (the `replayLive` field of that call's node.started). */
export interface ReplayLive {
  reason: 'fork' | 'diverged' | 'unrecorded' | 'unfinished' | 'unsupported';
  /** `<nodeId>#<n>`. */
  at: string;
  /** Paths of the input that differ (`diverged`). */
  differs?: string[];
  /** The recorded and the live call's match keys (`diverged`). */
  recordedKey?: string;
  liveKey?: string;
}

/** What a replay did. */
export interface ReplayReport<T = unknown> {
  /** Calls answered from the recording. */
  replayed: number;
  live: ReplayLive | null;
  /** Why nothing was replayed (a missing file or run, not an export, another app). */
  error: string | null;
  /** The recorded run's id. */
  replayOf: string | null;
  /** The run it answered. */
  runId: string | null;
  /** What `fn` returned. */
  result: T;
}

export interface ReplayOptions {
  /** The Session (or the `graphmind()` facade) the app records with. */
  session: Session | { session: Session };
  /** `<nodeId>#<n>`: that call and every later one run live. */
  from?: string;
  /** The output of the call just before `from`, instead of the recorded one. */
  output?: unknown;
  /** Reject with ReplayDiverged when the run went live anywhere but at `from`. */
  strict?: boolean;
}

/** Thrown by a strict replay that went live early (or replayed nothing). */
export class ReplayDiverged extends Error {}

/**
 * Replays `source` (an exported run's path, or a run id on the session's server) while
 * `fn` runs; resolves to the report.
 */
export function replay<T>(source: string | URL, fn: () => T | Promise<T>, options: ReplayOptions): Promise<ReplayReport<Awaited<T>>>;
