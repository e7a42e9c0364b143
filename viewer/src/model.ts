// The run model: a pure reducer from wire envelopes (protocol v1) to what the viewer draws.
// One `GNode` per logical `nodeId`, one `Instance` per `instanceId` (an execution of it).

export interface Envelope {
  gm: number;
  seq: number;
  ts: number;
  runId: string;
  type: string;
  payload: any;
}

export type NodeStatus = 'pending' | 'running' | 'ok' | 'error' | 'aborted' | 'paused';

export interface Redaction {
  count: number;
  keys: string[];
}

export interface Instance {
  instanceId: string;
  nodeId: string;
  startTs: number;
  endTs?: number;
  firstTokenTs?: number;
  status: 'running' | 'ok' | 'error' | 'aborted';
  input?: unknown;
  output?: unknown;
  error?: { name?: string; message?: string; stack?: string };
  usage?: Record<string, number>;
  durationMs?: number;
  heldMs?: number;
  startRedaction?: Redaction;
  finishRedaction?: Redaction;
  tokenRedaction?: Redaction;
  injected?: boolean;
  recovered?: boolean;
  edited?: unknown;
  principal?: string;
  text: string;
  reasoning: string;
  /** Characters streamed whose text a redaction switch hid (deltas with `v: ""`, `chars`). */
  hiddenChars: number;
  /** The `seq` of its `node.started` (start order where `ts` ties). */
  startSeq?: number;
  /** Answered from the recording by a replay (`node.started/finished.replayed`): nothing ran. */
  replayed?: boolean;
  /** The replay answered it with the edited output (`node.finished.replayEdited`). */
  replayEdited?: boolean;
  /** The call where a replay went live (`node.started.replayLive`). */
  replayLive?: ReplayLive;
}

/** Where and why a replay went live (docs/protocol.md): `fork`, `diverged`, `unrecorded`,
 * `unfinished` or `unsupported`, at `<nodeId>#<n>`, with up to 8 input paths that differ and,
 * for a divergence, the recorded and the live call's match keys. */
export interface ReplayLive {
  reason: string;
  at: string;
  differs?: string[];
  recordedKey?: string;
  liveKey?: string;
}

export interface GNode {
  id: string;
  kind: string;
  name: string;
  parentId?: string;
  order: number;
  hinted: boolean;
  instances: Instance[];
  byInstance: Map<string, Instance>;
  activePause?: string;
  /** `node.started.collapsed`: the app asks for the node to open folded. */
  collapsed?: boolean;
  version: number;
}

export interface LoopInfo {
  repeats?: number;
  firstSeq?: number;
  lastSeq?: number;
  kind?: string;
  period?: number;
  laps?: number;
  fingerprint?: string;
}

export interface Pause {
  pauseId: string;
  nodeId: string;
  point: string;
  reason?: string;
  loop?: LoopInfo;
  smart?: { rule: string; detail?: string };
  editable?: boolean;
  active: boolean;
  ts: number;
  instanceId?: string;
  resumed?: { action: string; principal?: string; edited?: unknown; ts: number };
  refused?: { code: string; message?: string };
}

export interface RunModel {
  runId: string;
  app?: string;
  status: string;
  startTs?: number;
  endTs?: number;
  lastTs?: number;
  error?: { name?: string; message?: string };
  nodes: Map<string, GNode>;
  pauses: Map<string, Pause>;
  /** seq -> ts of every applied event (dedupe, and where a gap falls). */
  seen: Map<number, number>;
  /** instanceId -> nodeId: the C ABI and the Rust API name a parent by its instance id. */
  instanceNode: Map<string, string>;
  /** Nodes with an instance still running (for inferring a missing parentId). */
  running: Set<string>;
  /** `run.started.meta.replayOf`: the run this one replays. */
  replayOf?: string;
  /** `run.started.meta.from`: the replay's fork point, `<nodeId>#<n>`. */
  replayFrom?: string;
  eventCount: number;
  errorCount: number;
  gaps: number;
  /** The replay gap markers (`graph.hint` with `gap`), in arrival order: what was lost and where. */
  gapList: Gap[];
  /** Bumps on every applied event. */
  version: number;
  /** Bumps when the set of nodes, their parents or their pause state changes (layout input). */
  shapeVersion: number;
}

