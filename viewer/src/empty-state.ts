// The empty stage: no run yet (start the demo, point an app here, a synthetic run), a token
// needed, or a run with no nodes so far.
import { authHeaders, token } from './conn';
import { el } from './json';
import { S } from './store';
import { type RunModel } from './model';
import { NEEDS_TOKEN } from './control';
import { toast } from './actions';

/** What the stage says when there is nothing to draw. */
export function emptyState(m: RunModel | undefined): HTMLElement {
  const box = el('div', 'empty-card');
  if (S.embeddedError !== undefined) {
    box.dataset.testid = 'empty';
    box.append(el('h2', '', 'This exported run cannot be read'), el('p', 'muted', S.embeddedError));
    return box;
  }
  if (m && S.selectedRun) {
    box.append(el('h2', '', S.embedded ? 'No nodes recorded' : 'Waiting for events…'), el('p', 'muted', S.embedded ? `The exported run ${m.runId} has no node events.` : `Run ${m.runId} has no nodes yet.`));
    return box;
  }
  box.dataset.testid = 'empty';
  if (S.authNeeded) {
    box.append(el('h2', '', 'This server needs the viewer token'));
    box.append(el('p', '', 'Get this viewer’s link with its token: in a terminal on this machine, run'));
    box.append(el('pre', 'cmd', 'graphmind open'));
    box.append(el('p', 'muted', 'It prints the link (it ends in #token=…) and opens it. The token changes at every server start and is kept for this tab only.'));
    return box;
  }
  box.append(el('h2', '', 'No runs yet'));
  box.append(el('p', '', 'See one first: a demo agent that loops on a tool and fails once, held at both for you to Continue, Inject or Retry.'));
  box.append(startDemoButton());
  box.append(el('p', 'muted', 'Or in a terminal: graphmind demo (make demo in the repository).'));
  box.append(el('p', 'muted', `Or point an instrumented app at this server: GRAPHMIND_URL=ws://${location.host}/ingest${location.port === '4747' ? ' (the default)' : ''}.`));
  const a = el('a', 'btn', 'Try a synthetic 300-node run');
  a.href = '?stress=300';
  box.append(a);
  return box;
}

/** "Start the demo": `POST /api/demo/start` with the viewer token, then opens the run. */
function startDemoButton(): HTMLElement {
  const b = el('button', 'btn primary', 'Start the demo') as HTMLButtonElement;
  b.dataset.testid = 'start-demo';
  if (!token() && S.control) {
    b.disabled = true;
    b.title = NEEDS_TOKEN;
    const wrap = el('div', '');
    wrap.append(b, el('p', 'muted', NEEDS_TOKEN));
    return wrap;
  }
  b.onclick = async () => {
    b.disabled = true;
    try {
      const r = await fetch('/api/demo/start', { method: 'POST', headers: authHeaders() });
      const body = await r.json().catch(() => ({}));
      if (r.ok && typeof body.runId === 'string') location.hash = `#/run/${body.runId}`;
      else toast(`cannot start the demo: ${body.message ?? `HTTP ${r.status}`}`, 'warn');
    } catch (e) {
      toast(`cannot start the demo: ${e instanceof Error ? e.message : String(e)}`, 'warn');
    } finally {
      b.disabled = false;
    }
  };
  return b;
}
