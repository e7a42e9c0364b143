//! Who may connect, and the headers every response carries.
//!
//! The server binds 127.0.0.1, which is no boundary once a browser is involved: any page
//! can open a WebSocket to a loopback port (the upgrade is not covered by the same-origin
//! policy), and a DNS-rebinding page becomes same-origin for `fetch`. So every HTTP
//! request and every WebSocket upgrade is checked here, before any route:
//!
//! - `Host` must be a loopback name (127.0.0.0/8, `::1` in any spelling, `localhost`,
//!   `*.localhost`), on any port (an SSH tunnel keeps working), or the host of an origin
//!   listed in `GRAPHMIND_ALLOWED_ORIGINS`. A missing `Host` (HTTP/1.0) passes.
//! - `Origin`, when present, must be a loopback origin on the port this server bound, or
//!   listed. `null`, `file://` and anything that is not `scheme://host` are refused. No
//!   `Origin` at all passes: that is every non-browser client, and a page cannot omit it.
//! - `GRAPHMIND_ALLOWED_ORIGINS=*` turns both checks off.
//!
//! A refusal is `403` with a plain-text hint naming the variable. `Host` is judged before
//! `Origin`, so a rebinding request names its real cause.

use graphmind_core::config::{normalize_origin, AllowedOrigins};

/// The environment variable that widens the policy.
pub const ALLOWED_ORIGINS_ENV: &str = "GRAPHMIND_ALLOWED_ORIGINS";

/// The framing policy every response carries.
pub const FRAME_ANCESTORS: &str = "frame-ancestors 'none'";

/// The security headers on every response (HTML, API, errors, refused upgrades), as
/// (name, value) pairs for the response layer ([`crate::guards`]): no framing
/// (`frame-ancestors 'none'`, `X-Frame-Options: DENY`), no referrer, no MIME sniffing;
/// API answers (`/api/...`) are also `Cache-Control: no-store`.
pub fn header_lines(path: &str) -> Vec<(&'static str, &'static str)> {
    let mut h = vec![
        ("content-security-policy", FRAME_ANCESTORS),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("x-content-type-options", "nosniff"),
    ];
    if path == "/api" || path.starts_with("/api/") {
        h.push(NO_STORE);
    }
    h
}

/// `Cache-Control: no-store`: on every API answer and every refusal.
pub const NO_STORE: (&str, &str) = ("cache-control", "no-store");

/// The headers of a refusal made before any route (or of a refused upgrade): every
/// security header and `no-store`.
pub fn refusal_header_lines() -> Vec<(&'static str, &'static str)> {
    let mut h = header_lines("");
    h.push(NO_STORE);
    h
}

fn is_ipv4_loopback(host: &str) -> bool {
    let parts: Vec<&str> = host.split('.').collect();
    parts.len() == 4
        && parts[0] == "127"
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u16>().is_ok_and(|n| n <= 255)
        })
}

/// True for names that can only mean this machine: 127.0.0.0/8, `::1` (also written
/// `0:0:0:0:0:0:0:1` or as `::ffff:127.x.y.z`), `localhost` and its subdomains.
pub fn is_loopback_hostname(hostname: &str) -> bool {
    let h = hostname.trim().to_ascii_lowercase();
    let h = h.strip_prefix('[').unwrap_or(&h);
    let h = h.strip_suffix(']').unwrap_or(h);
    if h.is_empty() {
        return false;
    }
    if h == "localhost" || h.ends_with(".localhost") {
        return true;
    }
    if h == "::1" || h == "0:0:0:0:0:0:0:1" {
        return true;
    }
    if let Some(v4) = h.strip_prefix("::ffff:") {
        return is_ipv4_loopback(v4);
    }
    is_ipv4_loopback(h)
}

/// The host name of a `Host` header value (`example.com:4747`, `[::1]:4747`), lower case.
pub fn hostname_of_host_header(value: &str) -> Option<String> {
    let h = value.trim().to_ascii_lowercase();
    if h.is_empty() {
        return None;
    }
    if let Some(rest) = h.strip_prefix('[') {
        return rest.find(']').map(|end| rest[..end].to_owned());
    }
    Some(match h.find(':') {
        Some(i) => h[..i].to_owned(),
        None => h,
    })
}

