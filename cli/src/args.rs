//! Command-line parsing for `graphmind`, by hand: the first positional picks the command
//! (default `serve`); flags take `--flag value` or `--flag=value`; each command accepts
//! only its own flags.

use crate::config::check_pause_on_error;
use crate::tokens::ControlLevel;

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
    /// `--no-open` clears it: then the viewer is not opened in a browser.
    pub open: bool,
    /// `--open` was given: open the browser even with `--json` (which alone does not).
    pub open_explicit: bool,
    /// `--allow-control off|resume|inject|edit`: what the agent token may do.
    pub allow_control: Option<ControlLevel>,
    /// `--no-edit-input`: every input edit is refused.
    pub no_edit_input: bool,
    /// `--keep N` for the startup prune.
    pub keep: Option<u64>,
    /// `--days N` for the startup prune.
    pub days: Option<f64>,
    /// `--otlp-endpoint URL`: stream finished spans there (docs/otlp.md).
    pub otlp_endpoint: Option<String>,
    /// `--otlp-no-redact-secrets`: export secret-looking values as they are.
    pub otlp_no_redact_secrets: bool,
    /// `--log-level`: the server log's default level (`RUST_LOG` refines it; docs/server.md).
    pub log_level: Option<tracing::level_filters::LevelFilter>,
    /// `--spool-dir DIR`: one more folder to pick left spools up from at startup.
    pub spool_dir: Option<String>,
}

/// `graphmind runs` options.
#[derive(Debug, Default, PartialEq)]
pub struct RunsArgs {
    /// `--db`.
    pub db: Option<String>,
    /// `--keep N`: with `--prune` the runs kept; otherwise how many are listed.
    pub keep: Option<u64>,
    /// `--days N` (with `--prune`).
    pub days: Option<f64>,
    /// `--prune`.
    pub prune: bool,
    /// `--rm RUN_ID`.
    pub rm: Option<String>,
    /// `--clear`.
    pub clear: bool,
    /// `--yes`.
    pub yes: bool,
}

/// `graphmind record` options.
#[derive(Debug, Default, PartialEq)]
pub struct RecordArgs {
    /// The run.
    pub run_id: String,
    /// `--db`.
    pub db: Option<String>,
    /// `--out F` (`-` is stdout).
    pub out: Option<String>,
    /// `--html`.
    pub html: bool,
    /// `--no-redact-secrets`.
    pub no_redact_secrets: bool,
    /// `--format ndjson|otlp`.
    pub format: Option<String>,
}

/// `graphmind pauses` / `wait` / `resume` options.
#[derive(Debug, Default, PartialEq)]
pub struct ControlArgs {
    /// `--port` (default 4747).
    pub port: Option<u16>,
    /// `--run ID`.
    pub run: Option<String>,
    /// `--json`.
    pub json: bool,
    /// `--timeout S`.
    pub timeout: Option<f64>,
    /// `resume`: the pause id.
    pub pause_id: Option<String>,
    /// `resume --action`.
    pub action: Option<String>,
    /// `resume --output <json|@file>`.
    pub output: Option<String>,
    /// `resume --input <json|@file>`.
    pub input: Option<String>,
    /// `resume --operator <label>`.
    pub operator: Option<String>,
}

/// `graphmind demo` options.
#[derive(Debug, Default, PartialEq)]
pub struct DemoArgs {
    /// `--port` (default 4747).
    pub port: Option<u16>,
    /// `--live`: run the example agent instead of the recording.
    pub live: bool,
    /// `--no-open` clears it.
    pub open: bool,
    /// `--interactive`: leave the holds to the viewer even without a terminal.
    pub interactive: bool,
    /// `--db` (only when this command starts the server).
    pub db: Option<String>,
}

/// `graphmind init` options.
#[derive(Debug, Default, PartialEq)]
pub struct InitArgs {
    /// `--lang python|ruby|node|c`.
    pub lang: Option<String>,
    /// `--write`: put the snippet in a new file.
    pub write: bool,
    /// The folder to look at (default: the current one).
    pub dir: Option<String>,
}

