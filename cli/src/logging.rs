//! The server's diagnostic lines: `tracing` events written to stderr, filtered by
//! `graphmind serve --log-level` and `RUST_LOG` (docs/server.md, "Logs").
//!
//! A line is the event's message alone (then any other fields as `key=value`), with no
//! timestamp, level or target, so the log reads as it always did ("app attached: my-agent").
//! The level sets the default; `RUST_LOG`, when set, is applied on top of it: a bare level
//! there replaces the default, `target=level` directives refine it per module
//! (`graphmind_cli::otlp_export=debug`). Commands other than the server keep printing
//! their own output and errors directly: tracing is for the server's diagnostics only.

use std::fmt;
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
    fn levels_and_bad_directives() {
        assert_eq!(LEVELS.map(|l| parse_level(l).is_some()), [true; 6]);
        assert_eq!(parse_level("WARN"), Some(LevelFilter::WARN));
        assert_eq!(parse_level("loud"), None);
        let (_, bad) = filter(DEFAULT_LEVEL, Some("info,,x=y=z, graphmind_cli=debug"));
        assert_eq!(bad, vec!["x=y=z".to_owned()]);
    }
}
