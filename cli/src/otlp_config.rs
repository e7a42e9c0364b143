//! Where `graphmind serve` streams spans: `--otlp-endpoint` and the standard
//! `OTEL_EXPORTER_OTLP_*` variables, resolved with the OpenTelemetry specification's
//! precedence (docs/otlp.md):
//!
//! - endpoint: `--otlp-endpoint` > `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) >
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` appended). The flag takes a base URL
//!   like the generic variable; a flag that already ends in `/v1/traces` is used as is.
//! - headers: `OTEL_EXPORTER_OTLP_TRACES_HEADERS` > `OTEL_EXPORTER_OTLP_HEADERS`
//!   (`key=value,key2=value2`, values percent-decoded).
//! - protocol: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` > `OTEL_EXPORTER_OTLP_PROTOCOL`;
//!   `http/protobuf` (the default) or `http/json`. `grpc` is refused with a clear error.
//!
//! No endpoint anywhere means no export.

use crate::http::percent_decode;

/// The path the generic endpoint gets, as the specification says for traces.
pub const TRACES_PATH: &str = "/v1/traces";

/// The OTLP/HTTP body encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf`: `application/x-protobuf` (the default).
    Protobuf,
    /// `http/json`: `application/json`.
    Json,
}

/// A resolved export target.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpConfig {
    /// The full URL spans are POSTed to.
    pub url: String,
    /// Extra request headers.
    pub headers: Vec<(String, String)>,
    /// Body encoding.
    pub protocol: Protocol,
    /// Secrets replaced as in `record` (false under `--otlp-no-redact-secrets`).
    pub redact: bool,
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

fn with_traces_path(base: &str) -> String {
    format!("{}{TRACES_PATH}", base.trim_end_matches('/'))
}

/// Parses `key=value,key2=value2` (the specification's W3C-baggage-like list).
pub fn parse_headers(raw: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(format!("OTLP headers: \"{item}\" is not key=value"));
        };
        let k = percent_decode(k.trim());
        if k.is_empty() {
            return Err(format!("OTLP headers: \"{item}\" has an empty key"));
        }
        out.push((k, percent_decode(v.trim())));
    }
    Ok(out)
}

/// Resolves the export target from the flag and the environment (`env` looks a variable up).
pub fn resolve(
    flag: Option<&str>,
    no_redact: bool,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<OtlpConfig>, String> {
    let url = if let Some(f) = non_empty(flag.map(str::to_owned)) {
        if f.trim_end_matches('/').ends_with(TRACES_PATH) {
            f
        } else {
            with_traces_path(&f)
        }
    } else if let Some(u) = non_empty(env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
        u
    } else if let Some(u) = non_empty(env("OTEL_EXPORTER_OTLP_ENDPOINT")) {
        with_traces_path(&u)
    } else {
        return Ok(None);
    };
    if url.starts_with("https://") {
        return Err(format!(
            "OTLP endpoint {url}: https is not supported by this build (plain http only); point it at a local OpenTelemetry Collector that forwards over TLS"
        ));
    }
    if !url.starts_with("http://") {
        return Err(format!("OTLP endpoint \"{url}\" must be an http:// URL"));
    }
    let headers = match non_empty(env("OTEL_EXPORTER_OTLP_TRACES_HEADERS"))
        .or_else(|| non_empty(env("OTEL_EXPORTER_OTLP_HEADERS")))
    {
        Some(h) => parse_headers(&h)?,
        None => Vec::new(),
    };
    let protocol =
        match non_empty(env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
            .or_else(|| non_empty(env("OTEL_EXPORTER_OTLP_PROTOCOL")))
            .as_deref()
        {
            None | Some("http/protobuf") => Protocol::Protobuf,
            Some("http/json") => Protocol::Json,
            Some("grpc") => return Err(
                "OTLP protocol grpc is not supported: use http/protobuf (the default) or http/json"
                    .into(),
            ),
            Some(other) => {
                return Err(format!(
                    "OTLP protocol \"{other}\" is not one of http/protobuf, http/json"
                ))
            }
        };
    Ok(Some(OtlpConfig {
        url,
        headers,
        protocol,
        redact: !no_redact,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn precedence() {
        assert_eq!(resolve(None, false, env(&[])).unwrap(), None);
        let generic = resolve(
            None,
            false,
            env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318/")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(generic.url, "http://h:4318/v1/traces");
        assert_eq!(generic.protocol, Protocol::Protobuf);
        assert!(generic.redact);
        let both = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/custom"),
        ];
        assert_eq!(
            resolve(None, false, env(&both)).unwrap().unwrap().url,
            "http://t:1/custom"
        );
        assert_eq!(
            resolve(Some("http://f:2"), true, env(&both))
                .unwrap()
                .unwrap()
                .url,
            "http://f:2/v1/traces"
        );
        assert_eq!(
            resolve(Some("http://f:2/v1/traces"), true, env(&both))
                .unwrap()
                .unwrap()
                .url,
            "http://f:2/v1/traces"
        );
        assert!(
            !resolve(Some("http://f:2"), true, env(&[]))
                .unwrap()
                .unwrap()
                .redact
        );
    }

    #[test]
    fn headers_and_protocol() {
        let c = resolve(
            Some("http://x"),
            false,
            env(&[
                ("OTEL_EXPORTER_OTLP_HEADERS", "a=1"),
                ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key=s%20t, x=y"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            c.headers,
            vec![("api-key".into(), "s t".into()), ("x".into(), "y".into())]
        );
        assert_eq!(c.protocol, Protocol::Json);
        let g = resolve(
            Some("http://x"),
            false,
            env(&[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")]),
        )
        .unwrap_err();
        assert!(g.contains("grpc"), "{g}");
        assert!(resolve(Some("https://x"), false, env(&[]))
            .unwrap_err()
            .contains("https"));
        assert!(parse_headers("novalue").is_err());
    }
}