/** One gap marker: `dropped` events with seq `fromSeq`..`toSeq` never reached a debugger. */
export interface Gap {
  dropped: number;
  fromSeq: number;
  toSeq: number;
  reason: string;
  /** The newest ts seen on an event before `fromSeq` and the oldest after `toSeq`: where the gap falls in time. */
  beforeTs?: number;
  afterTs?: number;
}

export function newRun(runId: string): RunModel {
  return {
    runId,
    status: 'running',
    nodes: new Map(),
    pauses: new Map(),
    seen: new Map(),
    instanceNode: new Map(),
    running: new Set(),
    eventCount: 0,
    errorCount: 0,
    gaps: 0,
    gapList: [],
    version: 0,
    shapeVersion: 0,
  };
}

function ensureNode(run: RunModel, id: string, kind?: string, name?: string, parentId?: string): GNode {
  let n = run.nodes.get(id);
  if (!n) {
    n = {
      id,
      kind: kind ?? (id.includes(':') ? id.slice(0, id.indexOf(':')) : 'custom'),
      name: name ?? (id.includes(':') ? id.slice(id.indexOf(':') + 1) : id),
      parentId: parentId && parentId !== id ? parentId : undefined,
      order: run.nodes.size,
      hinted: true,
      instances: [],
      byInstance: new Map(),
      version: 0,
    };
    run.nodes.set(id, n);
    run.shapeVersion++;
  } else {
    if (kind && n.kind !== kind) n.kind = kind;
    if (name) n.name = name;
    if (parentId && !n.parentId && parentId !== id) {
      n.parentId = parentId;
      run.shapeVersion++;
    }
  }
  return n;
}

function latestRunning(n: GNode): Instance | undefined {
  for (let i = n.instances.length - 1; i >= 0; i--) if (n.instances[i].status === 'running') return n.instances[i];
  return n.instances[n.instances.length - 1];
}

function findInstance(n: GNode, instanceId: unknown): Instance | undefined {
  if (typeof instanceId === 'string') {
    const i = n.byInstance.get(instanceId);
    if (i) return i;
  }
  return latestRunning(n);
}

function redactionOf(p: any): Redaction | undefined {
  const r = p?.redaction;
  if (r && typeof r === 'object' && Array.isArray(r.keys)) return { count: Number(r.count) || 0, keys: r.keys.filter((k: unknown) => typeof k === 'string') };
  return undefined;
}

