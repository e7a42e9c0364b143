//! The port's connections on a small tokio runtime: the accept loop, each connection's
//! request head and guards, the two WebSocket endpoints (`tokio-tungstenite`), and the
//! hand-over of plain HTTP requests to tokio's blocking pool.
//!
//! One task per connection, no thread: an idle app or viewer socket is a parked task
//! waiting on its socket, its outbox's [`tokio::sync::Notify`] and its ping timer. The
//! hub's rules are not here: a text frame goes to [`server::ingest_frame`] or
//! [`server::ui_frame`] as before, and what the hub queues for a socket comes through
//! its [`Outbox`]. Plain HTTP answers read SQLite and may long-poll, so they run on the
//! blocking pool with the same code as before (see docs/server.md "Connections").

use crate::http::{self, Request};
use crate::hub::{Out, Outbox, Shared};
use crate::security;
use crate::server::{self, HEAD_TIMEOUT, PING_INTERVAL, SOCKET_BUFFER_BYTES, WRITE_TIMEOUT};
use crate::storage::MAX_FRAME_BYTES;
use crate::tokens::{self, Credential, Principal};
use crate::writer::{Op, MAX_QUEUED_BYTES, MAX_QUEUED_EVENTS};
use crossbeam_channel::Receiver;
use futures_util::{SinkExt, StreamExt};
use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self as ws_proto, Message};
use tokio_tungstenite::WebSocketStream;

/// Worker threads of the server's runtime. Sockets only move bytes and wait on the hub
/// thread for microseconds; SQLite and long-polls run on the blocking pool, so two are
/// enough on any machine and leave the cores to the writer thread and the app being debugged.
pub const RUNTIME_WORKERS: usize = 2;
/// The first pause after `accept` fails (out of descriptors, out of memory); it doubles
/// while the failures go on, up to [`ACCEPT_BACKOFF_MAX`], so a full descriptor table
/// does not spin a core on a connection that stays queued.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
/// The longest pause between two `accept` attempts that keep failing.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_millis(500);
/// How long a refused oversized frame's sender gets to see the 1009 close before the
/// socket is dropped (its unread bytes are read and thrown away meanwhile).
const OVERSIZE_DRAIN: Duration = Duration::from_millis(500);

const PLAIN: &str = "text/plain; charset=utf-8";

/// Runs the server's runtime on the calling thread and accepts connections forever.
pub fn run(listener: std::net::TcpListener, shared: Arc<Shared>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(RUNTIME_WORKERS)
        .thread_name("graphmind-net")
        .enable_all()
        .build();
    match runtime {
        Ok(rt) => rt.block_on(accept_loop(listener, shared)),
        Err(e) => tracing::error!("graphmind: cannot start the server's runtime: {e}"),
    }
}

