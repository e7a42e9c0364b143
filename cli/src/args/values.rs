//! The value parsers of the command line's flags: each turns the raw text into its value, or
//! into the exact sentence `graphmind` prints for a bad value (`--port must be ...`).

use crate::config::check_pause_on_error;
use crate::tokens::ControlLevel;
use tracing::level_filters::LevelFilter;

/// `--port` of `serve` and the commands that talk to a server: 0 (any free port) to 65535.
pub fn port(raw: &str) -> Result<u16, String> {
    raw.parse::<u16>()
        .map_err(|_| format!("--port must be an integer between 0 and 65535 (got \"{raw}\")"))
}

/// `--port` of `mcp` and `mcp-proxy`: a real port to report to or link at, 1 to 65535.
pub fn nonzero_port(raw: &str) -> Result<u16, String> {
    raw.parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("--port must be an integer between 1 and 65535 (got \"{raw}\")"))
}

/// `--keep`: a whole number of runs.
pub fn keep(raw: &str) -> Result<u64, String> {
    raw.trim()
        .parse::<u64>()
        .map_err(|_| format!("--keep must be a whole number >= 0 (got \"{raw}\")"))
}

fn non_negative(flag: &str, raw: &str) -> Result<f64, String> {
    match raw.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{flag} must be a number >= 0 (got \"{raw}\")")),
    }
}

/// `--days`: a number of days, fractions allowed.
pub fn days(raw: &str) -> Result<f64, String> {
    non_negative("--days", raw)
}

/// `--timeout`: seconds, fractions allowed.
pub fn timeout(raw: &str) -> Result<f64, String> {
    non_negative("--timeout", raw)
}

/// `--pause-on-error`: checked by the core's rule, kept as written (the core resolves it
/// against `GRAPHMIND_PAUSE_ON_ERROR` later).
pub fn pause_on_error(raw: &str) -> Result<String, String> {
    check_pause_on_error(raw).map(|()| raw.to_owned())
}

/// `--allow-control`: what the agent token may do.
pub fn allow_control(raw: &str) -> Result<ControlLevel, String> {
    ControlLevel::parse(raw).ok_or_else(|| {
        format!("--allow-control must be one of off, resume, inject, edit (got \"{raw}\")")
    })
}

/// `--log-level`, any case.
pub fn log_level(raw: &str) -> Result<LevelFilter, String> {
    crate::logging::parse_level(raw).ok_or_else(|| {
        format!(
            "--log-level must be one of {} (got \"{raw}\")",
            crate::logging::LEVELS.join(", ")
        )
    })
}

/// `--lang` of `init`, any case, returned in lower case.
pub fn lang(raw: &str) -> Result<String, String> {
    let lang = raw.trim().to_ascii_lowercase();
    if crate::init::LANGS.contains(&lang.as_str()) {
        Ok(lang)
    } else {
        Err(format!(
            "--lang must be one of {} (got \"{raw}\")",
            crate::init::LANGS.join(", ")
        ))
    }
}

/// `--format` of `record`.
pub fn format(raw: &str) -> Result<String, String> {
    match raw {
        "ndjson" | "otlp" => Ok(raw.to_owned()),
        _ => Err(format!("--format must be ndjson or otlp (got \"{raw}\")")),
    }
}

/// `--max-frame-bytes` of `mcp-proxy`.
pub fn max_frame_bytes(raw: &str) -> Result<usize, String> {
    use crate::mcp_proxy::MIN_MAX_FRAME_BYTES;
    raw.parse::<usize>()
        .ok()
        .filter(|n| *n >= MIN_MAX_FRAME_BYTES)
        .ok_or_else(|| {
            format!(
                "--max-frame-bytes must be a whole number of at least {MIN_MAX_FRAME_BYTES} (got \"{raw}\")"
            )
        })
}

/// The shell of `completions`.
pub fn shell(raw: &str) -> Result<clap_complete::Shell, String> {
    use clap::ValueEnum;
    clap_complete::Shell::from_str(raw, true).map_err(|_| {
        let names: Vec<String> = clap_complete::Shell::value_variants()
            .iter()
            .filter_map(|s| s.to_possible_value().map(|v| v.get_name().to_owned()))
            .collect();
        format!(
            "the shell must be one of {} (got \"{raw}\")",
            names.join(", ")
        )
    })
}