/** Applies one envelope; returns false for a duplicate (same seq) or a non-run envelope. */
export function apply(run: RunModel, env: Envelope): boolean {
  if (!env || typeof env.seq !== 'number' || run.seen.has(env.seq)) return false;
  const p = env.payload ?? {};
  const ts = typeof env.ts === 'number' ? env.ts : 0;
  run.seen.set(env.seq, ts);
  run.eventCount++;
  run.version++;
  if (run.startTs === undefined || ts < run.startTs) run.startTs = ts;
  if (run.lastTs === undefined || ts > run.lastTs) run.lastTs = ts;
  if (env.type !== 'graph.hint') for (const g of run.gapList) placeGap(g, env.seq, ts);
  switch (env.type) {
    case 'run.started':
      if (typeof p.app === 'string') run.app = p.app;
      if (typeof p.meta?.replayOf === 'string') run.replayOf = p.meta.replayOf;
      if (typeof p.meta?.from === 'string') run.replayFrom = p.meta.from;
      run.startTs = ts;
      break;
    case 'run.finished':
      run.status = typeof p.status === 'string' ? p.status : 'ok';
      run.endTs = ts;
      if (p.error) run.error = p.error;
      for (const pause of run.pauses.values()) closePause(run, pause);
      for (const n of run.nodes.values()) {
        for (const i of n.instances) if (i.status === 'running') i.status = run.status === 'aborted' ? 'aborted' : i.status;
      }
      break;
    case 'graph.hint':
      if (p.gap && typeof p.gap === 'object') addGap(run, p.gap, env.seq);
      if (Array.isArray(p.nodes)) for (const h of p.nodes) if (h && typeof h.nodeId === 'string') ensureNode(run, h.nodeId, h.kind, h.name, h.parentId);
      break;
    case 'node.started': {
      if (typeof p.nodeId !== 'string') break;
      // No parentId: the node runs under whatever started most recently and is still running.
      // A parentId that names no node but an execution (the C ABI's and the Rust API's
      // parent instance id) stands for that execution's node.
      const named = typeof p.parentId === 'string' ? (run.nodes.has(p.parentId) ? p.parentId : run.instanceNode.get(p.parentId) ?? p.parentId) : undefined;
      const parent = named ?? (run.nodes.has(p.nodeId) ? undefined : innermostRunning(run, p.nodeId));
      const n = ensureNode(run, p.nodeId, p.kind, p.name, parent);
      n.hinted = false;
      if (p.collapsed === true && !n.collapsed) {
        n.collapsed = true;
        run.shapeVersion++;
      }
      const instanceId = typeof p.instanceId === 'string' ? p.instanceId : `${p.nodeId}#${n.instances.length}`;
      let inst = n.byInstance.get(instanceId);
      if (!inst) {
        inst = { instanceId, nodeId: n.id, startTs: ts, status: 'running', text: '', reasoning: '', hiddenChars: 0 };
        n.instances.push(inst);
        n.byInstance.set(instanceId, inst);
        run.instanceNode.set(instanceId, n.id);
      }
      inst.input = p.input;
      inst.startSeq ??= env.seq;
      if (p.replayed === true) inst.replayed = true;
      const live = replayLiveOf(p.replayLive);
      if (live) inst.replayLive = live;
      inst.startRedaction = redactionOf(p);
      run.running.add(n.id);
      n.version++;
      break;
    }
    case 'node.token': {
      if (typeof p.nodeId !== 'string') break;
      const n = ensureNode(run, p.nodeId);
      const inst = findInstance(n, p.instanceId);
      if (!inst) break;
      if (inst.firstTokenTs === undefined) inst.firstTokenTs = ts;
      if (Array.isArray(p.deltas))
        for (const d of p.deltas) {
          if (!d || typeof d.v !== 'string') continue;
          if (d.v === '' && typeof d.chars === 'number') {
            inst.hiddenChars += d.chars;
            continue;
          }
          if (d.t === 'reasoning') inst.reasoning = clip(inst.reasoning + d.v);
          else inst.text = clip(inst.text + d.v);
        }
      const r = redactionOf(p);
      if (r) inst.tokenRedaction = r;
      n.version++;
      break;
    }
    case 'node.finished': {
      if (typeof p.nodeId !== 'string') break;
      const n = ensureNode(run, p.nodeId);
      n.hinted = false;
      const inst = findInstance(n, p.instanceId) ?? addLateInstance(n, p.instanceId, ts, p.durationMs);
      inst.status = p.status === 'error' ? 'error' : p.status === 'aborted' ? 'aborted' : 'ok';
      inst.endTs = ts;
      inst.output = p.output;
      if (p.usage && typeof p.usage === 'object') inst.usage = p.usage;
      if (typeof p.durationMs === 'number') inst.durationMs = p.durationMs;
      if (typeof p.heldMs === 'number') inst.heldMs = p.heldMs;
      inst.finishRedaction = redactionOf(p);
      if (p.injected) inst.injected = true;
      if (p.replayed === true) inst.replayed = true;
      if (p.replayEdited === true) inst.replayEdited = true;
      if (p.recoveredFromError) inst.recovered = true;
      if (inst.status === 'error') run.errorCount++;
      settle(run, n);
      n.version++;
      break;
    }
    case 'node.error': {
      if (typeof p.nodeId !== 'string') break;
      const n = ensureNode(run, p.nodeId);
      n.hinted = false;
      const inst = findInstance(n, p.instanceId) ?? addLateInstance(n, p.instanceId, ts, undefined);
      inst.status = 'error';
      inst.endTs = ts;
      inst.error = p.error;
      if (p.replayed === true) inst.replayed = true;
      if (typeof p.heldMs === 'number') inst.heldMs = p.heldMs;
      if (inst.durationMs === undefined) inst.durationMs = Math.max(0, ts - inst.startTs);
      run.errorCount++;
      settle(run, n);
      n.version++;
      break;
    }
    case 'exec.paused': {
      if (typeof p.pauseId !== 'string' || typeof p.nodeId !== 'string') break;
      const n = ensureNode(run, p.nodeId);
      const inst = latestRunning(n);
      const pause: Pause = {
        pauseId: p.pauseId,
        nodeId: p.nodeId,
        point: p.point ?? 'before',
        reason: p.reason,
        loop: p.loop,
        smart: p.smart,
        editable: p.editable === true,
        active: true,
        ts,
        instanceId: inst?.instanceId,
      };
      run.pauses.set(pause.pauseId, pause);
      n.activePause = pause.pauseId;
      n.version++;
      run.shapeVersion++;
      break;
    }
    case 'exec.resumed': {
      const pause = run.pauses.get(p.pauseId);
      if (!pause) break;
      pause.resumed = { action: String(p.action ?? 'continue'), principal: typeof p.principal === 'string' ? p.principal : principalName(p.principal), edited: p.edited?.after, ts };
      closePause(run, pause);
      const n = run.nodes.get(pause.nodeId);
      const inst = n && pause.instanceId ? n.byInstance.get(pause.instanceId) : undefined;
      if (inst) {
        if (p.edited) inst.edited = p.edited.after;
        if (pause.resumed.principal) inst.principal = pause.resumed.principal;
        // The hold counts as held until the node.finished that follows stamps the core's own
        // heldMs (which replaces this): an `error` gate holds after node.error, outside the
        // time that event measured.
        inst.heldMs = (inst.heldMs ?? 0) + Math.max(0, ts - pause.ts);
        if (pause.point === 'error' && pause.resumed.action === 'retry' && inst.status === 'error') {
          // a retry runs the call again on the same instance: it is running, not failed
          inst.status = 'running';
          inst.endTs = undefined;
          inst.durationMs = undefined;
          run.running.add(n!.id);
        }
        n!.version++;
      }
      break;
    }
    case 'exec.refused': {
      const pause = run.pauses.get(p.pauseId);
      if (pause) {
        pause.refused = { code: String(p.code), message: p.message };
        const n = run.nodes.get(pause.nodeId);
        if (n) n.version++;
      }
      break;
    }
    default:
      break;
  }
  return true;
}

