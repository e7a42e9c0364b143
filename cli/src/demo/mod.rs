//! `graphmind demo [--live] [--port N] [--no-open] [--interactive]`: the first five minutes.
//!
//! Uses the GraphMind server already running on the port (4747 by default), or starts one
//! in this process on the default database; attaches the trip-planner agent (the embedded
//! recording replayed with its real timing, or with `--live` the example agent's own tools),
//! prints the viewer link with its token and opens it. The agent is held twice — its third
//! identical `searchFlights` (a loop) and the failing `bookFlight` (an error) — for the
//! newcomer to press Continue / Inject / Retry. With a terminal the server then keeps
//! running until Ctrl-C; without one (CI, `make demo` in a pipe) the demo resolves both
//! holds itself (inject, retry), prints what was recorded, and exits.

pub mod agent;
pub mod recording;

use crate::args::DemoArgs;
use crate::browser;
use crate::config::{self, DEFAULT_PORT};
use crate::control_cli::{enc, request};
use crate::tokens::{self, ControlPolicy, Tokens};
use crate::{hub, server, EXIT_USAGE};
use graphmind_core::config::{PauseOnError, ServerFlags};
use graphmind_core::json::{self, Map, Value};
use graphmind_core::session::RunOutcome;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long one long-poll for the run's next hold waits.
pub const HOLD_POLL: Duration = Duration::from_secs(20);
/// How long a demo without a terminal may take, start to finish, before it gives up.
pub const AUTO_DEADLINE: Duration = Duration::from_secs(120);
/// How long a probe of the port (`GET /health`) may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Slack on top of a long-poll's own wait before the demo gives up on the answer.
pub const POLL_SLACK: Duration = Duration::from_secs(5);
/// How long the demo waits for the app's answer to its own resume (the server's default
/// resume wait is 30 s).
pub const RESUME_TIMEOUT: Duration = Duration::from_secs(35);
/// How long the agent may take to report its outcome once the run has ended.
pub const OUTCOME_WAIT: Duration = Duration::from_secs(10);
/// What the demo injects at the loop hold when it plays the developer itself.
pub const LOOP_INJECTION: &str = r#"[{"flight":"GM101","to":"Oslo","price":129.5,"note":"same result as before: stop searching"}]"#;

/// The server the demo talks to.
struct Target {
    port: u16,
    /// The viewer token (full control).
    viewer_token: String,
    /// Started by this process (then it owns the run files).
    own: Option<Own>,
}

struct Own {
    db: PathBuf,
    shared: std::sync::Arc<hub::Shared>,
    files: Option<tokens::RunFiles>,
}

/// What is on a port.
enum Probe {
    Nothing,
    GraphMind,
    Other,
}

fn probe(port: u16) -> Probe {
    match request(port, "GET", "/health", "", "", PROBE_TIMEOUT) {
        Err(_) => Probe::Nothing,
        Ok(r) if r.body.get("name").and_then(Value::as_str) == Some("graphmind-ai") => {
            Probe::GraphMind
        }
        Ok(_) => Probe::Other,
    }
}

fn token_of(viewer_url: &str) -> Option<String> {
    let t = viewer_url.split("#token=").nth(1)?;
    Some(t.split('&').next().unwrap_or(t).to_owned())
}

