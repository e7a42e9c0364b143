// Layout: a top-down tidy tree over the visible cards, with orthogonal edges routed through
// the gaps between rows, so an edge never crosses a card. Pure and linear in the card count.

export const CARD_W = 232;
export const CARD_H = 84;
export const HELD_H = 196;
export const GAP_X = 28;
export const GAP_Y = 64;
/** Gap between cards stacked in a column. */
export const STACK_GAP = 14;
/** Indent of a stacked column, room for its vertical edge bus. */
export const STACK_INDENT = 26;
/** A parent whose visible children are all leaves stacks them when there are this many. */
export const STACK_MIN = 3;

export interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface Layout {
  boxes: Map<string, Box>;
  edges: { from: string; to: string; points: [number, number][] }[];
  /** Bounds: [x0, x0 + width] × [y0, y0 + height]. */
  x0: number;
  y0: number;
  width: number;
  height: number;
}

/**
 * Incremental placement: shifts `next` so the anchor card sits where it sat in `prev`.
 * When a live run grows, the tree re-centres parents over their new children; anchoring on
 * the card the user looks at (the selection, else the first root) keeps it still and lets
 * the rest slide around it. Returns whether it shifted.
 */
export function anchorTo(next: Layout, prev: Layout, anchor: string): boolean {
  const a = prev.boxes.get(anchor);
  const b = next.boxes.get(anchor);
  if (!a || !b) return false;
  const dx = a.x - b.x;
  const dy = a.y - b.y;
  if (dx === 0 && dy === 0) return false;
  for (const box of next.boxes.values()) {
    box.x += dx;
    box.y += dy;
  }
  for (const e of next.edges) for (const p of e.points) (p[0] += dx), (p[1] += dy);
  next.x0 += dx;
  next.y0 += dy;
  return true;
}

export interface LayoutInput {
  /** Visible ids in pre-order (parents before children, siblings in order). */
  visible: string[];
  /** Visible parent of each child. */
  parent: Map<string, string>;
  /** Card height per id (default CARD_H). */
  height?: (id: string) => number;
}

/**
 * Each subtree gets a slot as wide as the larger of its card and its children's slots side
 * by side; a parent is centred over its children. Rows are as tall as their tallest card.
 * A parent whose visible children are all leaves (STACK_MIN or more) stacks them in one
 * column under it, joined by a vertical bus left of the column. Slots never overlap, edges
 * run inside their parent's slot and through the gaps, so no edge crosses a card. Order is
 * the nodes' first-seen order, so a new node lands after its siblings and the rest keep
 * their relative places (cards animate to their new position).
 */
export function layout(input: LayoutInput): Layout {
  const { visible, parent } = input;
  const h = input.height ?? (() => CARD_H);
  const kids = new Map<string, string[]>();
  const roots: string[] = [];
  for (const id of visible) {
    const p = parent.get(id);
    if (p !== undefined) {
      let l = kids.get(p);
      if (!l) kids.set(p, (l = []));
      l.push(id);
    } else roots.push(id);
  }
  // depth and row heights
  const depth = new Map<string, number>();
  const rowH: number[] = [];
  for (const id of visible) {
    const p = parent.get(id);
    const d = p !== undefined ? (depth.get(p) ?? 0) + 1 : 0;
    depth.set(id, d);
    rowH[d] = Math.max(rowH[d] ?? 0, h(id));
  }
  const rowY: number[] = [];
  let y = 0;
  for (let d = 0; d < rowH.length; d++) {
    rowY[d] = y;
    y += rowH[d] + GAP_Y;
  }
  // subtree widths, children before parents: walk pre-order backwards
  const width = new Map<string, number>();
  const stacked = new Set<string>();
  for (const [id, ks] of kids) if (ks.length >= STACK_MIN && ks.every((k) => !kids.has(k))) stacked.add(id);
  for (let i = visible.length - 1; i >= 0; i--) {
    const id = visible[i];
    const ks = kids.get(id);
    let w = 0;
    if (stacked.has(id)) w = CARD_W + STACK_INDENT;
    else if (ks) {
      for (const k of ks) w += width.get(k)!;
      w += GAP_X * (ks.length - 1);
    }
    width.set(id, Math.max(CARD_W, w));
  }
  const boxes = new Map<string, Box>();
  let bottom = y - GAP_Y;
  const left = new Map<string, number>();
  let x = 0;
  for (const r of roots) {
    left.set(r, x);
    x += width.get(r)! + GAP_X * 2;
  }
  for (const id of visible) {
    const l = left.get(id)!;
    const w = width.get(id)!;
    const ks = kids.get(id);
    const d = depth.get(id)!;
    if (!boxes.has(id)) boxes.set(id, { x: l + (w - CARD_W) / 2, y: rowY[d], w: CARD_W, h: h(id) });
    if (ks && stacked.has(id)) {
      let sy = rowY[d + 1];
      for (const k of ks) {
        boxes.set(k, { x: l + STACK_INDENT, y: sy, w: CARD_W, h: h(k) });
        sy += h(k) + STACK_GAP;
      }
      bottom = Math.max(bottom, sy - STACK_GAP);
    } else if (ks) {
      let cw = GAP_X * (ks.length - 1);
      for (const k of ks) cw += width.get(k)!;
      let cx = l + (w - cw) / 2;
      for (const k of ks) {
        left.set(k, cx);
        cx += width.get(k)! + GAP_X;
      }
    }
  }
  const edges: Layout['edges'] = [];
  for (const [child, p] of parent) {
    const a = boxes.get(p);
    const b = boxes.get(child);
    if (!a || !b) continue;
    const d = depth.get(p)!;
    const midY = rowY[d] + rowH[d] + GAP_Y / 2;
    const ax = a.x + a.w / 2;
    if (stacked.has(p)) {
      const bus = b.x - STACK_INDENT / 2;
      const cy = b.y + Math.min(b.h, CARD_H) / 2;
      edges.push({ from: p, to: child, points: [[ax, a.y + a.h], [ax, midY], [bus, midY], [bus, cy], [b.x, cy]] });
      continue;
    }
    const bx = b.x + b.w / 2;
    edges.push({ from: p, to: child, points: [[ax, a.y + a.h], [ax, midY], [bx, midY], [bx, b.y]] });
  }
  return { boxes, edges, x0: 0, y0: 0, width: Math.max(0, x - GAP_X * 2), height: Math.max(0, bottom) };
}
