// Timeline: one bar per instance (an execution of a node), start-ordered, for the waterfall.
import { instanceTimes, type RunModel } from './model';

export interface Bar {
  nodeId: string;
  instanceId: string;
  name: string;
  kind: string;
  status: string;
  /** ms from the run's start */
  start: number;
  total: number;
  held: number;
  /** ms from the bar's start to the first token, if any */
  firstToken?: number;
}

export interface Timeline {
  bars: Bar[];
  t0: number;
  span: number;
}

export function timeline(run: RunModel, now = Date.now()): Timeline {
  const t0 = run.startTs ?? 0;
  const bars: Bar[] = [];
  let end = 0;
  for (const n of run.nodes.values()) {
    for (const i of n.instances) {
      const t = instanceTimes(i, run.endTs ?? now, run);
      const start = i.startTs - t0;
      bars.push({
        nodeId: n.id,
        instanceId: i.instanceId,
        name: n.name,
        kind: n.kind,
        status: i.status,
        start,
        total: t.total,
        held: t.held,
        firstToken: i.firstTokenTs !== undefined ? i.firstTokenTs - i.startTs : undefined,
      });
      if (start + t.total > end) end = start + t.total;
    }
  }
  bars.sort((a, b) => a.start - b.start || (a.instanceId < b.instanceId ? -1 : 1));
  return { bars, t0, span: Math.max(1, end, (run.endTs ?? run.lastTs ?? t0) - t0) };
}

/** The p90 duration of a run's finished instances: "slow" means at or above it. */
export function p90(run: RunModel): number {
  const ds: number[] = [];
  for (const n of run.nodes.values()) for (const i of n.instances) if (i.durationMs !== undefined) ds.push(i.durationMs);
  if (ds.length === 0) return Infinity;
  ds.sort((a, b) => a - b);
  return ds[Math.min(ds.length - 1, Math.floor(ds.length * 0.9))];
}
