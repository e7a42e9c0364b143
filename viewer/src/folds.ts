// Folding in the graph panel: the summary line of a folded card (what it hides, by kind), the
// cards that stand for no node (the run as a root, an MCP session's protocol traffic), and
// "fold by" — every sub-agent, every chain — as actions. The fold state lives in the store;
// the rules (what folds by default, what a kind fold touches) are in project.ts.
import { el } from './json';
import { S, invalidate } from './store';
import type { RunModel } from './model';
import { buildTree, foldKind, foldSummary, initialFolds, setOpen, type Tree, type VirtualNode } from './project';

/** "4 llm · 7 tool · 1 error · 1 held": what a folded card hides, most frequent kind first. */
export function summaryText(tree: Tree, m: RunModel, id: string): string {
  const s = foldSummary(tree, m, id);
  const parts = [...s.kinds].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([k, n]) => `${n} ${k}`);
  if (s.errors) parts.push(`${s.errors} error${s.errors === 1 ? '' : 's'}`);
  if (s.running) parts.push(`${s.running} running`);
  if (s.held) parts.push(`${s.held} held`);
  return parts.join(' · ');
}

/** The status a virtual card shows: held > running > error > ok, over what it stands for. */
export function virtualStatus(tree: Tree, m: RunModel, id: string): string {
  const s = foldSummary(tree, m, id);
  return s.held ? 'paused' : s.running ? 'running' : s.errors ? 'error' : 'ok';
}

/** Fills a virtual card (the run, or an MCP session's protocol traffic). `toggle` folds or opens it. */
export function fillVirtualCard(e: HTMLElement, m: RunModel, tree: Tree, v: VirtualNode, folded: number | undefined, dim: boolean, toggle: () => void): void {
  const st = virtualStatus(tree, m, v.id);
  e.className = `card card-virtual kind-${v.kind === 'run' ? 'agent' : 'server'} st-${st}${dim ? ' dim' : ''}`;
  e.dataset.virtual = v.kind;
  e.replaceChildren();
  const head = el('div', 'card-head');
  head.append(el('span', 'kind-badge', v.kind === 'run' ? 'run' : 'mcp'), el('span', 'card-name', v.name));
  const count = (tree.children.get(v.id) ?? []).length;
  if (v.kind === 'protocol') head.append(el('span', 'count', `${count} message${count === 1 ? '' : 's'}`));
  e.append(head);
  const sub = el('div', 'card-sub');
  sub.append(el('span', `st-text st-${st}`, st));
  sub.append(el('span', 'muted', v.kind === 'run' ? `${count} top-level nodes, in call order` : 'initialize, notifications, lists'));
  e.append(sub);
  const sum = el('div', 'card-preview fold-summary', summaryText(tree, m, v.id));
  sum.dataset.testid = 'fold-summary';
  e.append(sum);
  const fb = el('button', 'fold-btn', folded !== undefined ? `▸ ${folded} folded` : '▾');
  fb.dataset.testid = folded !== undefined ? 'fold-expander' : 'fold-toggle';
  fb.title = folded !== undefined ? 'Expand' : 'Fold the nodes under this one';
  fb.onclick = (ev) => {
    ev.stopPropagation();
    toggle();
  };
  e.append(fb);
  e.onclick = toggle;
  e.title = v.kind === 'run' ? 'The run: this recording has no single root node (the C ABI and the Rust API record none), so its top-level nodes hang here in call order' : 'The MCP session’s protocol traffic, folded into one card';
}

/** Folds every sub-agent (`agent`) or every chain (`chain`) of the selected run; says how many. */
export function foldBy(kind: 'agent' | 'chain', toast: (t: string) => void): void {
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (!m) return;
  const tree = buildTree(m);
  let f = S.folds.get(m.runId);
  if (!f) S.folds.set(m.runId, (f = initialFolds(tree, m.nodes.size, m)));
  const n = foldKind(f, tree, m, kind);
  S.userFolded.add(m.runId);
  toast(n ? `folded ${n} ${kind === 'agent' ? 'sub-agent' : 'chain'}${n === 1 ? '' : 's'}` : `no open ${kind === 'agent' ? 'sub-agent' : 'chain'} to fold`);
  invalidate({ graph: true });
}

/** Opens or folds one card (a user fold: the run's folds stop following its growth). */
export function setFold(m: RunModel, id: string, open: boolean): void {
  const f = S.folds.get(m.runId);
  if (!f) return;
  setOpen(f, id, open);
  S.userFolded.add(m.runId);
  invalidate({ graph: true });
}
