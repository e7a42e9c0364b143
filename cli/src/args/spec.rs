//! The command line of `graphmind`, declared once with `clap`'s derive: every command, its
//! flags, their defaults and help. `--help`, the per-command help and the shell
//! completions are all rendered from these declarations.
//!
//! Where a command's options are exactly one of the public argument structs (`ServeArgs`,
//! `RunsArgs`, ...), the struct is the declaration; a command with a positional that must be
//! given (`record <runId>`) wraps its struct so that a missing one gets our own sentence.

use super::values;
use crate::tokens::ControlLevel;
use clap::{ArgAction, Args, Parser, Subcommand};
use tracing::level_filters::LevelFilter;

/// What `graphmind --help` ends with.
pub const AFTER_HELP: &str = "\
`graphmind <command> --help` shows a command's own options. Flags take `--flag value` or
`--flag=value` and go after the command's name. Shell completions: graphmind completions <shell>.

Exit codes of pauses, wait and resume:
  0  ok (resumed; a pause was found; listed)
  1  usage error, or something unexpected
  2  timeout (wait: no pause in time; resume: no answer from the app yet)
  3  no GraphMind server on that port
  4  nothing to act on (no such pause; wait --run: the run ended)
  5  not authorized (no or stale token file, --allow-control too low, edit refused)
  6  refused (the app would not run the edit; placeholder or truncated value)
  7  taken (another resume — the viewer, another agent — won the pause)
Other commands exit 2 on a usage error.";

/// The whole command line: `graphmind [serve options]` or `graphmind <command> ...`.
#[derive(Debug, Parser)]
#[command(
    name = "graphmind",
    about = concat!(
        "graphmind v",
        env!("CARGO_PKG_VERSION"),
        " — local debugger server for AI agents (binds 127.0.0.1 only)"
    ),
    after_help = AFTER_HELP,
    disable_help_flag = true,
    disable_version_flag = true,
    disable_help_subcommand = true,
    args_override_self = true,
    max_term_width = 100
)]
pub struct Cli {
    /// The command (default `serve`).
    #[command(subcommand)]
    pub command: Option<Cmd>,
    /// `graphmind` alone is `graphmind serve`: its options are accepted here.
    #[command(flatten)]
    pub serve: ServeArgs,
    /// `-h`, `--help`: the help of the command it follows.
    #[arg(short = 'h', long, global = true, action = ArgAction::SetTrue,
          help = "Show this help (after a command: that command's help)")]
    pub help: bool,
    /// `-v`, `--version`.
    #[arg(short = 'v', long, global = true, action = ArgAction::SetTrue,
          help = "Print the version and exit")]
    pub version: bool,
}

/// The commands, in the order `--help` lists them.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Start the GraphMind server (the default command) and open the viewer
    Serve(ServeArgs),
    /// Watch a demo agent get held twice (a loop, an error) and release it in the viewer
    Demo(DemoArgs),
    /// Print and open the viewer link (with its token) of the server on --port
    Open(OpenArgs),
    /// Print the install line and snippet for the project here
    Init(InitArgs),
    /// Print the SKILL.md that teaches a coding agent to drive GraphMind
    Skill(SkillArgs),
    /// List stored runs; prune them, delete one, or clear them all
    Runs(RunsArgs),
    /// Export a run (NDJSON, OTLP/JSON, or a standalone HTML page)
    Record(RecordCli),
    /// Re-run an app with a recorded run answering its tool and model calls (docs/replay.md)
    Replay(ReplayCli),
    /// Load OTLP/JSON or OpenInference spans as a read-only run, or the spools of dead apps
    Import(ImportCli),
    /// List the held pauses of the server on --port
    Pauses(PauseQuery),
    /// Block until a pause is held, and show it
    Wait(WaitCli),
    /// Release a pause with the agent token
    Resume(ControlArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions(CompletionsCli),
    /// Serve the recorded runs to a coding agent over stdio (read-only MCP server)
    Mcp(McpArgs),
    /// Debug any stdio MCP server, in any language, with no code changes
    #[command(name = "mcp-proxy")]
    McpProxy(ProxyCli),
}

