// The timeline panel: one row per execution, bars to scale with the held part hatched and a
// tick at the first token; only the rows in view are drawn. Zoom lives in the store: the
// buttons, Ctrl/⌘-wheel around the pointer, and dragging a range across the bars zooms to
// it. "Timeline only" gives the panel the whole main area.
import { el } from './json';
import { fmtMs, now } from './format';
import { S, invalidate } from './store';
import { timeline } from './timeline';
import { gapText, gapTime } from './stream';

const $ = (id: string) => document.getElementById(id)!;
/** Height of one timeline row in px. */
const ROW = 20;
/** Width of the pinned label column in px. */
const LABEL_W = 200;
/** A drag shorter than this (px) is a click, not a range. */
const MIN_DRAG_PX = 5;
/** The deepest zoom: the run's span times this fills the width. */
export const MAX_ZOOM = 500;
/** Shows or hides the timeline. */
export function toggleTimeline(): void {
  S.showTimeline = !S.showTimeline;
  if (!S.showTimeline) S.timelineOnly = false;
  applyView();
}

/** Shows the timeline alone (the graph hidden), or the graph back. */
export function toggleTimelineOnly(): void {
  S.timelineOnly = !S.timelineOnly;
  if (S.timelineOnly) S.showTimeline = true;
  applyView();
}

function applyView(): void {
  $('timeline').hidden = !S.showTimeline;
  $('main').classList.toggle('tl-only', S.timelineOnly);
  const b = document.getElementById('tl-only');
  if (b) b.classList.toggle('on', S.timelineOnly);
  invalidate({ timeline: true, bar: true, graph: true });
}

/** Sets the zoom so that `t1`..`t2` (ms from the run's start) fill the width. */
export function zoomTo(t1: number, t2: number, span: number): void {
  const sc = $('tl-scroll');
  const visible = Math.max(1, sc.clientWidth - LABEL_W);
  const lo = Math.max(0, Math.min(t1, t2));
  const hi = Math.min(span, Math.max(t1, t2));
  if (hi <= lo) return;
  S.tlZoom = Math.max(1, Math.min(MAX_ZOOM, span / (hi - lo)));
  // the new width must exist before scrolling to the range's start
  $('tl-inner').style.width = `${visible * S.tlZoom + LABEL_W}px`;
  sc.scrollLeft = (lo / span) * visible * S.tlZoom;
  invalidate({ timeline: true });
}

/** Wires the panel's controls: scroll, wheel zoom, the zoom buttons, drag-a-range, timeline only. */
export function setupTimeline(): void {
  const sc = $('tl-scroll');
  sc.addEventListener('scroll', () => invalidate({ timeline: true }));
  sc.addEventListener(
    'wheel',
    (e) => {
      if (!(e.ctrlKey || e.metaKey)) return;
      e.preventDefault();
      const px = e.clientX - sc.getBoundingClientRect().left - LABEL_W;
      const before = S.tlZoom;
      S.tlZoom = Math.max(1, Math.min(MAX_ZOOM, S.tlZoom * Math.exp(-e.deltaY * 0.002)));
      // keep the time under the pointer in place
      sc.scrollLeft = Math.max(0, ((sc.scrollLeft + px) * S.tlZoom) / before - px);
      invalidate({ timeline: true });
    },
    { passive: false },
  );
  $('tl-zoom-in').onclick = () => ((S.tlZoom = Math.min(MAX_ZOOM, S.tlZoom * 1.5)), invalidate({ timeline: true }));
  $('tl-zoom-out').onclick = () => ((S.tlZoom = Math.max(1, S.tlZoom / 1.5)), invalidate({ timeline: true }));
  $('tl-fit').onclick = () => ((S.tlZoom = 1), (sc.scrollLeft = 0), invalidate({ timeline: true }));
  $('tl-only').onclick = toggleTimelineOnly;
  // Drag a range across the bars (not the labels) to zoom to it.
  const sel = $('tl-sel');
  let from: number | undefined;
  let dragged = false;
  const xIn = (e: PointerEvent) => e.clientX - sc.getBoundingClientRect().left;
  sc.addEventListener('pointerdown', (e) => {
    if (e.button !== 0 || xIn(e) < LABEL_W) return;
    from = xIn(e);
    dragged = false;
  });
  sc.addEventListener('pointermove', (e) => {
    if (from === undefined) return;
    const x = Math.max(LABEL_W, Math.min(sc.clientWidth, xIn(e)));
    if (!dragged && Math.abs(x - from) < MIN_DRAG_PX) return;
    if (!dragged) sc.setPointerCapture(e.pointerId);
    dragged = true;
    sel.hidden = false;
    sel.style.top = `${sc.offsetTop}px`;
    sel.style.height = `${sc.clientHeight}px`;
    sel.style.left = `${sc.offsetLeft + Math.min(from, x)}px`;
    sel.style.width = `${Math.abs(x - from)}px`;
  });
  const end = (e: PointerEvent) => {
    if (from === undefined) return;
    const start = from;
    from = undefined;
    sel.hidden = true;
    if (!dragged) return;
    const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
    if (!m) return;
    const span = timeline(m, now()).span;
    const width = Math.max(1, (sc.clientWidth - LABEL_W) * S.tlZoom);
    const t = (x: number) => ((sc.scrollLeft + x - LABEL_W) / width) * span;
    const x = Math.max(LABEL_W, Math.min(sc.clientWidth, xIn(e)));
    zoomTo(t(start), t(x), span);
  };
  sc.addEventListener('pointerup', end);
  sc.addEventListener('pointercancel', () => ((from = undefined), (sel.hidden = true)));
  // the click that ends a drag selects no row
  sc.addEventListener(
    'click',
    (e) => {
      if (dragged) {
        e.stopPropagation();
        dragged = false;
      }
    },
    true,
  );
}