function replayLiveOf(v: any): ReplayLive | undefined {
  if (!v || typeof v !== 'object' || typeof v.reason !== 'string') return undefined;
  const differs: string[] | undefined = Array.isArray(v.differs) ? v.differs.filter((d: unknown) => typeof d === 'string') : undefined;
  const out: ReplayLive = { reason: v.reason, at: typeof v.at === 'string' ? v.at : '' };
  if (differs) out.differs = differs;
  if (typeof v.recordedKey === 'string') out.recordedKey = v.recordedKey;
  if (typeof v.liveKey === 'string') out.liveKey = v.liveKey;
  return out;
}

function innermostRunning(run: RunModel, except: string): string | undefined {
  let best: Instance | undefined;
  for (const id of run.running) {
    if (id === except) continue;
    const n = run.nodes.get(id);
    if (!n) continue;
    for (const i of n.instances) if (i.status === 'running' && (!best || i.startTs >= best.startTs)) best = i;
  }
  return best?.nodeId;
}

function principalName(p: any): string | undefined {
  if (p && typeof p === 'object') return String(p.name ?? p.id ?? p.kind ?? JSON.stringify(p));
  return undefined;
}

function addLateInstance(n: GNode, instanceId: unknown, ts: number, durationMs: unknown): Instance {
  const id = typeof instanceId === 'string' ? instanceId : `${n.id}#${n.instances.length}`;
  const start = typeof durationMs === 'number' ? ts - durationMs : ts;
  const inst: Instance = { instanceId: id, nodeId: n.id, startTs: start, status: 'running', text: '', reasoning: '', hiddenChars: 0 };
  n.instances.push(inst);
  n.byInstance.set(id, inst);
  return inst;
}

