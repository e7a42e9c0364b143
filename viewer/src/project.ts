// Projection: which nodes get a card, given the fold state. Pure; runs when the shape changes.
// Two kinds of card stand for no node of the run (virtual nodes): the run itself, as the root
// of a run with several top-level nodes (the C ABI and the Rust API record no root), and one
// "MCP protocol" card per MCP session gathering its protocol traffic (initialize,
// notifications, */list), folded by default.
import type { GNode, RunModel } from './model';

/** Runs with more nodes than this open folded. */
export const FOLD_THRESHOLD = 70;
/** Cards a folded run opens with, at most. */
export const FOLD_BUDGET = 60;

/** Id of the virtual card for the run when it has several top-level nodes. */
export const RUN_ROOT = '⟨run⟩';
/** Prefix of the virtual "MCP protocol" card's id; the MCP session's node id follows. */
export const PROTOCOL_PREFIX = '⟨protocol⟩';

export interface FoldState {
  /** true: every node open unless in `collapsed`; false: only nodes in `expanded` are open. */
  defaultOpen: boolean;
  expanded: Set<string>;
  collapsed: Set<string>;
  /** Nodes that open folded by default (protocol cards, `collapsed` nodes) already folded once. */
  known: Set<string>;
}

/** A card that stands for no node of the run. */
export interface VirtualNode {
  id: string;
  kind: 'run' | 'protocol';
  name: string;
}

export interface Tree {
  roots: string[];
  children: Map<string, string[]>;
  /** Descendant counts (not counting the node itself). */
  descendants: Map<string, number>;
  depth: Map<string, number>;
  /** Parent in the tree (virtual cards included). */
  parent: Map<string, string>;
  virtual: Map<string, VirtualNode>;
}