/// Finds or starts the server. `Err` is (message, exit code).
fn target(
    a: &DemoArgs,
    home: &Path,
    db: PathBuf,
    grace: Duration,
    origins: graphmind_core::config::AllowedOrigins,
) -> Result<Target, (String, i32)> {
    let port = a.port.unwrap_or(DEFAULT_PORT);
    if port != 0 {
        match probe(port) {
            Probe::GraphMind => {
                tokens::read_run_file(home, port).map_err(|e| {
                    (format!("a GraphMind server runs on port {port}, but not as this user (or with another GRAPHMIND_HOME): {}. Stop it, or pick another port with --port.", e.message), 1)
                })?;
                let viewer_token = tokens::read_viewer_url(home, port).ok().as_deref().and_then(token_of).ok_or_else(|| {
                    (format!("the GraphMind server on port {port} has no readable viewer link in {}; restart it, or pick another port with --port", tokens::opener_path(home, port).display()), 1)
                })?;
                if a.db.is_some() {
                    eprintln!("graphmind demo: --db applies only when the demo starts the server; recording into the server already running on port {port}");
                }
                return Ok(Target {
                    port,
                    viewer_token,
                    own: None,
                });
            }
            Probe::Other => {
                return Err((format!("port {port} is taken by something that is not GraphMind; pick a free one with --port (e.g. --port {})", port.saturating_add(1)), 1));
            }
            Probe::Nothing => {}
        }
    }
    let tokens = Tokens::generate()
        .map_err(|e| (format!("cannot make the viewer and agent tokens: {e}"), 1))?;
    let server = server::Server::bind(server::ServeConfig {
        port,
        db_path: db.clone(),
        // The demo's second hold is pause-on-error: armed whatever GRAPHMIND_PAUSE_ON_ERROR says.
        breakpoints: config::breakpoints_for(&PauseOnError::On),
        grace,
        allowed_origins: origins,
        policy: ControlPolicy::default(),
        tokens: tokens.clone(),
        otlp: None,
    })
    .map_err(|e| (e, 1))?;
    let port = server.port();
    let url = format!("http://127.0.0.1:{port}");
    let files = match tokens::write_run_files(home, port, &url, &tokens, hub::VERSION) {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("graphmind demo: cannot write the run files in {}: {e} (graphmind open / resume will not find this server)", tokens::run_dir(home).display());
            None
        }
    };
    let shared = server.shared();
    std::thread::Builder::new()
        .name("graphmind-accept".into())
        .spawn(move || server.run())
        .map_err(|e| (e.to_string(), 1))?;
    Ok(Target {
        port,
        viewer_token: tokens.viewer,
        own: Some(Own { db, shared, files }),
    })
}

fn stdin_is_terminal() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(0) == 1 }
}

/// One hold the demo saw: (pause id, node, point, reason).
type Hold = (String, String, String, String);

