//! Who may connect: the origin guard on every request and upgrade, the security headers on
//! every response, and the control credentials — against the real binary.

mod common;
use common::*;
use graphmind_core::json::{parse_str, Value};
use std::time::Duration;

fn get_with(port: u16, path: &str, host: &str, origin: Option<&str>) -> (u16, String, String) {
    let origin = origin
        .map(|o| format!("Origin: {o}\r\n"))
        .unwrap_or_default();
    let raw = http_raw(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{origin}Connection: close\r\n\r\n"),
    );
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (h, b) = raw
        .split_once("\r\n\r\n")
        .map(|(h, b)| (h.to_owned(), b.to_owned()))
        .unwrap_or_default();
    (status, h, b)
}

#[test]
fn host_must_be_a_loopback_name_on_any_port() {
    let srv = Server::start(&[], &[]);
    let p = srv.port;
    for host in [
        format!("127.0.0.1:{p}"),
        format!("localhost:{p}"),
        "localhost:8888".into(),
        format!("[::1]:{p}"),
        format!("app.localhost:{p}"),
        "127.9.9.9".into(),
    ] {
        assert_eq!(get_with(p, "/health", &host, None).0, 200, "{host}");
    }
    for host in [
        "graphmind.attacker.example",
        "graphmind.attacker.example:4747",
        "127.0.0.1.nip.io",
        "0.0.0.0",
    ] {
        let (status, head, body) = get_with(p, "/health", host, None);
        assert_eq!(status, 403, "{host}");
        assert!(
            body.starts_with(&format!("Refused: Host \"{host}\" is not a loopback name.")),
            "{body}"
        );
        assert!(
            body.contains("GRAPHMIND_ALLOWED_ORIGINS") && body.ends_with('\n'),
            "a hint"
        );
        assert_eq!(
            header_of(&head, "content-type").as_deref(),
            Some("text/plain; charset=utf-8")
        );
    }
    // HTTP/1.0 without a Host passes. Only the status code is read: hyper answers an
    // HTTP/1.0 request in HTTP/1.0 (RFC 9110 section 6.2: a server answers in a version the
    // client speaks), where the hand-written server always wrote `HTTP/1.1`.
    let raw = http_raw(p, "GET /health HTTP/1.0\r\n\r\n");
    assert_eq!(raw.split(' ').nth(1), Some("200"), "{raw}");
}

#[test]
fn origin_must_be_this_servers_own_loopback_origin() {
    let srv = Server::start(&[], &[]);
    let p = srv.port;
    let host = format!("127.0.0.1:{p}");
    for ok in [
        format!("http://127.0.0.1:{p}"),
        format!("http://localhost:{p}"),
        format!("http://[::1]:{p}"),
        format!("http://LocalHost:{p}/"),
    ] {
        assert_eq!(get_with(p, "/api/runs", &host, Some(&ok)).0, 200, "{ok}");
    }
    for bad in [
        "null".to_string(),
        "file://".into(),
        "file:///etc/passwd".into(),
        "https://evil.example".into(),
        "http://localhost:5199".into(),
        format!("http://evil.example:{p}"),
    ] {
        let (status, _, body) = get_with(p, "/api/runs", &host, Some(&bad));
        assert_eq!(status, 403, "{bad}");
        assert!(
            body.starts_with(&format!(
                "Refused: Origin \"{bad}\" may not talk to this GraphMind server."
            )),
            "{body}"
        );
        assert!(body.contains(&format!("(http://127.0.0.1:{p}, http://localhost:{p})")));
    }
    // Host is judged first, so a rebinding request names its real cause.
    let (_, _, body) = get_with(p, "/", "evil.example", Some("http://evil.example"));
    assert!(body.starts_with("Refused: Host"), "{body}");
}

