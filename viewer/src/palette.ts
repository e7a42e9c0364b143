// The command palette: fuzzy search over the run's nodes, the runs, and the actions.
import { el } from './json';
import { toggleTimeline, toggleTimelineOnly } from './timeline-panel';
import { foldBy } from './folds';
import { KINDS, S } from './store';
import { nodeStatus } from './model';
import { setMode, toggleBreakpoint } from './control';
import { fit } from './camera';
import { clearFilters, toggleFilter, toggleKind } from './filters';
import { comparePair, toggleCompare } from './compare-panel';
import { copyLink, cycleTheme, rearrange, toast, toggleAllFolds, toggleRail } from './actions';
import { selectNode, selectRun } from './routing';

const $ = (id: string) => document.getElementById(id)!;

interface Item {
  label: string;
  hint: string;
  run: () => void;
}

function actions(): Item[] {
  const a: Item[] = [
    { label: 'Fit the graph', hint: '⇧F', run: fit },
    { label: 'Follow the active node', hint: 'F', run: () => (S.follow = !S.follow) },
    { label: 'Toggle the timeline', hint: '⇧T', run: toggleTimeline },
    { label: 'Hide the graph: timeline only', hint: '⇧O', run: toggleTimelineOnly },
    { label: 'Filter: errored nodes', hint: '', run: () => toggleFilter('errored') },
    { label: 'Filter: error path (failures and what led to them)', hint: '⇧E', run: () => toggleFilter('errorPath') },
    { label: 'Re-arrange the layout and fit', hint: '⇧A', run: rearrange },
    { label: 'Filter: slow nodes (p90)', hint: '', run: () => toggleFilter('slow') },
    { label: 'Filter: paused nodes', hint: '', run: () => toggleFilter('paused') },
    { label: 'Clear all filters', hint: '', run: clearFilters },
    { label: 'Collapse / expand all', hint: '⇧C', run: toggleAllFolds },
    { label: 'Fold every sub-agent into a summary card', hint: '⇧G', run: () => foldBy('agent', toast) },
    { label: 'Fold every chain into a summary card', hint: '⇧H', run: () => foldBy('chain', toast) },
    { label: 'Copy a deep link to this G.view', hint: '⇧L', run: copyLink },
    { label: 'Toggle the run list', hint: 'B', run: toggleRail },
    { label: 'Cycle the theme', hint: 'D', run: cycleTheme },
  ];
  if (!S.embedded)
    a.push(
      { label: 'Mode: run', hint: '', run: () => setMode('run') },
      { label: 'Mode: step', hint: '', run: () => setMode('step') },
      { label: 'Pause all (hold before every node)', hint: '', run: () => toggleBreakpoint({}) },
    );
  for (const k of KINDS) a.push({ label: `Filter: kind ${k}`, hint: '', run: () => toggleKind(k) });
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (m && comparePair(m)) a.push({ label: S.compare ? 'Back to the graph (leave the replay comparison)' : 'Compare the original and its replay side by side', hint: '', run: () => toggleCompare() });
  return a;
}

function score(q: string, s: string): number {
  if (!q) return 1;
  const t = s.toLowerCase();
  const at = t.indexOf(q);
  if (at >= 0) return 1000 - at - t.length / 100;
  let i = 0;
  let gaps = 0;
  let last = -1;
  for (const ch of q) {
    const j = t.indexOf(ch, i);
    if (j < 0) return 0;
    if (last >= 0) gaps += j - last - 1;
    last = j;
    i = j + 1;
  }
  return 100 - gaps - t.length / 100;
}

/** The palette's list and its selected row. */
export const P = { sel: 0, items: [] as Item[] };

/** Opens the palette with `initial` typed (">" for actions). */
export function openPalette(initial: string): void {
  const p = $('palette');
  p.hidden = false;
  const input = $('pal-input') as HTMLInputElement;
  input.value = initial;
  input.focus();
  P.sel = 0;
  refreshPalette();
}

/** Closes the palette. */
export function closePalette(): void {
  $('palette').hidden = true;
  // Give the keyboard back at once: a hidden input keeps focus until the browser's next
  // focus fixup, and a shortcut typed right after closing (B, T, ...) went into it.
  const focused = document.activeElement as HTMLElement | null;
  if (focused && $('palette').contains(focused)) focused.blur();
}

/** Filters and draws the palette list for what is typed. */
export function refreshPalette(): void {
  const q = ($('pal-input') as HTMLInputElement).value;
  const actionsOnly = q.startsWith('>');
  const query = (actionsOnly ? q.slice(1) : q).trim().toLowerCase();
  const items: [number, Item][] = [];
  if (!actionsOnly) {
    const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
    if (m)
      for (const n of m.nodes.values()) {
        const s = score(query, `${n.name} ${n.id}`);
        if (s > 0) items.push([s + 5, { label: n.name, hint: `${n.kind} · ${nodeStatus(n)} · ${n.id}`, run: () => selectNode(n.id, true) }]);
      }
    for (const r of S.runs.values()) {
      const s = score(query, `${r.app} ${r.id}`);
      if (s > 0) items.push([s, { label: `run ${r.app}`, hint: `${r.status} · ${r.id}`, run: () => selectRun(r.id) }]);
    }
  }
  for (const a of actions()) {
    const s = score(query, a.label);
    if (s > 0) items.push([s - (actionsOnly ? 0 : 50), { ...a, label: `> ${a.label}` }]);
  }
  items.sort((a, b) => b[0] - a[0]);
  P.items = items.slice(0, 50).map((x) => x[1]);
  P.sel = Math.min(P.sel, Math.max(0, P.items.length - 1));
  const list = $('pal-list');
  list.replaceChildren();
  P.items.forEach((it, i) => {
    const row = el('div', `pal-item${i === P.sel ? ' sel' : ''}`);
    row.append(el('span', '', it.label), el('span', 'muted', it.hint));
    row.onmousedown = (e) => {
      e.preventDefault();
      closePalette();
      it.run();
    };
    list.append(row);
  });
  if (!P.items.length) list.append(el('div', 'muted pal-none', 'Nothing matches'));
}
