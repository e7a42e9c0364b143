// Selection and the address bar: which run and node are shown, and the #/run/…/node/… link.
import { invalidate, S } from './store';
import { reveal } from './project';
import { G } from './graph';
import { wire } from './control';
import { newRun, type RunModel } from './model';

/** Shows run `id` (subscribing to it on first use), with `node` selected if given. */
export function selectRun(id: string | undefined, node?: string): void {
  if (S.selectedRun !== id) {
    S.selectedRun = id;
    S.selectedNode = undefined;
    S.selectedInstance = undefined;
    S.cam = { x: 40, y: 40, k: 1 };
    G.fitPending = true;
    if (id) subscribe(id);
  }
  if (node) selectNode(node, true);
  writeHash();
  invalidate();
}

/** Subscribes to run `id`'s events (once), so its model fills. */
export function subscribe(id: string): void {
  if (S.stress || S.subscribed.has(id)) return;
  S.subscribed.add(id);
  model(id);
  wire.socket?.send({ type: 'subscribe', runId: id });
}

/** Selects node `id` for the inspector, centring its card if `center`. */
export function selectNode(id: string | undefined, center: boolean): void {
  S.selectedNode = id;
  S.selectedInstance = undefined;
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (id && m) {
    const f = S.folds.get(m.runId);
    if (f && S.userFolded.has(m.runId)) reveal(f, m, id);
    if (center) G.pendingCenter = id;
  }
  writeHash();
  invalidate({ graph: true, inspector: true, timeline: S.showTimeline });
}

/** Writes the selection into the address bar (#/run/…/node/…). */
export function writeHash(): void {
  if (S.stress) return;
  let h = '';
  if (S.selectedRun) h = `#/run/${encodeURIComponent(S.selectedRun)}`;
  if (S.selectedRun && S.selectedNode) h += `/node/${encodeURIComponent(S.selectedNode)}`;
  if (location.hash !== h) history.replaceState(null, '', h || location.pathname + location.search);
}

/** Selects what the address bar names. */
export function readHash(): void {
  const m = /^#\/run\/([^/]+)(?:\/node\/(.+))?$/.exec(location.hash);
  if (!m) return;
  const run = decodeURIComponent(m[1]);
  const node = m[2] ? decodeURIComponent(m[2]) : undefined;
  if (S.embedded && !S.runs.has(run)) return;
  selectRun(run);
  if (node) {
    S.selectedNode = node;
    G.pendingCenter = node;
  }
}

/** The run model of `runId`, made empty on first use. */
export function model(runId: string): RunModel {
  let m = S.models.get(runId);
  if (!m) S.models.set(runId, (m = newRun(runId)));
  return m;
}
