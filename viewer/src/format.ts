// Durations and ages as the viewer writes them, and the clock they read.
import { S } from './store';


/** A duration: "0 ms", "350 ms", "2.58 s", "3m 4s"; "—" when unknown. */
export function fmtMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !isFinite(ms)) return '—';
  if (ms === 0) return '0 ms';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60_000);
  return `${m}m ${Math.round((ms % 60_000) / 1000)}s`;
}
/** The clock the durations read: the last recorded event for an exported run, else now. */
export function now(): number {
  return S.frozenAt ?? Date.now();
}
/** How long ago: "12s ago", "3m ago", "2h ago", else the date. */
export function fmtAgo(ts: number): string {
  const s = Math.max(0, (Date.now() - ts) / 1000);
  if (s < 60) return `${Math.floor(s)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return new Date(ts).toLocaleDateString();
}

