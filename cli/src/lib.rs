//! `graphmind-cli`: the `graphmind` binary — a local GraphMind server that the SDKs attach
//! to (`/ingest`), that viewers watch and steer (`/ws/ui`), with an HTTP API and SQLite
//! storage — plus the `runs` and `record` commands.

pub mod args;
pub mod browser;
pub mod commands;
pub mod config;
pub mod control_api;
pub mod control_cli;
pub mod demo;
pub mod envelope;
pub mod export;
pub mod export_html;
pub mod guards;
pub mod http;
pub mod hub;
pub mod hub_task;
pub mod import;
pub mod init;
pub mod logging;
pub mod mcp_proxy;
pub mod mcp_server;
pub mod migrations;
pub mod otlp_config;
pub mod otlp_export;
pub mod otlp_map;
pub mod payload_guard;
pub mod replay_cmd;
pub mod retention;
pub mod routes;
pub mod security;
pub mod server;
pub mod skill;
pub mod sockets;
pub mod spool_import;
pub mod storage;
pub mod storage_health;
pub mod telemetry;
pub mod tokens;
pub mod util;
pub mod write_timeout;
pub mod writer;

use args::Command;
use graphmind_core::config::ServerFlags;
use std::time::Duration;

/// Exit code for a usage error (unknown flag, bad value). `pauses`, `wait` and `resume`
/// use 1, because their 2 means "timeout" (see `control_cli`).
pub const EXIT_USAGE: i32 = 2;

/// The resolved configuration for a command that takes `--db` (and the prune flags).
fn config_for(flags: ServerFlags) -> Result<graphmind_core::config::ServerConfig, i32> {
    config::resolve(&flags).map_err(|e| {
        eprintln!("graphmind: {e}");
        EXIT_USAGE
    })
}

/// Runs the command line `argv` (without the program name); returns the exit code.
pub fn main_with_args(argv: &[String]) -> i32 {
    let cmd = match args::parse(argv) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    if matches!(
        cmd,
        Command::Version
            | Command::Help(_)
            | Command::Runs(_)
            | Command::Record(_)
            | Command::Completions(_)
    ) {
        die_quietly_on_closed_stdout();
    }
    if !matches!(
        cmd,
        Command::Serve(_) | Command::Demo(_) | Command::Mcp(_) | Command::McpProxy(_)
    ) {
        // a long-running server keeps serving when one print fails
        report_failed_stdout_as_an_error();
    }
    match cmd {
        Command::Version => {
            println!("{}", hub::VERSION);
            0
        }
        Command::Help(h) if h.to_stderr => {
            eprint!("{}", h.text);
            0
        }
        Command::Help(h) => {
            print!("{}", h.text);
            0
        }
        Command::Completions(shell) => {
            args::completions(shell, &mut std::io::stdout());
            0
        }
        Command::Mcp(a) => mcp_server::main(a),
        Command::McpProxy(a) => mcp_proxy::main(a),
        Command::Runs(r) => match config_for(ServerFlags {
            db: r.db.clone(),
            ..Default::default()
        }) {
            Ok(c) => {
                telemetry::record_command("runs", &c);
                commands::runs(&c.db_path, &r)
            }
            Err(code) => code,
        },
        Command::Record(r) => match config_for(ServerFlags {
            db: r.db.clone(),
            ..Default::default()
        }) {
            Ok(c) => {
                telemetry::record_command("record", &c);
                export::record(&c.db_path, &r)
            }
            Err(code) => code,
        },
        Command::Import { file, db } => match config_for(ServerFlags {
            db,
            ..Default::default()
        }) {
            Ok(c) => {
                telemetry::record_command("import", &c);
                import::import_file(&c.db_path, &file)
            }
            Err(code) => code,
        },
        Command::ImportSpool { dir, db } => match config_for(ServerFlags {
            db,
            ..Default::default()
        }) {
            Ok(c) => {
                telemetry::record_command("import", &c);
                spool_import::import_spool(&c.db_path, &dir)
            }
            Err(code) => code,
        },
        Command::Pauses(a) => {
            control_telemetry("pauses");
            control_cli::pauses(&a)
        }
        Command::Wait(a) => {
            control_telemetry("wait");
            control_cli::wait(&a)
        }
        Command::Resume(a) => {
            control_telemetry("resume");
            control_cli::resume(&a)
        }
        Command::Serve(s) => serve(s),
        Command::Demo(a) => demo::main(&a),
        Command::Replay(a) => {
            control_telemetry("replay");
            replay_cmd::main(&a)
        }
        Command::Init(a) => {
            control_telemetry("init");
            init::main(&a)
        }
        Command::Skill { install, force } => {
            control_telemetry("skill");
            skill::main(install, force)
        }
        Command::Open { port, open } => match config_for(ServerFlags::default()) {
            Ok(c) => {
                telemetry::record_command("open", &c);
                browser::open_command(port, open, &c.home)
            }
            Err(code) => code,
        },
    }
}