/// `graphmind replay` options.
#[derive(Debug, Default, PartialEq)]
pub struct ReplayArgs {
    /// The recorded run.
    pub run_id: String,
    /// `--from <nodeId>#<n>`: the fork point.
    pub from: Option<String>,
    /// `--output <json|@file>`: the edited output of the call before the fork point.
    pub output: Option<String>,
    /// `--exec <command>`: run it (through `sh -c`) in replay mode.
    pub exec: Option<String>,
    /// `--port` of the server the app attaches to (default 4747).
    pub port: Option<u16>,
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Command {
    /// `graphmind [serve]`.
    Serve(ServeArgs),
    /// `graphmind runs`.
    Runs(RunsArgs),
    /// `graphmind record RUN_ID`.
    Record(RecordArgs),
    /// `graphmind import FILE`.
    Import { file: String, db: Option<String> },
    /// `graphmind import --spool DIR`.
    ImportSpool { dir: String, db: Option<String> },
    /// `graphmind pauses`.
    Pauses(ControlArgs),
    /// `graphmind wait`.
    Wait(ControlArgs),
    /// `graphmind resume PAUSE_ID`.
    Resume(ControlArgs),
    /// `graphmind demo`.
    Demo(DemoArgs),
    /// `graphmind replay RUN_ID`.
    Replay(ReplayArgs),
    /// `graphmind init [dir]`.
    Init(InitArgs),
    /// `graphmind skill [--install [--force]]`.
    Skill { install: bool, force: bool },
    /// `graphmind open [--port N] [--no-open]`.
    Open { port: Option<u16>, open: bool },
    /// `--help`.
    Help,
    /// `--version`.
    Version,
}

/// A usage error, printed as `graphmind: <message>`. The process exits 2, except for
/// `pauses`, `wait` and `resume`, whose exit code 2 means "timeout": there it exits 1 as
/// the reference does.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct UsageError {
    /// What was wrong.
    pub message: String,
    /// The command it was for, when known.
    pub command: Option<String>,
}

impl UsageError {
    fn new(message: impl Into<String>) -> Self {
        UsageError {
            message: message.into(),
            command: None,
        }
    }
}

