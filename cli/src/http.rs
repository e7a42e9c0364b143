//! The read-only answers of the port's HTTP (`/health`, `/api/runs`,
//! `/api/runs/{id}/events`), the query-string helpers, and the viewer's static files
//! (embedded at build time by `build.rs`, or read from `GRAPHMIND_VIEWER_DIST`). The
//! routing, the request heads and the responses' bytes are axum's and hyper's
//! ([`crate::routes`]); these functions only compute (status, content type, body).

use crate::hub::{Shared, VERSION};
use crate::storage::{self, PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX};
use crate::util::{js, object, or_null, put_opt, text};
use graphmind_core::json::Value;

/// Largest request head accepted.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// An answer: (status, content type, body).
pub type Answer = (u16, &'static str, String);

/// The content type of every JSON answer.
pub const JSON: &str = "application/json; charset=utf-8";

/// The value of `name` in a query string (undecoded).
pub fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn int_param(query: &str, name: &str, fallback: i64) -> Option<i64> {
    match query_param(query, name) {
        None | Some("") => Some(fallback),
        Some(v) => v
            .parse::<i64>()
            .ok()
            .filter(|n| n.unsigned_abs() <= 9_007_199_254_740_991),
    }
}

/// Decodes `%XX` escapes (invalid UTF-8 replaced; a `%` not followed by two hex digits is
/// kept as it is), with the `percent-encoding` crate.
pub fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/viewer_assets.rs"));
}
pub use embedded::{VIEWER_ASSETS, VIEWER_BUILT};

/// Environment variable naming a built viewer folder to serve instead of the embedded one.
pub const VIEWER_DIST_ENV: &str = "GRAPHMIND_VIEWER_DIST";
/// Largest file served from `GRAPHMIND_VIEWER_DIST`.
pub const MAX_STATIC_BYTES: u64 = 64 * 1024 * 1024;

/// The content type for a static file, from its extension (`mime_guess`); text types
/// (and JSON) are sent as UTF-8, a source map is JSON, anything unknown is a download.
pub fn mime_type(path: &str) -> &'static str {
    let ext = path.rsplit('.').next().unwrap_or("");
    let guessed = if ext == "map" {
        "application/json"
    } else {
        mime_guess::from_ext(ext)
            .first_raw()
            .unwrap_or("application/octet-stream")
    };
    match guessed {
        "text/html" => "text/html; charset=utf-8",
        "text/javascript" | "application/javascript" => "text/javascript; charset=utf-8",
        "text/css" => "text/css; charset=utf-8",
        "application/json" => "application/json; charset=utf-8",
        "text/plain" => "text/plain; charset=utf-8",
        other => other,
    }
}

/// The bundle-relative file a request path names (`/` is `index.html`); `None` for a path
/// that could leave the bundle (`..`, backslashes, empty segments, NUL).
fn static_rel(path: &str) -> Option<String> {
    let rel = percent_decode(path.trim_start_matches('/'));
    let rel = if rel.is_empty() {
        "index.html".to_owned()
    } else {
        rel
    };
    let safe = !rel.contains('\\')
        && !rel.contains('\0')
        && rel
            .split('/')
            .all(|seg| !seg.is_empty() && seg != ".." && seg != ".");
    safe.then_some(rel)
}

/// A viewer file: from `GRAPHMIND_VIEWER_DIST` when set, else from the embedded bundle.
pub fn static_file(path: &str) -> Option<(&'static str, Vec<u8>)> {
    let rel = static_rel(path)?;
    if let Some(dir) = std::env::var_os(VIEWER_DIST_ENV).filter(|d| !d.is_empty()) {
        let file = std::path::Path::new(&dir).join(&rel);
        let meta = std::fs::metadata(&file)
            .ok()
            .filter(|m| m.is_file() && m.len() <= MAX_STATIC_BYTES)?;
        let _ = meta;
        return std::fs::read(&file).ok().map(|b| (mime_type(&rel), b));
    }
    VIEWER_ASSETS
        .iter()
        .find(|(p, _)| *p == rel)
        .map(|(_, b)| (mime_type(&rel), b.to_vec()))
}

/// `{"error": message}`: the answer of a failed `/api` read.
fn error_body(message: &str) -> String {
    text(object([("error", message.into())]))
}

/// 405 `{"error":"method not allowed"}`: a method other than GET/HEAD on a read-only route
/// or on a path no route knows.
pub fn method_not_allowed() -> Answer {
    (405, JSON, error_body("method not allowed"))
}

/// 404 `{"error":"not found"}`.
pub fn not_found() -> Answer {
    (404, JSON, error_body("not found"))
}

/// `GET /health`.
pub fn health(shared: &Shared) -> Answer {
    let mut health = object([
        ("ok", true.into()),
        ("name", "graphmind-ai".into()),
        ("version", VERSION.into()),
    ]);
    put_opt(&mut health, "storage", shared.storage.health_value());
    (200, JSON, text(health))
}

