//! Command-line parsing for `graphmind`, by hand: the first positional picks the command
//! (default `serve`); flags take `--flag value` or `--flag=value`.

use crate::config::parse_pause_on_error;

/// `graphmind serve` options.
#[derive(Debug, Default, PartialEq)]
pub struct ServeArgs {
    /// `--port` (0 = any free port).
    pub port: Option<u16>,
    /// `--db`.
    pub db: Option<String>,
    /// `--pause-on-error` (validated).
    pub pause_on_error: Option<String>,
    /// `--json`.
    pub json: bool,
    /// `--no-open` clears it. We never open a browser; kept for compatibility.
    pub open: bool,
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Command {
    /// `graphmind [serve]`.
    Serve(ServeArgs),
    /// `graphmind runs [--db]`.
    Runs { db: Option<String> },
    /// `graphmind record RUN_ID [--db] [--out F]`.
    Record { run_id: String, db: Option<String>, out: Option<String> },
    /// `--help`.
    Help,
    /// `--version`.
    Version,
}

/// A usage error, printed as `graphmind: <message>`; the process exits 2.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The `graphmind --help` text.
pub fn help_text(version: &str) -> String {
    format!(
        "graphmind v{version} — local debugger server for AI agents (binds 127.0.0.1 only)

Usage: graphmind [command] [options]

Commands:
  serve      Start the GraphMind server (the default command)
  runs       List stored runs: id, app, status, events, started
  record     Export a run as NDJSON, one wire envelope per line: record <runId> [--out <file>]

Options:
  --port <n>     Port to listen on (default 4747; always binds 127.0.0.1; 0 picks a free one)
  --db <path>    SQLite database file (default ~/.graphmind/graphmind.db, or GRAPHMIND_DB)
  --pause-on-error <on|off|kind>
                 Scope the default pause-on-error breakpoint. Default: on (every node error).
                 \"off\" starts with no breakpoints; a node kind (agent, llm, tool, chain,
                 retriever, custom) pauses only on that kind. Env: GRAPHMIND_PAUSE_ON_ERROR
  --json         (serve) print one JSON line {{port,url,pid,version}} once listening
  --no-open      Do not open the viewer in a browser (this server never opens one)
  --out <file>   (record) output path (default graphmind-run-<runId>.ndjson; - for stdout)
  -v, --version  Print the version and exit
  -h, --help     Show this help
"
    )
}