/// Prints a usage error in the words and with the exit code of the command it was for:
/// `mcp` and `mcp-proxy` name themselves, `pauses` / `wait` / `resume` exit 1 (their 2 is
/// "timeout"), every other command exits [`EXIT_USAGE`].
fn usage_error(e: &args::UsageError) -> i32 {
    match e.command.as_deref() {
        Some(name @ ("mcp" | "mcp-proxy")) => {
            eprintln!("graphmind {name}: {e}");
            eprintln!("Run \"graphmind {name} --help\" for usage.");
            EXIT_USAGE
        }
        command => {
            eprintln!("graphmind: {e}");
            eprintln!("Run \"graphmind --help\" for usage.");
            if matches!(command, Some("pauses" | "wait" | "resume")) {
                control_cli::EXIT_USAGE_CONTROL
            } else {
                EXIT_USAGE
            }
        }
    }
}

fn control_telemetry(event: &str) {
    if let Ok(c) = config::resolve(&ServerFlags::default()) {
        telemetry::record_command(event, &c);
    }
}

static SHUTDOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    SHUTDOWN.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// A command that only prints (`runs`, `record`, `--help`, `--version`) ends quietly when its
/// reader goes away (`graphmind runs | head -1`), as Unix tools do: SIGPIPE back to its
/// default instead of Rust's ignore, under which `println!` panicked (exit 101).
fn die_quietly_on_closed_stdout() {
    // SAFETY: restoring a signal's default disposition has no handler to be unsafe in.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Exit code of a command whose standard output could not be written (a full disk, `> /dev/full`).
pub const EXIT_STDOUT_FAILED: i32 = 1;

/// A write to standard output that fails for another reason than a closed reader (a full
/// disk, `graphmind runs > /dev/full`) ends the command with one clear line and
/// [`EXIT_STDOUT_FAILED`], not with `println!`'s panic and its backtrace (exit 101). Any
/// other panic keeps the default report.
fn report_failed_stdout_as_an_error() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(cause) = message.strip_prefix("failed printing to stdout: ") {
            eprintln!("graphmind: cannot write to standard output: {cause}");
            std::process::exit(EXIT_STDOUT_FAILED);
        }
        default_hook(info);
    }));
}

/// Ctrl-C, SIGTERM and SIGHUP set [`SHUTDOWN`] (see [`spawn_shutdown_watcher`]).
pub(crate) fn install_signal_handlers() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGHUP, on_signal as *const () as libc::sighandler_t);
    }
}