/// `GET /api/runs`: paged, `limit` (1..=RUNS_PAGE_MAX, default the maximum) runs after
/// `cursor` (the previous page's `nextCursor`), most recently started first.
pub fn runs(shared: &Shared, query: &str) -> Answer {
    let limit = int_param(query, "limit", storage::RUNS_PAGE_MAX as i64).filter(|l| *l >= 1);
    let cursor =
        query_param(query, "cursor").map(|c| storage::RunCursor::parse(&percent_decode(c)));
    let (Some(limit), None | Some(Some(_))) = (limit, &cursor) else {
        return (
            400,
            JSON,
            error_body(
                "limit must be an integer >= 1 and cursor a nextCursor from a previous page",
            ),
        );
    };
    let cursor = cursor.flatten();
    let page = storage::open(&shared.db_path).and_then(|c| {
        storage::list_runs_page(&c, cursor.as_ref(), limit.min(i64::from(u32::MAX)) as usize)
    });
    let (rows, next) = match page {
        Ok(p) => p,
        Err(e) => return (500, JSON, error_body(&e.to_string())),
    };
    let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    let live: Vec<bool> = shared
        .hub
        .call(move |h| ids.iter().map(|id| h.is_live(id)).collect())
        .unwrap_or_else(|_| vec![false; rows.len()]);
    let runs: Vec<Value> = rows
        .iter()
        .zip(live)
        .map(|(r, live)| r.to_value(live))
        .collect();
    let page = object([
        ("runs", Value::Array(runs)),
        ("nextCursor", or_null(next.map(|c| c.to_text()))),
    ]);
    (200, JSON, text(page))
}

/// `GET /api/runs/{id}/events` (`id` already percent-decoded): a page of stored frames.
pub fn run_events(shared: &Shared, id: &str, query: &str) -> Answer {
    let conn = match storage::open(&shared.db_path) {
        Ok(c) => c,
        Err(e) => return (500, JSON, error_body(&e.to_string())),
    };
    if !matches!(storage::get_run(&conn, id), Ok(Some(_))) {
        return (404, JSON, error_body("run not found"));
    }
    let after = int_param(query, "afterSeq", -1);
    let limit = int_param(query, "limit", PAGE_LIMIT_DEFAULT);
    let (Some(after), Some(limit)) = (after, limit.filter(|l| *l >= 1)) else {
        return (
            400,
            JSON,
            error_body("afterSeq and limit must be integers (limit >= 1)"),
        );
    };
    let page = match storage::list_events(&conn, id, after, Some(limit.min(PAGE_LIMIT_MAX))) {
        Ok(p) => p,
        Err(e) => return (500, JSON, error_body(&e.to_string())),
    };
    let next = if page.has_more {
        page.events.last().map(|e| e.seq.to_string())
    } else {
        None
    };
    let events: Vec<&str> = page.events.iter().map(|e| e.frame.as_str()).collect();
    (
        200,
        JSON,
        // Stored frames are embedded byte for byte: parsing a page of them only to
        // write them back would cost every read of a run.
        format!(
            "{{\"runId\":{},\"total\":{},\"events\":[{}],\"nextAfterSeq\":{}}}",
            js(id),
            page.total,
            events.join(","),
            next.unwrap_or_else(|| "null".into())
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_paths() {
        assert_eq!(static_rel("/").as_deref(), Some("index.html"));
        assert_eq!(
            static_rel("/assets/index-x.js").as_deref(),
            Some("assets/index-x.js")
        );
        assert_eq!(static_rel("/../etc/passwd"), None);
        assert_eq!(static_rel("/assets/%2e%2e/x"), None);
        assert_eq!(static_rel("/a//b"), None);
        assert_eq!(mime_type("assets/a.js"), "text/javascript; charset=utf-8");
        for (file, ctype) in [
            ("index.html", "text/html; charset=utf-8"),
            ("a.mjs", "text/javascript; charset=utf-8"),
            ("a.css", "text/css; charset=utf-8"),
            ("a.json", "application/json; charset=utf-8"),
            ("a.js.map", "application/json; charset=utf-8"),
            ("a.svg", "image/svg+xml"),
            ("a.png", "image/png"),
            ("favicon.ico", "image/x-icon"),
            ("a.woff2", "font/woff2"),
            ("a.txt", "text/plain; charset=utf-8"),
            ("a.wasm", "application/wasm"),
            ("a.unknownext", "application/octet-stream"),
        ] {
            assert_eq!(mime_type(file), ctype, "{file}");
        }
        assert!(VIEWER_ASSETS.iter().any(|(p, _)| *p == "index.html"));
    }

    #[test]
    fn params() {
        assert_eq!(int_param("afterSeq=3&limit=2", "limit", 1000), Some(2));
        assert_eq!(int_param("afterSeq=3", "limit", 1000), Some(1000));
        assert_eq!(int_param("limit=x", "limit", 1000), None);
        assert_eq!(percent_decode("run%3A1"), "run:1");
        // a `%` before a multi-byte character, or at the end, is kept (the hand-written
        // decoder sliced inside the character and panicked the connection's thread)
        assert_eq!(percent_decode("run%é"), "run%é");
        assert_eq!(percent_decode("run%4"), "run%4");
        assert_eq!(percent_decode("%FF"), "\u{fffd}");
    }
}
