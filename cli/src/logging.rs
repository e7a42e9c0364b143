//! The server's diagnostic lines: `tracing` events written to stderr, filtered by
//! `graphmind serve --log-level` and `RUST_LOG` (docs/server.md, "Logs").
//!
//! A line is the event's message alone (then any other fields as `key=value`), with no
//! timestamp, level or target, so the log reads as it always did ("app attached: my-agent").
//! The level sets the default; `RUST_LOG`, when set, is applied on top of it: a bare level
//! there replaces the default, `target=level` directives refine it per module
//! (`graphmind_cli::otlp_export=debug`). Commands other than the server keep printing
//! their own output and errors directly: tracing is for the server's diagnostics only.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::{Directive, EnvFilter, LevelFilter};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// The level when neither `--log-level` nor `RUST_LOG` says otherwise.
pub const DEFAULT_LEVEL: LevelFilter = LevelFilter::INFO;

/// The values `--log-level` takes, quietest first.
pub const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// The environment variable read for filter directives.
pub const ENV_VAR: &str = "RUST_LOG";

/// `--log-level`'s value (case-insensitive), or `None` when it is not one of [`LEVELS`].
pub fn parse_level(raw: &str) -> Option<LevelFilter> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "off" => Some(LevelFilter::OFF),
        "error" => Some(LevelFilter::ERROR),
        "warn" => Some(LevelFilter::WARN),
        "info" => Some(LevelFilter::INFO),
        "debug" => Some(LevelFilter::DEBUG),
        "trace" => Some(LevelFilter::TRACE),
        _ => None,
    }
}

/// The filter for `level` with `rust_log`'s directives on top (a later directive for the
/// same target replaces an earlier one), and the directives of `rust_log` that did not
/// parse (they are skipped, and reported by [`init`]).
pub fn filter(level: LevelFilter, rust_log: Option<&str>) -> (EnvFilter, Vec<String>) {
    let mut filter = EnvFilter::default().add_directive(level.into());
    let mut bad = Vec::new();
    for raw in rust_log
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        match raw.parse::<Directive>() {
            Ok(d) => filter = filter.add_directive(d),
            Err(_) => bad.push(raw.to_owned()),
        }
    }
    (filter, bad)
}

/// Writes each event as its message (then `key=value` fields), one line, nothing else.
pub struct MessageOnly;

impl<S, N> FormatEvent<S, N> for MessageOnly
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Installs the process's log subscriber (stderr) for `level` (default [`DEFAULT_LEVEL`])
/// and `RUST_LOG`. Once per process; a second call changes nothing.
pub fn init(level: Option<LevelFilter>) {
    let rust_log = std::env::var(ENV_VAR).ok();
    let (filter, bad) = filter(level.unwrap_or(DEFAULT_LEVEL), rust_log.as_deref());
    let layer = tracing_subscriber::fmt::layer()
        .event_format(MessageOnly)
        .with_writer(std::io::stderr);
    if tracing_subscriber::registry()
        .with(filter)
        .with(layer)
        .try_init()
        .is_ok()
    {
        for d in bad {
            tracing::warn!("graphmind: {ENV_VAR}: ignoring \"{d}\" (not a filter directive: a level, or target=level)");
        }
    }
}

/// Minimum gap between two identical log lines (reference: `LOG_THROTTLE_MS`).
pub const LOG_THROTTLE_MS: u64 = 1_000;

/// Which throttled log lines were written when, and how many were swallowed since: at most
/// one line per key per [`LOG_THROTTLE_MS`]. A leaf lock, held only to read and update
/// one entry, never across a call or a write. Use it through [`throttled_log!`].
#[derive(Default)]
pub struct LogThrottle {
    lines: Mutex<HashMap<&'static str, (Instant, u64)>>,
}

impl LogThrottle {
    /// May a line for `key` be logged now? `Some(n)` when it may, `n` the lines swallowed
    /// since the last one; `None` counts one more.
    pub fn allow(&self, key: &'static str) -> Option<u64> {
        self.allow_at(key, Instant::now())
    }

