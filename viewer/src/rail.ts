// The runs rail: newest first, with status, duration, held time, node and error counts; the
// figures of runs not subscribed to are read lazily from the HTTP API.
import { getJson } from './conn';
import { el } from './json';
import { fmtAgo, fmtMs, now } from './format';
import { imported, importedBadge } from './stream';
import { invalidate, type RunInfo, S } from './store';
import { apply, newRun, runHeldMs } from './model';
import { selectRun } from './routing';

const $ = (id: string) => document.getElementById(id)!;

// Lazy run summaries (nodes, held time) for the rail, from the HTTP API.
let summarizing = false;
/** A call that came while a pass was running: one more pass after it. */
let again = false;

/** Reads the rail's figures of the newest runs not subscribed to, soon and once at a time. */
export function summarizeSoon(): void {
  if (S.stress || S.embedded) return;
  if (summarizing) {
    again = true;
    return;
  }
  summarizing = true;
  setTimeout(async () => {
    try {
      const list = [...S.runs.values()].sort((a, b) => b.startedAt - a.startedAt).slice(0, 30);
      for (const r of list) {
        const have = S.summaries.get(r.id);
        if (have && have.atEvents === r.eventCount) continue;
        const loaded = S.models.get(r.id);
        if (loaded && S.subscribed.has(r.id)) continue;
        if (r.eventCount > 5000) continue;
        try {
          const page = await getJson(`/api/runs/${encodeURIComponent(r.id)}/events?limit=5000`);
          const m = newRun(r.id);
          for (const e of page.events ?? []) apply(m, e);
          S.summaries.set(r.id, { nodes: m.nodes.size, heldMs: runHeldMs(m), atEvents: r.eventCount, replayOf: m.replayOf });
          // a replay's summary names its original, whose bar lists it
          invalidate({ rail: true, bar: !!m.replayOf, graph: !!m.replayOf && S.compare });
        } catch {
          /* a summary is optional */
        }
      }
    } finally {
      summarizing = false;
      if (again) {
        again = false;
        summarizeSoon();
      }
    }
  }, 150);
}

function runStatus(r: RunInfo): string {
  return r.status;
}

/** Draws the runs rail. */
export function renderRail(): void {
  const rail = $('rail');
  rail.hidden = !S.rail;
  if (!S.rail) return;
  rail.replaceChildren();
  rail.append(el('div', 'rail-head', `Runs (${S.runs.size})`));
  const list = el('div', 'rail-list');
  const runs = [...S.runs.values()].sort((a, b) => b.startedAt - a.startedAt);
  for (const r of runs) {
    const item = el('button', `run-item${r.id === S.selectedRun ? ' sel' : ''}`);
    item.dataset.runId = r.id;
    item.dataset.testid = 'run-item';
    const top = el('div', 'run-top');
    top.append(el('span', 'run-app', r.app), el('span', `pill st-${runStatus(r)}`, runStatus(r)));
    if (imported(r)) top.append(importedBadge());
    const m = S.models.get(r.id);
    const sum = m && S.subscribed.has(r.id) ? { nodes: m.nodes.size, heldMs: runHeldMs(m, now()), events: m.eventCount } : S.summaries.get(r.id);
    const duration = r.durationMs ?? (r.status === 'running' ? now() - r.startedAt : null);
    const meta = el('div', 'run-meta');
    meta.append(
      el('span', '', fmtMs(duration)),
      el('span', 'muted', `held ${sum ? fmtMs(sum.heldMs) : '—'}`),
      el('span', 'muted', `${sum ? sum.nodes : '—'} nodes`),
      el('span', r.errorCount ? 'err' : 'muted', `${r.errorCount} err`),
    );
    const foot = el('div', 'run-foot muted', `${fmtAgo(r.startedAt)} · ${Math.max(r.eventCount, (sum as any)?.events ?? 0)} events${r.live ? ' · live' : ''}`);
    item.append(top, meta, foot);
    item.onclick = () => selectRun(r.id);
    list.append(item);
  }
  rail.append(list);
}
