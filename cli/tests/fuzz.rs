//! Property-based fuzzing on stable Rust (proptest) of every parser that reads input from
//! outside the process: the tolerant wire parser and the server's ingest frame parser, the
//! packed-value reader, the strict JSON parser against its validator, the HTTP request
//! (read by hyper in a real server, then our guards, routes and query helpers), the MCP
//! proxy's line framing and `import`. Each input is answered or refused:
//! no panic, and the size of what comes back is bounded by the input. Bounded for CI (256
//! cases a property); `PROPTEST_CASES=20000` for a longer run (`make soak`).

mod common;

use graphmind_cli::{envelope, http, import, mcp_proxy::protocol};
use graphmind_core::json::{self, packed};
use graphmind_core::wire;
use proptest::prelude::*;
use std::io::{Read, Write};

/// A valid envelope, the seed the mutations start from.
const SEED: &str = r#"{"gm":1,"seq":7,"ts":1700000000000,"runId":"run_a","type":"node.started","payload":{"nodeId":"tool:t","kind":"tool","name":"t","instanceId":"i","input":{"q":"é \ud800","n":[1,2.5,null,true]}}}"#;

/// Bytes shaped like JSON more often than plain noise.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"{".to_vec()),
        Just(b"}".to_vec()),
        Just(b"[".to_vec()),
        Just(b"]".to_vec()),
        Just(b",".to_vec()),
        Just(b":".to_vec()),
        Just(b"\"gm\"".to_vec()),
        Just(b"\"type\"".to_vec()),
        Just(b"\"payload\"".to_vec()),
        Just(b"\"\\ud800\"".to_vec()),
        Just(b"1e999".to_vec()),
        Just(b"-0".to_vec()),
        Just(b"null".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(token, 0..64).prop_map(|parts| parts.concat())
}

/// The seed with a few bytes replaced, inserted or cut.
fn mutated_seed() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec((0..SEED.len(), any::<u8>(), 0u8..3), 1..6).prop_map(|edits| {
        let mut bytes = SEED.as_bytes().to_vec();
        for (at, byte, op) in edits {
            if bytes.is_empty() {
                bytes.push(byte);
                continue;
            }
            let at = at.min(bytes.len() - 1);
            match op {
                0 => bytes[at] = byte,
                1 => bytes.insert(at, byte),
                _ => {
                    bytes.truncate(at);
                }
            }
        }
        bytes
    })
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..512),
        jsonish(),
        mutated_seed()
    ]
}

proptest! {
    #[test]
    fn the_wire_and_ingest_parsers_answer_every_frame(bytes in input()) {
        let _ = wire::parse_envelope(&bytes);
        let _ = envelope::parse_envelope(&bytes);
    }

    #[test]
    fn the_json_parser_and_its_validator_agree(bytes in input()) {
        let parsed = json::parse(&bytes);
        prop_assert_eq!(parsed.is_ok(), json::validate(&bytes).is_ok());
        if let Ok(value) = parsed {
            // What it built is no larger than the input says: it writes back within bounds.
            prop_assert!(json::to_string(&value).len() <= 8 * bytes.len() + 16);
        }
    }

    #[test]
    fn the_packed_reader_refuses_or_decodes_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(value) = packed::decode(&bytes) {
            prop_assert!(json::to_string(&value).len() <= 64 * bytes.len() + 16);
        }
    }

    #[test]
    fn the_mcp_proxy_classifies_or_ignores_any_line(bytes in input()) {
        let body = protocol::frame_body(&bytes);
        prop_assert!(body.len() <= bytes.len());
        let _ = protocol::classify(&bytes);
    }

    #[test]
    fn import_reads_or_refuses_any_document(bytes in input()) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok((spans, format, _)) = import::read_spans(&text) {
            let _ = import::convert(&spans, "run_fuzz", "fuzz", format, "fuzz.json");
        }
    }
}

#[test]
fn nesting_past_the_limit_is_refused_not_a_stack_overflow() {
    for depth in [600usize, 100_000] {
        let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(json::parse(deep.as_bytes()).is_err());
        let _ = wire::parse_envelope(
            format!(
                r#"{{"gm":1,"seq":1,"ts":1,"runId":"r","type":"graph.hint","payload":{deep}}}"#
            )
            .as_bytes(),
        );
    }
}

/// Any bytes sent as a request to a real server: answered with an HTTP status line or the
/// connection closed, never a crash; the server still answers afterwards. The head is
/// hyper's to read now (it was our own `httparse` reader), so this drives the server.
#[test]
fn an_http_request_is_answered_or_refused() {
    let server = common::Server::start(&[], &[]);
    let port = server.port;
    let requests = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..2048),
        "(GET|POST|PUT|HEAD) /[a-z/?=&%+0-9]{0,40} HTTP/1\\.[01]\r\n([A-Za-z-]{1,12}: [ -~]{0,30}\r\n){0,6}\r\n".prop_map(String::into_bytes),
    ];
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::default());
    runner
        .run(&requests, |bytes| {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(15)))
                .unwrap();
            let _ = s.write_all(&bytes);
            let _ = s.shutdown(std::net::Shutdown::Write);
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out);
            prop_assert!(out.is_empty() || out.starts_with(b"HTTP/1."), "{out:?}");
            if let Ok(text) = std::str::from_utf8(&bytes) {
                if let Some(target) = text.split(' ').nth(1) {
                    let query = target.split_once('?').map_or("", |(_, q)| q);
                    let _ = http::query_param(query, "limit");
                    let _ = http::percent_decode(target);
                }
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(server.get("/health").0, 200);
}