/// The `graphmind --help` text.
pub fn help_text(version: &str) -> String {
    format!(
        "graphmind v{version} — local debugger server for AI agents (binds 127.0.0.1 only)

Usage: graphmind [command] [options]

Commands:
  serve      Start the GraphMind server (the default command) and open the viewer
  demo       Watch a demo agent get held twice (a loop, an error) and release it in the
             viewer: demo [--live] [--port <n>] [--no-open] [--interactive]
  open       Print and open the viewer link (with its token) of the server on --port
  init       Print the install line and snippet for the project here: init [dir]
             [--lang python|ruby|node|c] [--write]
  skill      Print the SKILL.md that teaches a coding agent to drive GraphMind:
             skill [--install [--force]] (installs into .claude/skills/graphmind/)
  runs       List stored runs; --prune [--keep N] [--days N], --rm <runId>, --clear --yes
  record     Export a run: record <runId> [--out <file>] [--html] [--format ndjson|otlp]
             [--no-redact-secrets]
  replay     Re-run an app with a recorded run answering its tool and model calls:
             replay <runId> [--from <nodeId>#<n>] [--output <json|@file>] [--exec <cmd>]
             [--port <n>] (prints the command line; --exec runs it; docs/replay.md)
  import     Load OTLP/JSON or OpenInference spans as a read-only run: import <file>;
             or store the spools left by apps that died: import --spool <dir> (docs/spool.md)
  pauses     List held pauses of the server on --port: pauses [--run <id>] [--json]
  wait       Block until a pause is held: wait [--run <id>] [--timeout <s>] [--json]
  resume     Release a pause: resume <pauseId> --run <id> --action continue|retry|inject|abort
             [--output <json|@file>] [--input <json|@file>] [--operator <label>]
             [--timeout <s>] [--json]
  mcp        Serve the recorded runs to a coding agent over stdio (read-only MCP server):
             mcp [--db <path>] [--port <n>]
  mcp-proxy  Debug any stdio MCP server, in any language, with no code changes:
             mcp-proxy [--trace] [--wait-for-attach] [--port <n>] -- <command> [args...]
             (graphmind mcp-proxy --help for the recipe)

Options:
  --port <n>     Port to listen on / talk to (default 4747; always 127.0.0.1; 0 picks a free one)
  --db <path>    SQLite database file (default ~/.graphmind/graphmind.db, or GRAPHMIND_DB)
  --pause-on-error <on|off|kind>
                 Scope the default pause-on-error breakpoint. Default: on (every node error).
                 \"off\" starts with no breakpoints; a node kind (agent, llm, tool, chain,
                 retriever, custom) pauses only on that kind. Env: GRAPHMIND_PAUSE_ON_ERROR
  --allow-control <off|resume|inject|edit>
                 (serve) what the agent token (graphmind resume) may do. Default: off
  --no-edit-input
                 (serve) refuse every input edit, whoever asks
  --otlp-endpoint <url>
                 (serve) stream every finished node and run as OTLP/HTTP spans to this
                 OpenTelemetry endpoint (base URL; /v1/traces is appended). Also
                 OTEL_EXPORTER_OTLP_ENDPOINT / _TRACES_ENDPOINT / _HEADERS / _PROTOCOL
                 (http/protobuf default, http/json). See docs/otlp.md
  --otlp-no-redact-secrets
                 (serve) export secret-looking values as they are (redacted by default)
  --log-level <off|error|warn|info|debug|trace>
                 (serve) the server log's level on stderr (default info); RUST_LOG, when
                 set, refines it (target=level) or replaces it (a bare level)
  --spool-dir <dir>
                 (serve) also store, at startup, the spools left in <dir> by apps that
                 died (always: GRAPHMIND_SPOOL_DIR and ~/.graphmind/spool; docs/spool.md)
  --keep <n>     Runs kept by the prune (default 200, GRAPHMIND_KEEP_RUNS)
  --days <n>     Days kept by the prune (default 30, GRAPHMIND_KEEP_DAYS)
  --json         (serve) print one JSON line {{port,url,pid,version}} once listening, and
                 open no browser unless --open; (pauses, wait, resume) print JSON
  --live         (demo) run the example agent's own tools instead of the recording
  --interactive  (demo) leave both holds to the viewer even without a terminal
  --no-open      (serve, demo, open) do not open the viewer in a browser (neither do CI=1
                 or a session without a display)
  --out <file>   (record) output path (default graphmind-run-<runId>.ndjson; - for stdout)
  -v, --version  Print the version and exit
  -h, --help     Show this help

Exit codes of pauses, wait and resume:
  0  ok (resumed; a pause was found; listed)
  1  usage error, or something unexpected
  2  timeout (wait: no pause in time; resume: no answer from the app yet)
  3  no GraphMind server on that port
  4  nothing to act on (no such pause; wait --run: the run ended)
  5  not authorized (no or stale token file, --allow-control too low, edit refused)
  6  refused (the app would not run the edit; placeholder or truncated value)
  7  taken (another resume — the viewer, another agent — won the pause)
Other commands exit 2 on a usage error.
"
    )
}

fn non_negative(flag: &str, raw: &str) -> Result<f64, UsageError> {
    match raw.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(UsageError::new(format!(
            "{flag} must be a number >= 0 (got \"{raw}\")"
        ))),
    }
}