fn serve(s: args::ServeArgs) -> i32 {
    logging::init(s.log_level);
    let flags = ServerFlags {
        db: s.db.clone(),
        pause_on_error: s.pause_on_error.clone(),
        keep: s.keep,
        days: s.days,
        ..Default::default()
    };
    let cfg = match config_for(flags) {
        Ok(c) => c,
        Err(code) => return code,
    };
    for w in &cfg.warnings {
        tracing::warn!("graphmind: {w}");
    }
    let otlp =
        match otlp_config::resolve(s.otlp_endpoint.as_deref(), s.otlp_no_redact_secrets, |k| {
            std::env::var(k).ok()
        }) {
            Ok(c) => c,
            // Asked for on the command line: a usage error. Only from the environment: a
            // warning and no export (an unusable variable must not stop a server starting).
            Err(e) if s.otlp_endpoint.is_some() => {
                eprintln!("graphmind serve: {e}");
                return EXIT_USAGE;
            }
            Err(e) => {
                tracing::warn!("graphmind: {e}; OTLP export is off");
                None
            }
        };
    let otlp_url = otlp.as_ref().map(|c| c.url.clone());
    telemetry::record_command("serve", &cfg);
    install_signal_handlers();
    if cfg.retention {
        retention::startup_prune(&cfg.db_path, cfg.keep_runs, cfg.keep_days);
    }
    pick_up_spools(&cfg.db_path, s.spool_dir.as_deref(), &cfg.home);
    let tokens = match tokens::Tokens::generate() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("graphmind: cannot make the viewer and agent tokens: {e}");
            return 1;
        }
    };
    let policy = tokens::ControlPolicy {
        agent_level: s.allow_control.unwrap_or_default(),
        edit_input: !s.no_edit_input,
    };
    let db = cfg.db_path.clone();
    let server = match server::Server::bind(server::ServeConfig {
        port: s.port.unwrap_or(config::DEFAULT_PORT),
        db_path: db.clone(),
        breakpoints: config::breakpoints_for(&cfg.pause_on_error),
        grace: Duration::from_millis(cfg.abandon_grace_ms),
        allowed_origins: cfg.allowed_origins.clone(),
        policy,
        tokens: tokens.clone(),
        otlp,
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("graphmind: {e}");
            return 1;
        }
    };
    let port = server.port();
    let url = format!("http://127.0.0.1:{port}");
    // Fail-open: without run files there is no CLI control and no token link, but the
    // server still serves.
    let run_files = match tokens::write_run_files(&cfg.home, port, &url, &tokens, hub::VERSION) {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!("graphmind: cannot write the run files in {}: {e} (graphmind resume and the token link are unavailable)", tokens::run_dir(&cfg.home).display());
            None
        }
    };
    if s.json {
        println!("{}", server::json_line(port));
        // `--json` is for scripts and coding agents: a browser only when asked with --open.
        if let Some(f) = run_files
            .as_ref()
            .filter(|_| s.open_explicit && browser::may_open(s.open).is_ok())
        {
            let _ = browser::open_file(&f.opener_path);
        }
    } else {
        println!("GraphMind v{} listening on {url}", hub::VERSION);
        println!("  ingest   ws://127.0.0.1:{port}/ingest");
        println!("  ui ws    ws://127.0.0.1:{port}/ws/ui");
        println!("  db       {}", db.display());
        let scopes: Vec<String> = server
            .breakpoints()
            .iter()
            .filter(|m| m.get("point").and_then(|p| p.as_str()) == Some("error"))
            .map(|m| match m.get("kind").and_then(|k| k.as_str()) {
                Some(k) => format!("{k} nodes"),
                None => "every node".into(),
            })
            .collect();
        println!(
            "  pause    on error: {} (--pause-on-error <on|off|kind>)",
            if scopes.is_empty() {
                "off".into()
            } else {
                scopes.join(", ")
            }
        );
        if let Some(f) = &run_files {
            println!("  viewer   open {} (a private link carrying the viewer token; `graphmind open` prints it)", f.opener_path.display());
        }
        println!(
            "  control  agent token: --allow-control={} (graphmind pauses | wait | resume)",
            policy.agent_level.as_str()
        );
        if let Some(f) = &run_files {
            println!("  browser  {}", browser::open_line(s.open, &f.opener_path));
        }
        if let Some(u) = &otlp_url {
            println!("  otlp     exporting spans to {u}");
        }
        println!("Press Ctrl+C to stop.");
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    spawn_shutdown_watcher(Some(server.shared()), run_files, Vec::new());
    server.run();
    0
}

/// Stores the spools that apps which died left behind (docs/spool.md), before the server
/// listens, so nothing else writes the database meanwhile. Fail-open: a spool that cannot be
/// stored stays where it is and the server starts anyway.
fn pick_up_spools(db: &std::path::Path, flag: Option<&str>, home: &std::path::Path) {
    let env = std::env::var("GRAPHMIND_SPOOL_DIR").ok();
    let dirs = spool_import::serve_dirs(flag, env.as_deref(), home);
    let conn = match storage::open(db) {
        Ok(c) => c,
        Err(_) => return,
    };
    match spool_import::pick_up(&conn, &dirs) {
        Ok(s) if s.spools > 0 => tracing::info!("graphmind: {}", s.line()),
        Ok(_) => {}
        Err(e) => tracing::warn!("graphmind: cannot store a left spool ({e}); it stays on disk for `graphmind import --spool`"),
    }
}

/// Closes every socket with 1001, stores what is queued, removes the run files.
pub(crate) fn shutdown(shared: &hub::Shared, run_files: Option<&tokens::RunFiles>) {
    server::close_sockets(shared, server::SHUTDOWN_CLOSE_GRACE);
    let (tx, rx) = crossbeam_channel::bounded(1);
    if shared.writer.send(writer::Op::Flush(tx)).is_ok() {
        let _ = rx.recv_timeout(Duration::from_secs(5));
    }
    if let Some(x) = &shared.otlp {
        x.shutdown_flush();
    }
    if let Some(f) = run_files {
        f.remove();
    }
}

/// A thread that, once a signal set [`SHUTDOWN`], shuts the server down (when this process
/// runs one), deletes `extra` files, and exits 0.
pub(crate) fn spawn_shutdown_watcher(
    shared: Option<std::sync::Arc<hub::Shared>>,
    run_files: Option<tokens::RunFiles>,
    extra: Vec<std::path::PathBuf>,
) {
    std::thread::Builder::new()
        .name("graphmind-signals".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(50));
            if SHUTDOWN.load(std::sync::atomic::Ordering::SeqCst) {
                if let Some(shared) = &shared {
                    shutdown(shared, run_files.as_ref());
                }
                for f in &extra {
                    let _ = std::fs::remove_file(f);
                }
                std::process::exit(0);
            }
        })
        .ok();
}
