//! `graphmind-cli`: the `graphmind` binary — a local GraphMind server that the SDKs attach
//! to (`/ingest`), that viewers watch and steer (`/ws/ui`), with an HTTP API and SQLite
//! storage — plus the `runs` and `record` commands.

pub mod args;
pub mod commands;
pub mod config;
pub mod envelope;
pub mod http;
pub mod hub;
pub mod mcp_proxy;
pub mod mcp_server;
pub mod payload_guard;
pub mod server;
pub mod storage;
pub mod util;
pub mod writer;

use args::Command;
use std::time::Duration;

/// Exit code for a usage error (unknown flag, bad value).
pub const EXIT_USAGE: i32 = 2;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn db_path(flag: Option<&str>) -> std::path::PathBuf {
    config::resolve_db_path(flag, env("GRAPHMIND_DB").as_deref(), env("HOME").as_deref())
}

/// Runs the command line `argv` (without the program name); returns the exit code.
pub fn main_with_args(argv: &[String]) -> i32 {
    match argv.first().map(String::as_str) {
        Some("mcp-proxy") => return mcp_proxy::main(&argv[1..]),
        Some("mcp") => return mcp_server::main(&argv[1..]),
        _ => {}
    }
    let cmd = match args::parse(argv) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("graphmind: {e}");
            eprintln!("Run \"graphmind --help\" for usage.");
            return EXIT_USAGE;
        }
    };
    match cmd {
        Command::Version => {
            println!("{}", hub::VERSION);
            0
        }
        Command::Help => {
            print!("{}", args::help_text(hub::VERSION));
            0
        }
        Command::Runs { db } => commands::runs(&db_path(db.as_deref())),
        Command::Record { run_id, db, out } => commands::record(&db_path(db.as_deref()), &run_id, out.as_deref()),
        Command::Serve(s) => serve(s),
    }
}

fn serve(s: args::ServeArgs) -> i32 {
    let raw_poe = s.pause_on_error.clone().or_else(|| env("GRAPHMIND_PAUSE_ON_ERROR"));
    let breakpoints = match config::parse_pause_on_error(raw_poe.as_deref()) {
        Ok(b) => b,
        Err(e) => {
            // A bad flag never gets here (args.rs); a bad variable is a warning + the default.
            eprintln!("graphmind: {e}; using the default");
            config::parse_pause_on_error(None).unwrap_or_default()
        }
    };
    let allowed_origins = env("GRAPHMIND_ALLOWED_ORIGINS")
        .map(|v| v.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    let db = db_path(s.db.as_deref());
    let server = match server::Server::bind(server::ServeConfig {
        port: s.port.unwrap_or(config::DEFAULT_PORT),
        db_path: db.clone(),
        breakpoints,
        grace: Duration::from_millis(config::abandon_grace_ms(env("GRAPHMIND_ABANDON_GRACE_MS").as_deref())),
        allowed_origins,
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("graphmind: {e}");
            return 1;
        }
    };
    let port = server.port();
    if s.json {
        println!("{}", server::json_line(port));
    } else {
        let url = format!("http://127.0.0.1:{port}");
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
            if scopes.is_empty() { "off".into() } else { scopes.join(", ") }
        );
        println!("Press Ctrl+C to stop.");
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    server.run();
    0
}