/// Accepts connections forever, a task each. While `accept` keeps failing (the descriptor
/// table full, say) it backs off and says so once per episode.
async fn accept_loop(listener: std::net::TcpListener, shared: Arc<Shared>) {
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|()| TcpListener::from_std(listener))
    {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("graphmind: cannot listen: {e}");
            return;
        }
    };
    let mut backoff: Option<Duration> = None;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                if backoff.take().is_some() {
                    tracing::info!("graphmind: accepting connections again");
                }
                tokio::spawn(connection(stream, shared.clone()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let pause = match backoff {
                    None => {
                        tracing::error!("graphmind: cannot accept connections ({e}); retrying, backing off up to {} ms", ACCEPT_BACKOFF_MAX.as_millis());
                        ACCEPT_BACKOFF_MIN
                    }
                    Some(p) => (p * 2).min(ACCEPT_BACKOFF_MAX),
                };
                backoff = Some(pause);
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// `fut` bounded by [`WRITE_TIMEOUT`]: a peer that accepts nothing for that long is
/// dropped instead of buffered without bound.
async fn timed<T, E>(fut: impl Future<Output = Result<T, E>>) -> Result<T, ()> {
    match tokio::time::timeout(WRITE_TIMEOUT, fut).await {
        Ok(Ok(v)) => Ok(v),
        _ => Err(()),
    }
}

/// Answers a request refused before any route (every security header and `no-store`).
async fn refuse(stream: &mut TcpStream, status: u16, ctype: &str, body: &str) {
    let _ = timed(stream.write_all(&http::refusal_bytes(status, ctype, body))).await;
}

/// One accepted connection: its head, the guards, then plain HTTP or a WebSocket.
async fn connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let head = tokio::time::timeout(HEAD_TIMEOUT, http::read_head_async(&mut stream)).await;
    let Ok(Ok(Some((req, leftover)))) = head else {
        return refuse(&mut stream, 400, PLAIN, "bad request\n").await;
    };
    if let Some(name) = req.repeated_single_header() {
        crate::hub::throttled_log!(
            tracing::Level::WARN,
            shared.log_throttle,
            "duplicate-header",
            "refused a request with more than one {name} header on {}",
            req.path
        );
        let body = format!("bad request: more than one {name} header\n");
        return refuse(&mut stream, 400, PLAIN, &body).await;
    }
    if let Some(r) = security::check_request(
        req.header("host"),
        req.header("origin"),
        shared.port,
        &shared.allowed_origins,
    ) {
        crate::hub::throttled_log!(
            tracing::Level::WARN,
            shared.log_throttle,
            "origin-refused",
            "refused {} \"{}\" on {}",
            r.kind.as_str(),
            r.value,
            req.path
        );
        return refuse(&mut stream, 403, PLAIN, &format!("{}\n", r.message)).await;
    }
    if !req.header_has("upgrade", "websocket") {
        // SQLite reads, request bodies and long-polls block: the blocking pool answers,
        // on the plain socket, with the code that always did.
        let Ok(std_stream) = stream.into_std() else {
            return;
        };
        let _ = std_stream.set_nonblocking(false);
        let _ = tokio::task::spawn_blocking(move || answer_http(std_stream, req, leftover, shared))
            .await;
        return;
    }
    upgrade(stream, req, leftover, shared).await;
}

/// Answers one plain HTTP request (blocking: run on the blocking pool).
fn answer_http(
    mut stream: std::net::TcpStream,
    req: Request,
    leftover: Vec<u8>,
    shared: Arc<Shared>,
) {
    let _answering = InFlight::enter(&shared.http_in_flight);
    let (status, ctype, body, extra) =
        match crate::control_api::route(&shared, &req, &mut stream, &leftover) {
            Some((status, ctype, body, extra)) => (status, ctype, body.into_bytes(), extra),
            None => {
                let (status, ctype, body) = http::route(&shared, &req);
                (status, ctype, body, String::new())
            }
        };
    let body = if req.method == "HEAD" {
        Vec::new()
    } else {
        body
    };
    let headers = format!("{}{extra}", security::header_lines(&req.path));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = http::respond_with(&mut stream, status, ctype, &body, &headers);
}

/// A WebSocket upgrade: which endpoint, the viewer's credential and admission, the
/// handshake, then the socket's session.
async fn upgrade(mut stream: TcpStream, req: Request, leftover: Vec<u8>, shared: Arc<Shared>) {
    if req.path != "/ingest" && req.path != "/ws/ui" {
        let body = "{\"error\":\"not found\"}";
        return refuse(&mut stream, 404, "application/json", body).await;
    }
    let Some(key) = req
        .header("sec-websocket-key")
        .filter(|_| req.method == "GET")
    else {
        return refuse(&mut stream, 400, PLAIN, "bad websocket upgrade\n").await;
    };
    // /ws/ui: a credential in `gm.auth.<token>` (a browser cannot set headers) or a Bearer
    // header; an invalid one is refused outright, none is `anonymous`.
    let mut principal = Principal::Anonymous;
    let mut protocol_line = String::new();
    if req.path == "/ws/ui" {
        let protocols: Vec<&str> = req
            .headers
            .iter()
            .filter(|(k, _)| k == "sec-websocket-protocol")
            .map(|(_, v)| v.as_str())
            .collect();
        let mut presented: Vec<Option<String>> =
            tokens::subprotocol_tokens(protocols.iter().copied())
                .into_iter()
                .map(Some)
                .collect();
        if let Some(b) = tokens::bearer_token(req.header("authorization")) {
            presented.push(b);
        }
        match tokens::resolve_credential(&presented, &shared.verifier) {
            Credential::None => {}
            Credential::Ok(p) => principal = p,
            Credential::Invalid(why) => {
                crate::hub::throttled_log!(
                    tracing::Level::WARN,
                    shared.log_throttle,
                    "ui-credential",
                    "refused a viewer socket: {why}"
                );
                let body = format!("unauthorized: {why}\n");
                return refuse(&mut stream, 401, PLAIN, &body).await;
            }
        }
        let admitted = shared
            .hub
            .call(move |h| h.admit_viewer(principal))
            .unwrap_or_else(|e| Err(e.to_string()));
        if let Err(why) = admitted {
            crate::hub::throttled_log!(
                tracing::Level::WARN,
                shared.log_throttle,
                "ui-limit",
                "refused a viewer socket: {why}"
            );
            let body = format!("too many viewers: {why}\n");
            return refuse(&mut stream, 503, PLAIN, &body).await;
        }
        let offered_v1 = protocols
            .iter()
            .any(|v| v.split(',').any(|p| p.trim() == tokens::UI_SUBPROTOCOL));
        if offered_v1 {
            protocol_line = format!("Sec-WebSocket-Protocol: {}\r\n", tokens::UI_SUBPROTOCOL);
        }
    }
    let accept = ws_proto::handshake::derive_accept_key(key.trim().as_bytes());
    let resp = format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n{protocol_line}\r\n");
    if timed(stream.write_all(resp.as_bytes())).await.is_err() {
        if req.path != "/ingest" {
            shared.hub.tell(move |h| h.release_viewer(principal));
        }
        return;
    }
    // Small per-socket buffers (tungstenite's default is 128 KiB each way): a thousand
    // idle apps then cost a thousand small buffers, not 256 MB; big frames still grow them.
    let config = WebSocketConfig::default()
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .max_message_size(Some(MAX_FRAME_BYTES))
        .read_buffer_size(SOCKET_BUFFER_BYTES)
        .write_buffer_size(0);
    let ws =
        WebSocketStream::from_partially_read(stream, leftover, Role::Server, Some(config)).await;
    if req.path == "/ingest" {
        ingest_session(ws, shared).await;
    } else {
        ui_session(ws, shared, principal).await;
    }
}

/// Reads and writes one WebSocket until it ends. `on_text` handles each text frame.
///
/// The task waits on the socket, the outbox's wake-up and the ping timer together, so an
/// idle connection costs nothing and a queued frame (a resume for an app, a fan-out for a
/// viewer) is written at once.
async fn pump(
    ws: &mut WebSocketStream<TcpStream>,
    rx: &Receiver<Out>,
    outbox: &Outbox,
    mut on_text: impl FnMut(&str),
) {
    let mut closing = false;
    let mut alive = true;
    // One timer for the socket's life, moved on at each ping (not one per frame).
    let ping_due = tokio::time::sleep(PING_INTERVAL);
    tokio::pin!(ping_due);
    loop {
        if outbox.overflowed() && !closing {
            // Fell too far behind: drop the backlog, say why, let it reconnect and replay.
            while rx.try_recv().is_ok() {}
            let _ = timed(ws.close(Some(CloseFrame {
                code: CloseCode::Policy,
                reason: "viewer too slow: reconnect to replay the run".into(),
            })))
            .await;
            return;
        }
        if ping_due.is_elapsed() {
            if !alive {
                return; // missed the previous ping: the peer is gone
            }
            alive = false;
            ping_due
                .as_mut()
                .reset(tokio::time::Instant::now() + PING_INTERVAL);
            if timed(ws.send(Message::Ping(Default::default())))
                .await
                .is_err()
            {
                return;
            }
        }
        let mut wrote = false;
        while let Ok(out) = rx.try_recv() {
            match out {
                Out::Text(t) if !closing => {
                    let n = t.len();
                    if timed(ws.feed(Message::text(t))).await.is_err() {
                        return;
                    }
                    outbox.sent(n);
                    wrote = true;
                }
                Out::Close(code, reason) if !closing => {
                    let _ = timed(ws.close(Some(CloseFrame {
                        code: CloseCode::from(code),
                        reason: reason.into(),
                    })))
                    .await;
                    closing = true;
                }
                _ => {}
            }
        }
        if wrote && timed(ws.flush()).await.is_err() && !closing {
            return;
        }
        tokio::select! {
            biased;
            _ = outbox.wake().notified() => {}
            got = ws.next() => match got {
                Some(Ok(Message::Text(t))) => {
                    alive = true; // any frame proves the peer alive, not only a pong
                    if !closing {
                        on_text(t.as_str())
                    }
                }
                Some(Ok(_)) => alive = true,
                Some(Err(ws_proto::Error::Capacity(_))) => {
                    refuse_oversize(ws).await;
                    return;
                }
                Some(Err(_)) | None => return,
            },
            _ = &mut ping_due => {}
        }
    }
}

/// A frame above `MAX_FRAME_BYTES`: close 1009 without reading the rest, then drop the
/// socket after reading away what the peer still sends for a moment (dropping a socket
/// with unread bytes would reset it, and the peer could lose the close frame).
async fn refuse_oversize(ws: &mut WebSocketStream<TcpStream>) {
    let _ = timed(ws.close(Some(CloseFrame {
        code: CloseCode::Size,
        reason: "frame exceeds 16 MiB".into(),
    })))
    .await;
    let stream = ws.get_mut();
    let _ = stream.shutdown().await;
    let deadline = tokio::time::Instant::now() + OVERSIZE_DRAIN;
    let mut sink = vec![0u8; 64 * 1024];
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.read(&mut sink)).await {
        if n == 0 {
            break;
        }
    }
}

