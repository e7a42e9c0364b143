// The viewer's link to `graphmind serve`: the /ws/ui socket (reconnecting), the HTTP API,
// and the viewer token.
//
// Token: `#token=<t>` in the URL (optionally followed by `&/run/...`) is taken out of the
// address bar at once, kept in sessionStorage (this tab only), and presented as the
// WebSocket subprotocols `graphmind.v1` + `gm.auth.<t>` and as `Authorization: Bearer <t>`
// on HTTP, only to the server that served the page. A server that negotiates no
// subprotocol makes the browser fail the handshake: the viewer then connects without one,
// so a server with no token requirement still works.

const STORAGE_KEY = 'graphmind.viewerToken';
const TOKEN_RE = /^[A-Za-z0-9_-]{16,128}$/;
export const UI_SUBPROTOCOL = 'graphmind.v1';
export const AUTH_PREFIX = 'gm.auth.';

export function captureToken(): void {
  const hash = location.hash;
  if (!hash.startsWith('#token=')) return;
  const body = hash.slice('#token='.length);
  const amp = body.indexOf('&');
  const token = amp < 0 ? body : body.slice(0, amp);
  const rest = amp < 0 ? '' : body.slice(amp + 1);
  try {
    history.replaceState(history.state, '', `${location.pathname}${location.search}${rest.startsWith('/') ? '#' + rest : ''}`);
  } catch {
    /* the token is still taken */
  }
  if (TOKEN_RE.test(token)) setToken(token);
}

let memToken: string | undefined;
export function token(): string | undefined {
  if (memToken) return memToken;
  try {
    const t = sessionStorage.getItem(STORAGE_KEY);
    return t && TOKEN_RE.test(t) ? t : undefined;
  } catch {
    return undefined;
  }
}
export function setToken(t: string | undefined): void {
  memToken = t;
  try {
    t ? sessionStorage.setItem(STORAGE_KEY, t) : sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    /* storage blocked: memory copy serves this page */
  }
}

export function authHeaders(): Record<string, string> {
  const t = token();
  return t ? { authorization: `Bearer ${t}` } : {};
}

export class HttpError extends Error {
  constructor(
    public status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function getJson(path: string): Promise<any> {
  const r = await fetch(path, { headers: authHeaders() });
  if (!r.ok) throw new HttpError(r.status, `${path}: HTTP ${r.status}`);
  return r.json();
}

/** After a failed connect while holding a token: is the token refused by this server (a
 * token from an earlier `graphmind serve`)? Then it is dropped. */
export async function tokenRejected(): Promise<boolean> {
  const t = token();
  if (!t) return false;
  try {
    const r = await fetch('/api/session', { headers: { authorization: `Bearer ${t}` } });
    if (r.status === 401 && token() === t) {
      setToken(undefined);
      return true;
    }
  } catch {
    /* server unreachable: keep the token */
  }
  return false;
}

/** After a failed connect: does the server ask for a token this tab lacks (or has stale)?
 * A 401 from the API says so; the stale token is dropped. */
export async function needsToken(): Promise<boolean> {
  try {
    await getJson('/api/runs');
    return false;
  } catch (e) {
    if (e instanceof HttpError && e.status === 401) {
      setToken(undefined);
      return true;
    }
    return false;
  }
}

export type Listener = (msg: any) => void;

export class Socket {
  ws?: WebSocket;
  state: 'connecting' | 'open' | 'closed' = 'connecting';
  private tries = 0;
  private withProtocols = true;
  private queue: string[] = [];
  constructor(
    private url: string,
    private onMessage: Listener,
    private onState: (s: Socket['state']) => void,
    private onOpen: () => void,
  ) {
    this.connect();
  }

  private connect(): void {
    const t = token();
    const protocols = t && this.withProtocols ? [UI_SUBPROTOCOL, AUTH_PREFIX + t] : undefined;
    let opened = false;
    let ws: WebSocket;
    try {
      ws = protocols ? new WebSocket(this.url, protocols) : new WebSocket(this.url);
    } catch {
      this.retry();
      return;
    }
    this.ws = ws;
    this.state = 'connecting';
    this.onState(this.state);
    ws.onopen = () => {
      opened = true;
      this.tries = 0;
      this.state = 'open';
      this.onState(this.state);
      this.onOpen();
      for (const m of this.queue.splice(0)) ws.send(m);
    };
    ws.onmessage = (e) => {
      if (typeof e.data !== 'string') return;
      let msg: any;
      try {
        msg = JSON.parse(e.data);
      } catch {
        return;
      }
      this.onMessage(msg);
    };
    ws.onclose = () => {
      this.state = 'closed';
      this.onState(this.state);
      // A handshake that failed before opening: with the token offered, the server may not
      // speak subprotocols (no token requirement); without it, the server may be one that
      // does. Alternate while a token is held, so a restarted server of either kind is found.
      if (!opened && token()) this.withProtocols = !this.withProtocols;
      this.retry();
    };
  }

  private retry(): void {
    const delay = Math.min(5000, 250 * 2 ** Math.min(this.tries++, 5));
    setTimeout(() => this.connect(), delay);
  }

  send(msg: unknown): void {
    const text = JSON.stringify(msg);
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(text);
    else this.queue.push(text);
  }
}

let controlSeq = 0;
/** A v1 control envelope for `{type:"control", envelope}`. */
export function control(type: string, payload: Record<string, unknown>, runId = '*'): unknown {
  return { type: 'control', envelope: { gm: 1, seq: controlSeq++, ts: Date.now(), runId, type, payload } };
}

export function newRequestId(): string {
  return 'vw_' + Math.random().toString(36).slice(2, 10) + Date.now().toString(36);
}
