// The graph panel: the view (projection + layout) of the selected run, its cards (lit per
// execution, the held gate's banner), edges, the empty state, and focus on a new hold.
import { el } from './json';
import { fmtMs, now } from './format';
import { fillVirtualCard, setFold, summaryText } from './folds';
import { invalidate, KINDS, S } from './store';
import { anchorTo, CARD_H, HELD_H, type Layout, layout } from './layout';
import { activePauses, type GNode, hiddenBy, instanceTimes, nodeStatus, type RunModel } from './model';
import { buildTree, foldDefaults, type FoldState, initialFolds, project, type Projection, reveal, setOpen } from './project';
import { p90 } from './timeline';
import { matches, RECORD_HELD_H } from './control';
import { applyCamera, centerOn, fit, fitsInView } from './camera';
import { errorPath, renderFilters } from './filters';
import { selectNode } from './routing';
import { heldBanner, heldMeta } from './gate-card';
import { emptyState } from './empty-state';
import { cardMark } from './replay';

const $ = (id: string) => document.getElementById(id)!;

/** The graph panel's shared state: the current view, and the camera's pending moves. */
export const G = {
  view: undefined as View | undefined,
  /** Fit on the next draw (a run just opened, ⇧A, ⇧C). */
  fitPending: true,
  /** The card to keep in place across the next layout (the one whose fold just changed). */
  anchorHint: undefined as string | undefined,
  /** A node to centre once it has a card (a deep link). */
  pendingCenter: undefined as string | undefined,
  /** The run is shown whole (fitted) and nobody has moved the camera since. */
  fitted: false,
  /** The layout the last fit was made for. */
  fittedLayout: undefined as Layout | undefined,
};

// When a gate holds, focus moves to its Continue button once (after the card is drawn); and
// again only when a redraw replaced that button while it had the focus (the focus then falls
// back to the page), never away from something the user focused since.
let focusedPause: string | undefined;
let focusedButton: HTMLButtonElement | undefined;

function focusHeld(m: RunModel): void {
  const p = activePauses(m)[0];
  if (!p) return;
  const replaced = focusedButton !== undefined && !focusedButton.isConnected && document.activeElement === document.body;
  if (p.pauseId === focusedPause && !replaced) return;
  // a new hold off screen: bring its card into G.view
  const box = G.view?.lay.boxes.get(p.nodeId);
  if (box) {
    const stage = $('stage').getBoundingClientRect();
    const x = box.x * S.cam.k + S.cam.x;
    const y = box.y * S.cam.k + S.cam.y;
    if (x < 0 || y < 0 || x + box.w * S.cam.k > stage.width || y + box.h * S.cam.k > stage.height) centerOn(p.nodeId);
  }
  const btn = document.querySelector<HTMLButtonElement>(`.card[data-id="${CSS.escape(p.nodeId)}"] .act-continue`);
  if (!btn || !$('modal').hidden || !$('palette').hidden) return;
  focusedPause = p.pauseId;
  focusedButton = btn;
  btn.focus({ preventScroll: true });
}

interface View {
  runId: string;
  key: string;
  proj: Projection;
  lay: Layout;
}

/** The drawn cards by node id, with the stamp of what each shows. */
export const cards = new Map<string, { el: HTMLElement; stamp: string }>();

let cardsRun: string | undefined;

function foldsFor(m: RunModel, tree: ReturnType<typeof buildTree>): FoldState {
  // Until the user folds or unfolds something, the folds follow the run as it grows: all
  // open up to FOLD_THRESHOLD nodes, then the breadth-first budget, with the selected node
  // and every held node revealed.
  let f = S.folds.get(m.runId);
  if (!f || !S.userFolded.has(m.runId)) {
    f = initialFolds(tree, m.nodes.size, m);
    if (S.selectedNode && m.nodes.has(S.selectedNode)) reveal(f, m, S.selectedNode);
    for (const p of activePauses(m)) reveal(f, m, p.nodeId);
    S.folds.set(m.runId, f);
  } else foldDefaults(f, tree, m);
  return f;
}

function foldKey(f: FoldState): string {
  return `${f.defaultOpen}|${[...f.expanded].join(',')}|${[...f.collapsed].join(',')}`;
}

function computeView(m: RunModel): View {
  const tree = buildTree(m);
  const f = foldsFor(m, tree);
  const key = `${m.runId}|${m.shapeVersion}|${foldKey(f)}`;
  if (G.view && G.view.runId === m.runId && G.view.key === key) return G.view;
  const proj = project(m, f, tree);
  const lay = layout({ visible: proj.visible, parent: proj.parent, height: (id) => (m.nodes.get(id)?.activePause ? (S.embedded ? RECORD_HELD_H : HELD_H) : CARD_H) });
  if (G.view && G.view.runId === m.runId) {
    const hint = G.anchorHint && G.view.lay.boxes.has(G.anchorHint) ? G.anchorHint : undefined;
    G.anchorHint = undefined;
    const anchor = hint ?? (S.selectedNode && G.view.lay.boxes.has(S.selectedNode) ? S.selectedNode : proj.tree.roots.find((r) => G.view!.lay.boxes.has(r)));
    if (anchor) anchorTo(lay, G.view.lay, anchor);
  }
  G.view = { runId: m.runId, key, proj, lay };
  return G.view;
}

