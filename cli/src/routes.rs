//! The port's HTTP routes: one axum [`Router`] (state `Arc<Shared>`) that hyper serves on
//! each accepted connection ([`crate::sockets`]), behind the guards of [`crate::guards`].
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /health`, `GET /api/runs`, `GET /api/runs/{id}/events` | [`crate::http`] |
//! | `GET /api/session`, `GET /api/pauses`, `GET /api/runs/{run}/pauses/{pause}`, `POST .../resume`, `POST /api/demo/start` | [`crate::control_api`] |
//! | `GET /ingest`, `GET /ws/ui` with `Upgrade: websocket` | [`crate::sockets`] |
//! | anything else | the viewer's static files (GET/HEAD), else 404 JSON |
//!
//! A method other than GET/HEAD on a read-only route, or on a path no route knows, is 405
//! `{"error":"method not allowed"}`; a resume asked with another method than POST is 405
//! with `Allow: POST`. A HEAD answer carries no body. Query strings keep their meaning:
//! the raw query ([`RawQuery`]) read by [`http::query_param`] (first occurrence wins, `+`
//! is not a space) and [`http::percent_decode`].
//!
//! The answers read SQLite and may long-poll, so each runs on tokio's blocking pool; a
//! long-poll learns that its caller hung up through a flag set when hyper drops the
//! request's handler (the connection closed).

use crate::control_api;
use crate::http::{self, percent_decode, JSON};
use crate::hub::Shared;
use crate::sockets;
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{any, get, post};
use axum::Router;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a resume's body may take to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The service hyper runs for every request on the port: the guards
/// ([`crate::guards::guard`]) around the [`Router`], outermost, so that they answer before
/// any routing (a refusal carries no `Allow` of a route it never reached).
pub fn service(
    shared: Arc<Shared>,
) -> impl tower::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = Response,
    Error = std::convert::Infallible,
    Future: Send + 'static,
> + Clone
       + Send
       + 'static {
    use tower::Layer;
    let guard = axum::middleware::from_fn_with_state(shared.clone(), crate::guards::guard);
    tower::ServiceBuilder::new()
        .map_request(|req: hyper::Request<hyper::body::Incoming>| req.map(Body::new))
        .service(guard.layer(router(shared)))
}

/// The routes (without the guards).
fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/health", get(health).fallback(not_allowed))
        .route("/api/runs", get(runs).fallback(not_allowed))
        .route(
            "/api/runs/{id}/events",
            get(run_events).fallback(not_allowed),
        )
        .route("/api/session", get(session).fallback(not_allowed))
        .route("/api/pauses", get(pauses).fallback(not_allowed))
        .route(
            "/api/runs/{run}/pauses/{pause}",
            get(pause_detail).fallback(not_allowed),
        )
        .route(
            "/api/runs/{run}/pauses/{pause}/resume",
            post(resume).fallback(resume_not_allowed),
        )
        .route("/api/demo/start", any(demo_start))
        .route("/ingest", any(sockets::ingest_upgrade))
        .route("/ws/ui", any(sockets::ui_upgrade))
        .fallback(fallback)
        .with_state(shared)
}

async fn health(State(s): State<Arc<Shared>>, method: Method) -> Response {
    blocking(method == Method::HEAD, move || plain(http::health(&s))).await
}

async fn runs(State(s): State<Arc<Shared>>, method: Method, RawQuery(q): RawQuery) -> Response {
    let query = q.unwrap_or_default();
    blocking(method == Method::HEAD, move || {
        plain(http::runs(&s, &query))
    })
    .await
}

async fn run_events(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let head = req.method() == Method::HEAD;
    let query = req.uri().query().unwrap_or("").to_owned();
    let (mut parts, _) = req.into_parts();
    let [id] = segments(&mut parts, &s, [3]).await;
    blocking(head, move || plain(http::run_events(&s, &id, &query))).await
}

async fn session(State(s): State<Arc<Shared>>, method: Method, headers: HeaderMap) -> Response {
    blocking(method == Method::HEAD, move || {
        control_api::session(&s, &headers)
    })
    .await
}

async fn pauses(State(s): State<Arc<Shared>>, method: Method, RawQuery(q): RawQuery) -> Response {
    let query = q.unwrap_or_default();
    let gone = CallerGone::default();
    let flag = gone.0.clone();
    blocking(method == Method::HEAD, move || {
        control_api::list_pauses(&s, &query, &flag)
    })
    .await
}

async fn pause_detail(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let head = req.method() == Method::HEAD;
    let (mut parts, _) = req.into_parts();
    let [run, pause] = segments(&mut parts, &s, [3, 5]).await;
    blocking(head, move || control_api::pause_detail(&s, &run, &pause)).await
}

async fn resume(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let (mut parts, body) = req.into_parts();
    let [run, pause] = segments(&mut parts, &s, [3, 5]).await;
    let principal = match control_api::resume_caller(&s, &parts.headers) {
        Ok(p) => p,
        Err(a) => return answer(a, false),
    };
    let len = match control_api::body_length(&parts.headers) {
        Ok(n) => n,
        Err(a) => return answer(a, false),
    };
    let read = axum::body::to_bytes(body, len);
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Ok(Ok(b)) if b.len() == len => b,
        _ => return answer(control_api::body_ended_early(), false),
    };
    blocking(false, move || {
        control_api::resume(&s, principal, &bytes, &run, &pause)
    })
    .await
}

async fn demo_start(State(s): State<Arc<Shared>>, method: Method, headers: HeaderMap) -> Response {
    let head = method == Method::HEAD;
    blocking(head, move || control_api::demo_start(&s, &method, &headers)).await
}

async fn not_allowed(method: Method) -> Response {
    answer(plain(http::method_not_allowed()), method == Method::HEAD)
}

async fn resume_not_allowed(method: Method) -> Response {
    answer(
        Some(control_api::resume_not_allowed()),
        method == Method::HEAD,
    )
}

/// Any other request: the viewer's static files (GET/HEAD, outside `/api/`), else 404.
pub async fn fallback(method: Method, uri: Uri) -> Response {
    let head = method == Method::HEAD;
    if method != Method::GET && !head {
        return answer(plain(http::method_not_allowed()), head);
    }
    let path = uri.path().to_owned();
    if path.starts_with("/api/") {
        return answer(plain(http::not_found()), head);
    }
    let found = tokio::task::spawn_blocking(move || http::static_file(&path)).await;
    match found {
        Ok(Some((ctype, bytes))) => respond(200, ctype, bytes, None, head),
        _ => answer(plain(http::not_found()), head),
    }
}

/// The captured path segments of a matched route, decoded by axum's [`Path`]; when one is
/// not UTF-8 once decoded, segments `at` (indexes in the `/`-split path) are decoded
/// lossily from the raw path instead, as the hand-written router did.
async fn segments<const N: usize>(
    parts: &mut axum::http::request::Parts,
    s: &Arc<Shared>,
    at: [usize; N],
) -> [String; N] {
    use axum::extract::FromRequestParts;
    if let Ok(Path(v)) = Path::<Vec<String>>::from_request_parts(parts, s).await {
        if let Ok(a) = <[String; N]>::try_from(v) {
            return a;
        }
    }
    let raw: Vec<&str> = parts.uri.path().split('/').collect();
    at.map(|i| percent_decode(raw.get(i).copied().unwrap_or("")))
}

/// A read-only answer with no extra header.
fn plain((status, ctype, body): http::Answer) -> Option<control_api::Answer> {
    Some((status, ctype, body, None))
}

/// Runs `f` on the blocking pool and turns its answer into a response.
async fn blocking<F>(head: bool, f: F) -> Response
where
    F: FnOnce() -> Option<control_api::Answer> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(a) => answer(a, head),
        Err(_) => respond(
            500,
            JSON,
            b"{\"error\":\"internal error\"}".to_vec(),
            None,
            head,
        ),
    }
}

/// An answer as a response; `None` (a long-poll whose caller is gone) is an empty 500
/// nobody reads.
fn answer(a: Option<control_api::Answer>, head: bool) -> Response {
    match a {
        Some((status, ctype, body, extra)) => {
            respond(status, ctype, body.into_bytes(), extra, head)
        }
        None => respond(500, JSON, Vec::new(), None, head),
    }
}

/// A complete response: status, `Content-Type`, the body (none for HEAD) and one extra
/// header. hyper adds `Content-Length` and `Connection: close`.
pub fn respond(
    status: u16,
    ctype: &'static str,
    body: Vec<u8>,
    extra: Option<(&'static str, &'static str)>,
    head: bool,
) -> Response {
    let body = if head {
        Body::empty()
    } else {
        Body::from(body)
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    h.insert("content-type", HeaderValue::from_static(ctype));
    if let Some((name, value)) = extra {
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    resp
}

/// Set when the request's handler is dropped: hyper drops it when the connection closes,
/// so a long-poll on the blocking pool stops for a caller that hung up.
#[derive(Default)]
struct CallerGone(Arc<AtomicBool>);

impl Drop for CallerGone {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Counts a request as being answered (in `Shared::http_in_flight`) for as long as it
/// lives: until its answer is handed to hyper.
pub struct InFlight(Arc<Shared>);

impl InFlight {
    /// Counts one more request.
    pub fn enter(shared: Arc<Shared>) -> Self {
        shared.http_in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(shared)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let count: &AtomicUsize = &self.0.http_in_flight;
        count.fetch_sub(1, Ordering::SeqCst);
    }
}
