//! Anonymous CLI telemetry, exactly as the spec's table and the reference's telemetry page
//! describe it: ONE record per command, `{event, installId, version, ts}`, nothing else.
//!
//! - Mode (the core's `telemetry_mode`): `DO_NOT_TRACK=1|true` beats everything -> off;
//!   `GRAPHMIND_TELEMETRY=0|false` -> off; `=log` -> the exact record is printed to
//!   stderr prefixed `[graphmind telemetry] ` and NOTHING is sent (even under `CI`); `CI`
//!   set -> off; otherwise send.
//! - Off: nothing at all happens: no request, no install id file.
//! - The install id is a random UUID in `$GRAPHMIND_HOME/telemetry-id` (0600, its folder
//!   0700), created the first time a record is made.
//! - Sending is fire-and-forget from a detached thread with a 3 s timeout; it never blocks
//!   or holds the process open, and failures are silent. This build has no TLS client, so
//!   it sends only to `http://` endpoints (`GRAPHMIND_TELEMETRY_URL`, used by the tests);
//!   for an `https://` endpoint, the default, it sends nothing and creates no install id.

use crate::util::{object, text};
use graphmind_core::config::{ServerConfig, TelemetryMode};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

/// Timeout of the telemetry request.
pub const TELEMETRY_TIMEOUT: Duration = Duration::from_secs(3);
/// The stderr prefix of `GRAPHMIND_TELEMETRY=log`.
pub const LOG_PREFIX: &str = "[graphmind telemetry] ";

fn random_uuid() -> String {
    let mut b: [u8; 16] = graphmind_core::random::bytes_or_fallback();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = graphmind_core::fingerprint::to_hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

/// The install id: read from `path`, or created (0600; folder 0700).
pub fn install_id(path: &Path) -> String {
    if let Ok(t) = std::fs::read_to_string(path) {
        let t = t.trim();
        if is_uuid(t) {
            return t.to_owned();
        }
    }
    let id = random_uuid();
    if let Some(dir) = path.parent() {
        let _ = crate::tokens::ensure_private_dir(dir);
    }
    let _ = crate::tokens::write_private_file(path, &format!("{id}\n"));
    id
}

/// Epoch milliseconds as ISO 8601 UTC with milliseconds (`2026-08-26T14:03:07.512Z`).
pub fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// The record: `{"event","installId","version","ts"}`.
pub fn record_json(event: &str, install_id: &str, version: &str, ts_ms: u64) -> String {
    text(object([
        ("event", event.into()),
        ("installId", install_id.into()),
        ("version", version.into()),
        ("ts", iso8601(ts_ms).into()),
    ]))
}

/// Records one command (`serve`, `runs`, `record`, `import`, `pauses`, `wait`, `resume`,
/// `mcp`, `mcp-proxy`).
pub fn record_command(event: &str, cfg: &ServerConfig) {
    match cfg.telemetry {
        TelemetryMode::Off => {}
        TelemetryMode::Log => {
            let rec = record_json(
                event,
                &install_id(&cfg.telemetry_id_path),
                crate::hub::VERSION,
                crate::util::now_ms() as u64,
            );
            eprintln!("{LOG_PREFIX}{rec}");
        }
        TelemetryMode::Send => {
            if !cfg
                .telemetry_url
                .trim()
                .to_ascii_lowercase()
                .starts_with("http://")
            {
                return; // no TLS client in this build: nothing would be sent, so nothing is made
            }
            let rec = record_json(
                event,
                &install_id(&cfg.telemetry_id_path),
                crate::hub::VERSION,
                crate::util::now_ms() as u64,
            );
            let url = cfg.telemetry_url.clone();
            let _ = std::thread::Builder::new()
                .name("graphmind-telemetry".into())
                .spawn(move || {
                    let _ = post(&url, &rec);
                });
        }
    }
}

/// `POST url` with a JSON body, 3 s timeout; `http://` only.
fn post(url: &str, body: &str) -> std::io::Result<()> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| std::io::Error::other("only http:// is supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr_text = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addr = addr_text
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, TELEMETRY_TIMEOUT)?;
    s.set_write_timeout(Some(TELEMETRY_TIMEOUT))?;
    s.set_read_timeout(Some(TELEMETRY_TIMEOUT))?;
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())?;
    let mut sink = [0u8; 512];
    let _ = s.read(&mut sink);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_shape() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_788_962_587_512), "2026-09-09T14:03:07.512Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        let r = record_json("serve", "3f8a2c1e-9b4d-4e7a-8c2f-1d5e6a7b8c9d", "0.6.0", 0);
        assert_eq!(
            r,
            r#"{"event":"serve","installId":"3f8a2c1e-9b4d-4e7a-8c2f-1d5e6a7b8c9d","version":"0.6.0","ts":"1970-01-01T00:00:00.000Z"}"#
        );
        let u = random_uuid();
        assert!(is_uuid(&u) && &u[14..15] == "4", "{u}");
    }

    #[test]
    fn install_id_is_stable_and_private() {
        let dir = std::env::temp_dir().join(format!("gm-telemetry-{}", crate::util::new_token()));
        let path = dir.join("telemetry-id");
        let a = install_id(&path);
        assert_eq!(install_id(&path), a);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