/// Parses `argv` (without the program name).
pub fn parse(argv: &[String]) -> Result<Command, UsageError> {
    let mut positionals: Vec<String> = Vec::new();
    let mut serve = ServeArgs {
        open: true,
        ..Default::default()
    };
    let mut runs = RunsArgs::default();
    let mut record = RecordArgs::default();
    let mut control = ControlArgs::default();
    let mut replay = ReplayArgs::default();
    let mut db = None;
    let mut spool: Option<String> = None;
    let mut port = None;
    let mut json = false;
    let mut keep = None;
    let mut days = None;
    let mut demo = DemoArgs {
        open: true,
        ..Default::default()
    };
    let mut init = InitArgs::default();
    let (mut install, mut force) = (false, false);
    let (mut help, mut version) = (false, false);
    let mut seen: Vec<&'static str> = Vec::new();
    let mut i = 0;
    // The command is the first positional; flags are judged against it at the end.
    let first_positional = argv.iter().find(|a| !a.starts_with('-')).cloned();
    let with_cmd = |e: UsageError| UsageError {
        command: first_positional.clone(),
        ..e
    };
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
        // `--output`/`--input` take JSON, which may start with `-` only via `=`.
        let mut value = |flag: &str| -> Result<String, UsageError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            match argv.get(i) {
                Some(v) if !v.starts_with("--") => {
                    i += 1;
                    Ok(v.clone())
                }
                _ => Err(with_cmd(UsageError::new(format!(
                    "{flag} requires a value"
                )))),
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
                    Ok(p) => port = Some(p),
                    Err(_) => {
                        return Err(with_cmd(UsageError::new(format!(
                            "--port must be an integer between 0 and 65535 (got \"{raw}\")"
                        ))))
                    }
                }
                "port"
            }
            "--db" => {
                db = Some(value("--db")?);
                "db"
            }
            "--pause-on-error" => {
                let raw = value("--pause-on-error")?;
                check_pause_on_error(&raw).map_err(UsageError::new)?;
                serve.pause_on_error = Some(raw);
                "pause-on-error"
            }
            "--allow-control" => {
                let raw = value("--allow-control")?;
                match ControlLevel::parse(&raw) {
                    Some(l) => serve.allow_control = Some(l),
                    None => {
                        return Err(UsageError::new(format!(
                        "--allow-control must be one of off, resume, inject, edit (got \"{raw}\")"
                    )))
                    }
                }
                "allow-control"
            }
            "--no-edit-input" => {
                serve.no_edit_input = true;
                "no-edit-input"
            }
            "--otlp-endpoint" => {
                serve.otlp_endpoint = Some(value("--otlp-endpoint")?);
                "otlp-endpoint"
            }
            "--spool-dir" => {
                serve.spool_dir = Some(value("--spool-dir")?);
                "spool-dir"
            }
            "--spool" => {
                spool = Some(value("--spool")?);
                "spool"
            }
            "--otlp-no-redact-secrets" => {
                serve.otlp_no_redact_secrets = true;
                "otlp-no-redact-secrets"
            }
            "--log-level" => {
                let raw = value("--log-level")?;
                match crate::logging::parse_level(&raw) {
                    Some(l) => serve.log_level = Some(l),
                    None => {
                        return Err(with_cmd(UsageError::new(format!(
                            "--log-level must be one of {} (got \"{raw}\")",
                            crate::logging::LEVELS.join(", ")
                        ))))
                    }
                }
                "log-level"
            }
            "--keep" => {
                let raw = value("--keep")?;
                match raw.trim().parse::<u64>() {
                    Ok(n) => keep = Some(n),
                    Err(_) => {
                        return Err(UsageError::new(format!(
                            "--keep must be a whole number >= 0 (got \"{raw}\")"
                        )))
                    }
                }
                "keep"
            }
            "--days" => {
                let raw = value("--days")?;
                days = Some(non_negative("--days", &raw)?);
                "days"
            }
            "--json" => {
                json = true;
                "json"
            }
            "--no-open" => {
                serve.open = false;
                "no-open"
            }
            "--open" => {
                serve.open = true;
                serve.open_explicit = true;
                "open"
            }
            "--live" => {
                demo.live = true;
                "live"
            }
            "--interactive" => {
                demo.interactive = true;
                "interactive"
            }
            "--lang" => {
                let raw = value("--lang")?;
                let lang = raw.trim().to_ascii_lowercase();
                if !crate::init::LANGS.contains(&lang.as_str()) {
                    return Err(with_cmd(UsageError::new(format!(
                        "--lang must be one of {} (got \"{raw}\")",
                        crate::init::LANGS.join(", ")
                    ))));
                }
                init.lang = Some(lang);
                "lang"
            }
            "--write" => {
                init.write = true;
                "write"
            }
            "--install" => {
                install = true;
                "install"
            }
            "--force" => {
                force = true;
                "force"
            }
            "--out" => {
                record.out = Some(value("--out")?);
                "out"
            }
            "--html" => {
                record.html = true;
                "html"
            }
            "--no-redact-secrets" => {
                record.no_redact_secrets = true;
                "no-redact-secrets"
            }
            "--format" => {
                let raw = value("--format")?;
                if raw != "ndjson" && raw != "otlp" {
                    return Err(UsageError::new(format!(
                        "--format must be ndjson or otlp (got \"{raw}\")"
                    )));
                }
                record.format = Some(raw);
                "format"
            }
            "--prune" => {
                runs.prune = true;
                "prune"
            }
            "--rm" => {
                runs.rm = Some(value("--rm")?);
                "rm"
            }
            "--clear" => {
                runs.clear = true;
                "clear"
            }
            "--yes" | "-y" => {
                runs.yes = true;
                "yes"
            }
            "--run" => {
                control.run = Some(value("--run")?);
                "run"
            }
            "--timeout" => {
                let raw = value("--timeout")?;
                control.timeout = Some(non_negative("--timeout", &raw).map_err(with_cmd)?);
                "timeout"
            }
            "--action" => {
                control.action = Some(value("--action")?);
                "action"
            }
            "--output" => {
                control.output = Some(value("--output")?);
                "output"
            }
            "--input" => {
                control.input = Some(value("--input")?);
                "input"
            }
            "--from" => {
                replay.from = Some(value("--from")?);
                "from"
            }
            "--exec" => {
                replay.exec = Some(value("--exec")?);
                "exec"
            }
            "--operator" => {
                control.operator = Some(value("--operator")?);
                "operator"
            }
            other => {
                return Err(with_cmd(UsageError::new(format!(
                    "unknown option \"{other}\""
                ))))
            }
        };
        if matches!(
            flag,
            "json"
                | "no-open"
                | "open"
                | "no-edit-input"
                | "otlp-no-redact-secrets"
                | "html"
                | "no-redact-secrets"
                | "prune"
                | "clear"
                | "yes"
                | "live"
                | "interactive"
                | "write"
                | "install"
                | "force"
        ) && inline.is_some()
        {
            return Err(with_cmd(UsageError::new(format!("{name} takes no value"))));
        }
        seen.push(flag);
    }
    if version {
        return Ok(Command::Version);
    }
    if help {
        return Ok(Command::Help);
    }
    let command = if positionals.is_empty() {
        "serve".to_owned()
    } else {
        positionals.remove(0)
    };
    let err = |m: String| UsageError {
        message: m,
        command: Some(command.clone()),
    };
    let allow = |allowed: &[&str]| -> Result<(), UsageError> {
        match seen.iter().find(|f| !allowed.contains(f)) {
            Some(f) => Err(err(format!(
                "option \"--{f}\" does not apply to \"graphmind {command}\""
            ))),
            None => Ok(()),
        }
    };
    let no_more = |p: &[String]| -> Result<(), UsageError> {
        match p.first() {
            Some(p) => Err(err(format!("unexpected argument \"{p}\""))),
            None => Ok(()),
        }
    };
    match command.as_str() {
        "serve" => {
            allow(&[
                "port",
                "db",
                "pause-on-error",
                "json",
                "no-open",
                "open",
                "allow-control",
                "no-edit-input",
                "keep",
                "days",
                "otlp-endpoint",
                "otlp-no-redact-secrets",
                "log-level",
                "spool-dir",
            ])?;
            no_more(&positionals)?;
            serve.db = db;
            serve.port = port;
            serve.json = json;
            serve.keep = keep;
            serve.days = days;
            Ok(Command::Serve(serve))
        }
        "runs" => {
            allow(&["db", "keep", "days", "prune", "rm", "clear", "yes"])?;
            no_more(&positionals)?;
            runs.db = db;
            runs.keep = keep;
            runs.days = days;
            Ok(Command::Runs(runs))
        }
        "record" => {
            allow(&["db", "out", "html", "no-redact-secrets", "format"])?;
            let mut it = positionals.into_iter();
            let Some(run_id) = it.next() else {
                return Err(err("record needs a run id: graphmind record <runId>".into()));
            };
            no_more(&it.collect::<Vec<_>>())?;
            if record.html && record.format.as_deref() == Some("otlp") {
                return Err(err("--html and --format otlp cannot be combined".into()));
            }
            record.run_id = run_id;
            record.db = db;
            Ok(Command::Record(record))
        }
        "import" => {
            allow(&["db", "spool"])?;
            if let Some(dir) = spool {
                no_more(&positionals)?;
                return Ok(Command::ImportSpool { dir, db });
            }
            let mut it = positionals.into_iter();
            let Some(file) = it.next() else {
                return Err(err(
                    "import needs a file: graphmind import <file.json>".into()
                ));
            };
            no_more(&it.collect::<Vec<_>>())?;
            Ok(Command::Import { file, db })
        }
        "pauses" | "wait" | "resume" => {
            let allowed: &[&str] = match command.as_str() {
                "pauses" => &["port", "run", "json"],
                "wait" => &["port", "run", "timeout", "json"],
                _ => &[
                    "port", "run", "json", "timeout", "action", "output", "input", "operator",
                ],
            };
            allow(allowed)?;
            control.port = port;
            control.json = json;
            if command == "resume" {
                let mut it = positionals.into_iter();
                control.pause_id = it.next();
                no_more(&it.collect::<Vec<_>>())?;
                Ok(Command::Resume(control))
            } else {
                no_more(&positionals)?;
                Ok(if command == "pauses" {
                    Command::Pauses(control)
                } else {
                    Command::Wait(control)
                })
            }
        }
        "demo" => {
            allow(&["port", "db", "live", "no-open", "open", "interactive"])?;
            no_more(&positionals)?;
            demo.port = port;
            demo.db = db;
            demo.open = serve.open;
            Ok(Command::Demo(demo))
        }
        "open" => {
            allow(&["port", "no-open", "open"])?;
            no_more(&positionals)?;
            Ok(Command::Open {
                port,
                open: serve.open,
            })
        }
        "init" => {
            allow(&["lang", "write"])?;
            let mut it = positionals.into_iter();
            init.dir = it.next();
            no_more(&it.collect::<Vec<_>>())?;
            Ok(Command::Init(init))
        }
        "skill" => {
            allow(&["install", "force"])?;
            no_more(&positionals)?;
            if force && !install {
                return Err(err("--force only applies with --install".into()));
            }
            Ok(Command::Skill { install, force })
        }
        "replay" => {
            allow(&["port", "from", "output", "exec"])?;
            let mut it = positionals.into_iter();
            let Some(run_id) = it.next() else {
                return Err(err("replay needs a run id: graphmind replay <runId>".into()));
            };
            no_more(&it.collect::<Vec<_>>())?;
            replay.run_id = run_id;
            replay.output = control.output;
            replay.port = port;
            Ok(Command::Replay(replay))
        }
        other => Err(err(format!("unknown command \"{other}\""))),
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
        assert_eq!(
            p(&[]).unwrap(),
            Command::Serve(ServeArgs {
                open: true,
                ..Default::default()
            })
        );
        let Command::Serve(s) = p(&[
            "--port=4848",
            "--db",
            "x.db",
            "--json",
            "--no-open",
            "--pause-on-error",
            "tool",
            "--allow-control",
            "inject",
            "--no-edit-input",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            s,
            ServeArgs {
                port: Some(4848),
                db: Some("x.db".into()),
                pause_on_error: Some("tool".into()),
                json: true,
                open: false,
                allow_control: Some(ControlLevel::Inject),
                no_edit_input: true,
                ..Default::default()
            }
        );
    }

    #[test]
    fn log_level() {
        let Command::Serve(s) = p(&["--log-level", "warn"]).unwrap() else {
            panic!()
        };
        assert_eq!(s.log_level, Some(tracing::level_filters::LevelFilter::WARN));
        let Command::Serve(s) = p(&["serve", "--log-level=TRACE"]).unwrap() else {
            panic!()
        };
        assert_eq!(
            s.log_level,
            Some(tracing::level_filters::LevelFilter::TRACE)
        );
        assert_eq!(
            p(&["--log-level", "loud"]).unwrap_err().message,
            "--log-level must be one of off, error, warn, info, debug, trace (got \"loud\")"
        );
        assert_eq!(
            p(&["runs", "--log-level", "warn"]).unwrap_err().message,
            "option \"--log-level\" does not apply to \"graphmind runs\""
        );
    }

    #[test]
    fn errors() {
        assert_eq!(
            p(&["--bogus"]).unwrap_err().message,
            "unknown option \"--bogus\""
        );
        assert!(p(&["--port", "x"])
            .unwrap_err()
            .message
            .contains("--port must be"));
        assert!(p(&["--port"])
            .unwrap_err()
            .message
            .contains("requires a value"));
        assert!(p(&["--pause-on-error", "nope"])
            .unwrap_err()
            .message
            .starts_with("--pause-on-error must be one of"));
        assert!(p(&["--allow-control", "all"]).is_err());
        assert!(p(&["frobnicate"])
            .unwrap_err()
            .message
            .contains("unknown command"));
        assert!(p(&["runs", "--out", "f"]).is_err());
        assert!(p(&["record"]).is_err());
        assert_eq!(
            p(&["resume", "--bogus"]).unwrap_err().command.as_deref(),
            Some("resume")
        );
        assert!(p(&["pauses", "--action", "x"]).is_err());
        assert!(p(&["init", "--lang", "cobol"])
            .unwrap_err()
            .message
            .contains("--lang must be one of"));
        assert!(p(&["skill", "--force"])
            .unwrap_err()
            .message
            .contains("--install"));
        assert!(p(&["demo", "--write"]).is_err());
        assert!(p(&["demo", "--live=yes"]).is_err());
    }

    #[test]
    fn subcommands() {
        assert_eq!(
            p(&["runs", "--db", "a"]).unwrap(),
            Command::Runs(RunsArgs {
                db: Some("a".into()),
                ..Default::default()
            })
        );
        assert_eq!(
            p(&["runs", "--prune", "--keep", "5", "--days", "1.5"]).unwrap(),
            Command::Runs(RunsArgs {
                prune: true,
                keep: Some(5),
                days: Some(1.5),
                ..Default::default()
            })
        );
        assert_eq!(
            p(&["record", "r1", "--out", "-", "--no-redact-secrets"]).unwrap(),
            Command::Record(RecordArgs {
                run_id: "r1".into(),
                out: Some("-".into()),
                no_redact_secrets: true,
                ..Default::default()
            })
        );
        assert_eq!(
            p(&[
                "resume",
                "p1",
                "--run",
                "r",
                "--action",
                "inject",
                "--output={\"a\":1}"
            ])
            .unwrap(),
            Command::Resume(ControlArgs {
                pause_id: Some("p1".into()),
                run: Some("r".into()),
                action: Some("inject".into()),
                output: Some("{\"a\":1}".into()),
                ..Default::default()
            })
        );
        assert_eq!(
            p(&["wait", "--timeout", "3"]).unwrap(),
            Command::Wait(ControlArgs {
                timeout: Some(3.0),
                ..Default::default()
            })
        );
        assert_eq!(
            p(&["import", "f.json"]).unwrap(),
            Command::Import {
                file: "f.json".into(),
                db: None
            }
        );
        assert_eq!(
            p(&["import", "--spool", "/s"]).unwrap(),
            Command::ImportSpool {
                dir: "/s".into(),
                db: None
            }
        );
        assert!(
            p(&["import", "--spool", "/s", "f.json"]).is_err(),
            "a spool or a file, not both"
        );
        assert!(p(&["runs", "--spool", "/s"]).is_err());
        let Command::Serve(s) = p(&["serve", "--spool-dir", "/d"]).unwrap() else {
            panic!()
        };
        assert_eq!(s.spool_dir.as_deref(), Some("/d"));
        assert_eq!(p(&["--version"]).unwrap(), Command::Version);
        assert_eq!(
            p(&["demo", "--live", "--no-open", "--port", "0"]).unwrap(),
            Command::Demo(DemoArgs {
                port: Some(0),
                live: true,
                ..Default::default()
            })
        );
        assert_eq!(
            p(&["init", "app", "--lang", "Ruby", "--write"]).unwrap(),
            Command::Init(InitArgs {
                lang: Some("ruby".into()),
                write: true,
                dir: Some("app".into())
            })
        );
        assert_eq!(
            p(&["skill", "--install", "--force"]).unwrap(),
            Command::Skill {
                install: true,
                force: true
            }
        );
        assert_eq!(
            p(&["open"]).unwrap(),
            Command::Open {
                port: None,
                open: true
            }
        );
        assert_eq!(p(&["runs", "-h"]).unwrap(), Command::Help);
    }
}
