//! The port's guards, as one axum middleware ([`guard`], a tower layer through
//! `axum::middleware::from_fn_with_state`) around every route, the WebSocket upgrades
//! and the static-file fallback, in this order:
//!
//! 1. a repeated `Host` or `Origin` header: 400 (and a throttled log line);
//! 2. [`security::check_request`] (`Host` and `Origin` policy): 403 with its message;
//! 3. an upgrade to a WebSocket anywhere but `/ingest` and `/ws/ui`: 404; an upgrade on
//!    those two goes to its handler as is (it answers 101 or a refusal itself);
//! 4. the Bearer check for non-GET `/api/...` ([`control_api::bearer_refusal`]): 401 with
//!    `WWW-Authenticate: Bearer`;
//! 5. the answer, counted in `Shared::http_in_flight` (shutdown waits for it), with
//!    [`security::header_lines`] for its path added (`Cache-Control: no-store` on `/api`).
//!
//! A refusal made here, before any route, carries every security header and `no-store`
//! ([`security::refusal_header_lines`]), as before.

use crate::control_api::{self, header};
use crate::hub::Shared;
use crate::routes::{respond, InFlight};
use crate::security;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

/// The content type of a plain-text refusal.
pub const PLAIN: &str = "text/plain; charset=utf-8";

/// A header that RFC 9110 allows once (`Host`, `Origin`) sent more than once: only the
/// first would be judged, so the request is refused (400) instead.
fn repeated_single_header(headers: &HeaderMap) -> Option<&'static str> {
    ["host", "origin"]
        .into_iter()
        .find(|name| headers.get_all(*name).iter().count() > 1)
}

/// Whether header `name` holds `token` in its comma-separated list (case-insensitive).
pub fn header_has(headers: &HeaderMap, name: &str, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        String::from_utf8_lossy(v.as_bytes())
            .split(',')
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    })
}

/// A refusal answered before any route: every security header and `no-store`.
pub fn refusal(status: u16, ctype: &'static str, body: impl Into<String>) -> Response {
    let mut resp = respond(status, ctype, body.into().into_bytes(), None, false);
    add_headers(resp.headers_mut(), &security::refusal_header_lines());
    resp
}

/// Adds each (name, value) the response does not carry yet.
fn add_headers(headers: &mut HeaderMap, pairs: &[(&'static str, &'static str)]) {
    for (name, value) in pairs {
        headers
            .entry(HeaderName::from_static(name))
            .or_insert_with(|| HeaderValue::from_static(value));
    }
}

/// The guards of every request, then its answer with the security headers (see the
/// module header for the order).
pub async fn guard(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    if let Some(name) = repeated_single_header(req.headers()) {
        crate::hub::throttled_log!(
            tracing::Level::WARN,
            shared.log_throttle,
            "duplicate-header",
            "refused a request with more than one {name} header on {path}"
        );
        return refusal(
            400,
            PLAIN,
            format!("bad request: more than one {name} header\n"),
        );
    }
    let host = header(req.headers(), "host");
    let origin = header(req.headers(), "origin");
    let checked = security::check_request(
        host.as_deref(),
        origin.as_deref(),
        shared.port,
        &shared.allowed_origins,
    );
    if let Some(r) = checked {
        crate::hub::throttled_log!(
            tracing::Level::WARN,
            shared.log_throttle,
            "origin-refused",
            "refused {} \"{}\" on {path}",
            r.kind.as_str(),
            r.value
        );
        return refusal(403, PLAIN, format!("{}\n", r.message));
    }
    if header_has(req.headers(), "upgrade", "websocket") {
        if path != "/ingest" && path != "/ws/ui" {
            return refusal(404, "application/json", "{\"error\":\"not found\"}");
        }
        return next.run(req).await;
    }
    let refused = control_api::bearer_refusal(&shared, req.method(), &path, req.headers());
    let mut resp = match refused {
        Some((status, ctype, body, extra)) => {
            respond(status, ctype, body.into_bytes(), extra, false)
        }
        None => {
            let _answering = InFlight::enter(shared.clone());
            next.run(req).await
        }
    };
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        add_headers(resp.headers_mut(), &security::header_lines(&path));
    }
    resp
}