#[test]
fn websocket_upgrades_pass_the_same_guard() {
    let srv = Server::start(&[], &[]);
    let p = srv.port;
    for path in ["/ws/ui", "/ingest"] {
        for origin in ["https://evil.example", "null", "http://localhost:5199"] {
            match Ws::try_connect(p, path, &[("Origin", origin)]) {
                Err(tungstenite::Error::Http(r)) => {
                    assert_eq!(r.status().as_u16(), 403, "{path} {origin}")
                }
                Err(e) => panic!("{path} {origin}: {e}"),
                Ok(_) => panic!("{path} {origin} was accepted"),
            }
        }
        let own = format!("http://127.0.0.1:{p}");
        assert!(
            Ws::try_connect(p, path, &[("Origin", own.as_str())]).is_ok(),
            "{path} own origin"
        );
    }
}

#[test]
fn allowed_origins_widen_the_guard_and_star_turns_it_off() {
    let srv = Server::start(
        &[],
        &[(
            "GRAPHMIND_ALLOWED_ORIGINS",
            "http://localhost:5199, http://host.docker.internal:4747",
        )],
    );
    let p = srv.port;
    assert_eq!(
        get_with(
            p,
            "/health",
            &format!("127.0.0.1:{p}"),
            Some("http://localhost:5199")
        )
        .0,
        200
    );
    assert_eq!(
        get_with(p, "/health", "host.docker.internal:4747", None).0,
        200,
        "an allowed origin's host"
    );
    assert_eq!(
        get_with(
            p,
            "/health",
            &format!("127.0.0.1:{p}"),
            Some("https://evil.example")
        )
        .0,
        403
    );
    let srv = Server::start(&[], &[("GRAPHMIND_ALLOWED_ORIGINS", "*")]);
    assert_eq!(
        get_with(
            srv.port,
            "/health",
            "evil.example",
            Some("https://evil.example")
        )
        .0,
        200
    );
}

#[test]
fn every_response_carries_the_security_headers() {
    let srv = Server::start(&[], &[]);
    let p = srv.port;
    let host = format!("127.0.0.1:{p}");
    for (path, status, api) in [
        ("/", 200, false),
        ("/health", 200, false),
        ("/api/runs", 200, true),
        ("/api/runs/x/events", 404, true),
        ("/nope", 404, false),
    ] {
        let (st, head, _) = get_with(p, path, &host, None);
        assert_eq!(st, status, "{path}");
        assert_eq!(
            header_of(&head, "content-security-policy").as_deref(),
            Some("frame-ancestors 'none'"),
            "{path}"
        );
        assert_eq!(
            header_of(&head, "x-frame-options").as_deref(),
            Some("DENY"),
            "{path}"
        );
        assert_eq!(
            header_of(&head, "referrer-policy").as_deref(),
            Some("no-referrer"),
            "{path}"
        );
        assert_eq!(
            header_of(&head, "x-content-type-options").as_deref(),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(
            header_of(&head, "cache-control").as_deref(),
            if api { Some("no-store") } else { None },
            "{path}"
        );
        assert!(
            header_of(&head, "access-control-allow-origin").is_none(),
            "never CORS"
        );
    }
    // A refusal carries them too.
    let (_, head, _) = get_with(p, "/", "evil.example", None);
    assert_eq!(header_of(&head, "x-frame-options").as_deref(), Some("DENY"));
    assert_eq!(
        header_of(&head, "cache-control").as_deref(),
        Some("no-store")
    );
}

#[test]
fn tokens_are_minted_written_privately_and_removed_on_exit() {
    let mut srv = Server::start(&[], &[]);
    assert!(
        srv.viewer_token.starts_with("gmv_") && srv.viewer_token.len() == 36,
        "{}",
        srv.viewer_token
    );
    assert!(srv.agent_token.starts_with("gma_") && srv.agent_token.len() == 36);
    let run = srv.home.join("run");
    let cred = run.join(format!("serve-{}.json", srv.port));
    let opener = run.join(format!("open-{}.html", srv.port));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&run), 0o700);
        assert_eq!(mode(&cred), 0o600);
        assert_eq!(mode(&opener), 0o600);
    }
    let v = parse_str(&std::fs::read_to_string(&cred).unwrap()).unwrap();
    assert_eq!(v.get("port").and_then(Value::as_i64), Some(srv.port as i64));
    assert_eq!(
        v.get("pid").and_then(Value::as_i64),
        Some(srv.child.id() as i64)
    );
    assert_eq!(
        v.get("url").and_then(Value::as_str),
        Some(format!("http://127.0.0.1:{}", srv.port).as_str())
    );
    assert!(
        !std::fs::read_to_string(&cred)
            .unwrap()
            .contains(&srv.viewer_token),
        "the viewer token never goes in the agent's file"
    );
    // A clean stop (SIGTERM) removes both files.
    unsafe { libc_kill(srv.child.id() as i32, 15) };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while (cred.exists() || opener.exists()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !cred.exists() && !opener.exists(),
        "run files removed on exit"
    );
    let status = srv.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    srv.stop();
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