/** MCP protocol traffic: what the MCP proxy records as `mcp:<method>` besides the session. */
export function isProtocol(n: GNode): boolean {
  return n.id.startsWith('mcp:') && n.kind !== 'server' && !['tool', 'resource', 'prompt', 'llm'].includes(n.kind);
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

/** Parent/child structure from `parentId`; a parent that does not exist (yet) makes a root.
 * Protocol traffic goes under its session's protocol card; several roots go under the run. */
export function buildTree(run: RunModel): Tree {
  const children = new Map<string, string[]>();
  const virtual = new Map<string, VirtualNode>();
  let roots: string[] = [];
  const add = (p: string, id: string) => {
    let list = children.get(p);
    if (!list) children.set(p, (list = []));
    list.push(id);
  };
  const nodes = [...run.nodes.values()].sort((a, b) => a.order - b.order);
  for (const n of nodes) {
    const p = n.parentId;
    if (p && run.nodes.has(p) && !createsCycle(run, n)) {
      if (isProtocol(n)) {
        const g = PROTOCOL_PREFIX + p;
        if (!virtual.has(g)) {
          virtual.set(g, { id: g, kind: 'protocol', name: 'MCP protocol' });
          add(p, g);
        }
        add(g, n.id);
      } else add(p, n.id);
    } else roots.push(n.id);
  }
  if (roots.length > 1) {
    virtual.set(RUN_ROOT, { id: RUN_ROOT, kind: 'run', name: run.app ?? 'run' });
    children.set(RUN_ROOT, roots);
    roots = [RUN_ROOT];
  }
  const parent = new Map<string, string>();
  for (const [p, ks] of children) for (const k of ks) parent.set(k, p);
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
  return { roots, children, descendants, depth, parent, virtual };
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
export function initialFolds(tree: Tree, nodeCount: number, run?: RunModel): FoldState {
  if (nodeCount <= FOLD_THRESHOLD) return foldDefaults({ defaultOpen: true, expanded: new Set(), collapsed: new Set(), known: new Set() }, tree, run);
  const expanded = new Set<string>();
  let cards = tree.roots.length;
  const queue = [...tree.roots];
  for (let qi = 0; qi < queue.length; qi++) {
    const id = queue[qi];
    const ks = tree.children.get(id);
    if (!ks || ks.length === 0 || foldsByDefault(tree, run, id)) continue;
    if (cards + ks.length > FOLD_BUDGET) continue;
    cards += ks.length;
    expanded.add(id);
    for (const k of ks) queue.push(k);
  }
  return foldDefaults({ defaultOpen: false, expanded, collapsed: new Set(), known: new Set() }, tree, run);
}

/** Whether a card opens folded: a protocol card, or a node the app started `collapsed`. */
export function foldsByDefault(tree: Tree, run: RunModel | undefined, id: string): boolean {
  return tree.virtual.get(id)?.kind === 'protocol' || !!run?.nodes.get(id)?.collapsed;
}

/** Folds each card that opens folded, once: a later unfold by the user stays. */
export function foldDefaults(f: FoldState, tree: Tree, run?: RunModel): FoldState {
  for (const id of tree.children.keys()) {
    if (f.known.has(id) || !foldsByDefault(tree, run, id)) continue;
    f.known.add(id);
    setOpen(f, id, false);
  }
  return f;
}

/** Folds every node of `kind` with children: for `agent`, every sub-agent (an agent under
 * another agent), so the top agent stays open. Returns how many were open. */
export function foldKind(f: FoldState, tree: Tree, run: RunModel, kind: string): number {
  let n = 0;
  for (const id of tree.children.keys()) {
    if (run.nodes.get(id)?.kind !== kind) continue;
    if (kind === 'agent' && !hasAncestorOfKind(tree, run, id, 'agent')) continue;
    if (isOpen(f, id)) n++;
    setOpen(f, id, false);
  }
  return n;
}

function hasAncestorOfKind(tree: Tree, run: RunModel, id: string, kind: string): boolean {
  let p = tree.parent.get(id);
  for (let hops = 0; p && hops < 10000; hops++) {
    if (run.nodes.get(p)?.kind === kind) return true;
    p = tree.parent.get(p);
  }
  return false;
}

/** What a folded card hides: node count by kind, errors, and whether any is running or held. */
export function foldSummary(tree: Tree, run: RunModel, id: string): { kinds: Map<string, number>; errors: number; running: number; held: number } {
  const kinds = new Map<string, number>();
  let errors = 0;
  let running = 0;
  let held = 0;
  const stack = [...(tree.children.get(id) ?? [])];
  while (stack.length) {
    const k = stack.pop()!;
    const n = run.nodes.get(k);
    if (n) {
      kinds.set(n.kind, (kinds.get(n.kind) ?? 0) + 1);
      if (n.instances.some((i) => i.status === 'error')) errors++;
      if (n.activePause) held++;
      else if (n.instances.some((i) => i.status === 'running')) running++;
    }
    for (const c of tree.children.get(k) ?? []) stack.push(c);
  }
  return { kinds, errors, running, held };
}

export function isOpen(f: FoldState, id: string): boolean {
  return f.defaultOpen ? !f.collapsed.has(id) : f.expanded.has(id);
}

export function setOpen(f: FoldState, id: string, open: boolean): void {
  if (f.defaultOpen) open ? f.collapsed.delete(id) : f.collapsed.add(id);
  else open ? f.expanded.add(id) : f.expanded.delete(id);
}

/** Opens every ancestor of `id` (its protocol card and the run card included) so it gets a card. */
export function reveal(f: FoldState, run: RunModel, id: string): void {
  let n = run.nodes.get(id);
  let hops = 0;
  while (n && hops++ < 10000) {
    const p = n.parentId && run.nodes.has(n.parentId) ? n.parentId : undefined;
    if (p && isProtocol(n)) setOpen(f, PROTOCOL_PREFIX + p, true);
    if (!p) setOpen(f, RUN_ROOT, true);
    n = p ? run.nodes.get(p) : undefined;
    if (n) setOpen(f, n.id, true);
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
