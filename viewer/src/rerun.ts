// "Re-run from here" in the node inspector: the `graphmind replay` line that re-runs the
// app with this run's calls answered from the recording up to this call, live from it
// (docs/replay.md). The rules are the core's; this only spells the command.

import { el } from './json';

/** The kinds a replay answers (tool and model calls); other nodes run their own code. */
export const RERUN_KINDS = ['tool', 'llm'];
/** The server's default port: the line names --port only when the viewer is elsewhere. */
export const DEFAULT_PORT = 4747;

/** `text` as one POSIX shell word. */
export function shellWord(text: string): string {
  return /^[A-Za-z0-9_\-./:@#=,]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

/** `graphmind replay <run> --from '<nodeId>#<n>' [--port N]`: `n` counts this node's
 * executions from 1 in the order they started. */
export function rerunLine(runId: string, nodeId: string, n: number, port: number = DEFAULT_PORT): string {
  const parts = ['graphmind', 'replay', shellWord(runId), '--from', shellWord(`${nodeId}#${n}`)];
  if (port !== DEFAULT_PORT) parts.push('--port', String(port));
  return parts.join(' ');
}

/** The inspector's panel: the line ready to copy, and what it does. `undefined` for a node
 * a replay does not answer. */
export function rerunPanel(runId: string, nodeId: string, kind: string, n: number, port: number): HTMLElement | undefined {
  if (!RERUN_KINDS.includes(kind) || n < 1) return undefined;
  const box = el('div', 'rerun');
  box.dataset.testid = 'rerun';
  const line = rerunLine(runId, nodeId, n, port);
  const head = el('h4', '', 'Re-run from here');
  const code = el('code', 'mono rerun-line', line);
  const copy = el('button', 'btn small', 'Copy');
  copy.onclick = () => {
    navigator.clipboard?.writeText(`${line} --exec '<your app command>'`).then(
      () => (copy.textContent = 'Copied'),
      () => (copy.textContent = 'Copy failed'),
    );
  };
  const hint = el('p', 'muted', `Calls before this one are answered from this run; this call (#${n}) and what follows run live. Add --exec '<your app command>' to start it, --output <json> to edit the previous call's output.`);
  box.append(head, code, copy, hint);
  return box;
}
