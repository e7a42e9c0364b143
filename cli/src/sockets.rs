//! The port's connections on a small tokio runtime: the accept loop, each connection served
//! by hyper's HTTP/1 server with the axum [`Router`] of [`crate::routes`] (guards in
//! [`crate::guards`]), and the two WebSocket endpoints (`tokio-tungstenite`).
//!
//! One task per connection, no thread: an idle app or viewer socket is a parked task
//! waiting on its socket, its outbox's [`tokio::sync::Notify`] and its ping timer. The
//! hub's rules are not here: a text frame goes to [`server::ingest_frame`] or
//! [`server::ui_frame`] as before, and what the hub queues for a socket comes through
//! its [`Outbox`]. Every answer ends its connection (`Connection: close`, no keep-alive).
//!
//! The WebSocket upgrade is done by hand, not with axum's `WebSocketUpgrade`: the
//! handlers check the request (GET, `Sec-WebSocket-Key`, the viewer's credential and
//! admission, the subprotocol), answer 101 themselves, and a task takes the socket from
//! `hyper::upgrade::on` into a `tokio_tungstenite::WebSocketStream` with our own
//! configuration. `WebSocketUpgrade` never hands the socket back, which would lose the
//! drain after a 1009 close ([`refuse_oversize`]), and it measured a worse gate p99.
//!
//! A peer that reads nothing for [`WRITE_TIMEOUT`] is dropped: every connection's socket
//! is wrapped in a [`WriteTimeout`] adapter under hyper (plain HTTP answers and, after an
//! upgrade, the WebSocket writes alike).

use crate::guards::{self, refusal, PLAIN};
use crate::http::MAX_HEAD_BYTES;
use crate::hub::{Out, Outbox, Shared};
use crate::server::{self, HEAD_TIMEOUT, PING_INTERVAL, SOCKET_BUFFER_BYTES, WRITE_TIMEOUT};
use crate::storage::MAX_FRAME_BYTES;
use crate::tokens::{self, Credential, Principal};
use crate::write_timeout::WriteTimeout;
use crate::writer::{Op, MAX_QUEUED_BYTES, MAX_QUEUED_EVENTS};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method};
use axum::response::Response;
use crossbeam_channel::Receiver;
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
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

/// Most headers a request may carry.
pub const MAX_HEADERS: usize = 64;

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
    let service = crate::routes::service(shared);
    let mut backoff: Option<Duration> = None;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                if backoff.take().is_some() {
                    tracing::info!("graphmind: accepting connections again");
                }
                tokio::spawn(connection(
                    stream,
                    TowerToHyperService::new(service.clone()),
                ));
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

/// One accepted connection: hyper reads its one request (head bounded in size, count and
/// time), the router answers, and the connection ends (or is handed to a WebSocket).
async fn connection<S>(stream: TcpStream, service: S)
where
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = Response,
            Error = std::convert::Infallible,
        > + Send
        + 'static,
    S::Future: Send + 'static,
{
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(WriteTimeout::new(stream));
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .keep_alive(false)
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .title_case_headers(true)
        .auto_date_header(false)
        .serve_connection(io, service)
        .with_upgrades()
        .await;
    if let Err(e) = served {
        tracing::debug!("graphmind: connection ended: {e}");
    }
}

/// `GET /ingest` (an app's socket).
pub async fn ingest_upgrade(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    upgrade(shared, req, false).await
}

/// `GET /ws/ui` (a viewer's socket).
pub async fn ui_upgrade(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    upgrade(shared, req, true).await
}

/// A WebSocket upgrade: the checks, the viewer's credential and admission, the 101, and a
/// task that takes the upgraded socket into its session. A request on `/ingest` or
/// `/ws/ui` that asks no upgrade is answered like any unknown path.
async fn upgrade(shared: Arc<Shared>, mut req: Request, ui: bool) -> Response {
    let headers = req.headers();
    if !guards::header_has(headers, "upgrade", "websocket") {
        return crate::routes::fallback(req.method().clone(), req.uri().clone()).await;
    }
    let key = headers
        .get("sec-websocket-key")
        .filter(|_| req.method() == Method::GET)
        .map(|k| String::from_utf8_lossy(k.as_bytes()).into_owned());
    let Some(key) = key else {
        return refusal(400, PLAIN, "bad websocket upgrade\n");
    };
    // /ws/ui: a credential in `gm.auth.<token>` (a browser cannot set headers) or a Bearer
    // header; an invalid one is refused outright, none is `anonymous`.
    let mut principal = Principal::Anonymous;
    let mut protocol = None;
    if ui {
        let protocols: Vec<String> = headers
            .get_all("sec-websocket-protocol")
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        let mut presented: Vec<Option<String>> =
            tokens::subprotocol_tokens(protocols.iter().map(String::as_str))
                .into_iter()
                .map(Some)
                .collect();
        let authorization = crate::control_api::header(headers, "authorization");
        if let Some(b) = tokens::bearer_token(authorization.as_deref()) {
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
                return refusal(401, PLAIN, format!("unauthorized: {why}\n"));
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
            return refusal(503, PLAIN, format!("too many viewers: {why}\n"));
        }
        let offered_v1 = protocols
            .iter()
            .any(|v| v.split(',').any(|p| p.trim() == tokens::UI_SUBPROTOCOL));
        if offered_v1 {
            protocol = Some(HeaderValue::from_static(tokens::UI_SUBPROTOCOL));
        }
    }
    let accept = ws_proto::handshake::derive_accept_key(key.trim().as_bytes());
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            if ui {
                shared.hub.tell(move |h| h.release_viewer(principal));
            }
            return;
        };
        // Small per-socket buffers (tungstenite's default is 128 KiB each way): a thousand
        // idle apps then cost a thousand small buffers, not 256 MB; big frames grow them.
        let config = WebSocketConfig::default()
            .max_frame_size(Some(MAX_FRAME_BYTES))
            .max_message_size(Some(MAX_FRAME_BYTES))
            .read_buffer_size(SOCKET_BUFFER_BYTES)
            .write_buffer_size(0);
        let io = TokioIo::new(upgraded);
        let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
        if ui {
            ui_session(ws, shared, principal).await;
        } else {
            ingest_session(ws, shared).await;
        }
    });
    let mut resp = Response::new(axum::body::Body::empty());
    *resp.status_mut() = axum::http::StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert("upgrade", HeaderValue::from_static("websocket"));
    h.insert("connection", HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert("sec-websocket-accept", v);
    }
    if let Some(p) = protocol {
        h.insert("sec-websocket-protocol", p);
    }
    resp
}

/// Reads and writes one WebSocket until it ends. `on_text` handles each text frame.
///
/// The task waits on the socket, the outbox's wake-up and the ping timer together, so an
/// idle connection costs nothing and a queued frame (a resume for an app, a fan-out for a
/// viewer) is written at once.
async fn pump<S: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<S>,
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
async fn refuse_oversize<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>) {
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

async fn ingest_session<S: AsyncRead + AsyncWrite + Unpin>(
    mut ws: WebSocketStream<S>,
    shared: Arc<Shared>,
) {
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

async fn ui_session<S: AsyncRead + AsyncWrite + Unpin>(
    mut ws: WebSocketStream<S>,
    shared: Arc<Shared>,
    principal: Principal,
) {
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