    fn allow_at(&self, key: &'static str, now: Instant) -> Option<u64> {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        match lines.get_mut(key) {
            Some((last, suppressed))
                if now.duration_since(*last) < Duration::from_millis(LOG_THROTTLE_MS) =>
            {
                *suppressed += 1;
                None
            }
            entry => {
                let suppressed = entry.map(|e| e.1).unwrap_or(0);
                lines.insert(key, (now, 0));
                Some(suppressed)
            }
        }
    }
}

/// Logs one line at `$level` at most once per `$key` per [`LOG_THROTTLE_MS`] (`$throttle`
/// is a [`LogThrottle`]), with "(+N more)" for the ones it swallowed meanwhile. A macro so
/// the line's target is the calling module (`RUST_LOG=graphmind_cli::server=error`).
macro_rules! throttled_log {
    ($level:expr, $throttle:expr, $key:expr, $($arg:tt)+) => {
        let suppressed = $throttle.allow($key);
        if let Some(suppressed) = suppressed {
            if suppressed == 0 {
                ::tracing::event!($level, $($arg)+);
            } else {
                ::tracing::event!($level, "{} (+{suppressed} more)", format_args!($($arg)+));
            }
        }
    };
}
pub(crate) use throttled_log;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What the subscriber for `level` and `rust_log` writes for a few events.
    fn lines(level: LevelFilter, rust_log: Option<&str>) -> String {
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = out.clone();
        let make = move || Sink(sink.clone());
        let (filter, _) = filter(level, rust_log);
        let subscriber = tracing_subscriber::registry().with(filter).with(
            tracing_subscriber::fmt::layer()
                .event_format(MessageOnly)
                .with_writer(make),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "graphmind_cli::hub", "app attached: a");
            tracing::warn!(target: "graphmind_cli::otlp_export", "otlp: cannot export");
            tracing::debug!(target: "graphmind_cli::otlp_export", spans = 3, "otlp: sent");
        });
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        text
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_is_the_bare_message() {
        assert_eq!(
            lines(DEFAULT_LEVEL, None),
            "app attached: a\notlp: cannot export\n"
        );
        assert_eq!(
            lines(LevelFilter::DEBUG, None),
            "app attached: a\notlp: cannot export\notlp: sent spans=3\n"
        );
    }

    #[test]
    fn the_level_is_the_default_and_rust_log_refines_or_replaces_it() {
        assert_eq!(lines(LevelFilter::WARN, None), "otlp: cannot export\n");
        assert_eq!(lines(LevelFilter::OFF, None), "");
        // a target directive refines the flag's default
        assert_eq!(
            lines(LevelFilter::WARN, Some("graphmind_cli::hub=info")),
            "app attached: a\notlp: cannot export\n"
        );
        assert_eq!(
            lines(DEFAULT_LEVEL, Some("graphmind_cli::otlp=debug")),
            "app attached: a\notlp: cannot export\notlp: sent spans=3\n"
        );
        assert_eq!(
            lines(DEFAULT_LEVEL, Some("graphmind_cli::otlp_export=off")),
            "app attached: a\n"
        );
        // a bare level replaces it
        assert_eq!(lines(DEFAULT_LEVEL, Some("error")), "");
        assert_eq!(
            lines(LevelFilter::WARN, Some("info")),
            "app attached: a\notlp: cannot export\n"
        );
    }

    #[test]
    fn the_throttle_lets_one_line_per_key_per_interval_and_counts_the_rest() {
        let t = LogThrottle::default();
        let start = Instant::now();
        assert_eq!(t.allow_at("a", start), Some(0));
        assert_eq!(t.allow_at("a", start), None);
        assert_eq!(t.allow_at("a", start), None);
        assert_eq!(t.allow_at("b", start), Some(0), "keys are counted apart");
        let later = start + Duration::from_millis(LOG_THROTTLE_MS);
        assert_eq!(t.allow_at("a", later), Some(2));
        assert_eq!(t.allow_at("a", later), None);
    }

    #[test]
    fn levels_and_bad_directives() {
        assert_eq!(LEVELS.map(|l| parse_level(l).is_some()), [true; 6]);
        assert_eq!(parse_level("WARN"), Some(LevelFilter::WARN));
        assert_eq!(parse_level("loud"), None);
        let (_, bad) = filter(DEFAULT_LEVEL, Some("info,,x=y=z, graphmind_cli=debug"));
        assert_eq!(bad, vec!["x=y=z".to_owned()]);
    }
}