/** Draws the visible rows of the selected run's timeline (virtualised); a row click calls `select`. */
export function renderTimeline(select: (nodeId: string) => void): void {
  const box = $('timeline');
  box.hidden = !S.showTimeline;
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (!S.showTimeline || !m) return;
  const tl = timeline(m, now());
  const scroller = $('tl-scroll');
  const inner = $('tl-inner');
  const width = Math.max(LABEL_W, (scroller.clientWidth - LABEL_W) * S.tlZoom);
  inner.style.height = `${tl.bars.length * ROW}px`;
  inner.style.width = `${width + LABEL_W}px`;
  const first = Math.max(0, Math.floor(scroller.scrollTop / ROW) - 5);
  const last = Math.min(tl.bars.length, first + Math.ceil(scroller.clientHeight / ROW) + 10);
  const frag = document.createDocumentFragment();
  for (let r = first; r < last; r++) {
    const b = tl.bars[r];
    const row = el('div', `tl-row${b.nodeId === S.selectedNode ? ' sel' : ''}`);
    row.style.top = `${r * ROW}px`;
    const label = el('div', 'tl-label', b.name);
    label.style.left = `${scroller.scrollLeft}px`;
    const bar = el('div', `tl-bar st-${b.status}`);
    const x = LABEL_W + (b.start / tl.span) * width;
    const w = Math.max(2, (b.total / tl.span) * width);
    bar.style.left = `${x}px`;
    bar.style.width = `${w}px`;
    bar.title = `${b.name}: ${fmtMs(b.total)}${b.held ? `, held ${fmtMs(b.held)}` : ''}${b.firstToken !== undefined ? `, first token after ${fmtMs(b.firstToken)}` : ''}`;
    if (b.held) {
      const h = el('div', 'tl-held');
      h.style.width = `${(b.held / Math.max(1, b.total)) * 100}%`;
      bar.append(h);
    }
    if (b.firstToken !== undefined && w > 12) {
      const ft = el('div', 'tl-ft');
      ft.style.left = `${(b.firstToken / Math.max(1, b.total)) * 100}%`;
      bar.append(ft);
    }
    row.append(bar, label);
    row.onclick = () => select(b.nodeId);
    frag.append(row);
  }
  // Gap markers where the lost events fall (between the events around them).
  for (const g of m.gapList) {
    const t = gapTime(g);
    if (t === undefined) continue;
    const mark = el('div', 'tl-gap');
    mark.dataset.testid = 'tl-gap';
    mark.style.left = `${LABEL_W + (Math.max(0, t - tl.t0) / tl.span) * width}px`;
    mark.title = gapText(g);
    mark.append(el('span', '', gapText(g)));
    frag.append(mark);
  }
  inner.replaceChildren(frag);
  const shown = (Math.max(1, scroller.clientWidth - LABEL_W) / width) * tl.span;
  const a = (scroller.scrollLeft / width) * tl.span;
  $('tl-info').textContent = `${tl.bars.length} executions · ${fmtMs(tl.span)}${S.tlZoom > 1 ? ` · showing ${fmtMs(a)}–${fmtMs(Math.min(tl.span, a + shown))} (×${S.tlZoom.toFixed(1)})` : ''}`;
}

