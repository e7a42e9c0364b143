// The run bar's control levels: what this tab may do (its principal, from `welcome.control`)
// and what the agent token may do (`graphmind serve --allow-control`), as docs/security.md
// tabulates them. Read-only: the levels are the server's to set.
import { el } from './json';

/** `welcome.control` as the hub sends it (absent from servers without control tokens). */
export interface Control {
  principal?: string;
  agentLevel?: string;
  editInput?: boolean;
  hubCapabilities?: string[];
}

/** What each level allows, in docs/security.md's words. */
const ALLOWS: Record<string, string> = {
  viewer: 'continue, retry, abort, inject, edit input, breakpoints and step mode',
  edit: 'continue, retry, abort, inject, edit input, breakpoints and step mode',
  inject: 'continue, retry, abort, inject, breakpoints and step mode (no input edits)',
  resume: 'continue, retry, abort, breakpoints and step mode (no inject, no input edits)',
  off: 'nothing: the agent token cannot release or change anything',
  anonymous: 'continue, retry and abort only',
};

/** Short label of a level for the chip. */
function label(level: string): string {
  if (level === 'viewer' || level === 'edit') return 'full control';
  if (level === 'anonymous') return 'watch + release';
  return level;
}

/** The two chips: "this tab: viewer · full control" and "agent token: inject". */
export function controlLevelChips(c: Control | undefined): HTMLElement[] {
  if (!c || !c.principal) return [];
  const out: HTMLElement[] = [];
  const noEdit = c.editInput === false ? ' Input edits are off for everyone on this server (--no-edit-input).' : '';
  const you = el('span', 'chip chip-level', `this tab: ${c.principal === 'anonymous' ? 'no token' : c.principal} · ${label(c.principal)}`);
  you.dataset.testid = 'level-viewer';
  you.title = `This tab connected as ${c.principal}: it may ${ALLOWS[c.principal] ?? 'what the server allows'}.${noEdit}`;
  out.push(you);
  if (c.agentLevel) {
    const a = el('span', 'chip chip-level', `agent token: ${c.agentLevel}`);
    a.dataset.testid = 'level-agent';
    a.title = `The agent token (graphmind resume, the HTTP control API; graphmind serve --allow-control ${c.agentLevel}) may ${ALLOWS[c.agentLevel] ?? 'what the server allows'}.${noEdit}`;
    out.push(a);
  }
  return out;
}
