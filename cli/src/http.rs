//! The HTTP/1.1 side of the port: reading one request head (`httparse`), writing a response, the
//! read-only JSON routes (`/health`, `/api/runs`, `/api/runs/:id/events`), and the viewer's
//! static files (embedded at build time by `build.rs`, or read from `GRAPHMIND_VIEWER_DIST`).

use crate::hub::{Shared, VERSION};
use crate::storage::{self, PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX};
use crate::util::{js, object, or_null, put_opt, text};
use graphmind_core::json::Value;
use std::io::{self, Read, Write};

/// Largest request head accepted.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// One parsed request head.
#[derive(Debug, Default)]
pub struct Request {
    /// `GET`, ...
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// The query string (after `?`), possibly empty.
    pub query: String,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// First header named `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether a header holds `token` in its comma-separated list (case-insensitive).
    /// How many times header `name` (lower case) appears.
    pub fn header_count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(k, _)| k == name).count()
    }

    /// A header that RFC 9110 allows once (`Host`, `Origin`) sent more than once: only the
    /// first would be judged, so the request is refused (400) instead.
    pub fn repeated_single_header(&self) -> Option<&'static str> {
        ["host", "origin"]
            .into_iter()
            .find(|name| self.header_count(name) > 1)
    }

    pub fn header_has(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(k, _)| k == name)
            .any(|(_, v)| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    }
}

/// Parses a request head from the start of `buf`: the request and the head's length, or
/// `None` while the head is incomplete; an error for a malformed or oversized head.
pub fn parse_head(buf: &[u8]) -> io::Result<Option<(Request, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let target = req.path.unwrap_or("/");
            let (path, query) = match target.split_once('?') {
                Some((p, q)) => (p.to_owned(), q.to_owned()),
                None => (target.to_owned(), String::new()),
            };
            let parsed = Request {
                method: req.method.unwrap_or("").to_owned(),
                path,
                query,
                headers: req
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_ascii_lowercase(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect(),
            };
            Ok(Some((parsed, len)))
        }
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD_BYTES => Ok(None),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "bad request head",
        )),
    }
}

/// Reads a request head from a blocking reader; returns it and any bytes read past it
/// (`None` when the reader ended before a head).
pub fn read_head(stream: &mut impl Read) -> io::Result<Option<(Request, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some((req, len)) = parse_head(&buf)? {
            return Ok(Some((req, buf[len..].to_vec())));
        }
    }
}

/// [`read_head`] from a tokio socket (the server's connections).
pub async fn read_head_async(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
) -> io::Result<Option<(Request, Vec<u8>)>> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some((req, len)) = parse_head(&buf)? {
            return Ok(Some((req, buf[len..].to_vec())));
        }
    }
}

/// Writes a complete response carrying every security header and `no-store` (errors and
/// refusals answered before any route), and closes the exchange.
pub fn respond(
    stream: &mut impl Write,
    status: u16,
    content_type: &str,
    body: &str,
) -> io::Result<()> {
    respond_with(
        stream,
        status,
        content_type,
        body.as_bytes(),
        &crate::security::refusal_header_lines(),
    )
}

/// The reason phrase of a status code.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Error",
    }
}

/// Writes a complete response with these extra header lines (each ending in CRLF) and
/// closes the exchange (`Connection: close`).
pub fn respond_with(
    stream: &mut impl Write,
    status: u16,
    content_type: &str,
    body: &[u8],
    headers: &str,
) -> io::Result<()> {
    stream.write_all(&response_bytes(status, content_type, body, headers))?;
    stream.flush()
}