function settle(run: RunModel, n: GNode): void {
  if (!n.instances.some((i) => i.status === 'running')) run.running.delete(n.id);
}

function closePause(run: RunModel, pause: Pause): void {
  if (!pause.active) return;
  pause.active = false;
  const n = run.nodes.get(pause.nodeId);
  if (n && n.activePause === pause.pauseId) {
    n.activePause = undefined;
    n.version++;
    run.shapeVersion++;
  }
}

const PREVIEW_CHARS = 4000;
function clip(s: string): string {
  return s.length > PREVIEW_CHARS ? s.slice(s.length - PREVIEW_CHARS) : s;
}

/** Records a gap marker and places it among the events already seen. */
function addGap(run: RunModel, raw: any, markerSeq: number): void {
  const dropped = Number(raw.droppedCount) || 0;
  run.gaps += dropped;
  const fromSeq = Number(raw.fromSeq);
  const toSeq = Number(raw.toSeq);
  if (!Number.isFinite(fromSeq) || !Number.isFinite(toSeq)) return;
  const g: Gap = { dropped, fromSeq, toSeq, reason: typeof raw.reason === 'string' ? raw.reason : 'unknown' };
  run.gapList.push(g);
  // Live, the marker comes before the buffered events (later ones place it as they arrive);
  // from storage it comes in seq order, after them. Its own seq is fresh and not part of it.
  for (const [seq, ts] of run.seen) if (seq !== markerSeq) placeGap(g, seq, ts);
}

function placeGap(g: Gap, seq: number, ts: number): void {
  if (seq < g.fromSeq && (g.beforeTs === undefined || ts > g.beforeTs)) g.beforeTs = ts;
  else if (seq > g.toSeq && (g.afterTs === undefined || ts < g.afterTs)) g.afterTs = ts;
}

/** The node's status: paused > running > last instance's outcome; `pending` for a hint. */
export function nodeStatus(n: GNode): NodeStatus {
  if (n.activePause) return 'paused';
  if (n.instances.length === 0) return 'pending';
  let running = false;
  for (const i of n.instances) if (i.status === 'running') running = true;
  if (running) return 'running';
  const last = n.instances[n.instances.length - 1];
  return last.status === 'error' ? 'error' : last.status === 'aborted' ? 'aborted' : 'ok';
}

export function activePauses(run: RunModel): Pause[] {
  const out: Pause[] = [];
  for (const p of run.pauses.values()) if (p.active) out.push(p);
  return out;
}

/** Total time held at gates in this run: each pause from its exec.paused to its
 * exec.resumed (or to now while it holds). A child's hold is not counted again for the
 * parent that waited on it, unlike summing every node's heldMs. */
export function runHeldMs(run: RunModel, now = Date.now()): number {
  let held = 0;
  for (const p of run.pauses.values()) {
    const end = p.resumed?.ts ?? (p.active ? now : run.endTs ?? p.ts);
    held += Math.max(0, end - p.ts);
  }
  // Without pause events (a partial recording), the longest single heldMs is a lower bound.
  let longest = 0;
  for (const n of run.nodes.values()) for (const i of n.instances) longest = Math.max(longest, i.heldMs ?? 0);
  return Math.max(held, longest);
}

/** The gate an instance is held at right now, if any (an `error` gate holds after the
 * instance's `node.error`, so its status is no longer `running`). */
export function holdingPause(run: RunModel, i: Instance): Pause | undefined {
  for (const p of run.pauses.values()) if (p.active && p.nodeId === i.nodeId && p.instanceId === i.instanceId) return p;
  return undefined;
}

