// Debugging controls: what this tab may do, the messages that hold or release a gate (resume,
// step, mode, breakpoints), the held gate of the selection, and the JSON editor (inject / edit).
import { control, newRequestId, Socket } from './conn';
import { el } from './json';
import { S } from './store';
import { activePauses, carriesPlaceholder, type GNode, type Pause } from './model';
import { toast } from './actions';

const $ = (id: string) => document.getElementById(id)!;

/** The UI socket (set once by main.ts). */
export const wire = { socket: undefined as Socket | undefined };

/** What this tab's credential allows. A server that sends no `control` in `welcome` has no
 * credentials (0.5): everything is allowed. An anonymous viewer may continue, retry and
 * abort, but not inject, edit, or change breakpoints or step mode. */
export function may(what: 'inject' | 'edit' | 'debug'): boolean {
  const c = S.control;
  if (!c) return true;
  if (c.principal === 'anonymous') return false;
  if (what === 'edit') return c.editInput !== false;
  return true;
}

/** Why a control needs the viewer token (a disabled button's title). */
export const NEEDS_TOKEN = 'Needs the viewer token: run `graphmind open` in a terminal for this viewer’s link with its token';

/** A held card in an exported run: the reason and a note, no row of action buttons. */
export const RECORD_HELD_H = 150;

/** Why nothing in an exported run can be released or changed. */
export const READ_ONLY = 'An exported run is a record: nothing is executing, so nothing here can be resumed or changed';

/** Sends a control message on the UI socket (a no-op without one). */
export function send(type: string, payload: Record<string, unknown>, runId = '*'): void {
  if (S.stress || S.embedded) {
    toast(S.embedded ? READ_ONLY : 'a synthetic run cannot be controlled', 'warn');
    return;
  }
  wire.socket?.send(control(type, payload, runId));
}

/** Releases the held gate `p` with `action` (continue, retry, inject, abort) and its extras. */
export function resume(p: Pause, action: string, extra: Record<string, unknown> = {}): void {
  if (!S.selectedRun) return;
  send('exec.resume', { pauseId: p.pauseId, action, requestId: newRequestId(), ...extra }, S.selectedRun);
}

/** Step mode: releases `p` and holds before the next node. */
export function step(p: Pause): void {
  // arm step mode before releasing, so the next gate is already a step
  send('mode.set', { mode: 'step' });
  resume(p, 'continue');
}

/** Switches the server between run and step mode. */
export function setMode(mode: 'run' | 'step'): void {
  send('mode.set', { mode });
}

/** Sets the breakpoint `matcher`, or clears it when it is set. */
export function toggleBreakpoint(matcher: Record<string, unknown>): void {
  const same = S.breakpoints.find((b) => sameMatcher(b, matcher));
  send(same ? 'breakpoint.clear' : 'breakpoint.set', { matcher: same ?? matcher });
}

/** Whether two breakpoint matchers are the same (same keys and values). */
export function sameMatcher(a: any, b: any): boolean {
  const ka = Object.keys(a ?? {}).sort();
  const kb = Object.keys(b ?? {}).sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i] && a[k] === b[k]);
}

/** Whether a node-specific breakpoint matcher matches node `n`. */
export function matches(matcher: any, n: GNode): boolean {
  if (matcher.kind !== undefined && matcher.kind !== n.kind) return false;
  if (matcher.name !== undefined && matcher.name !== n.name) return false;
  return true;
}

/** The held gate the keys act on: the selected node's, else the first held one. */
export function currentPause(): Pause | undefined {
  const m = S.selectedRun ? S.models.get(S.selectedRun) : undefined;
  if (!m) return undefined;
  const ps = activePauses(m);
  if (S.selectedNode) {
    const mine = ps.find((p) => p.nodeId === S.selectedNode);
    if (mine) return mine;
  }
  return ps[0];
}

/** The JSON editor (inject a value / edit arguments). */
export function openEditor(p: Pause, mode: 'inject' | 'edit'): void {
  const m = S.models.get(S.selectedRun!);
  const n = m?.nodes.get(p.nodeId);
  const inst = n && p.instanceId ? n.byInstance.get(p.instanceId) : undefined;
  const box = $('modal');
  box.replaceChildren();
  box.hidden = false;
  const card = el('div', 'modal-card');
  card.append(el('h3', '', mode === 'inject' ? `Inject a result for ${n?.name ?? p.nodeId}` : `Edit the arguments of ${n?.name ?? p.nodeId}`));
  card.append(el('p', 'muted', mode === 'inject' ? 'The held call is skipped; this JSON value becomes its output.' : 'The held call runs with this input instead.'));
  const ta = el('textarea', 'editor');
  ta.spellcheck = false;
  ta.value = mode === 'inject' ? JSON.stringify(inst?.output ?? {}, null, 2) : JSON.stringify(inst?.input ?? {}, null, 2);
  const err = el('div', 'editor-error');
  const go = el('button', 'btn primary', mode === 'inject' ? 'Inject ⌘↵' : 'Run with these arguments ⌘↵');
  const cancel = el('button', 'btn', 'Cancel');
  const submit = () => {
    let v: unknown;
    try {
      v = JSON.parse(ta.value);
    } catch (e) {
      err.textContent = `Not valid JSON: ${(e as Error).message}`;
      return;
    }
    const bad = carriesPlaceholder(v);
    if (bad) {
      err.textContent = `Refused: the value ${bad}. Replace it with a real value first.`;
      return;
    }
    if (mode === 'inject') resume(p, 'inject', { output: v });
    else resume(p, 'continue', { input: v });
    closeModal();
  };
  go.onclick = submit;
  cancel.onclick = closeModal;
  ta.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.metaKey || e.ctrlKey)) {
      e.preventDefault();
      submit();
    } else if (e.key === 'Escape') closeModal();
  });
  const row = el('div', 'row');
  row.append(go, cancel);
  card.append(ta, err, row);
  box.append(card);
  ta.focus();
}

function closeModal(): void {
  $('modal').hidden = true;
  $('modal').replaceChildren();
}