/// Whether queueing an event of `bytes` may have to wait for the writer (its queue is at
/// or near its budget): that frame is then handled with the worker handed off
/// ([`tokio::task::block_in_place`]), so backpressure on one app never stalls the others.
fn writer_may_be_full(shared: &Shared, bytes: usize) -> bool {
    let (events, queued) = shared.budget.queued();
    events + 1 >= MAX_QUEUED_EVENTS || queued + bytes.min(MAX_QUEUED_BYTES) > MAX_QUEUED_BYTES
}

async fn ingest_session(mut ws: WebSocketStream<TcpStream>, shared: Arc<Shared>) {
    let (tx, rx) = Outbox::new();
    let added = tx.clone();
    let Ok(conn) = shared.hub.call(move |h| h.add_ingest(added)) else {
        return;
    };
    let mut owned_here: HashSet<String> = HashSet::new();
    pump(&mut ws, &rx, &tx, |text| {
        if writer_may_be_full(&shared, text.len()) {
            tokio::task::block_in_place(|| {
                server::ingest_frame(&shared, conn, &tx, &mut owned_here, text)
            })
        } else {
            server::ingest_frame(&shared, conn, &tx, &mut owned_here, text)
        }
    })
    .await;
    // Waits for the writer (up to a bound): on the blocking pool.
    let s = shared.clone();
    let _ = tokio::task::spawn_blocking(move || server::ingest_gone(&s, conn)).await;
    drop(ws);
}

async fn ui_session(mut ws: WebSocketStream<TcpStream>, shared: Arc<Shared>, principal: Principal) {
    let (tx, rx) = Outbox::for_viewer(shared.viewer_backlog.clone());
    let added = tx.clone();
    let Ok(conn) = shared.hub.call(move |h| h.add_ui(added, principal)) else {
        return;
    };
    pump(&mut ws, &rx, &tx, |text| {
        server::ui_frame(&shared, conn, &tx, text)
    })
    .await;
    shared.hub.tell(move |h| h.remove_ui(conn));
    tx.forget_backlog();
    let _ = shared.writer.send(Op::UiGone(conn));
}

/// Counts a request as being answered for as long as it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