/** Wall time an instance took, and the part of it spent running (duration − held).
 * With the run given, a hold still open on the instance counts as held up to `now`: a
 * node held at its `error` gate reads as held, not as run. */
export function instanceTimes(i: Instance, now = Date.now(), run?: RunModel): { total: number; held: number; ran: number } {
  let total = i.durationMs ?? Math.max(0, (i.endTs ?? now) - i.startTs);
  let heldSoFar = i.heldMs ?? 0;
  const open = run ? holdingPause(run, i) : undefined;
  if (open) {
    // the open hold is not in the stamped heldMs yet, and the wall time runs on while it holds
    heldSoFar += Math.max(0, now - open.ts);
    total = Math.max(total, now - i.startTs);
  }
  const held = Math.min(total, heldSoFar);
  return { total, held, ran: Math.max(0, total - held) };
}

/** Words for a pause's reason, e.g. "Loop: 3× searchFlights with identical arguments". */
export function pauseReasonText(pause: Pause, node?: GNode): string {
  const name = node?.name ?? pause.nodeId;
  if (pause.reason === 'loop' || pause.loop) {
    const l = pause.loop ?? {};
    if (l.kind === 'cycle') return `Loop: a cycle of ${l.period ?? '?'} calls repeated ${l.laps ?? l.repeats ?? '?'}×, ending at ${name}`;
    if (l.kind === 'error-repeat') return `Loop: ${l.repeats ?? '?'}× ${name} failing the same way`;
    return `Loop: ${l.repeats ?? '?'}× ${name} with identical arguments`;
  }
  if (pause.smart) {
    if (pause.smart.rule === 'error-result') return `Error result from ${name}${pause.smart.detail ? `: ${pause.smart.detail}` : ''}`;
    if (pause.smart.rule === 'truncated-tool-call') return `Truncated tool call to ${name}${pause.smart.detail ? `: ${pause.smart.detail}` : ''}`;
  }
  if (pause.reason === 'error' || pause.point === 'error') return `Error in ${name}`;
  if (pause.reason === 'step') return `Step: before ${name}`;
  if (pause.reason === 'breakpoint') return `Breakpoint ${pause.point === 'after' ? 'after' : 'before'} ${name}`;
  return `Held ${pause.point === 'after' ? 'after' : 'before'} ${name}`;
}

export const REDACTED = '__REDACTED__';
export const TRUNCATED_KEY = '__graphmindTruncated';

/** Whether a value still carries a redaction placeholder or a truncation marker anywhere. */
export function carriesPlaceholder(v: unknown, depth = 0): string | undefined {
  if (depth > 512) return 'too deep';
  if (typeof v === 'string') {
    if (v.includes(REDACTED)) return `contains ${REDACTED}`;
    return undefined;
  }
  if (Array.isArray(v)) {
    for (const x of v) {
      const r = carriesPlaceholder(x, depth + 1);
      if (r) return r;
    }
    return undefined;
  }
  if (v && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      if (k === TRUNCATED_KEY) return `contains a truncation marker (${TRUNCATED_KEY})`;
      const r = carriesPlaceholder(x, depth + 1);
      if (r) return r;
    }
  }
  return undefined;
}

/** The redaction switches that can have hidden a field, given the node kind (from the
 * `redaction.keys` of its node.started / node.finished / node.token). */
export function hiddenBy(kind: string, key: string): string {
  const tool = kind === 'tool';
  const field = key.split('.')[0];
  if (field === 'input') return tool ? 'hideToolArgs or hideInputs' : 'hideInputs';
  if (key === 'output.toolCalls') return tool ? 'hideToolArgs or hideInputs' : 'hideInputs';
  if (field === 'output') return tool ? 'hideToolResults or hideOutputs' : 'hideOutputs';
  if (field === 'deltas') return tool ? 'hideToolResults or hideOutputs' : 'hideOutputs';
  return 'a redaction switch';
}
