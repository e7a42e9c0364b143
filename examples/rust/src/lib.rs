//! A small instrumented agent: plans a trip with three tools. It searches the same flights
//! three times in a row (the loop guard holds the third call when a debugger is attached)
//! and its booking tool fails once (the default pause-on-error holds it). Every tool call
//! goes through `graphmind_core::step::Step`, the same state machine every SDK uses.
//!
//! The binary (`example-agent`) runs it against `GRAPHMIND_URL`; `graphmind demo --live`
//! runs the same [`plan_trip`] in-process, and `graphmind demo` replays a recording of it
//! through the same [`call`].

use graphmind_core::event::{ErrorInfo, NodeKind};
use graphmind_core::json::{parse_str, to_string, Value};
use graphmind_core::session::{NodeRef, Run, RunOutcome, Session};
use graphmind_core::step::{Next, Step};
use std::time::Duration;

/// The app name the agent reports.
pub const APP_NAME: &str = "trip-planner";
/// The run's name.
pub const RUN_NAME: &str = "plan a trip to Oslo";
/// How long each pretend tool takes, as a network call would (so durations are real).
pub const TOOL_LATENCY: Duration = Duration::from_millis(350);

/// A tool: takes its JSON input and which attempt this is (1 = first), returns its JSON
/// output or an error message.
pub type Tool<'a> = &'a mut dyn FnMut(&Value, u32) -> Result<Value, String>;

fn search_flights(input: &Value, _attempt: u32) -> Result<Value, String> {
    std::thread::sleep(TOOL_LATENCY);
    let to = input.get("to").and_then(Value::as_str).unwrap_or("?");
    Ok(parse_str(&format!(
        r#"[{{"flight":"GM101","to":"{to}","price":129.5}}]"#
    ))
    .unwrap_or_default())
}

fn check_weather(input: &Value, _attempt: u32) -> Result<Value, String> {
    std::thread::sleep(TOOL_LATENCY);
    let city = input.get("city").and_then(Value::as_str).unwrap_or("?");
    Ok(parse_str(&format!(
        r#"{{"city":"{city}","forecast":"light rain","celsius":9}}"#
    ))
    .unwrap_or_default())
}

fn book_flight(_input: &Value, attempt: u32) -> Result<Value, String> {
    std::thread::sleep(TOOL_LATENCY);
    if attempt == 1 {
        Err("seat map service timed out".into())
    } else {
        Ok(parse_str(r#"{"booking":"GM101-7F","status":"confirmed"}"#).unwrap_or_default())
    }
}

/// Calls one tool through its gates, as every GraphMind wrapper does: `tool` runs once per
/// attempt (a `retry` runs it again), an `inject` returns the debugger's value instead.
pub fn call(
    session: &Session,
    run: &Run,
    name: &str,
    tool: Tool<'_>,
    input: Value,
) -> Result<Value, String> {
    let mut step = Step::start(
        session,
        Some(&run.run_id),
        NodeRef::new(NodeKind::Tool, name),
        None,
        Some(input.clone()),
        true,
    );
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
                        let decision = step
                            .error(ErrorInfo::new("ToolError", message.as_str()))
                            .wait();
                        match step.on_error(decision) {
                            Next::Reraise => return Err(message),
                            other => other,
                        }
                    }
                };
            }
            Next::ReturnInjected(value) => return Ok(value),
            Next::ReturnResult => return Err("the step returned a result it never had".into()),
            Next::Reraise => return Err("re-raised".into()),
            Next::Abort => return Err("aborted by the debugger".into()),
            Next::Raise(error) => return Err(error.message.to_string_lossy().into_owned()),
            Next::Stream(_) => return Err("a tool call is never a stream".into()),
        }
    }
}

/// Plans the trip on `run` (started on `session`, which should be attached already): five
/// tool calls; returns the run's outcome for the caller to finish it with. Prints what it
/// does on stdout when `verbose`.
pub fn plan_trip(session: &Session, run: &Run, verbose: bool) -> RunOutcome {
    let say = |line: String| {
        if verbose {
            println!("agent: {line}");
        }
    };
    let query =
        parse_str(r#"{"from":"Berlin","to":"Oslo","date":"2026-12-18"}"#).unwrap_or_default();
    let mut outcome = RunOutcome::Ok;
    for round in 1..=3 {
        match call(
            session,
            run,
            "searchFlights",
            &mut search_flights,
            query.clone(),
        ) {
            Ok(found) => say(format!("searchFlights #{round} -> {}", to_string(&found))),
            Err(e) => say(format!("searchFlights #{round} failed: {e}")),
        }
    }
    let city = parse_str(r#"{"city":"Oslo"}"#).unwrap_or_default();
    let weather = call(session, run, "checkWeather", &mut check_weather, city);
    say(format!(
        "checkWeather -> {}",
        weather.map(|v| to_string(&v)).unwrap_or_else(|e| e)
    ));
    let seat = parse_str(r#"{"flight":"GM101","seat":"7F"}"#).unwrap_or_default();
    match call(session, run, "bookFlight", &mut book_flight, seat) {
        Ok(booking) => say(format!("bookFlight -> {}", to_string(&booking))),
        Err(e) => {
            say(format!("bookFlight failed: {e}"));
            outcome = RunOutcome::Error(ErrorInfo::new("ToolError", e.as_str()));
        }
    }
    outcome
}