/// Parses `argv` (without the program name).
pub fn parse(argv: &[String]) -> Result<Command, UsageError> {
    let mut positionals: Vec<String> = Vec::new();
    let mut serve = ServeArgs { open: true, ..Default::default() };
    let mut db = None;
    let mut out = None;
    let (mut help, mut version) = (false, false);
    let mut seen: Vec<&'static str> = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let token = &argv[i];
        i += 1;
        if !token.starts_with('-') || token == "-" {
            positionals.push(token.clone());
            continue;
        }
        let (name, inline) = match token.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_owned())),
            _ => (token.as_str(), None),
        };
        let mut value = |flag: &str| -> Result<String, UsageError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            match argv.get(i) {
                Some(v) if !v.starts_with("--") => {
                    i += 1;
                    Ok(v.clone())
                }
                _ => Err(UsageError(format!("{flag} requires a value"))),
            }
        };
        let flag: &'static str = match name {
            "-h" | "--help" => {
                help = true;
                "help"
            }
            "-v" | "--version" => {
                version = true;
                "version"
            }
            "--port" => {
                let raw = value("--port")?;
                match raw.parse::<u16>() {
                    Ok(p) => serve.port = Some(p),
                    Err(_) => return Err(UsageError(format!("--port must be an integer between 0 and 65535 (got \"{raw}\")"))),
                }
                "port"
            }
            "--db" => {
                db = Some(value("--db")?);
                "db"
            }
            "--pause-on-error" => {
                let raw = value("--pause-on-error")?;
                parse_pause_on_error(Some(&raw)).map_err(|e| UsageError(format!("--{e}")))?;
                serve.pause_on_error = Some(raw);
                "pause-on-error"
            }
            "--json" => {
                serve.json = true;
                "json"
            }
            "--no-open" => {
                serve.open = false;
                "no-open"
            }
            "--open" => {
                serve.open = true;
                "open"
            }
            "--out" => {
                out = Some(value("--out")?);
                "out"
            }
            other => return Err(UsageError(format!("unknown option \"{other}\""))),
        };
        if matches!(flag, "json" | "no-open" | "open") && inline.is_some() {
            return Err(UsageError(format!("{name} takes no value")));
        }
        seen.push(flag);
    }
    if version {
        return Ok(Command::Version);
    }
    if help {
        return Ok(Command::Help);
    }
    let command = if positionals.is_empty() { "serve".to_owned() } else { positionals.remove(0) };
    let allow = |allowed: &[&str]| -> Result<(), UsageError> {
        match seen.iter().find(|f| !allowed.contains(f)) {
            Some(f) => Err(UsageError(format!("option \"--{f}\" does not apply to \"graphmind {command}\""))),
            None => Ok(()),
        }
    };
    match command.as_str() {
        "serve" => {
            allow(&["port", "db", "pause-on-error", "json", "no-open", "open"])?;
            if let Some(p) = positionals.first() {
                return Err(UsageError(format!("unexpected argument \"{p}\"")));
            }
            serve.db = db;
            Ok(Command::Serve(serve))
        }
        "runs" => {
            allow(&["db"])?;
            if let Some(p) = positionals.first() {
                return Err(UsageError(format!("unexpected argument \"{p}\"")));
            }
            Ok(Command::Runs { db })
        }
        "record" => {
            allow(&["db", "out"])?;
            let mut it = positionals.into_iter();
            let Some(run_id) = it.next() else { return Err(UsageError("record needs a run id: graphmind record <runId>".into())) };
            if let Some(p) = it.next() {
                return Err(UsageError(format!("unexpected argument \"{p}\"")));
            }
            Ok(Command::Record { run_id, db, out })
        }
        other => Err(UsageError(format!("unknown command \"{other}\""))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Command, UsageError> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn default_is_serve() {
        assert_eq!(p(&[]).unwrap(), Command::Serve(ServeArgs { open: true, ..Default::default() }));
        let Command::Serve(s) = p(&["--port=4848", "--db", "x.db", "--json", "--no-open", "--pause-on-error", "tool"]).unwrap() else { panic!() };
        assert_eq!(s, ServeArgs { port: Some(4848), db: Some("x.db".into()), pause_on_error: Some("tool".into()), json: true, open: false });
    }

    #[test]
    fn errors() {
        assert_eq!(p(&["--bogus"]).unwrap_err().0, "unknown option \"--bogus\"");
        assert!(p(&["--port", "x"]).unwrap_err().0.contains("--port must be"));
        assert!(p(&["--port"]).unwrap_err().0.contains("requires a value"));
        assert!(p(&["--pause-on-error", "nope"]).unwrap_err().0.starts_with("--pause-on-error must be one of"));
        assert!(p(&["frobnicate"]).unwrap_err().0.contains("unknown command"));
        assert!(p(&["runs", "--out", "f"]).is_err());
        assert!(p(&["record"]).is_err());
    }

    #[test]
    fn subcommands() {
        assert_eq!(p(&["runs", "--db", "a"]).unwrap(), Command::Runs { db: Some("a".into()) });
        assert_eq!(
            p(&["record", "r1", "--out", "-"]).unwrap(),
            Command::Record { run_id: "r1".into(), db: None, out: Some("-".into()) }
        );
        assert_eq!(p(&["--version"]).unwrap(), Command::Version);
        assert_eq!(p(&["runs", "-h"]).unwrap(), Command::Help);
    }
}
