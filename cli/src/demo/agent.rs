//! Starts one demo run against a GraphMind server on this machine: the trip planner, either
//! replayed from the embedded recording or run live (`--live`), in-process on the core. Used
//! by `graphmind demo` and by the viewer's "Start the demo" button (`POST /api/demo/start`).

use super::recording::{replay, Recording};
use graphmind_core::config::{self, EnvSnapshot, Options, SdkFlavor, SdkInfo};
use graphmind_core::session::{RunOutcome, Session};
use graphmind_core::warn::stderr_sink;
use graphmind_example_agent::{plan_trip, APP_NAME, RUN_NAME};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long the demo agent waits to attach to the server.
pub const ATTACH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a hold nobody answers stays held before the demo continues by itself (the
/// agent must not wait forever for a closed browser tab).
pub const DEMO_PAUSE_TIMEOUT_MS: f64 = 15.0 * 60.0 * 1000.0;
/// How long the agent's session may take to deliver its last events when the run ends.
pub const DISPOSE_DEADLINE: Duration = Duration::from_secs(2);
/// The `sdk.name` a demo run reports.
pub const DEMO_SDK: &str = "graphmind-demo";

/// Where the demo's tool results come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The recording embedded in the binary, with its real timing.
    Replay,
    /// The example agent's own tools, run now.
    Live,
}

impl Mode {
    /// `replay` or `live`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Replay => "replay",
            Mode::Live => "live",
        }
    }
}

/// A demo run under way.
pub struct Started {
    /// Its run id.
    pub run_id: String,
    /// Receives the run's outcome once it has finished and its events were delivered.
    pub done: crossbeam_channel::Receiver<RunOutcome>,
}

/// Whether a demo run started by `POST /api/demo/start` is still going (one at a time).
static SERVER_DEMO_RUNNING: AtomicBool = AtomicBool::new(false);

/// Attaches a demo agent to the server on `port` and starts its run on a thread.
pub fn start(port: u16, mode: Mode) -> Result<Started, String> {
    let options = Options {
        url: Some(format!("ws://127.0.0.1:{port}/ingest")),
        app_name: Some(APP_NAME.into()),
        sdk: Some(SdkInfo {
            name: DEMO_SDK.into(),
            version: crate::hub::VERSION.into(),
        }),
        pause_timeout_ms: Some(DEMO_PAUSE_TIMEOUT_MS),
        ..Options::default()
    };
    // The demo ignores the shell's GRAPHMIND_* variables: it always talks to this server.
    let session = Session::new(
        config::resolve(&options, &EnvSnapshot::new(), SdkFlavor::Native),
        stderr_sink(),
    );
    if !session.ready(ATTACH_TIMEOUT) {
        session.dispose(Duration::ZERO);
        return Err(format!(
            "the demo agent could not attach to the GraphMind server on port {port}"
        ));
    }
    let recording = Recording::embedded();
    let name = if mode == Mode::Replay && !recording.run_name.is_empty() {
        recording.run_name.clone()
    } else {
        RUN_NAME.to_owned()
    };
    let run = session.start_run(&name, None);
    let run_id = run.run_id.clone();
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("graphmind-demo".into())
        .spawn(move || {
            let outcome = match mode {
                Mode::Replay => replay(&session, &run, &recording),
                Mode::Live => plan_trip(&session, &run, false),
            };
            session.finish_run(&run, outcome.clone());
            session.dispose(DISPOSE_DEADLINE);
            let _ = tx.send(outcome);
        })
        .map_err(|e| format!("cannot start the demo agent: {e}"))?;
    Ok(Started { run_id, done: rx })
}

/// `POST /api/demo/start`: one replayed demo run at a time on this server. Returns the run
/// id, or why not.
pub fn start_for_viewer(port: u16) -> Result<String, String> {
    if SERVER_DEMO_RUNNING.swap(true, Ordering::SeqCst) {
        return Err("a demo run is already going on this server".into());
    }
    match start(port, Mode::Replay) {
        Ok(s) => {
            let done = s.done;
            let _ = std::thread::Builder::new()
                .name("graphmind-demo-watch".into())
                .spawn(move || {
                    let _ = done.recv();
                    SERVER_DEMO_RUNNING.store(false, Ordering::SeqCst);
                });
            Ok(s.run_id)
        }
        Err(e) => {
            SERVER_DEMO_RUNNING.store(false, Ordering::SeqCst);
            Err(e)
        }
    }
}