/// `graphmind serve` options.
#[derive(Debug, Default, PartialEq, Args)]
pub struct ServeArgs {
    /// Port to listen on (default 4747; always 127.0.0.1; 0 picks a free one)
    #[arg(long, value_name = "N", value_parser = values::port, allow_negative_numbers = true)]
    pub port: Option<u16>,
    /// SQLite database file (default ~/.graphmind/graphmind.db, or GRAPHMIND_DB)
    #[arg(long, value_name = "PATH")]
    pub db: Option<String>,
    /// Scope the default pause-on-error breakpoint: on (default, every node error), off (no
    /// breakpoints), or a node kind (agent, llm, tool, chain, retriever, custom). Env:
    /// GRAPHMIND_PAUSE_ON_ERROR
    #[arg(long, value_name = "on|off|KIND", value_parser = values::pause_on_error)]
    pub pause_on_error: Option<String>,
    /// Print one JSON line {port,url,pid,version} once listening, and open no browser unless
    /// --open
    #[arg(long)]
    pub json: bool,
    /// Do not open the viewer in a browser (neither do CI=1 or a session without a display)
    #[arg(long = "no-open", action = ArgAction::SetFalse, overrides_with = "open_explicit")]
    pub open: bool,
    /// Open the viewer in a browser, even with --json
    #[arg(long = "open", overrides_with = "open")]
    pub open_explicit: bool,
    /// What the agent token (graphmind resume) may do. Default: off
    #[arg(long, value_name = "off|resume|inject|edit", value_parser = values::allow_control)]
    pub allow_control: Option<ControlLevel>,
    /// Refuse every input edit, whoever asks
    #[arg(long)]
    pub no_edit_input: bool,
    /// Runs kept by the startup prune (default 200, GRAPHMIND_KEEP_RUNS)
    #[arg(long, value_name = "N", value_parser = values::keep, allow_negative_numbers = true)]
    pub keep: Option<u64>,
    /// Days kept by the startup prune (default 30, GRAPHMIND_KEEP_DAYS)
    #[arg(long, value_name = "N", value_parser = values::days, allow_negative_numbers = true)]
    pub days: Option<f64>,
    /// Stream every finished node and run as OTLP/HTTP spans to this OpenTelemetry endpoint
    /// (base URL; /v1/traces is appended). Also OTEL_EXPORTER_OTLP_ENDPOINT /
    /// _TRACES_ENDPOINT / _HEADERS / _PROTOCOL (http/protobuf default, http/json); docs/otlp.md
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Export secret-looking values as they are (redacted by default)
    #[arg(long)]
    pub otlp_no_redact_secrets: bool,
    /// The server log's level on stderr (default info); RUST_LOG, when set, refines it
    /// (target=level) or replaces it (a bare level)
    #[arg(long, value_name = "off|error|warn|info|debug|trace", value_parser = values::log_level)]
    pub log_level: Option<LevelFilter>,
    /// Also store, at startup, the spools left in DIR by apps that died (always:
    /// GRAPHMIND_SPOOL_DIR and ~/.graphmind/spool; docs/spool.md)
    #[arg(long, value_name = "DIR")]
    pub spool_dir: Option<String>,
}

/// `graphmind runs` options.
#[derive(Debug, Default, PartialEq, Args)]
pub struct RunsArgs {
    /// SQLite database file (default ~/.graphmind/graphmind.db, or GRAPHMIND_DB)
    #[arg(long, value_name = "PATH")]
    pub db: Option<String>,
    /// With --prune: the runs kept (default 200, GRAPHMIND_KEEP_RUNS); otherwise how many are
    /// listed (default 25)
    #[arg(long, value_name = "N", value_parser = values::keep, allow_negative_numbers = true)]
    pub keep: Option<u64>,
    /// With --prune: the days kept (default 30, GRAPHMIND_KEEP_DAYS)
    #[arg(long, value_name = "N", value_parser = values::days, allow_negative_numbers = true)]
    pub days: Option<f64>,
    /// Apply the retention policy now, then VACUUM
    #[arg(long)]
    pub prune: bool,
    /// Delete one run
    #[arg(long, value_name = "RUN_ID")]
    pub rm: Option<String>,
    /// Delete every run (with --yes)
    #[arg(long)]
    pub clear: bool,
    /// Confirm --clear
    #[arg(short = 'y', long)]
    pub yes: bool,
}

