//! The demo's recording: a real run of the trip planner (`examples/rust`), exported with
//! `graphmind record` and embedded in the binary. [`Recording::parse`] turns its events
//! into the tool calls the run made — name, input, each attempt's outcome and how long it
//! took, the pause between calls — and [`replay`] makes those calls again, through the
//! same gated [`call`] the live agent uses, so the holds (the loop guard on the third
//! search, pause-on-error on the booking) are the core's, not the recording's.

use graphmind_core::event::ErrorInfo;
use graphmind_core::json::{self, Value};
use graphmind_core::session::{Run, RunOutcome, Session};
use graphmind_example_agent::call;
use std::time::Duration;

/// The embedded recording (NDJSON, one envelope a line).
pub const TRIP_PLANNER: &str = include_str!("trip-planner.ndjson");
/// The longest pause between two calls a replay keeps (the recording's think time).
pub const MAX_GAP: Duration = Duration::from_millis(1_500);
/// The longest single attempt a replay keeps.
pub const MAX_ATTEMPT: Duration = Duration::from_secs(5);

/// What one attempt of a recorded call did.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    /// The output, or the error message.
    pub outcome: Result<Value, String>,
    /// How long it ran.
    pub took: Duration,
}

/// One recorded tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The tool's name.
    pub name: String,
    /// The input it was called with.
    pub input: Value,
    /// Its real attempts, in order (a call the debugger injected before it ran has none).
    pub attempts: Vec<Attempt>,
    /// The time between the previous call's end and this call's start.
    pub gap: Duration,
}

/// A parsed recording.
#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    /// The run's app.
    pub app: String,
    /// The run's name.
    pub run_name: String,
    /// The calls, in order.
    pub calls: Vec<Call>,
}

/// Why a recording cannot be replayed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RecordingError {
    /// A line is not a JSON envelope.
    #[error("line {0} of the recording is not a JSON envelope")]
    BadLine(usize),
    /// No tool call in it.
    #[error("the recording has no tool calls")]
    Empty,
}

fn ms(a: f64, b: f64) -> Duration {
    Duration::from_secs_f64(((b - a).max(0.0)) / 1000.0)
}

