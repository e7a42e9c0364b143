//! Command-line parsing for `graphmind`, on `clap`: the commands and flags are declared once
//! in [`spec`] (help, per-command help and shell completions come from there); [`parse`]
//! turns `argv` into a [`Command`], and a bad command line into a [`UsageError`] in our own
//! words ([`errors`]). `graphmind` alone is `graphmind serve`; each command accepts only its
//! own flags, given after its name.

mod errors;
pub mod spec;
pub mod values;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};
use spec::{Cli, Cmd};
pub use spec::{
    ControlArgs, DemoArgs, InitArgs, McpArgs, PauseQuery, ProxyArgs, RecordArgs, ReplayArgs,
    RunsArgs, ServeArgs,
};

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
    /// `graphmind mcp`.
    Mcp(McpArgs),
    /// `graphmind mcp-proxy`.
    McpProxy(ProxyArgs),
    /// `graphmind completions SHELL`.
    Completions(clap_complete::Shell),
    /// `--help` (`-h`), of `graphmind` or of the command it follows.
    Help(Help),
    /// `--version` (`-v`).
    Version,
}

/// A help text to print.
#[derive(Debug, PartialEq)]
pub struct Help {
    /// The text.
    pub text: String,
    /// `mcp` and `mcp-proxy` print theirs on stderr: their stdout is the protocol.
    pub to_stderr: bool,
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

/// The commands whose stdout is the MCP protocol (their help and errors go to stderr).
const STDIO_COMMANDS: [&str; 2] = ["mcp", "mcp-proxy"];

/// Parses `argv` (without the program name).
pub fn parse(argv: &[String]) -> Result<Command, UsageError> {
    let full = std::iter::once("graphmind").chain(argv.iter().map(String::as_str));
    let matches = Cli::command().try_get_matches_from(full).map_err(|e| {
        let named = named_command(argv);
        UsageError {
            message: errors::message(&e, named.as_deref().unwrap_or("serve")),
            command: named,
        }
    })?;
    let cli = Cli::from_arg_matches(&matches).map_err(|e| UsageError {
        message: errors::message(&e, "serve"),
        command: None,
    })?;
    let sub = matches.subcommand();
    let flag = |id: &str| {
        let set = |m: &clap::ArgMatches| matches!(m.try_get_one::<bool>(id), Ok(Some(true)));
        set(&matches) || sub.is_some_and(|(_, m)| set(m))
    };
    if flag("version") {
        return Ok(Command::Version);
    }
    if flag("help") {
        let name = sub.map(|(name, _)| name);
        let port = match &cli.command {
            Some(Cmd::McpProxy(p)) => p.args.port,
            _ => None,
        };
        return Ok(Command::Help(Help {
            text: help_text(name, port.unwrap_or(crate::config::DEFAULT_PORT)),
            to_stderr: name.is_some_and(|n| STDIO_COMMANDS.contains(&n)),
        }));
    }
    let Some(command) = cli.command else {
        return Ok(Command::Serve(cli.serve));
    };
    let name = sub.map_or("serve", |(name, _)| name).to_owned();
    let err = |message: String| UsageError {
        message,
        command: Some(name.clone()),
    };
    if let Some(id) = matches
        .ids()
        .map(|id| id.as_str())
        .find(|id| matches.value_source(id) == Some(ValueSource::CommandLine))
        .filter(|id| !matches!(*id, "help" | "version"))
    {
        return Err(err(flag_before_command(id, &name)));
    }
    Ok(match command {
        Cmd::Serve(s) => Command::Serve(s),
        Cmd::Runs(r) => Command::Runs(r),
        Cmd::Record(r) => {
            let Some(run_id) = r.run_id else {
                return Err(err(
                    "record needs a run id: graphmind record <runId>".into()
                ));
            };
            if r.args.html && r.args.format.as_deref() == Some("otlp") {
                return Err(err("--html and --format otlp cannot be combined".into()));
            }
            Command::Record(RecordArgs { run_id, ..r.args })
        }
        Cmd::Import(i) => match (i.spool, i.file) {
            (Some(_), Some(file)) => return Err(err(format!("unexpected argument \"{file}\""))),
            (Some(dir), None) => Command::ImportSpool { dir, db: i.db },
            (None, Some(file)) => Command::Import { file, db: i.db },
            (None, None) => {
                return Err(err(
                    "import needs a file: graphmind import <file.json>".into()
                ))
            }
        },
        Cmd::Pauses(query) => Command::Pauses(ControlArgs {
            query,
            ..Default::default()
        }),
        Cmd::Wait(w) => Command::Wait(ControlArgs {
            query: w.query,
            timeout: w.timeout,
            ..Default::default()
        }),
        Cmd::Resume(c) => Command::Resume(c),
        Cmd::Demo(d) => Command::Demo(d),
        Cmd::Open(o) => Command::Open {
            port: o.port,
            open: o.open,
        },
        Cmd::Init(i) => Command::Init(i),
        Cmd::Skill(s) => {
            if s.force && !s.install {
                return Err(err("--force only applies with --install".into()));
            }
            Command::Skill {
                install: s.install,
                force: s.force,
            }
        }
        Cmd::Replay(r) => {
            let Some(run_id) = r.run_id else {
                return Err(err(
                    "replay needs a run id: graphmind replay <runId>".into()
                ));
            };
            Command::Replay(ReplayArgs { run_id, ..r.args })
        }
        Cmd::Completions(c) => match c.shell {
            Some(shell) => Command::Completions(shell),
            None => {
                return Err(err(
                    "completions needs a shell: graphmind completions <bash|zsh|fish|elvish|powershell>"
                        .into(),
                ))
            }
        },
        Cmd::Mcp(m) => Command::Mcp(m),
        Cmd::McpProxy(p) => {
            let mut server = p.server.into_iter();
            Command::McpProxy(ProxyArgs {
                command: server.next(),
                args: server.collect(),
                ..p.args
            })
        }
    })
}

/// The error for a `serve` flag given before a command's name (`graphmind --db x runs`):
/// where it goes instead, or that it does not apply to that command.
fn flag_before_command(id: &str, command: &str) -> String {
    let cli = Cli::command();
    let long = |c: &clap::Command, id: &str| {
        c.get_arguments()
            .find(|a| a.get_id() == id)
            .and_then(|a| a.get_long())
            .map(str::to_owned)
    };
    let flag = long(&cli, id).unwrap_or_else(|| id.to_owned());
    let applies = cli
        .find_subcommand(command)
        .is_some_and(|c| c.get_arguments().any(|a| a.get_long() == Some(&flag)));
    if applies {
        format!("option \"--{flag}\" goes after the command: graphmind {command} --{flag} ...")
    } else {
        format!("option \"--{flag}\" does not apply to \"graphmind {command}\"")
    }
}

/// The command a command line names, for an error's exit code and prefix: its first word
/// that is not a flag nor a top-level flag's value.
fn named_command(argv: &[String]) -> Option<String> {
    let cli = Cli::command();
    let takes_value = |token: &str| {
        token.strip_prefix("--").is_some_and(|long| {
            !long.contains('=')
                && cli
                    .get_arguments()
                    .any(|a| a.get_long() == Some(long) && a.get_action().takes_values())
        })
    };
    let mut tokens = argv.iter();
    while let Some(t) = tokens.next() {
        if t == "--" {
            return None;
        }
        if takes_value(t) {
            tokens.next();
        } else if !t.starts_with('-') || t == "-" {
            return Some(t.clone());
        }
    }
    None
}

/// The help of `graphmind` (`command` `None`) or of one command; `mcp-proxy`'s recipe names
/// the port it reports to.
pub fn help_text(command: Option<&str>, proxy_port: u16) -> String {
    let mut cli = Cli::command().mut_subcommand("mcp-proxy", |c| {
        c.after_help(spec::proxy_recipe(proxy_port))
    });
    cli.build();
    let help = match command.and_then(|name| cli.find_subcommand_mut(name)) {
        Some(sub) => sub.render_help(),
        None => cli.render_help(),
    };
    help.to_string()
}

/// `graphmind completions <shell>`: the script, for `graphmind` as named here.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    clap_complete::generate(shell, &mut Cli::command(), "graphmind", out);
}

#[cfg(test)]
mod tests;