/// `graphmind record` options.
#[derive(Debug, Default, PartialEq, Args)]
pub struct RecordArgs {
    /// The run (the positional of [`RecordCli`]).
    #[arg(skip)]
    pub run_id: String,
    /// SQLite database file (default ~/.graphmind/graphmind.db, or GRAPHMIND_DB)
    #[arg(long, value_name = "PATH")]
    pub db: Option<String>,
    /// Output path (default graphmind-run-<runId>.ndjson; - for stdout)
    #[arg(long, value_name = "FILE")]
    pub out: Option<String>,
    /// A standalone HTML page instead of NDJSON
    #[arg(long)]
    pub html: bool,
    /// Export secret-looking values as they are (redacted by default)
    #[arg(long)]
    pub no_redact_secrets: bool,
    /// ndjson (default) or otlp (OTLP/JSON spans)
    #[arg(long, value_name = "ndjson|otlp", value_parser = values::format)]
    pub format: Option<String>,
}

/// `graphmind record <runId> [options]`.
#[derive(Debug, Args)]
pub struct RecordCli {
    /// The run to export
    #[arg(value_name = "RUN_ID")]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub args: RecordArgs,
}

/// `--port N --run ID --json`: which server, which run, and how to print, declared once for
/// `pauses` (its whole command line), `wait` and `resume`.
#[derive(Debug, Default, PartialEq, Args)]
pub struct PauseQuery {
    /// Port of the GraphMind server (default 4747)
    #[arg(long, value_name = "N", value_parser = values::port, allow_negative_numbers = true)]
    pub port: Option<u16>,
    /// Only the pauses of this run
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// `graphmind pauses` / `wait` / `resume` options (`resume`'s command line; `pauses` and
/// `wait` fill in their part).
#[derive(Debug, Default, PartialEq, Args)]
#[command(mut_arg("run", |run| run.help("The run the pause belongs to")))]
pub struct ControlArgs {
    /// The pause to release
    #[arg(value_name = "PAUSE_ID")]
    pub pause_id: Option<String>,
    /// `--port`, `--run`, `--json`.
    #[command(flatten)]
    pub query: PauseQuery,
    /// Seconds to wait for the app's answer (default 30, 1 to 120)
    #[arg(long, value_name = "S", value_parser = values::timeout, allow_negative_numbers = true)]
    pub timeout: Option<f64>,
    /// continue, retry, inject or abort
    #[arg(long, value_name = "continue|retry|inject|abort")]
    pub action: Option<String>,
    /// With --action inject: the output to hand back instead (JSON, or @file)
    #[arg(long, value_name = "JSON|@FILE", allow_hyphen_values = true)]
    pub output: Option<String>,
    /// The held call's edited input (JSON, or @file)
    #[arg(long, value_name = "JSON|@FILE", allow_hyphen_values = true)]
    pub input: Option<String>,
    /// Who released it, shown in the viewer
    #[arg(long, value_name = "LABEL")]
    pub operator: Option<String>,
}

/// `graphmind wait [--run ID] [--timeout S] [--json] [--port N]`.
#[derive(Debug, Args)]
pub struct WaitCli {
    /// `--port`, `--run`, `--json`.
    #[command(flatten)]
    pub query: PauseQuery,
    /// Seconds to wait for a pause (default 90, 0 = forever)
    #[arg(long, value_name = "S", value_parser = values::timeout, allow_negative_numbers = true)]
    pub timeout: Option<f64>,
}

/// `graphmind demo` options.
#[derive(Debug, Default, PartialEq, Args)]
pub struct DemoArgs {
    /// Port of the server to use or start (default 4747)
    #[arg(long, value_name = "N", value_parser = values::port, allow_negative_numbers = true)]
    pub port: Option<u16>,
    /// Run the example agent's own tools instead of the recording
    #[arg(long)]
    pub live: bool,
    /// Do not open the viewer in a browser (neither do CI=1 or a session without a display)
    #[arg(long = "no-open", action = ArgAction::SetFalse, overrides_with = "open_flag")]
    pub open: bool,
    /// Open the viewer in a browser (the default)
    #[arg(long = "open", overrides_with = "open", hide = true)]
    pub open_flag: bool,
    /// Leave both holds to the viewer even without a terminal
    #[arg(long)]
    pub interactive: bool,
    /// SQLite database file, when this command starts the server
    #[arg(long, value_name = "PATH")]
    pub db: Option<String>,
}

/// `graphmind open [--port N] [--no-open]`.
#[derive(Debug, Default, PartialEq, Args)]
pub struct OpenArgs {
    /// Port of the GraphMind server (default 4747)
    #[arg(long, value_name = "N", value_parser = values::port, allow_negative_numbers = true)]
    pub port: Option<u16>,
    /// Only print the link (neither do CI=1 or a session without a display open it)
    #[arg(long = "no-open", action = ArgAction::SetFalse, overrides_with = "open_flag")]
    pub open: bool,
    /// Open the link in a browser (the default)
    #[arg(long = "open", overrides_with = "open", hide = true)]
    pub open_flag: bool,
}

/// `graphmind init` options.
#[derive(Debug, Default, PartialEq, Args)]
pub struct InitArgs {
    /// The folder to look at (default: the current one)
    #[arg(value_name = "DIR")]
    pub dir: Option<String>,
    /// The language, when the folder does not tell
    #[arg(long, value_name = "python|ruby|node|c", value_parser = values::lang)]
    pub lang: Option<String>,
    /// Put the snippet in a new file
    #[arg(long)]
    pub write: bool,
}

/// `graphmind skill [--install [--force]]`.
#[derive(Debug, Default, PartialEq, Args)]
pub struct SkillArgs {
    /// Install it into .claude/skills/graphmind/
    #[arg(long)]
    pub install: bool,
    /// With --install: replace an existing SKILL.md
    #[arg(long)]
    pub force: bool,
}

/// `graphmind replay` options.
#[derive(Debug, Default, PartialEq, Args)]
pub struct ReplayArgs {
    /// The recorded run (the positional of [`ReplayCli`]).
    #[arg(skip)]
    pub run_id: String,
    /// The fork point: the call after which the app runs live again
    #[arg(long, value_name = "NODE_ID#N")]
    pub from: Option<String>,
    /// The edited output of the call before the fork point (JSON, or @file)
    #[arg(long, value_name = "JSON|@FILE", allow_hyphen_values = true)]
    pub output: Option<String>,
    /// Run this command (through sh -c) in replay mode, instead of printing the line
    #[arg(long, value_name = "COMMAND")]
    pub exec: Option<String>,
    /// Port of the server the app attaches to (default 4747)
    #[arg(long, value_name = "N", value_parser = values::port, allow_negative_numbers = true)]
    pub port: Option<u16>,
}

/// `graphmind replay <runId> [options]`.
#[derive(Debug, Args)]
pub struct ReplayCli {
    /// The recorded run
    #[arg(value_name = "RUN_ID")]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub args: ReplayArgs,
}

/// `graphmind import <file> | --spool <dir>`.
#[derive(Debug, Args)]
pub struct ImportCli {
    /// The OTLP/JSON or OpenInference spans file
    #[arg(value_name = "FILE")]
    pub file: Option<String>,
    /// Store the spools left in DIR by apps that died, instead of a file (docs/spool.md)
    #[arg(long, value_name = "DIR")]
    pub spool: Option<String>,
    /// SQLite database file (default ~/.graphmind/graphmind.db, or GRAPHMIND_DB)
    #[arg(long, value_name = "PATH")]
    pub db: Option<String>,
}

/// `graphmind completions <shell>`.
#[derive(Debug, Args)]
pub struct CompletionsCli {
    /// bash, zsh, fish, elvish or powershell
    #[arg(value_name = "SHELL", value_parser = values::shell)]
    pub shell: Option<clap_complete::Shell>,
}

/// `graphmind mcp [--db PATH] [--port N]`.
#[derive(Debug, Default, PartialEq, Args)]
#[command(after_help = "\
Tools: list_runs, get_run, get_node, find_errors. The database is opened read-only; no
GraphMind server needs to be running.

Add it to Claude Code: claude mcp add graphmind -- graphmind mcp")]
pub struct McpArgs {
    /// SQLite database (default ~/.graphmind/graphmind.db, or GRAPHMIND_DB); opened read-only
    #[arg(long, value_name = "PATH")]
    pub db: Option<String>,
    /// Port of the viewer the links point at (default 4747)
    #[arg(long, value_name = "N", value_parser = values::nonzero_port, allow_negative_numbers = true)]
    pub port: Option<u16>,
}

/// Parsed `graphmind mcp-proxy` command line.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct ProxyArgs {
    /// Hold the first frame until the debugger attaches (up to 3 s)
    #[arg(long)]
    pub wait_for_attach: bool,
    /// Give the server our stderr (its log is then not recorded)
    #[arg(long)]
    pub inherit_stderr: bool,
    /// Frame ceiling in bytes (at least 1024); above it that direction becomes a raw pipe and
    /// the session keeps working
    #[arg(long, value_name = "N", default_value_t = crate::mcp_proxy::DEFAULT_MAX_FRAME_BYTES,
          value_parser = values::max_frame_bytes, allow_negative_numbers = true)]
    pub max_frame_bytes: usize,
    /// GraphMind port to report to (default 4747)
    #[arg(long, value_name = "N", value_parser = values::nonzero_port, allow_negative_numbers = true)]
    pub port: Option<u16>,
    /// Print one line per frame on stderr (works with no GraphMind running)
    #[arg(long)]
    pub trace: bool,
    /// The server's command (the first word of [`ProxyCli`]'s command line).
    #[arg(skip)]
    pub command: Option<String>,
    /// Its arguments.
    #[arg(skip)]
    pub args: Vec<String>,
}

