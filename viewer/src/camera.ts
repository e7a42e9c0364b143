// The graph's camera: fit (keeping cards out from under the minimap), centring, the minimap,
// and the stage's pan, zoom and minimap drag.
import { setupTimeline } from './timeline-panel';
import { virtualStatus } from './folds';
import { invalidate, S } from './store';
import { nodeStatus } from './model';
import { cards, G } from './graph';
import { closePalette, P, refreshPalette } from './palette';

const $ = (id: string) => document.getElementById(id)!;

/** camera */
export function applyCamera(): void {
  const w = $('world');
  w.style.transform = `translate(${S.cam.x}px, ${S.cam.y}px) scale(${S.cam.k})`;
  drawMinimap();
}

/** The minimap's rectangle in stage coordinates, with a margin, or undefined when hidden. */
function minimapZone(stage: DOMRect): { x: number; y: number; w: number; h: number } | undefined {
  const mm = $('minimap') as HTMLCanvasElement;
  if (mm.hidden) return undefined;
  const r = mm.getBoundingClientRect();
  const m = 10;
  return { x: r.left - stage.left - m, y: r.top - stage.top - m, w: r.width + 2 * m, h: r.height + 2 * m };
}

/** Whether any card, under camera `cam`, would lie under the rectangle `z` (so the minimap would take its clicks). */
function cardsUnder(z: { x: number; y: number; w: number; h: number }, cam: { k: number; x: number; y: number }): boolean {
  for (const [id, b] of G.view!.lay.boxes) {
    // a card's content (a token preview, long names) can make it taller than its layout box
    const h = Math.max(b.h, cards.get(id)?.el.offsetHeight ?? 0);
    const x = b.x * cam.k + cam.x;
    const y = b.y * cam.k + cam.y;
    if (x < z.x + z.w && x + b.w * cam.k > z.x && y < z.y + z.h && y + h * cam.k > z.y) return true;
  }
  return false;
}

/** Shows the whole run, scaled to the stage and kept clear of the minimap's corner. */
export function fit(): void {
  if (!G.view) return;
  const stage = $('stage').getBoundingClientRect();
  const { width, height, x0, y0 } = G.view.lay;
  const place = (w: number, h: number) => {
    const k = Math.max(0.45, Math.min(1, (w - 80) / Math.max(1, width), (h - 100) / Math.max(1, height)));
    const x = width * k <= w - 40 ? (w - width * k) / 2 : 40;
    return { k, x: x - x0 * k, y: Math.max(56, (h - height * k) / 2) - y0 * k };
  };
  let cam = place(stage.width, stage.height);
  const zone = minimapZone(stage);
  if (zone && cardsUnder(zone, cam)) {
    // the minimap would cover a card and take its clicks: fit into the band above it, or
    // the one left of it, whichever keeps the run larger and clear
    const options = [place(stage.width, zone.y), place(zone.x, stage.height)].filter((c) => !cardsUnder(zone, c));
    if (options.length) cam = options.reduce((a, b) => (b.k > a.k ? b : a));
  }
  S.cam = cam;
  applyCamera();
  G.fitted = true;
  G.fittedLayout = G.view.lay;
}

/** Whether every card lies inside the stage and clear of the minimap under the current camera. */
export function fitsInView(): boolean {
  if (!G.view) return true;
  const stage = $('stage').getBoundingClientRect();
  const zone = minimapZone(stage);
  if (zone && cardsUnder(zone, S.cam)) return false;
  const { width, height, x0, y0 } = G.view.lay;
  const k = S.cam.k;
  const left = x0 * k + S.cam.x;
  const top = y0 * k + S.cam.y;
  return left >= 0 && top >= 0 && left + width * k <= stage.width && top + height * k <= stage.height;
}

/** Centres the camera on node `id`'s card. */
export function centerOn(id: string): void {
  const box = G.view?.lay.boxes.get(id);
  if (!box) return;
  const stage = $('stage').getBoundingClientRect();
  const k = Math.max(S.cam.k, 0.6);
  S.cam = { k, x: stage.width / 2 - (box.x + box.w / 2) * k, y: stage.height / 2 - (box.y + box.h / 2) * k };
  G.fitted = false;
  applyCamera();
}

