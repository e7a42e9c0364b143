// The prompt diff: what changed between two consecutive calls of one LLM node. Pure (no DOM),
// so it is unit-tested in Node and timed in viewer/bench. Reads the recorded `input` of an LLM
// `node.started` (docs/llm.md): `instructions` / `system`, `messages` | `input` | `prompt`,
// `tools: [{name, schemaHash}]`, and the usage of each call for the cache-miss note.

/** One message that was added, changed or removed, by its index in the newer (or older) prompt. */
export interface MessageChange {
  index: number;
  role?: string;
  before?: unknown;
  after?: unknown;
}

/** What changed from the previous call's prompt to this one. */
export interface PromptDiff {
  /** Leading messages identical in both calls. */
  kept: number;
  added: MessageChange[];
  changed: MessageChange[];
  removed: MessageChange[];
  /** The system prompt (instructions / system / system-role messages), when it changed. */
  system?: { before?: string; after?: string };
  /** The model, when it changed. */
  model?: { before?: string; after?: string };
  tools: { added: string[]; removed: string[]; changed: string[] };
  /** Cached prompt tokens dropped between the calls (a cache miss), with both counts. */
  cacheMiss?: { before: number; after: number };
  /** Nothing above changed. */
  same: boolean;
}

/** Roles whose messages are the system prompt rather than the conversation. */
const SYSTEM_ROLES = new Set(['system', 'developer']);

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Canonical JSON (keys sorted) so key order never reads as a change. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (isObj(v)) {
    const keys = Object.keys(v).sort();
    return `{${keys.filter((k) => v[k] !== undefined).map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** A system prompt value (string, or content blocks) as text. */
function textOf(v: unknown): string {
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) return v.map((b) => (isObj(b) && typeof b.text === 'string' ? b.text : canonical(b))).join('\n');
  return v === undefined || v === null ? '' : canonical(v);
}

/** The conversation of a recorded input: `messages`, else `input` (Responses), else `prompt`. */
function conversation(input: Obj): unknown[] {
  const m = input.messages ?? input.input ?? input.prompt;
  if (Array.isArray(m)) return m;
  return m === undefined ? [] : [{ role: 'user', content: m }];
}

/** Splits an input into its system prompt and its conversation (system-role messages lifted out). */
export function promptParts(input: unknown): { system: string; messages: unknown[]; model?: string; tools: Map<string, string> } {
  const inp = isObj(input) ? input : {};
  const sys: string[] = [];
  if (inp.instructions !== undefined) sys.push(textOf(inp.instructions));
  if (inp.system !== undefined) sys.push(textOf(inp.system));
  const messages: unknown[] = [];
  for (const m of conversation(inp)) {
    if (isObj(m) && typeof m.role === 'string' && SYSTEM_ROLES.has(m.role)) sys.push(textOf(m.content));
    else messages.push(m);
  }
  const tools = new Map<string, string>();
  if (Array.isArray(inp.tools))
    for (const t of inp.tools) if (isObj(t) && typeof t.name === 'string') tools.set(t.name, typeof t.schemaHash === 'string' ? t.schemaHash : canonical(t));
  return { system: sys.join('\n'), messages, model: typeof inp.model === 'string' ? inp.model : undefined, tools };
}

const roleOf = (m: unknown) => (isObj(m) && typeof m.role === 'string' ? m.role : isObj(m) && typeof m.type === 'string' ? m.type : undefined);

/** Cached prompt tokens of a call's usage (`cacheReadTokens`), 0 when not reported. */
export const cachedOf = (usage: Record<string, number> | undefined) => (usage && typeof usage.cacheReadTokens === 'number' ? usage.cacheReadTokens : 0);

/**
 * Diffs two consecutive calls' inputs. Messages are compared by position: the identical leading
 * run is `kept`, a differing position is `changed`, positions only the newer call has are `added`,
 * only the older `removed`. Tools compare by name, `changed` when the schema hash differs.
 */
export function promptDiff(
  before: unknown,
  after: unknown,
  usage?: { before?: Record<string, number>; after?: Record<string, number> },
): PromptDiff {
  const a = promptParts(before);
  const b = promptParts(after);
  const d: PromptDiff = { kept: 0, added: [], changed: [], removed: [], tools: { added: [], removed: [], changed: [] }, same: true };
  const n = Math.min(a.messages.length, b.messages.length);
  let prefix = true;
  for (let i = 0; i < n; i++) {
    const x = a.messages[i];
    const y = b.messages[i];
    if (x === y || canonical(x) === canonical(y)) {
      if (prefix) d.kept++;
      continue;
    }
    prefix = false;
    d.changed.push({ index: i, role: roleOf(y), before: x, after: y });
  }
  for (let i = n; i < b.messages.length; i++) d.added.push({ index: i, role: roleOf(b.messages[i]), after: b.messages[i] });
  for (let i = n; i < a.messages.length; i++) d.removed.push({ index: i, role: roleOf(a.messages[i]), before: a.messages[i] });
  if (a.system !== b.system) d.system = { before: a.system || undefined, after: b.system || undefined };
  if (a.model !== b.model) d.model = { before: a.model, after: b.model };
  for (const [name, h] of b.tools) {
    if (!a.tools.has(name)) d.tools.added.push(name);
    else if (a.tools.get(name) !== h) d.tools.changed.push(name);
  }
  for (const name of a.tools.keys()) if (!b.tools.has(name)) d.tools.removed.push(name);
  const cb = cachedOf(usage?.before);
  const ca = cachedOf(usage?.after);
  if (usage?.before && usage?.after && ca < cb) d.cacheMiss = { before: cb, after: ca };
  d.same =
    !d.added.length && !d.changed.length && !d.removed.length && !d.system && !d.model &&
    !d.tools.added.length && !d.tools.removed.length && !d.tools.changed.length;
  return d;
}