/// `graphmind mcp-proxy [options] [--] <command> [args...]`: the first bare word starts the
/// server's command line, and everything after it is the server's.
#[derive(Debug, Args)]
pub struct ProxyCli {
    #[command(flatten)]
    pub args: ProxyArgs,
    /// The MCP server's command line (`--` before it is optional unless it starts with `-`)
    #[arg(value_name = "COMMAND", trailing_var_arg = true)]
    pub server: Vec<String>,
}

/// What `graphmind mcp-proxy --help` (and `mcp-proxy` with no command) ends with: a recipe
/// that works as written, with the port the proxy reports to.
pub fn proxy_recipe(port: u16) -> String {
    format!(
        "The proxy starts <command> as its child, relays every JSON-RPC line between your MCP host
and that server unchanged and in order, and records the conversation as one GraphMind run.
With no GraphMind server running it is a plain pipe.

Try it:
  graphmind --port {port}                                   # terminal 1: the debugger
  graphmind mcp-proxy -- npx -y @modelcontextprotocol/server-everything
  graphmind mcp-proxy --trace -- python -m my_server       # one stderr line per frame

Wrap a server your host already starts: move its command behind `--`.
  before: {{ \"command\": \"node\", \"args\": [\"/abs/path/server.js\"] }}
  after:  {{ \"command\": \"graphmind\", \"args\": [\"mcp-proxy\", \"--\", \"node\", \"/abs/path/server.js\"] }}
  Claude Code: claude mcp add my-server-debug -- graphmind mcp-proxy -- node /abs/path/server.js

Gates: a request can be held before the server sees it, a response before the host sees
it; JSON-RPC errors and isError results hold by default. Loop holds and the
GRAPHMIND_HIDE_* switches are read from this process's environment.
Nothing but the protocol is ever written to stdout."
    )
}