/// Splits a normalized origin (`scheme://host[:port]`) into host and effective port.
fn origin_host_port(normalized: &str) -> Option<(String, u16)> {
    let (scheme, rest) = normalized.split_once("://")?;
    let (host, port) = if let Some(after) = rest.strip_prefix('[') {
        let end = after.find(']')?;
        let host = after[..end].to_owned();
        let port = after[end + 1..].strip_prefix(':').map(str::to_owned);
        (host, port)
    } else {
        match rest.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p.to_owned())),
            None => (rest.to_owned(), None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None if scheme == "https" || scheme == "wss" => 443,
        None => 80,
    };
    Some((host, port))
}

/// Is this `Origin` header allowed for a server bound to `port`?
pub fn is_origin_allowed(origin: Option<&str>, port: u16, policy: &AllowedOrigins) -> bool {
    let Some(origin) = origin.filter(|o| !o.is_empty()) else {
        return true;
    };
    if policy.any {
        return true;
    }
    let Some(normalized) = normalize_origin(origin) else {
        return false;
    };
    if policy.origins.contains(&normalized) {
        return true;
    }
    match origin_host_port(&normalized) {
        Some((host, p)) => is_loopback_hostname(&host) && p == port,
        None => false,
    }
}

/// Is this `Host` header allowed? Only the name matters; the port is left alone on
/// purpose (SSH tunnels).
pub fn is_host_allowed(host: Option<&str>, policy: &AllowedOrigins) -> bool {
    let Some(host) = host.filter(|h| !h.is_empty()) else {
        return true;
    };
    if policy.any {
        return true;
    }
    let Some(name) = hostname_of_host_header(host) else {
        return false;
    };
    if is_loopback_hostname(&name) {
        return true;
    }
    policy
        .origins
        .iter()
        .any(|o| origin_host_port(o).is_some_and(|(h, _)| h == name))
}

/// Which header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectionKind {
    /// The `Host` header.
    Host,
    /// The `Origin` header.
    Origin,
}

impl RejectionKind {
    /// `host` / `origin`.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectionKind::Host => "host",
            RejectionKind::Origin => "origin",
        }
    }
}

/// A refused request: which header, its value, and the 403 body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Host or Origin.
    pub kind: RejectionKind,
    /// The offending value.
    pub value: String,
    /// The message (the 403 body, without its newline).
    pub message: String,
}

fn hint() -> String {
    format!(
        "Set {ALLOWED_ORIGINS_ENV} to a comma-separated list of origins to allow it (for example {ALLOWED_ORIGINS_ENV}=http://localhost:5199), or '*' to disable the check."
    )
}

