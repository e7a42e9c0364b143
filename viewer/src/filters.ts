// The filter chips over the graph: errored, error path, slow (p90), paused, and by kind.
import { el } from './json';
import { invalidate, S } from './store';
import { type RunModel } from './model';

const $ = (id: string) => document.getElementById(id)!;

/** Draws the filter chips. */
export function renderFilters(): void {
  const f = $('filters');
  f.replaceChildren();
  const mk = (label: string, on: boolean, fn: () => void, testid: string) => {
    const b = el('button', `chip chip-filter${on ? ' on' : ''}`, label);
    b.dataset.testid = testid;
    b.onclick = fn;
    f.append(b);
  };
  mk('errored', S.filters.errored, () => toggleFilter('errored'), 'filter-errored');
  mk('error path', S.filters.errorPath, () => toggleFilter('errorPath'), 'filter-error-path');
  mk('slow (p90)', S.filters.slow, () => toggleFilter('slow'), 'filter-slow');
  mk('paused', S.filters.paused, () => toggleFilter('paused'), 'filter-paused');
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  const kinds = new Set<string>();
  if (m) for (const n of m.nodes.values()) kinds.add(n.kind);
  for (const k of [...kinds].sort()) mk(k, S.filters.kinds.has(k), () => toggleKind(k), `filter-kind-${k}`);
  const info = el('span', 'muted foldinfo-inline');
  f.append(info);
}

/** Failed nodes and every ancestor of one: "what led here". */
export function errorPath(m: RunModel): Set<string> {
  const keep = new Set<string>();
  for (const n of m.nodes.values()) {
    if (!n.instances.some((i) => i.status === 'error')) continue;
    let id: string | undefined = n.id;
    let hops = 0;
    while (id && !keep.has(id) && hops++ < 10000) {
      keep.add(id);
      id = m.nodes.get(id)?.parentId;
    }
  }
  return keep;
}

/** Turns one of the filters on or off. */
export function toggleFilter(k: 'errored' | 'errorPath' | 'slow' | 'paused'): void {
  S.filters[k] = !S.filters[k];
  invalidate({ graph: true });
}

/** Turns the kind filter `k` on or off. */
export function toggleKind(k: string): void {
  S.filters.kinds.has(k) ? S.filters.kinds.delete(k) : S.filters.kinds.add(k);
  invalidate({ graph: true });
}

/** Turns every filter off. */
export function clearFilters(): void {
  S.filters = { errored: false, errorPath: false, slow: false, paused: false, kinds: new Set() };
  invalidate({ graph: true });
}