/** Draws the selected run's cards and edges (cards are reused while their stamp holds). */
export function renderGraph(): void {
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  const empty = $('empty');
  const world = $('world');
  if (!m || m.nodes.size === 0) {
    empty.hidden = false;
    empty.replaceChildren(emptyState(m));
    world.hidden = true;
    ($('minimap') as HTMLCanvasElement).hidden = true;
    $('filters').hidden = true;
    return;
  }
  empty.hidden = true;
  world.hidden = false;
  ($('minimap') as HTMLCanvasElement).hidden = false;
  $('filters').hidden = false;
  const v = computeView(m);
  const layer = $('cards');
  if (cardsRun !== m.runId) {
    // another run: nothing of the previous run's cards may be reused (same node ids)
    for (const c of cards.values()) c.el.remove();
    cards.clear();
    cardsRun = m.runId;
  }
  const seen = new Set<string>();
  const slow = S.filters.slow ? p90(m) : Infinity;
  const anyFilter = S.filters.errored || S.filters.errorPath || S.filters.slow || S.filters.paused || S.filters.kinds.size > 0;
  const onErrorPath = S.filters.errorPath ? errorPath(m) : undefined;
  for (const id of v.proj.visible) {
    const n = m.nodes.get(id);
    const box = v.lay.boxes.get(id)!;
    seen.add(id);
    if (!n) {
      // a card that stands for no node: the run, or an MCP session's protocol traffic
      const vn = v.proj.tree.virtual.get(id)!;
      const folded = v.proj.folded.get(id);
      const stamp = `virtual|${m.version}|${folded ?? -1}|${anyFilter}`;
      let c = cards.get(id);
      if (!c) {
        const e = el('div', 'card');
        e.dataset.id = id;
        layer.append(e);
        c = { el: e, stamp: '' };
        cards.set(id, c);
      }
      c.el.style.transform = `translate(${box.x}px, ${box.y}px)`;
      c.el.style.height = `${box.h}px`;
      if (c.stamp !== stamp) {
        c.stamp = stamp;
        fillVirtualCard(c.el, m, v.proj.tree, vn, folded, anyFilter, () => {
          G.anchorHint = id;
          setFold(m, id, folded !== undefined);
        });
      }
      continue;
    }
    const st = nodeStatus(n);
    const folded = v.proj.folded.get(id);
    const hasKids = (v.proj.tree.children.get(id)?.length ?? 0) > 0;
    const bp = S.breakpoints.some((b) => (b.kind !== undefined || b.name !== undefined) && matches(b, n));
    let dim = false;
    if (anyFilter) {
      let keep = true;
      if (S.filters.errored) keep &&= n.instances.some((i) => i.status === 'error');
      if (onErrorPath) keep &&= onErrorPath.has(id);
      if (S.filters.slow) keep &&= n.instances.some((i) => (i.durationMs ?? 0) >= slow);
      if (S.filters.paused) keep &&= !!n.activePause;
      if (S.filters.kinds.size) keep &&= S.filters.kinds.has(n.kind);
      dim = !keep;
    }
    const stamp = `${n.version}|${st}|${folded ?? -1}|${folded !== undefined ? m.version : ''}|${hasKids}|${bp}|${dim}|${id === S.selectedNode}|${box.h}|${S.mode}`;
    let c = cards.get(id);
    if (!c) {
      const e = el('div', 'card');
      e.dataset.id = id;
      layer.append(e);
      c = { el: e, stamp: '' };
      cards.set(id, c);
    }
    c.el.style.transform = `translate(${box.x}px, ${box.y}px)`;
    c.el.style.height = `${box.h}px`;
    if (c.stamp !== stamp || st === 'running') {
      c.stamp = stamp;
      fillCard(c.el, m, n, st, folded, hasKids, bp, dim);
    } else if (st === 'paused') {
      // tick the hold clock in place (rebuilding would take focus off Continue)
      const p = n.activePause ? m.pauses.get(n.activePause) : undefined;
      const meta = c.el.querySelector('.held-meta');
      if (p && meta) meta.textContent = heldMeta(p);
    }
  }
  for (const [id, c] of cards) {
    if (!seen.has(id)) {
      c.el.remove();
      cards.delete(id);
    }
  }
  // edges
  const svg = $('edges') as unknown as SVGSVGElement;
  const edgesKey = v.key;
  if (svg.dataset.key !== edgesKey) {
    svg.dataset.key = edgesKey;
    svg.setAttribute('width', String(v.lay.width + 40));
    svg.setAttribute('height', String(v.lay.height + 40));
    const parts: string[] = [];
    for (const e of v.lay.edges) {
      const path = 'M' + e.points.map((q) => `${q[0]},${q[1]}`).join(' L');
      parts.push(`<path class="edge" data-from="${attr(e.from)}" data-to="${attr(e.to)}" d="${path}"/>`);
    }
    svg.innerHTML = parts.join('');
  }
  if (G.pendingCenter && v.lay.boxes.has(G.pendingCenter)) {
    centerOn(G.pendingCenter);
    G.pendingCenter = undefined;
    G.fitPending = false;
  } else if (G.fitPending && !G.pendingCenter) {
    fit();
    G.fitPending = false;
  } else if (S.follow) {
    const running = v.proj.visible.find((id) => m.nodes.has(id) && ['running', 'paused'].includes(nodeStatus(m.nodes.get(id)!)));
    if (running) centerOn(running);
  } else if (G.fitted && G.fittedLayout !== v.lay) {
    // a run shown whole that grew out of the stage or under the minimap is shown whole again
    G.fittedLayout = v.lay;
    if (!fitsInView()) fit();
  }
  applyCamera();
  focusHeld(m);
  $('foldinfo').textContent = `${v.proj.visible.length - [...v.proj.tree.virtual.keys()].filter((id) => v.lay.boxes.has(id)).length} of ${m.nodes.size} nodes shown${v.proj.folded.size ? ` · ${[...v.proj.folded.values()].reduce((a, b) => a + b, 0)} folded` : ''}`;
  renderFilters();
}