/// A complete response with these extra header lines (each ending in CRLF), ending the
/// exchange (`Connection: close`), as bytes to write.
pub fn response_bytes(status: u16, content_type: &str, body: &[u8], headers: &str) -> Vec<u8> {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n",
        reason_phrase(status),
        body.len()
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

/// A refusal answered before any route (see [`respond`]) as bytes to write.
pub fn refusal_bytes(status: u16, content_type: &str, body: &str) -> Vec<u8> {
    response_bytes(
        status,
        content_type,
        body.as_bytes(),
        &crate::security::refusal_header_lines(),
    )
}

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

/// Answers one plain HTTP request: (status, content type, body). API routes first, then
/// the viewer's static files.
pub fn route(shared: &Shared, req: &Request) -> (u16, &'static str, Vec<u8>) {
    let (status, ctype, body) = route_api(shared, req);
    if status == 404
        && (req.method == "GET" || req.method == "HEAD")
        && !req.path.starts_with("/api/")
    {
        if let Some((ctype, bytes)) = static_file(&req.path) {
            return (200, ctype, bytes);
        }
    }
    (status, ctype, body.into_bytes())
}

/// `{"error": message}`: the answer of a failed `/api` read.
fn error_body(message: &str) -> String {
    text(object([("error", message.into())]))
}

fn route_api(shared: &Shared, req: &Request) -> (u16, &'static str, String) {
    const JSON: &str = "application/json; charset=utf-8";
    if req.method != "GET" && req.method != "HEAD" {
        return (405, JSON, error_body("method not allowed"));
    }
    if req.path == "/health" {
        let mut health = object([
            ("ok", true.into()),
            ("name", "graphmind-ai".into()),
            ("version", VERSION.into()),
        ]);
        put_opt(&mut health, "storage", shared.storage.health_value());
        return (200, JSON, text(health));
    }
    if req.path == "/api/runs" {
        // Paged: `limit` (1..=RUNS_PAGE_MAX, default the maximum) runs after `cursor`
        // (the previous page's `nextCursor`), most recently started first.
        let limit =
            int_param(&req.query, "limit", storage::RUNS_PAGE_MAX as i64).filter(|l| *l >= 1);
        let cursor = query_param(&req.query, "cursor")
            .map(|c| storage::RunCursor::parse(&percent_decode(c)));
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
        return (200, JSON, text(page));
    }
    if let Some(rest) = req.path.strip_prefix("/api/runs/") {
        if let Some(id) = rest
            .strip_suffix("/events")
            .filter(|id| !id.is_empty() && !id.contains('/'))
        {
            let id = percent_decode(id);
            let conn = match storage::open(&shared.db_path) {
                Ok(c) => c,
                Err(e) => return (500, JSON, error_body(&e.to_string())),
            };
            if !matches!(storage::get_run(&conn, &id), Ok(Some(_))) {
                return (404, JSON, error_body("run not found"));
            }
            let after = int_param(&req.query, "afterSeq", -1);
            let limit = int_param(&req.query, "limit", PAGE_LIMIT_DEFAULT);
            let (Some(after), Some(limit)) = (after, limit.filter(|l| *l >= 1)) else {
                return (
                    400,
                    JSON,
                    error_body("afterSeq and limit must be integers (limit >= 1)"),
                );
            };
            let page =
                match storage::list_events(&conn, &id, after, Some(limit.min(PAGE_LIMIT_MAX))) {
                    Ok(p) => p,
                    Err(e) => return (500, JSON, error_body(&e.to_string())),
                };
            let next = if page.has_more {
                page.events.last().map(|e| e.seq.to_string())
            } else {
                None
            };
            let events: Vec<&str> = page.events.iter().map(|e| e.frame.as_str()).collect();
            return (
                200,
                JSON,
                // Stored frames are embedded byte for byte: parsing a page of them only to
                // write them back would cost every read of a run.
                format!(
                    "{{\"runId\":{},\"total\":{},\"events\":[{}],\"nextAfterSeq\":{}}}",
                    js(&id),
                    page.total,
                    events.join(","),
                    next.unwrap_or_else(|| "null".into())
                ),
            );
        }
    }
    (404, JSON, error_body("not found"))
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
