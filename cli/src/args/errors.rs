//! `clap`'s parse errors, said in `graphmind`'s own words: one sentence, the flag or word
//! quoted as the user typed it (`unknown option "--frobnicate"`, `option "--json" does not
//! apply to "graphmind runs"`, `--port must be ...`), no usage dump.

use super::spec::Cli;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::CommandFactory;

/// The sentence for a parse error of `graphmind <command>` (`command` is `serve` when none
/// was named).
pub fn message(e: &clap::Error, command: &str) -> String {
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => s.clone(),
        Some(ContextValue::Strings(v)) => v.first().cloned().unwrap_or_default(),
        _ => String::new(),
    };
    // The flag as clap names it is `--port <N>`: the flag alone.
    let flag = || {
        let a = text(ContextKind::InvalidArg);
        a.split(' ').next().unwrap_or_default().to_owned()
    };
    match e.kind() {
        ErrorKind::UnknownArgument => {
            let arg = text(ContextKind::InvalidArg);
            if !arg.starts_with('-') || arg == "-" {
                return format!("unexpected argument \"{arg}\"");
            }
            let name = arg.split_once('=').map_or(arg.as_str(), |(n, _)| n);
            if is_known_flag(name) {
                format!("option \"{name}\" does not apply to \"graphmind {command}\"")
            } else {
                format!(
                    "unknown option \"{name}\"{}",
                    did_you_mean(&text(ContextKind::SuggestedArg))
                )
            }
        }
        ErrorKind::InvalidSubcommand => format!(
            "unknown command \"{}\"{}",
            text(ContextKind::InvalidSubcommand),
            did_you_mean(&text(ContextKind::SuggestedSubcommand))
        ),
        // Our value parsers' own sentence.
        ErrorKind::ValueValidation => match std::error::Error::source(e) {
            Some(source) => source.to_string(),
            None => first_line(e),
        },
        ErrorKind::InvalidValue if text(ContextKind::InvalidValue).is_empty() => {
            format!("{} requires a value", flag())
        }
        ErrorKind::TooManyValues => format!("{} takes no value", flag()),
        _ => first_line(e),
    }
}

/// Whether `--name` is a flag of some command (then it only does not apply here).
fn is_known_flag(name: &str) -> bool {
    let Some(long) = name.strip_prefix("--") else {
        return false;
    };
    let cli = Cli::command();
    let known = std::iter::once(&cli)
        .chain(cli.get_subcommands())
        .flat_map(|c| c.get_arguments())
        .any(|a| a.get_long() == Some(long));
    known
}

fn did_you_mean(suggestion: &str) -> String {
    if suggestion.is_empty() {
        String::new()
    } else {
        format!(" (did you mean \"{suggestion}\"?)")
    }
}

/// clap's own wording, without its `error: ` prefix and usage lines (a kind we do not
/// expect to see: our declarations rule the others out).
fn first_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let line = rendered.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}