fn session(port: u16, auth: Option<&str>) -> (u16, String, Value) {
    let h = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let (st, head, body) = http_call(port, "GET", "/api/session", &h, "");
    (st, head, parse_str(&body).unwrap_or_default())
}

#[test]
fn session_says_who_a_token_is_and_bearer_guards_every_non_get_api_route() {
    let srv = Server::start(&["--allow-control", "inject", "--no-edit-input"], &[]);
    let p = srv.port;
    let (st, _, v) = session(p, None);
    assert_eq!(st, 200);
    assert_eq!(
        to_json(&v),
        format!(
            r#"{{"principal":"anonymous","agentLevel":"inject","editInput":false,"hubCapabilities":["pause-registry"],"version":"{}","otlp":null}}"#,
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(
        s(
            &session(p, Some(&format!("Bearer {}", srv.agent_token))).2,
            &["principal"]
        ),
        Some("agent")
    );
    assert_eq!(
        s(
            &session(p, Some(&format!("bearer   {}", srv.viewer_token))).2,
            &["principal"]
        ),
        Some("viewer")
    );
    let (st, head, v) = session(p, Some("Bearer gma_00000000000000000000000000000000"));
    assert_eq!(
        (st, s(&v, &["error"]), s(&v, &["message"])),
        (401, Some("unauthorized"), Some("unknown or expired token"))
    );
    assert_eq!(
        header_of(&head, "www-authenticate").as_deref(),
        Some("Bearer")
    );
    assert_eq!(
        session(p, Some("Basic abc")).0,
        401,
        "a malformed credential is refused, not anonymous"
    );
    // Non-GET under /api needs a credential; ?token= is never read.
    for (method, path) in [
        ("POST", "/api/runs"),
        ("DELETE", "/api/runs/x"),
        ("PUT", "/api/pauses"),
        (
            "POST",
            &format!("/api/anything?token={}", srv.agent_token) as &str,
        ),
    ] {
        let (st, head, body) = http_call(p, method, path, "", "");
        assert_eq!(st, 401, "{method} {path}");
        assert_eq!(
            header_of(&head, "www-authenticate").as_deref(),
            Some("Bearer")
        );
        assert!(
            body.contains("$GRAPHMIND_HOME/run/serve-<port>.json"),
            "{body}"
        );
    }
    // With a credential a non-GET read route is simply not allowed.
    let (st, _, _) = http_call(
        p,
        "POST",
        "/api/runs",
        &format!("Authorization: Bearer {}\r\n", srv.agent_token),
        "",
    );
    assert_eq!(st, 405);
    // The resume route is POST only: a navigation never mutates.
    let (st, head, body) = http_call(p, "GET", "/api/runs/r/pauses/p/resume", "", "");
    assert_eq!(
        (st, header_of(&head, "allow").as_deref()),
        (405, Some("POST"))
    );
    assert!(body.contains("method-not-allowed"));
}

#[test]
fn ui_socket_credentials_select_graphmind_v1_and_set_the_principal() {
    let srv = Server::start(&[], &[]);
    let p = srv.port;
    let proto = format!("graphmind.v1, gm.auth.{}", srv.viewer_token);
    let mut viewer =
        Ws::try_connect(p, "/ws/ui", &[("Sec-WebSocket-Protocol", proto.as_str())]).unwrap();
    let w = viewer.recv_type("welcome");
    assert_eq!(s(&w, &["control", "principal"]), Some("viewer"));
    assert_eq!(s(&w, &["control", "agentLevel"]), Some("off"));
    assert_eq!(
        to_json(w.get("control").unwrap().get("hubCapabilities").unwrap()),
        r#"["pause-registry","edit-input"]"#
    );
    // The server selects graphmind.v1 (tungstenite checks the reply names an offered one).
    let raw = http_head(
        p,
        &format!("GET /ws/ui HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: {proto}\r\n\r\n"),
    );
    // The header name is read case-insensitively (RFC 9110 section 5.1): hyper writes
    // `Sec-Websocket-Protocol`, not the hand-written server's exact spelling.
    assert_eq!(
        header_of(&raw, "sec-websocket-protocol").as_deref(),
        Some("graphmind.v1"),
        "{raw}"
    );
    assert!(!raw.contains("gm.auth"), "the token is never echoed");
    let agent = format!("graphmind.v1, gm.auth.{}", srv.agent_token);
    let mut a =
        Ws::try_connect(p, "/ws/ui", &[("Sec-WebSocket-Protocol", agent.as_str())]).unwrap();
    assert_eq!(
        s(&a.recv_type("welcome"), &["control", "principal"]),
        Some("agent")
    );
    let mut anon = srv.ui_anon();
    assert_eq!(
        s(&anon.recv_type("welcome"), &["control", "principal"]),
        Some("anonymous")
    );
    for bad in [
        "graphmind.v1, gm.auth.gmv_nope".to_string(),
        format!(
            "graphmind.v1, gm.auth.{}, gm.auth.{}",
            srv.viewer_token, srv.agent_token
        ),
    ] {
        match Ws::try_connect(p, "/ws/ui", &[("Sec-WebSocket-Protocol", bad.as_str())]) {
            Err(tungstenite::Error::Http(r)) => assert_eq!(r.status().as_u16(), 401, "{bad}"),
            other => panic!("{bad}: {:?}", other.err()),
        }
    }
}

#[test]
fn anonymous_and_agent_viewers_cannot_change_breakpoints_but_the_viewer_can() {
    let srv = Server::start(&["--allow-control", "resume"], &[]);
    let set = r#"{"type":"control","envelope":{"gm":1,"seq":0,"ts":0,"runId":"*","type":"mode.set","payload":{"mode":"step"}}}"#;
    let mut anon = srv.ui_anon();
    anon.recv_type("welcome");
    anon.send(set);
    let e = anon.recv_type("error");
    assert_eq!(s(&e, &["code"]), Some("forbidden"));
    assert_eq!(
        s(&anon.recv_type("state"), &["mode"]),
        Some("run"),
        "the real state follows a refusal"
    );
    let agent = format!("graphmind.v1, gm.auth.{}", srv.agent_token);
    let mut a = Ws::connect_with(
        srv.port,
        "/ws/ui",
        &[("Sec-WebSocket-Protocol", agent.as_str())],
    );
    a.recv_type("welcome");
    a.send(set);
    assert_eq!(
        s(&a.recv_type("state"), &["mode"]),
        Some("step"),
        "agent at level resume may"
    );
    let mut v = srv.ui();
    v.recv_type("welcome");
    v.send(&set.replace("step", "run"));
    assert_eq!(s(&v.recv_type("state"), &["mode"]), Some("run"));
}
