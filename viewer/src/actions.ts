// Actions the palette, the keys and the bar share: folds, re-layout, deep link, run list,
// theme, and toasts.
import { el } from './json';
import { invalidate, S } from './store';
import { buildTree, foldsByDefault, initialFolds, isOpen } from './project';
import { G } from './graph';
import { drawMinimap } from './camera';
import { writeHash } from './routing';

const $ = (id: string) => document.getElementById(id)!;

/** ⇧C: opens everything, or folds everything but the roots. */
export function toggleAllFolds(): void {
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (!m) return;
  const tree = buildTree(m);
  const f = S.folds.get(m.runId) ?? initialFolds(tree, m.nodes.size);
  const anyFolded = [...tree.children.keys()].some((id) => !isOpen(f, id));
  // Opening everything opens the cards that fold by default too; folding keeps the roots open.
  const known = new Set([...tree.children.keys()].filter((id) => foldsByDefault(tree, m, id)));
  S.folds.set(m.runId, anyFolded ? { defaultOpen: true, expanded: new Set(), collapsed: new Set(), known } : { defaultOpen: false, expanded: new Set(tree.roots), collapsed: new Set(), known });
  S.userFolded.add(m.runId);
  G.fitPending = true;
  invalidate({ graph: true });
}

/** ⇧A: a fresh layout, fitted. */
export function rearrange(): void {
  G.view = undefined;
  const svg = $('edges');
  svg.dataset.key = '';
  G.fitPending = true;
  invalidate({ graph: true });
}

/** Copies a deep link to the selected run and node. */
export function copyLink(): void {
  writeHash();
  const url = location.href;
  navigator.clipboard?.writeText(url).then(
    () => toast('link copied'),
    () => toast(url),
  );
}

/** Shows or hides the runs rail. */
export function toggleRail(): void {
  S.rail = !S.rail;
  invalidate({ rail: true });
}

/** Cycles the theme: system, dark, light (remembered). */
export function cycleTheme(): void {
  S.theme = S.theme === 'system' ? 'dark' : S.theme === 'dark' ? 'light' : 'system';
  try {
    localStorage.setItem('graphmind.theme', S.theme);
  } catch {
    /* fine */
  }
  applyTheme();
  invalidate({ bar: true, graph: true });
}

/** Applies the chosen theme (or the system's) to the page. */
export function applyTheme(): void {
  const dark = S.theme === 'dark' || (S.theme === 'system' && matchMedia('(prefers-color-scheme: dark)').matches);
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
  drawMinimap();
}

/** A short message at the bottom of the page for 5 s. */
export function toast(text: string, kind = 'info'): void {
  const t = el('div', `toast toast-${kind}`, text);
  $('toasts').append(t);
  setTimeout(() => t.remove(), 5000);
}
