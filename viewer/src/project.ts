// Projection: which nodes get a card, given the fold state. Pure; runs when the shape changes.
import type { GNode, RunModel } from './model';

/** Runs with more nodes than this open folded. */
export const FOLD_THRESHOLD = 70;
/** Cards a folded run opens with, at most. */
export const FOLD_BUDGET = 60;

export interface FoldState {
  /** true: every node open unless in `collapsed`; false: only nodes in `expanded` are open. */
  defaultOpen: boolean;
  expanded: Set<string>;
  collapsed: Set<string>;
}

export interface Tree {
  roots: string[];
  children: Map<string, string[]>;
  /** Descendant counts (not counting the node itself). */
  descendants: Map<string, number>;
  depth: Map<string, number>;
}

export interface Projection {
  tree: Tree;
  /** Visible nodes in pre-order. */
  visible: string[];
  /** Visible parent of each visible node that has one. */
  parent: Map<string, string>;
  /** For folded visible nodes with children: how many descendants are hidden. */
  folded: Map<string, number>;
}

/** Parent/child structure from `parentId`; a parent that does not exist (yet) makes a root. */
export function buildTree(run: RunModel): Tree {
  const children = new Map<string, string[]>();
  const roots: string[] = [];
  const nodes = [...run.nodes.values()].sort((a, b) => a.order - b.order);
  for (const n of nodes) {
    const p = n.parentId;
    if (p && run.nodes.has(p) && !createsCycle(run, n)) {
      let list = children.get(p);
      if (!list) children.set(p, (list = []));
      list.push(n.id);
    } else roots.push(n.id);
  }
  const descendants = new Map<string, number>();
  const depth = new Map<string, number>();
  // iterative post-order
  const stack: [string, number, boolean][] = roots.map((r) => [r, 0, false] as [string, number, boolean]).reverse();
  while (stack.length) {
    const [id, d, done] = stack.pop()!;
    if (done) {
      let c = 0;
      for (const k of children.get(id) ?? []) c += 1 + (descendants.get(k) ?? 0);
      descendants.set(id, c);
      continue;
    }
    depth.set(id, d);
    stack.push([id, d, true]);
    const ks = children.get(id);
    if (ks) for (let i = ks.length - 1; i >= 0; i--) stack.push([ks[i], d + 1, false]);
  }
  return { roots, children, descendants, depth };
}

function createsCycle(run: RunModel, n: GNode): boolean {
  let p = n.parentId;
  let hops = 0;
  while (p) {
    if (p === n.id) return true;
    if (++hops > 10000) return true;
    p = run.nodes.get(p)?.parentId;
  }
  return false;
}

/** The fold state a run opens with: all open up to FOLD_THRESHOLD nodes, else breadth-first
 * expansion while the card count stays within FOLD_BUDGET. */
export function initialFolds(tree: Tree, nodeCount: number): FoldState {
  if (nodeCount <= FOLD_THRESHOLD) return { defaultOpen: true, expanded: new Set(), collapsed: new Set() };
  const expanded = new Set<string>();
  let cards = tree.roots.length;
  const queue = [...tree.roots];
  for (let qi = 0; qi < queue.length; qi++) {
    const id = queue[qi];
    const ks = tree.children.get(id);
    if (!ks || ks.length === 0) continue;
    if (cards + ks.length > FOLD_BUDGET) continue;
    cards += ks.length;
    expanded.add(id);
    for (const k of ks) queue.push(k);
  }
  return { defaultOpen: false, expanded, collapsed: new Set() };
}

export function isOpen(f: FoldState, id: string): boolean {
  return f.defaultOpen ? !f.collapsed.has(id) : f.expanded.has(id);
}

export function setOpen(f: FoldState, id: string, open: boolean): void {
  if (f.defaultOpen) open ? f.collapsed.delete(id) : f.collapsed.add(id);
  else open ? f.expanded.add(id) : f.expanded.delete(id);
}

/** Opens every ancestor of `id` so it gets a card. */
export function reveal(f: FoldState, run: RunModel, id: string): void {
  let p = run.nodes.get(id)?.parentId;
  let hops = 0;
  while (p && run.nodes.has(p) && hops++ < 10000) {
    setOpen(f, p, true);
    p = run.nodes.get(p)?.parentId;
  }
}

export function project(run: RunModel, folds: FoldState, tree = buildTree(run)): Projection {
  const visible: string[] = [];
  const parent = new Map<string, string>();
  const folded = new Map<string, number>();
  const stack: string[] = [...tree.roots].reverse();
  while (stack.length) {
    const id = stack.pop()!;
    visible.push(id);
    const ks = tree.children.get(id);
    if (!ks || ks.length === 0) continue;
    if (!isOpen(folds, id)) {
      folded.set(id, tree.descendants.get(id) ?? 0);
      continue;
    }
    for (let i = ks.length - 1; i >= 0; i--) {
      parent.set(ks[i], id);
      stack.push(ks[i]);
    }
  }
  return { tree, visible, parent, folded };
}