function attr(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

function fillCard(e: HTMLElement, m: RunModel, n: GNode, st: string, folded: number | undefined, hasKids: boolean, bp: boolean, dim: boolean): void {
  e.className = `card kind-${KINDS.includes(n.kind) ? n.kind : 'custom'} st-${st}${dim ? ' dim' : ''}${n.id === S.selectedNode ? ' sel' : ''}`;
  e.replaceChildren();
  const head = el('div', 'card-head');
  head.append(el('span', 'kind-badge', n.kind));
  const name = el('span', 'card-name', n.name);
  name.title = n.id;
  head.append(name);
  if (bp) {
    const dot = el('span', 'bp-dot');
    dot.title = 'a breakpoint matches this node';
    head.append(dot);
  }
  if (n.instances.length > 1) head.append(el('span', 'count', `×${n.instances.length}`));
  const rm = cardMark(m, n);
  if (rm) {
    const c = el('span', `replay-mark mark-${rm.mark}`, rm.text);
    c.title = rm.title;
    c.dataset.testid = 'replay-mark';
    c.dataset.mark = rm.mark;
    head.append(c);
  }
  e.append(head);
  const last = n.instances[n.instances.length - 1];
  const sub = el('div', 'card-sub');
  const stLabel = el('span', `st-text st-${st}`, st);
  sub.append(stLabel);
  if (last) {
    const t = instanceTimes(last, m.endTs ?? now(), m);
    sub.append(el('span', 'muted', last.status === 'running' ? fmtMs(t.total) : `ran ${fmtMs(t.ran)}${t.held ? ` · held ${fmtMs(t.held)}` : ''}`));
    if (last.usage) sub.append(el('span', 'muted', `${(last.usage.inputTokens ?? 0) + (last.usage.outputTokens ?? 0)} tok`));
  }
  e.append(sub);
  if (last && last.status === 'running' && (last.text || last.reasoning)) {
    const prev = el('div', 'card-preview', (last.text || last.reasoning).slice(-90));
    prev.dataset.testid = 'token-preview';
    e.append(prev);
  } else if (last && last.status === 'running' && last.hiddenChars > 0) {
    const prev = el('div', 'card-preview');
    prev.dataset.testid = 'token-preview';
    prev.append(el('span', 'chip chip-hidden', `hidden by ${hiddenBy(n.kind, 'deltas')}`), document.createTextNode(` ${last.hiddenChars} chars`));
    e.append(prev);
  } else if (last?.status === 'error' && last.error) {
    e.append(el('div', 'card-preview err', `${last.error.name ?? 'Error'}: ${last.error.message ?? ''}`.slice(0, 90)));
  }
  if (folded !== undefined && !(last && last.status === 'running') && !(last?.status === 'error' && last.error) && G.view) {
    const sum = el('div', 'card-preview fold-summary', summaryText(G.view.proj.tree, m, n.id));
    sum.dataset.testid = 'fold-summary';
    e.append(sum);
  }
  if (hasKids) {
    const fb = el('button', 'fold-btn', folded !== undefined ? `▸ ${folded} folded` : '▾');
    fb.title = folded !== undefined ? 'Expand' : 'Fold the nodes under this one';
    fb.dataset.testid = folded !== undefined ? 'fold-expander' : 'fold-toggle';
    fb.onclick = (ev) => {
      ev.stopPropagation();
      const f = S.folds.get(m.runId)!;
      setOpen(f, n.id, folded !== undefined);
      S.userFolded.add(m.runId);
      G.anchorHint = n.id;
      invalidate({ graph: true });
    };
    e.append(fb);
  }
  const pause = n.activePause ? m.pauses.get(n.activePause) : undefined;
  if (pause && pause.active) e.append(heldBanner(m, n, pause));
  e.onclick = () => selectNode(n.id, false);
}
