// The gate card: the banner of a held node (on its card and atop the inspector) with why it
// held, how long, a refusal, and the actions that release it; in an exported run, a note.
import { el } from './json';
import { fmtMs, now } from './format';
import { S } from './store';
import { type GNode, type Pause, pauseReasonText, type RunModel } from './model';
import { may, NEEDS_TOKEN, openEditor, READ_ONLY, resume, step } from './control';

/** The banner of a held card: why it held and the actions that release it. */
export function heldBanner(m: RunModel, n: GNode, p: Pause): HTMLElement {
  const b = el('div', 'held');
  b.dataset.testid = 'held';
  b.append(el('div', 'held-reason', pauseReasonText(p, n)));
  if (p.refused) b.append(el('div', 'held-refused', `refused: ${p.refused.code}${p.refused.message ? ` — ${p.refused.message}` : ''}`));
  if (S.embedded) {
    // A record: the gate was held when the run was exported; there is nothing to release.
    const note = el('div', 'held-meta muted', `${heldMeta(p)} when exported · read-only record`);
    note.dataset.testid = 'held-readonly';
    note.title = READ_ONLY;
    b.append(note);
    return b;
  }
  const row = el('div', 'held-actions');
  const mk = (label: string, key: string, cls: string, fn: () => void) => {
    const btn = el('button', `btn act ${cls}`);
    btn.append(document.createTextNode(label));
    if (key) btn.append(el('kbd', '', key));
    btn.onclick = (ev) => {
      ev.stopPropagation();
      fn();
    };
    row.append(btn);
    return btn;
  };
  mk('Continue', 'C', 'act-continue primary', () => resume(p, 'continue'));
  const st = mk('Step', 'S', 'act-step', () => step(p));
  if (!may('debug')) (st.disabled = true), (st.title = `${NEEDS_TOKEN} (Step arms step mode)`);
  mk('Retry', 'R', 'act-retry', () => resume(p, 'retry'));
  const inj = mk('Inject', 'I', 'act-inject', () => openEditor(p, 'inject'));
  if (!may('inject')) (inj.disabled = true), (inj.title = NEEDS_TOKEN);
  if (p.editable && S.control?.editInput !== false) {
    const ed = mk('Edit args', '', 'act-edit', () => openEditor(p, 'edit'));
    if (!may('edit')) (ed.disabled = true), (ed.title = NEEDS_TOKEN);
  }
  mk('Abort', '', 'act-abort danger', () => resume(p, 'abort'));
  b.append(row);
  b.append(el('div', 'held-meta muted', heldMeta(p)));
  return b;
}

/** "held 3.2 s at the before gate", ticking. */
export function heldMeta(p: Pause): string {
  return `${p.point} gate · held ${fmtMs(Math.max(0, now() - p.ts))}`;
}