impl Recording {
    /// Reads the calls out of an exported run.
    pub fn parse(ndjson: &str) -> Result<Recording, RecordingError> {
        let mut rec = Recording {
            app: String::new(),
            run_name: String::new(),
            calls: Vec::new(),
        };
        // Per open call: its index and when its current attempt started.
        let mut open: Vec<(String, usize, f64)> = Vec::new();
        let mut last_end: Option<f64> = None;
        for (i, line) in ndjson
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let env = json::parse_str(line).map_err(|_| RecordingError::BadLine(i + 1))?;
            let ts = env
                .get("ts")
                .and_then(Value::as_f64)
                .ok_or(RecordingError::BadLine(i + 1))?;
            let p = env.get("payload").cloned().unwrap_or_default();
            let s = |k: &str| {
                p.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let inst = s("instanceId");
            match env.get("type").and_then(Value::as_str).unwrap_or_default() {
                "run.started" => {
                    rec.app = s("app");
                    rec.run_name = p
                        .get("meta")
                        .and_then(|m| m.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                }
                "node.started" if s("kind") == "tool" => {
                    let gap = last_end.map(|e| ms(e, ts)).unwrap_or_default().min(MAX_GAP);
                    rec.calls.push(Call {
                        name: s("name"),
                        input: p.get("input").cloned().unwrap_or_default(),
                        attempts: Vec::new(),
                        gap,
                    });
                    open.push((inst, rec.calls.len() - 1, ts));
                }
                "exec.resumed" => {
                    // A retry's attempt starts when the hold is released.
                    if let Some(o) = open.last_mut() {
                        o.2 = ts;
                    }
                }
                kind @ ("node.error" | "node.finished") => {
                    let Some(pos) = open.iter().position(|(id, _, _)| *id == inst) else {
                        continue;
                    };
                    let (_, idx, started) = open[pos].clone();
                    let took = ms(started, ts).min(MAX_ATTEMPT);
                    if kind == "node.error" {
                        let msg = p
                            .get("error")
                            .and_then(|e| e.get("message"))
                            .and_then(Value::as_str)
                            .unwrap_or("error")
                            .to_owned();
                        rec.calls[idx].attempts.push(Attempt {
                            outcome: Err(msg),
                            took,
                        });
                        open[pos].2 = ts;
                    } else {
                        if p.get("injected").and_then(Value::as_bool) != Some(true) {
                            rec.calls[idx].attempts.push(Attempt {
                                outcome: Ok(p.get("output").cloned().unwrap_or_default()),
                                took,
                            });
                        }
                        open.remove(pos);
                        last_end = Some(ts);
                    }
                }
                _ => {}
            }
        }
        if rec.calls.is_empty() {
            return Err(RecordingError::Empty);
        }
        Ok(rec)
    }

    /// The embedded trip-planner recording.
    pub fn embedded() -> Recording {
        // Checked by a unit test: the embedded file always parses.
        Recording::parse(TRIP_PLANNER).unwrap_or(Recording {
            app: "trip-planner".into(),
            run_name: "demo".into(),
            calls: Vec::new(),
        })
    }

    /// What attempt `n` (1-based) of call `idx` does: its own recorded attempt, else its
    /// last one, else (a call injected before it ran) the first real attempt of an
    /// earlier call to the same tool with the same input (the latest such call).
    pub fn attempt(&self, idx: usize, n: u32) -> Option<&Attempt> {
        let call = self.calls.get(idx)?;
        let n = (n.max(1) - 1) as usize;
        if let Some(a) = call.attempts.get(n).or(call.attempts.last()) {
            return Some(a);
        }
        self.calls[..idx]
            .iter()
            .rev()
            .find(|c| c.name == call.name && c.input == call.input)
            .and_then(|c| c.attempts.first())
    }
}

/// Replays `rec` on `run`: each call waits its recorded gap, then goes through the gates;
/// each attempt takes its recorded time and returns its recorded outcome. Returns the run's
/// outcome (the caller finishes the run).
pub fn replay(session: &Session, run: &Run, rec: &Recording) -> RunOutcome {
    let mut outcome = RunOutcome::Ok;
    for (idx, c) in rec.calls.iter().enumerate() {
        std::thread::sleep(c.gap);
        let mut tool = |_: &Value, n: u32| match rec.attempt(idx, n) {
            Some(a) => {
                std::thread::sleep(a.took);
                a.outcome.clone()
            }
            None => Err("the recording has no result for this call".to_owned()),
        };
        if let Err(e) = call(session, run, &c.name, &mut tool, c.input.clone()) {
            if idx + 1 == rec.calls.len() {
                outcome = RunOutcome::Error(ErrorInfo::new("ToolError", e.as_str()));
            }
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_recording_has_the_trip() {
        let rec = Recording::parse(TRIP_PLANNER).unwrap();
        assert_eq!(rec.app, "trip-planner");
        let names: Vec<&str> = rec.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "searchFlights",
                "searchFlights",
                "searchFlights",
                "checkWeather",
                "bookFlight"
            ]
        );
        // the looping third search was injected before it ran: it replays the previous one
        assert!(rec.calls[2].attempts.is_empty());
        assert_eq!(rec.attempt(2, 1), rec.calls[1].attempts.first());
        // the booking fails once, then succeeds; each attempt keeps its real time
        let book = &rec.calls[4];
        assert!(book.attempts[0].outcome.is_err() && book.attempts[1].outcome.is_ok());
        assert!(book
            .attempts
            .iter()
            .all(|a| a.took >= Duration::from_millis(300) && a.took <= MAX_ATTEMPT));
        assert_eq!(rec.attempt(4, 9), book.attempts.last());
    }

    #[test]
    fn bad_recordings() {
        assert_eq!(Recording::parse("{nope"), Err(RecordingError::BadLine(1)));
        assert_eq!(Recording::parse(""), Err(RecordingError::Empty));
    }
}
