//! `example-agent`: runs the trip planner (see the library) against `GRAPHMIND_URL`
//! (default ws://127.0.0.1:4747/ingest). GRAPHMIND_DEMO_PAUSE_TIMEOUT_MS makes holds
//! nobody answers continue by themselves.

use graphmind_core::config::{self, EnvSnapshot, Options, SdkFlavor, SdkInfo};
use graphmind_core::session::{Session, DEFAULT_READY_TIMEOUT};
use graphmind_core::warn::stderr_sink;
use graphmind_example_agent::{plan_trip, APP_NAME, RUN_NAME};
use std::time::Duration;

fn main() {
    let env = EnvSnapshot::from_process();
    let pause_timeout = env
        .get("GRAPHMIND_DEMO_PAUSE_TIMEOUT_MS")
        .and_then(|v| v.parse::<f64>().ok());
    let options = Options {
        app_name: Some(APP_NAME.into()),
        sdk: Some(SdkInfo {
            name: "graphmind-core".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }),
        pause_timeout_ms: pause_timeout,
        ..Options::default()
    };
    let session = Session::new(
        config::resolve(&options, &env, SdkFlavor::Native),
        stderr_sink(),
    );
    let attached = session.ready(DEFAULT_READY_TIMEOUT);
    println!(
        "agent: {}",
        if attached {
            "attached to the debugger"
        } else {
            "no debugger attached; running anyway"
        }
    );
    let run = session.start_run(RUN_NAME, None);
    println!("agent: run {}", run.run_id);
    let outcome = plan_trip(&session, &run, true);
    session.finish_run(&run, outcome);
    session.dispose(Duration::from_secs(2));
    println!("agent: done");
}