fn holds_of(body: &Value) -> Vec<Hold> {
    let s = |p: &Value, k: &str| {
        p.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match body.get("pauses") {
        Some(Value::Array(ps)) => ps
            .iter()
            .filter(|p| {
                p.get("state")
                    .and_then(Value::as_str)
                    .is_none_or(|st| st == "open")
            })
            .map(|p| {
                (
                    s(p, "pauseId"),
                    s(p, "nodeId"),
                    s(p, "point"),
                    s(p, "reason"),
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The action the demo takes itself at a hold, and its body.
fn decision(reason: &str) -> (&'static str, String) {
    let mut body = Map::new();
    let action = match reason {
        "loop" => {
            body.insert(
                "output",
                json::parse_str(LOOP_INJECTION).unwrap_or_default(),
            );
            "inject"
        }
        "error" => "retry",
        _ => "continue",
    };
    body.insert("action", Value::from(action));
    body.insert("operator", Value::from("graphmind demo"));
    (action, json::to_string(&Value::Object(body)))
}

/// Follows the run's holds until it ends: prints each, and resolves it when `auto`.
fn follow(
    t: &Target,
    run: &str,
    auto: bool,
    done: &crossbeam_channel::Receiver<RunOutcome>,
) -> Option<RunOutcome> {
    let auth = format!("Authorization: Bearer {}\r\n", t.viewer_token);
    let mut seen: Vec<String> = Vec::new();
    let started = Instant::now();
    loop {
        if let Ok(o) = done.try_recv() {
            return Some(o);
        }
        if auto && started.elapsed() > AUTO_DEADLINE {
            eprintln!(
                "graphmind demo: the run did not finish within {} s",
                AUTO_DEADLINE.as_secs()
            );
            return None;
        }
        let path = format!(
            "/api/pauses?runId={}&wait={}",
            enc(run),
            HOLD_POLL.as_secs()
        );
        let reply = match request(t.port, "GET", &path, &auth, "", HOLD_POLL + POLL_SLACK) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("graphmind demo: {e}");
                return done.recv_timeout(OUTCOME_WAIT).ok();
            }
        };
        for (pause, node, point, reason) in holds_of(&reply.body) {
            if seen.contains(&pause) {
                continue;
            }
            seen.push(pause.clone());
            let why = if reason == "loop" {
                "the same call a third time: a loop"
            } else if reason == "error" {
                "it failed"
            } else {
                "a breakpoint"
            };
            if !auto {
                println!("demo: held {node} at {point} ({why}) — press Continue, Inject or Retry in the viewer");
                continue;
            }
            let (action, body) = decision(&reason);
            println!("demo: held {node} at {point} ({why}) -> {action}");
            let path = format!("/api/runs/{}/pauses/{}/resume", enc(run), enc(&pause));
            let headers = format!("Content-Type: application/json\r\n{auth}");
            match request(t.port, "POST", &path, &headers, &body, RESUME_TIMEOUT) {
                Ok(r) if r.status == 200 => {}
                Ok(r) => eprintln!(
                    "graphmind demo: resume answered {}: {}",
                    r.status,
                    json::to_string(&r.body)
                ),
                Err(e) => eprintln!("graphmind demo: {e}"),
            }
        }
        if reply
            .body
            .get("run")
            .and_then(|r| r.get("status"))
            .and_then(Value::as_str)
            .is_some_and(|s| s != "running")
        {
            return done.recv_timeout(OUTCOME_WAIT).ok();
        }
    }
}

/// `graphmind demo`. Returns the exit code.
pub fn main(a: &DemoArgs) -> i32 {
    crate::logging::init(None); // the log of the server the demo may start
    let cfg = match config::resolve(&ServerFlags {
        db: a.db.clone(),
        ..Default::default()
    }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("graphmind demo: {e}");
            return EXIT_USAGE;
        }
    };
    crate::telemetry::record_command("demo", &cfg);
    crate::install_signal_handlers();
    let t = match target(
        a,
        &cfg.home,
        cfg.db_path.clone(),
        Duration::from_millis(cfg.abandon_grace_ms),
        cfg.allowed_origins.clone(),
    ) {
        Ok(t) => t,
        Err((message, code)) => {
            eprintln!("graphmind demo: {message}");
            return code;
        }
    };
    let page = tokens::run_dir(&cfg.home).join(format!("demo-{}.html", t.port));
    crate::spawn_shutdown_watcher(
        t.own.as_ref().map(|o| o.shared.clone()),
        t.own.as_ref().and_then(|o| o.files.clone()),
        vec![page.clone()],
    );
    let mode = if a.live {
        agent::Mode::Live
    } else {
        agent::Mode::Replay
    };
    let started = match agent::start(t.port, mode) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("graphmind demo: {e}");
            return 1;
        }
    };
    let base = format!("http://127.0.0.1:{}", t.port);
    let link = tokens::viewer_url(&base, &t.viewer_token, Some(&started.run_id));
    let auto = !(a.interactive || (stdin_is_terminal() && !browser::in_ci()));
    println!(
        "GraphMind demo: the trip-planner agent, {}",
        if a.live {
            "live (its own tools, in this process)"
        } else {
            "replayed from a recording with its real timing"
        }
    );
    match &t.own {
        Some(own) => println!(
            "  server   {base} (started by this demo; database {})",
            own.db.display()
        ),
        None => println!("  server   {base} (already running; recording into its database)"),
    }
    println!("  run      {}", started.run_id);
    println!("  viewer   {link}");
    let opened = match tokens::write_private_file(&page, &tokens::opener_html(&link)) {
        Ok(()) if auto => format!("browser not opened (no terminal: the demo releases both holds itself; --interactive leaves them to you); open {}", page.display()),
        Ok(()) => browser::open_line(a.open, &page),
        Err(e) => format!("browser not opened (cannot write {}: {e})", page.display()),
    };
    println!("  browser  {opened}");
    if auto {
        println!("demo: no terminal here, so the demo plays the developer: it injects a result at the loop and retries the failed booking.");
    } else {
        println!("demo: the agent will be held twice — at its third identical searchFlights (a loop) and when bookFlight fails (an error). Ctrl-C stops the demo.");
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let outcome = follow(&t, &started.run_id, auto, &started.done);
    let status = match &outcome {
        Some(RunOutcome::Ok) => "ok",
        Some(_) => "error",
        None => "unfinished",
    };
    println!("demo: run {} finished: {status}", started.run_id);
    println!(
        "demo: list it with `graphmind runs`, export it with `graphmind record {}`",
        started.run_id
    );
    if let Some(own) = &t.own {
        if !auto {
            println!(
                "demo: the server keeps running so you can look around; press Ctrl-C to stop it."
            );
            let _ = std::io::stdout().flush();
            loop {
                std::thread::park();
            }
        }
        crate::shutdown(&own.shared, own.files.as_ref());
    }
    let _ = std::fs::remove_file(&page);
    if status == "ok" {
        0
    } else {
        1
    }
}
