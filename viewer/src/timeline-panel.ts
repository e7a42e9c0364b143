// The timeline panel: one row per execution, bars to scale with the held part hatched and a
// tick at the first token; only the rows in view are drawn. Zoom lives in the store.
import { el } from './json';
import { fmtMs, now } from './format';
import { S, invalidate } from './store';
import { timeline } from './timeline';
import { gapText, gapTime } from './stream';

const $ = (id: string) => document.getElementById(id)!;
/** Height of one timeline row in px. */
const ROW = 20;
/** Shows or hides the timeline. */
export function toggleTimeline(): void {
  S.showTimeline = !S.showTimeline;
  $('timeline').hidden = !S.showTimeline;
  invalidate({ timeline: true, bar: true });
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
  const width = Math.max(200, (scroller.clientWidth - 200) * S.tlZoom);
  inner.style.height = `${tl.bars.length * ROW}px`;
  inner.style.width = `${width + 200}px`;
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
    const x = 200 + (b.start / tl.span) * width;
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
    mark.style.left = `${200 + (Math.max(0, t - tl.t0) / tl.span) * width}px`;
    mark.title = gapText(g);
    mark.append(el('span', '', gapText(g)));
    frag.append(mark);
  }
  inner.replaceChildren(frag);
  $('tl-info').textContent = `${tl.bars.length} executions · ${fmtMs(tl.span)}`;
}