/// Checks both headers of one request; `None` when it may proceed. The same function
/// guards HTTP routes and WebSocket upgrades, so they cannot drift apart.
pub fn check_request(
    host: Option<&str>,
    origin: Option<&str>,
    port: u16,
    policy: &AllowedOrigins,
) -> Option<Rejection> {
    if !is_host_allowed(host, policy) {
        let value = host.unwrap_or("").to_owned();
        return Some(Rejection {
            kind: RejectionKind::Host,
            message: format!(
                "Refused: Host \"{value}\" is not a loopback name. The GraphMind server is bound to 127.0.0.1 and only answers to 127.0.0.1, localhost or [::1]; a request arriving under another name is DNS rebinding, not you. {}",
                hint()
            ),
            value,
        });
    }
    if !is_origin_allowed(origin, port, policy) {
        let value = origin.unwrap_or("").to_owned();
        return Some(Rejection {
            kind: RejectionKind::Origin,
            message: format!(
                "Refused: Origin \"{value}\" may not talk to this GraphMind server. It records your prompts and tool payloads and can drive a paused agent, so only the viewer it serves itself (http://127.0.0.1:{port}, http://localhost:{port}) is allowed by default. {}",
                hint()
            ),
            value,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(raw: &str) -> AllowedOrigins {
        graphmind_core::config::parse_allowed_origins(Some(raw), &mut Vec::new())
    }

    #[test]
    fn loopback_names() {
        for h in [
            "127.0.0.1",
            "127.1.2.3",
            "localhost",
            "LOCALHOST",
            "app.localhost",
            "::1",
            "[::1]",
            "0:0:0:0:0:0:0:1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_loopback_hostname(h), "{h}");
        }
        for h in [
            "",
            "128.0.0.1",
            "127.0.0",
            "127.0.0.256",
            "localhost.evil.com",
            "evil.com",
            "::2",
            "0.0.0.0",
            "127.0.0.1.nip.io",
        ] {
            assert!(!is_loopback_hostname(h), "{h}");
        }
    }

    #[test]
    fn host_rules() {
        let p = policy("");
        assert!(is_host_allowed(Some("127.0.0.1:4747"), &p));
        assert!(is_host_allowed(Some("localhost:8888"), &p), "any port");
        assert!(is_host_allowed(Some("[::1]:4747"), &p));
        assert!(is_host_allowed(None, &p), "HTTP/1.0");
        assert!(!is_host_allowed(Some("graphmind.attacker.example"), &p));
        assert!(!is_host_allowed(
            Some("graphmind.attacker.example:4747"),
            &p
        ));
        assert!(is_host_allowed(
            Some("host.docker.internal:4747"),
            &policy("http://host.docker.internal:4747")
        ));
        assert!(is_host_allowed(Some("anything"), &policy("*")));
    }

    #[test]
    fn origin_rules() {
        let p = policy("");
        assert!(is_origin_allowed(None, 4747, &p));
        assert!(is_origin_allowed(Some("http://127.0.0.1:4747"), 4747, &p));
        assert!(is_origin_allowed(Some("http://LocalHost:4747/"), 4747, &p));
        assert!(is_origin_allowed(Some("http://[::1]:4747"), 4747, &p));
        assert!(
            is_origin_allowed(Some("http://localhost"), 80, &p),
            "default port"
        );
        assert!(
            !is_origin_allowed(Some("http://localhost:5199"), 4747, &p),
            "another loopback port"
        );
        assert!(!is_origin_allowed(Some("null"), 4747, &p));
        assert!(!is_origin_allowed(Some("file:///etc/passwd"), 4747, &p));
        assert!(!is_origin_allowed(Some("https://evil.example"), 4747, &p));
        assert!(is_origin_allowed(
            Some("http://localhost:5199"),
            4747,
            &policy("http://localhost:5199")
        ));
        assert!(is_origin_allowed(
            Some("https://evil.example"),
            4747,
            &policy("*")
        ));
    }

    #[test]
    fn host_is_reported_before_origin() {
        let r = check_request(
            Some("graphmind.attacker.example:4747"),
            Some("http://graphmind.attacker.example:4747"),
            4747,
            &policy(""),
        )
        .unwrap();
        assert_eq!(r.kind, RejectionKind::Host);
        assert!(r.message.contains("GRAPHMIND_ALLOWED_ORIGINS"));
        let r = check_request(Some("127.0.0.1:4747"), Some("null"), 4747, &policy("")).unwrap();
        assert_eq!((r.kind, r.value.as_str()), (RejectionKind::Origin, "null"));
        assert!(check_request(Some("127.0.0.1:4747"), None, 4747, &policy("")).is_none());
    }

    #[test]
    fn headers() {
        let h = header_lines("/");
        assert!(h.contains(&("content-security-policy", "frame-ancestors 'none'")));
        assert!(h.contains(&("x-frame-options", "DENY")));
        assert!(h.contains(&("referrer-policy", "no-referrer")));
        assert!(h.contains(&("x-content-type-options", "nosniff")));
        assert!(!h.contains(&NO_STORE));
        assert!(header_lines("/api/runs").contains(&NO_STORE));
        assert!(refusal_header_lines().contains(&NO_STORE));
    }
}
