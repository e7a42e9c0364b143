//! A small instrumented agent: plans a trip with three tools. It searches the same flights
//! three times in a row (the loop guard holds the third call when a debugger is attached)
//! and its booking tool fails once (the default pause-on-error holds it). Every tool call
//! goes through `graphmind_core::step::Step`, the same state machine every SDK uses.
//!
//! Environment: GRAPHMIND_URL (default ws://127.0.0.1:4747/ingest); the demo also sets
//! GRAPHMIND_DEMO_PAUSE_TIMEOUT_MS so that holds nobody answers continue by themselves.

use graphmind_core::config::{self, EnvSnapshot, Options, SdkFlavor, SdkInfo};
use graphmind_core::event::{ErrorInfo, NodeKind};
use graphmind_core::json::{parse_str, Value};
use graphmind_core::session::{NodeRef, Run, RunOutcome, Session, DEFAULT_READY_TIMEOUT};
use graphmind_core::step::{Next, Step};
use graphmind_core::warn::stderr_sink;
use std::time::Duration;

/// A tool: takes its JSON input, returns its JSON output or an error message.
type Tool = fn(&Value, u32) -> Result<Value, String>;

fn search_flights(input: &Value, _attempt: u32) -> Result<Value, String> {
    let to = input.get("to").and_then(Value::as_str).unwrap_or("?");
    Ok(parse_str(&format!(r#"[{{"flight":"GM101","to":"{to}","price":129.5}}]"#)).unwrap())
}

fn check_weather(input: &Value, _attempt: u32) -> Result<Value, String> {
    let city = input.get("city").and_then(Value::as_str).unwrap_or("?");
    Ok(parse_str(&format!(r#"{{"city":"{city}","forecast":"light rain","celsius":9}}"#)).unwrap())
}

fn book_flight(_input: &Value, attempt: u32) -> Result<Value, String> {
    if attempt == 1 {
        Err("seat map service timed out".into())
    } else {
        Ok(parse_str(r#"{"booking":"GM101-7F","status":"confirmed"}"#).unwrap())
    }
}

/// Calls one tool through its gates, as every GraphMind wrapper does.
fn call(session: &Session, run: &Run, name: &str, tool: Tool, input: Value) -> Result<Value, String> {
    let mut step = Step::start(session, Some(&run.run_id), NodeRef::new(NodeKind::Tool, name), None, Some(input.clone()), true);
    let mut args = input;
    let mut attempt = 0;
    let mut next = step.on_before(step.before().wait());
    loop {
        match next {
            Next::Run { input } => {
                if let Some(edited) = input {
                    args = edited;
                }
                attempt += 1;
                next = match tool(&args, attempt) {
                    Ok(output) => {
                        let decision = step.after().wait();
                        match step.on_after(decision, Some(output.clone())) {
                            Next::ReturnResult => return Ok(output),
                            other => other,
                        }
                    }
                    Err(message) => {
                        let decision = step.error(ErrorInfo::new("ToolError", message.as_str())).wait();
                        match step.on_error(decision) {
                            Next::Reraise => return Err(message),
                            other => other,
                        }
                    }
                };
            }
            Next::ReturnInjected(value) => return Ok(value),
            Next::ReturnResult => unreachable!("only after a result"),
            Next::Reraise => return Err("re-raised".into()),
            Next::Abort => return Err("aborted by the debugger".into()),
        }
    }
}

fn main() {
    let env = EnvSnapshot::from_process();
    let pause_timeout = env.get("GRAPHMIND_DEMO_PAUSE_TIMEOUT_MS").and_then(|v| v.parse::<f64>().ok());
    let options = Options {
        app_name: Some("trip-planner".into()),
        sdk: Some(SdkInfo { name: "graphmind-core".into(), version: env!("CARGO_PKG_VERSION").into() }),
        pause_timeout_ms: pause_timeout,
        ..Options::default()
    };
    let session = Session::new(config::resolve(&options, &env, SdkFlavor::Native), stderr_sink());
    let attached = session.ready(DEFAULT_READY_TIMEOUT);
    println!("agent: {}", if attached { "attached to the debugger" } else { "no debugger attached; running anyway" });

    let run = session.start_run("plan a trip to Oslo", None);
    println!("agent: run {}", run.run_id);
    let query = parse_str(r#"{"from":"Berlin","to":"Oslo","date":"2026-12-18"}"#).unwrap();
    let mut outcome = RunOutcome::Ok;
    for round in 1..=3 {
        match call(&session, &run, "searchFlights", search_flights, query.clone()) {
            Ok(found) => println!("agent: searchFlights #{round} -> {}", graphmind_core::json::to_string(&found)),
            Err(e) => println!("agent: searchFlights #{round} failed: {e}"),
        }
    }
    let weather = call(&session, &run, "checkWeather", check_weather, parse_str(r#"{"city":"Oslo"}"#).unwrap());
    println!("agent: checkWeather -> {}", weather.map(|v| graphmind_core::json::to_string(&v)).unwrap_or_else(|e| e));
    match call(&session, &run, "bookFlight", book_flight, parse_str(r#"{"flight":"GM101","seat":"7F"}"#).unwrap()) {
        Ok(booking) => println!("agent: bookFlight -> {}", graphmind_core::json::to_string(&booking)),
        Err(e) => {
            println!("agent: bookFlight failed: {e}");
            outcome = RunOutcome::Error(ErrorInfo::new("ToolError", e.as_str()));
        }
    }
    session.finish_run(&run, outcome);
    session.dispose(Duration::from_secs(2));
    println!("agent: done");
}
