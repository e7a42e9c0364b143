//! `graphmind record`: a run exported as NDJSON (default), OTLP/JSON (`--format otlp`)
//! or one self-contained HTML page with the viewer (`--html`, see [`crate::export_html`]).
//!
//! Secrets are redacted by default, as the reference does it: every value under a
//! secret-looking KEY becomes `"__REDACTED__"`, at any depth; nothing is inferred from
//! values. A key matches when, compared case-insensitively with `-` and `_` equivalent, the
//! whole key or any contiguous run of its `_`/`-` segments equals a listed key; a second
//! pass treats camelCase boundaries as delimiters too (`accessToken`), so it only adds
//! matches. `max_tokens`, `maxTokens` and `tokenizer` never match; `token_count` does
//! (over-redaction is the safe side). `null`, `""` and the placeholder itself are left
//! alone and not counted. The loop fingerprint of `exec.paused` is blanked too (a digest
//! of the whole input). One summary line goes to stderr.
//! `--no-redact-secrets` exports the run verbatim.

use crate::args::RecordArgs;
use crate::storage;
use graphmind_core::json::{self, Value};
use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;

/// The placeholder.
pub const REDACTED: &str = "__REDACTED__";

/// The secret key list. Compared lower-cased; `-` and `_` are equivalent.
pub const SECRET_KEYS: [&str; 14] = [
    "authorization",
    "cookie",
    "set-cookie",
    "api_key",
    "apikey",
    "password",
    "passwd",
    "secret",
    "client_secret",
    "private_key",
    "access_token",
    "refresh_token",
    "token",
    "bearer",
];

/// The most `_` segments any listed key has (`client_secret`: 2).
const MAX_RUN_SEGMENTS: usize = 2;

fn listed(norm: &str) -> bool {
    SECRET_KEYS.iter().any(|k| {
        k.len() == norm.len()
            && k.bytes()
                .zip(norm.bytes())
                .all(|(a, b)| (if a == b'-' { b'_' } else { a }) == b)
    })
}

fn matches_normalised(norm: &str) -> bool {
    if listed(norm) {
        return true;
    }
    if !norm.contains('_') {
        return false;
    }
    let segs: Vec<&str> = norm.split('_').filter(|s| !s.is_empty()).collect();
    for i in 0..segs.len() {
        let mut run = String::new();
        for (j, seg) in segs.iter().enumerate().skip(i).take(MAX_RUN_SEGMENTS) {
            if j > i {
                run.push('_');
            }
            run.push_str(seg);
            if listed(&run) {
                return true;
            }
        }
    }
    false
}

/// camelCase / PascalCase / acronym boundaries become `_`: `accessToken` ->
/// `access_Token`, `HTTPToken` -> `HTTP_Token`, `APIKey` -> `API_Key`.
fn split_camel(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    let mut out = String::with_capacity(key.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            let prev = chars[i - 1];
            let lower_or_digit_before = prev.is_ascii_lowercase() || prev.is_ascii_digit();
            let acronym_end = prev.is_ascii_uppercase()
                && chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if lower_or_digit_before || acronym_end {
                out.push('_');
            }
        }
        out.push(c);
    }
    out
}

fn normalise(key: &str) -> String {
    key.to_lowercase().replace('-', "_")
}

/// Substrings one of which every listed key contains, so a key (once lowercased) that has
/// none of them cannot match: checked first, without allocating, since most keys are not
/// secrets. Only for ASCII keys (a non-ASCII letter may lowercase to an ASCII one).
const ANCHORS: [&str; 7] = [
    "authorization",
    "cookie",
    "key",
    "pass",
    "secret",
    "token",
    "bearer",
];

fn has_anchor(key: &str) -> bool {
    let k = key.as_bytes();
    ANCHORS.iter().any(|a| {
        k.windows(a.len())
            .any(|w| w.eq_ignore_ascii_case(a.as_bytes()))
    })
}

/// Does this key name a secret (see the module doc for the rule)?
pub fn is_secret_key(key: &str) -> bool {
    if key.is_empty() || (key.is_ascii() && !has_anchor(key)) {
        return false;
    }
    matches_normalised(&normalise(key)) || matches_normalised(&normalise(&split_camel(key)))
}

