//! Loading a recording: an exported file, or a run fetched from the server the app
//! attaches to over its read-only HTTP API (`GET /api/runs/<id>/events`, paged), with one
//! plain HTTP/1.1 exchange per page on 127.0.0.1 (the server's own port).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::recording::{Recording, RecordingError};
use crate::json::{self, Value};

/// Connect budget for the server.
pub const FETCH_CONNECT_TIMEOUT: Duration = Duration::from_millis(1_000);
/// Read budget per page.
pub const FETCH_READ_TIMEOUT: Duration = Duration::from_millis(5_000);
/// Events asked for per page (the server's own page maximum).
pub const FETCH_PAGE_LIMIT: u32 = 5_000;
/// Most bytes one page may be.
pub const MAX_PAGE_BYTES: usize = 256 * 1024 * 1024;
/// Most bytes an exported file may be.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024 * 1024;

/// Why a recording could not be loaded (the app then runs live).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {why}")]
    File {
        /// The path.
        path: String,
        /// What failed.
        why: String,
    },
    /// The server could not be asked.
    #[error("cannot fetch run {run} from {url}: {why}")]
    Fetch {
        /// The run id.
        run: String,
        /// The server.
        url: String,
        /// What failed.
        why: String,
    },
    /// The server has no such run.
    #[error("the server at {url} has no run {run}")]
    NoSuchRun {
        /// The run id.
        run: String,
        /// The server.
        url: String,
    },
    /// What was read is not a recording.
    #[error(transparent)]
    Recording(#[from] RecordingError),
}

/// Reads an exported run.
pub fn load_file(path: &str) -> Result<Recording, LoadError> {
    let err = |why: String| LoadError::File {
        path: path.to_string(),
        why,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(err(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    Ok(Recording::from_ndjson(&String::from_utf8_lossy(&bytes))?)
}

/// `host:port` of a `ws://` ingest URL; `None` for anything else (`wss://` included: the
/// server serves plain HTTP on loopback).
pub fn http_authority(ws_url: &str) -> Option<String> {
    let rest = ws_url.trim().strip_prefix("ws://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    (!authority.is_empty()).then(|| authority.to_string())
}

/// Fetches run `run` from the server whose ingest URL is `ws_url`.
pub fn load_run(ws_url: &str, run: &str) -> Result<Recording, LoadError> {
    let fail = |why: String| LoadError::Fetch {
        run: run.to_string(),
        url: ws_url.to_string(),
        why,
    };
    let authority = http_authority(ws_url).ok_or_else(|| fail("not a ws:// address".into()))?;
    let mut events: Vec<Value> = Vec::new();
    let mut after: i64 = -1;
    loop {
        let path = format!("/api/runs/{run}/events?afterSeq={after}&limit={FETCH_PAGE_LIMIT}");
        let (status, body) = get(&authority, &path).map_err(fail)?;
        if status == 404 {
            return Err(LoadError::NoSuchRun {
                run: run.to_string(),
                url: ws_url.to_string(),
            });
        }
        if status != 200 {
            return Err(fail(format!("HTTP {status}")));
        }
        let page =
            json::parse_str(&String::from_utf8_lossy(&body)).map_err(|e| fail(e.to_string()))?;
        if let Some(list) = page.get("events").and_then(Value::as_array) {
            events.extend(list.iter().cloned());
        }
        match page.get("nextAfterSeq").and_then(Value::as_i64) {
            Some(next) if next > after => after = next,
            _ => break,
        }
    }
    Ok(Recording::from_envelopes(events.iter())?)
}

/// One `GET` with `Connection: close`: the status and the body.
fn get(authority: &str, path: &str) -> Result<(u16, Vec<u8>), String> {
    let addr = authority
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or_else(|| format!("{authority} does not resolve"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, FETCH_CONNECT_TIMEOUT).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(FETCH_READ_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    stream
        .take(MAX_PAGE_BYTES as u64 + 64 * 1024)
        .read_to_end(&mut raw)
        .map_err(|e| e.to_string())?;
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(&raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("the answer was cut off".into()),
        Err(e) => return Err(format!("not an HTTP answer ({e})")),
    };
    let status = response.code.unwrap_or(0);
    Ok((status, raw[head..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        assert_eq!(
            http_authority("ws://127.0.0.1:4747/ingest").as_deref(),
            Some("127.0.0.1:4747")
        );
        assert_eq!(
            http_authority("ws://localhost:9").as_deref(),
            Some("localhost:9")
        );
        assert_eq!(http_authority("wss://x/ingest"), None);
        assert_eq!(http_authority("http://x"), None);
    }

    #[test]
    fn a_missing_file_is_a_clear_error() {
        let e = load_file("/nonexistent/graphmind.ndjson").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read /nonexistent/graphmind.ndjson"),
            "{e}"
        );
    }

    #[test]
    fn a_refused_connection_is_a_clear_error() {
        // Port 1 on loopback: nothing listens there.
        let e = load_run("ws://127.0.0.1:1/ingest", "run_x").unwrap_err();
        assert!(e.to_string().contains("cannot fetch run run_x"), "{e}");
    }
}