/** Draws the minimap: every card in its status colour and the viewport. */
export function drawMinimap(): void {
  const c = $('minimap') as HTMLCanvasElement;
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (!G.view || !m || c.hidden) return;
  const W = c.width;
  const H = c.height;
  const ctx = c.getContext('2d')!;
  const cs = getComputedStyle(document.body);
  ctx.fillStyle = cs.getPropertyValue('--panel').trim() || '#222';
  ctx.fillRect(0, 0, W, H);
  const pad = 6;
  const sc = Math.min(0.12, (W - pad * 2) / Math.max(1, G.view.lay.width), (H - pad * 2) / Math.max(1, G.view.lay.height));
  mini = { sc, pad };
  const { x0, y0 } = G.view.lay;
  for (const [id, b] of G.view.lay.boxes) {
    const n = m.nodes.get(id);
    const st = n ? nodeStatus(n) : G.view.proj.tree.virtual.has(id) ? virtualStatus(G.view.proj.tree, m, id) : undefined;
    if (!st) continue;
    ctx.fillStyle = cs.getPropertyValue(`--st-${st}`).trim() || '#888';
    ctx.fillRect(pad + (b.x - x0) * sc, pad + (b.y - y0) * sc, Math.max(2, b.w * sc), Math.max(2, b.h * sc));
  }
  const stage = $('stage').getBoundingClientRect();
  ctx.strokeStyle = cs.getPropertyValue('--accent').trim() || '#4af';
  ctx.lineWidth = 1.5;
  ctx.strokeRect(pad + (-S.cam.x / S.cam.k - x0) * sc, pad + (-S.cam.y / S.cam.k - y0) * sc, (stage.width / S.cam.k) * sc, (stage.height / S.cam.k) * sc);
}

let mini = { sc: 1, pad: 6 };

function minimapPan(ev: PointerEvent): void {
  const c = $('minimap') as HTMLCanvasElement;
  const r = c.getBoundingClientRect();
  const wx = (ev.clientX - r.left - mini.pad) / mini.sc + (G.view?.lay.x0 ?? 0);
  const wy = (ev.clientY - r.top - mini.pad) / mini.sc + (G.view?.lay.y0 ?? 0);
  const stage = $('stage').getBoundingClientRect();
  S.cam.x = stage.width / 2 - wx * S.cam.k;
  S.cam.y = stage.height / 2 - wy * S.cam.k;
  S.follow = false;
  G.fitted = false;
  applyCamera();
}

/** Wires the stage (pan, wheel zoom), the minimap and the timeline. */
export function setupStage(): void {
  const stage = $('stage');
  let drag: { x: number; y: number; cx: number; cy: number } | undefined;
  stage.addEventListener('pointerdown', (e) => {
    if ((e.target as HTMLElement).closest('.card, #minimap, #filters, button')) return;
    drag = { x: e.clientX, y: e.clientY, cx: S.cam.x, cy: S.cam.y };
    stage.setPointerCapture(e.pointerId);
    S.follow = false;
  });
  stage.addEventListener('pointermove', (e) => {
    if (!drag) return;
    S.cam.x = drag.cx + e.clientX - drag.x;
    S.cam.y = drag.cy + e.clientY - drag.y;
    G.fitted = false;
    applyCamera();
  });
  stage.addEventListener('pointerup', () => (drag = undefined));
  stage.addEventListener(
    'wheel',
    (e) => {
      if ((e.target as HTMLElement).closest('#minimap')) return;
      e.preventDefault();
      const r = stage.getBoundingClientRect();
      const px = e.clientX - r.left;
      const py = e.clientY - r.top;
      if (e.ctrlKey || e.metaKey || Math.abs(e.deltaY) > 0) {
        const k = Math.max(0.1, Math.min(2.5, S.cam.k * Math.exp(-e.deltaY * 0.0015)));
        S.cam.x = px - ((px - S.cam.x) * k) / S.cam.k;
        S.cam.y = py - ((py - S.cam.y) * k) / S.cam.k;
        S.cam.k = k;
      }
      G.fitted = false;
      applyCamera();
    },
    { passive: false },
  );
  // the inspector opening or closing, or the window resizing, changes the stage: a run shown
  // whole stays whole (and clear of the minimap); a camera the user placed stays put
  new ResizeObserver(() => (G.fitted ? fit() : drawMinimap())).observe(stage);
  const mm = $('minimap');
  let mmDrag = false;
  mm.addEventListener('pointerdown', (e) => {
    mmDrag = true;
    mm.setPointerCapture(e.pointerId);
    minimapPan(e);
  });
  mm.addEventListener('pointermove', (e) => mmDrag && minimapPan(e));
  mm.addEventListener('pointerup', () => (mmDrag = false));
  setupTimeline();
  ($('pal-input') as HTMLInputElement).addEventListener('input', () => {
    P.sel = 0;
    refreshPalette();
  });
  $('palette').addEventListener('mousedown', (e) => {
    if (e.target === $('palette')) closePalette();
  });
  window.addEventListener('resize', () => invalidate({ graph: true, timeline: true }));
}