/// What [`redact_secrets`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Redaction {
    /// Values replaced (already-redacted ones not counted).
    pub count: usize,
    /// Distinct matched key spellings, as they appeared.
    pub keys: BTreeSet<String>,
}

fn skippable(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty() || s.as_str() == Some(REDACTED),
        _ => false,
    }
}

/// Most keys a [`SecretKeyMemo`] remembers (beyond, new keys are checked each time).
pub const SECRET_KEY_MEMO_MAX: usize = 4096;

/// [`is_secret_key`] with the answer remembered for keys that need the full check (those
/// holding one of the anchors, such as `inputTokens`): a long-lived redactor (the live
/// export) meets the same few keys on every event.
#[derive(Default)]
pub struct SecretKeyMemo {
    known: HashMap<String, bool>,
}

impl SecretKeyMemo {
    /// The same answer as [`is_secret_key`].
    pub fn is_secret(&mut self, key: &str) -> bool {
        if key.is_empty() || (key.is_ascii() && !has_anchor(key)) {
            return false;
        }
        if let Some(&known) = self.known.get(key) {
            return known;
        }
        let secret = is_secret_key(key);
        if self.known.len() < SECRET_KEY_MEMO_MAX {
            self.known.insert(key.to_owned(), secret);
        }
        secret
    }
}

/// Replaces every value under a secret-looking key, at any depth, with the placeholder.
/// Iterative (no recursion limit: a secret 50,000 levels deep is found too).
pub fn redact_secrets(value: &mut Value, r: &mut Redaction) {
    redact_secrets_with(value, r, is_secret_key)
}

/// [`redact_secrets`] deciding with `is_secret` (the same rule, e.g. a [`SecretKeyMemo`]).
pub fn redact_secrets_with(
    value: &mut Value,
    r: &mut Redaction,
    mut is_secret: impl FnMut(&str) -> bool,
) {
    let mut stack: Vec<&mut Value> = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    let key = k.to_string_lossy();
                    if is_secret(&key) && !skippable(child) {
                        r.count += 1;
                        r.keys.insert(key.into_owned());
                        *child = Value::from(REDACTED);
                    } else if matches!(child, Value::Object(_) | Value::Array(_)) {
                        stack.push(child);
                    }
                }
            }
            Value::Array(items) => {
                for child in items.iter_mut() {
                    if matches!(child, Value::Object(_) | Value::Array(_)) {
                        stack.push(child);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Blanks `exec.paused.loop.fingerprint` (an unsalted digest of the node's whole input).
pub fn blank_loop_fingerprint(envelope: &mut Value) -> bool {
    if envelope.get("type").and_then(Value::as_str) != Some("exec.paused") {
        return false;
    }
    let Some(fp) = envelope
        .as_object_mut()
        .and_then(|e| e.get_mut("payload"))
        .and_then(Value::as_object_mut)
        .and_then(|p| p.get_mut("loop"))
        .and_then(Value::as_object_mut)
        .and_then(|l| l.get_mut("fingerprint"))
    else {
        return false;
    };
    if fp.as_str() == Some(REDACTED) {
        return false;
    }
    *fp = Value::from(REDACTED);
    true
}

/// The one line `record` prints about what it redacted.
pub fn summary_line(count: usize, distinct_keys: usize) -> String {
    format!(
        "redacted {count} {} under {distinct_keys} distinct {} (--no-redact-secrets keeps them)",
        if count == 1 { "value" } else { "values" },
        if distinct_keys == 1 { "key" } else { "keys" }
    )
}

/// The run's envelopes in `seq` order, one line each, redacted unless `verbatim`. A frame
/// nothing was removed from is written exactly as stored (compacted only if it was sent
/// pretty-printed, so each envelope stays on one line).
pub fn load_run(
    db: &Path,
    run_id: &str,
    verbatim: bool,
) -> Result<(Vec<String>, Redaction), String> {
    let conn = storage::open(db).map_err(|e| format!("cannot read {}: {e}", db.display()))?;
    let page = storage::list_events(&conn, run_id, -1, None).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(page.events.len());
    let mut r = Redaction::default();
    for ev in &page.events {
        let multiline = ev.frame.contains(['\n', '\r']);
        if verbatim && !multiline {
            out.push(ev.frame.clone());
            continue;
        }
        let Ok(mut v) = json::parse_str(&ev.frame) else {
            out.push(ev.frame.replace(['\n', '\r'], " "));
            continue;
        };
        let before = r.count;
        let mut changed = false;
        if !verbatim {
            if let Some(p) = v.as_object_mut().and_then(|o| o.get_mut("payload")) {
                redact_secrets(p, &mut r);
            }
            changed = r.count != before;
            changed |= blank_loop_fingerprint(&mut v);
        }
        out.push(if changed || multiline {
            json::to_string(&v)
        } else {
            ev.frame.clone()
        });
    }
    Ok((out, r))
}

/// `graphmind record RUN_ID [--out F] [--html] [--format ndjson|otlp] [--no-redact-secrets]`.
pub fn record(db: &Path, a: &RecordArgs) -> i32 {
    let run_id = a.run_id.as_str();
    if !db.exists() {
        eprintln!(
            "graphmind record: no database at {} — nothing recorded yet.",
            db.display()
        );
        return 1;
    }
    let conn = match storage::open(db) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("graphmind record: cannot read {}: {e}", db.display());
            return 1;
        }
    };
    let Ok(Some(run)) = storage::get_run(&conn, run_id) else {
        eprintln!("graphmind record: no run \"{run_id}\" in {}", db.display());
        let recent = storage::list_runs(&conn).unwrap_or_default();
        if !recent.is_empty() {
            eprintln!("Recent runs:");
            for r in recent.iter().take(10) {
                eprintln!("  {}  {}  {}", r.id, r.app, r.status);
            }
        }
        return 1;
    };
    drop(conn);
    let verbatim = a.no_redact_secrets;
    let (envelopes, redaction) = match load_run(db, run_id, verbatim) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("graphmind record: {e}");
            return 1;
        }
    };
    let otlp = a.format.as_deref() == Some("otlp");
    let (body, ext) = if a.html {
        let title = format!("{} · GraphMind run {run_id}", run.app);
        match crate::export_html::render(&run.to_json(false), &envelopes, &title) {
            Ok(page) => (page, "html"),
            Err(e) => {
                eprintln!("graphmind record: --html: {e}");
                return 1;
            }
        }
    } else if otlp {
        let values: Vec<Value> = envelopes
            .iter()
            .filter_map(|l| json::parse_str(l).ok())
            .collect();
        (crate::otlp_map::to_json(&run, &values), "otlp.json")
    } else {
        let mut s = String::with_capacity(envelopes.iter().map(|l| l.len() + 1).sum());
        for line in &envelopes {
            s.push_str(line);
            s.push('\n');
        }
        (s, "ndjson")
    };
    let default_out = format!("graphmind-run-{run_id}.{ext}");
    let target = a.out.as_deref().unwrap_or(&default_out);
    if target == "-" {
        let mut stdout = std::io::stdout().lock();
        if stdout
            .write_all(body.as_bytes())
            .and_then(|_| stdout.flush())
            .is_err()
        {
            return 1;
        }
    } else {
        if let Err(e) = std::fs::write(target, body.as_bytes()) {
            eprintln!("graphmind record: cannot write {target}: {e}");
            return 1;
        }
        eprintln!(
            "exported run {run_id} ({} events) → {target}",
            envelopes.len()
        );
    }
    if verbatim {
        eprintln!("Note: --no-redact-secrets: the export contains the run's values verbatim, secrets included; read it before you share it.");
    } else {
        eprintln!("{}", summary_line(redaction.count, redaction.keys.len()));
        eprintln!("Note: only values under secret-looking keys are redacted; prompts, inputs, outputs and errors are exported as recorded. Read it before you share it.");
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphmind_core::json::Map;

    #[test]
    fn key_rule() {
        for k in [
            "authorization",
            "Authorization",
            "http_authorization",
            "api_key",
            "x-api-key",
            "API_KEY",
            "apiKey",
            "APIKey",
            "APIkey",
            "PassWord",
            "password",
            "db_password",
            "client_secret",
            "clientSecret",
            "accessToken",
            "access-token",
            "refresh_token",
            "token",
            "token_count",
            "client_secret_expires_at",
            "set-cookie",
            "Set-Cookie",
            "cookie",
            "bearer",
            "privateKey",
            "HTTPToken",
            "secret",
            "passwd",
        ] {
            assert!(is_secret_key(k), "{k} must match");
        }
        for k in [
            "max_tokens",
            "maxTokens",
            "tokenizer",
            "apiKeys",
            "tokens",
            "secrets",
            "",
            "author",
            "keyword",
            "passwords",
            "cookies",
        ] {
            assert!(!is_secret_key(k), "{k} must not match");
        }
    }

    #[test]
    fn every_listed_key_has_an_anchor_and_non_ascii_keys_skip_the_shortcut() {
        for k in SECRET_KEYS {
            assert!(has_anchor(k), "{k}: add its anchor to ANCHORS");
        }
        // KELVIN SIGN lowercases to an ASCII `k`: the full rule still sees `api_key`.
        assert!(is_secret_key("api_\u{212A}ey"));
    }

    #[test]
    fn walk_redacts_at_any_depth_and_counts() {
        let mut v = json::parse_str(
            r#"{"meta":{"api_key":"k1"},"output":[{"token":"a"},{"token":"b"}],"max_tokens":5,"password":"","secret":null,"Authorization":"__REDACTED__","deep":[[{"accessToken":{"x":1}}]]}"#,
        )
        .unwrap();
        let mut r = Redaction::default();
        redact_secrets(&mut v, &mut r);
        assert_eq!(
            json::to_string(&v),
            r#"{"meta":{"api_key":"__REDACTED__"},"output":[{"token":"__REDACTED__"},{"token":"__REDACTED__"}],"max_tokens":5,"password":"","secret":null,"Authorization":"__REDACTED__","deep":[[{"accessToken":"__REDACTED__"}]]}"#
        );
        assert_eq!(r.count, 4);
        assert_eq!(r.keys.len(), 3);
        // A second pass is a no-op.
        let mut r2 = Redaction::default();
        redact_secrets(&mut v, &mut r2);
        assert_eq!(r2.count, 0);
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let mut v = Value::from("s");
        for _ in 0..50_000 {
            let mut m = Map::new();
            m.insert("a", v);
            v = Value::Object(m);
        }
        let mut m = Map::new();
        m.insert("password", Value::from("p"));
        let mut cur = &mut v;
        while let Some(next) = cur.as_object_mut().and_then(|o| o.get_mut("a")) {
            if !matches!(next, Value::Object(_)) {
                *next = Value::Object(m.clone());
                break;
            }
            cur = next;
        }
        let mut r = Redaction::default();
        redact_secrets(&mut v, &mut r);
        assert_eq!(r.count, 1);
        std::mem::forget(v); // dropping 50k nested maps recursively would overflow the test stack
    }

    #[test]
    fn fingerprint_and_summary() {
        let mut e = json::parse_str(
            r#"{"type":"exec.paused","payload":{"loop":{"repeats":3,"fingerprint":"abc"}}}"#,
        )
        .unwrap();
        assert!(blank_loop_fingerprint(&mut e));
        assert_eq!(
            json::to_string(&e),
            r#"{"type":"exec.paused","payload":{"loop":{"repeats":3,"fingerprint":"__REDACTED__"}}}"#
        );
        assert_eq!(
            summary_line(4, 3),
            "redacted 4 values under 3 distinct keys (--no-redact-secrets keeps them)"
        );
        assert_eq!(
            summary_line(1, 1),
            "redacted 1 value under 1 distinct key (--no-redact-secrets keeps them)"
        );
        assert_eq!(
            summary_line(0, 0),
            "redacted 0 values under 0 distinct keys (--no-redact-secrets keeps them)"
        );
    }
}
