//! What to replay: the `replay` session option and the `GRAPHMIND_REPLAY*` variables,
//! read into a [`ReplaySpec`]. Pure: the recording itself is loaded later, on first use
//! ([`super::Replayer`]).

use crate::config::EnvSnapshot;
use crate::json::{self, Value};

/// Where the recording comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplaySource {
    /// An exported run (`graphmind record RUN_ID --no-redact-secrets`): NDJSON, one
    /// envelope a line. Needs no server.
    File(String),
    /// A run stored by the server the app attaches to, fetched over its HTTP API
    /// (`GET /api/runs/<id>/events`).
    Run(String),
}

/// The call at which a replay goes live: the `n`-th execution (1-based) of `node_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkPoint {
    /// The logical node (`tool:search`, `llm:step`).
    pub node_id: String,
    /// Which of its executions, counted from 1 in the order they started.
    pub n: u32,
}

impl ForkPoint {
    /// `<nodeId>#<n>` (the last `#` splits; `n` a whole number >= 1).
    pub fn parse(text: &str) -> Option<ForkPoint> {
        let (node, n) = text.trim().rsplit_once('#')?;
        let n: u32 = n.parse().ok().filter(|n| *n >= 1)?;
        (!node.is_empty()).then(|| ForkPoint {
            node_id: node.to_string(),
            n,
        })
    }

    /// `<nodeId>#<n>`.
    pub fn to_text(&self) -> String {
        format!("{}#{}", self.node_id, self.n)
    }
}

/// A resolved replay request.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplaySpec {
    /// The recording.
    pub source: ReplaySource,
    /// Where to go live (`None`: replay everything that matches).
    pub fork: Option<ForkPoint>,
    /// The output the execution just before the fork point returns instead of its
    /// recorded one.
    pub output: Option<Value>,
}

/// `GRAPHMIND_REPLAY`: `<run id>[@<nodeId>#<n>]`.
pub const ENV_REPLAY: &str = "GRAPHMIND_REPLAY";
/// `GRAPHMIND_REPLAY_FILE`: the path of an exported run.
pub const ENV_REPLAY_FILE: &str = "GRAPHMIND_REPLAY_FILE";
/// `GRAPHMIND_REPLAY_FROM`: `<nodeId>#<n>`, the fork point (with either source).
pub const ENV_REPLAY_FROM: &str = "GRAPHMIND_REPLAY_FROM";
/// `GRAPHMIND_REPLAY_OUTPUT`: JSON, the edited output of the execution before the fork.
pub const ENV_REPLAY_OUTPUT: &str = "GRAPHMIND_REPLAY_OUTPUT";

/// `<run id>[@<nodeId>#<n>]` -> the run id and the fork point, if any. A suffix that is not
/// a fork point is refused (`Err` says why).
pub fn parse_run_ref(text: &str) -> Result<(String, Option<ForkPoint>), String> {
    let text = text.trim();
    let (run, fork) = match text.split_once('@') {
        Some((run, fork)) => {
            let point = ForkPoint::parse(fork)
                .ok_or_else(|| format!("{fork:?} is not <nodeId>#<n> (n a whole number >= 1)"))?;
            (run, Some(point))
        }
        None => (text, None),
    };
    if run.is_empty()
        || !run
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(format!("{run:?} is not a run id"));
    }
    Ok((run.to_string(), fork))
}

/// The replay the option (beats the environment) or the variables ask for. `option` is
/// the `replay` option as given: `"<run id>[@<nodeId>#<n>]"`, or an object `{run?, file?,
/// source?, from?, output?}` (`source`, the test helpers' argument: a file when such a file
/// exists, else a run reference). Each value that cannot be used adds a warning and is left out; no
/// usable source means no replay (the app runs live).
pub fn resolve(
    option: Option<&Value>,
    env: &EnvSnapshot,
    w: &mut Vec<String>,
) -> Option<ReplaySpec> {
    let mut output = None;
    let (run, file, from) = match option {
        Some(Value::String(s)) => (Some(s.to_string_lossy().into_owned()), None, None),
        Some(Value::Object(m)) => {
            let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
            output = m.get("output").cloned();
            let (mut run, mut file) = (text("run"), text("file"));
            if let Some(source) = text("source").filter(|_| run.is_none() && file.is_none()) {
                if std::path::Path::new(&source).is_file() {
                    file = Some(source);
                } else if parse_run_ref(&source).is_ok() {
                    run = Some(source);
                } else {
                    w.push(format!(
                        "replay: {source:?} is neither a file nor a run id; running live"
                    ));
                    return None;
                }
            }
            (run, file, text("from"))
        }
        Some(Value::Null) | None => {
            if let Some(raw) = env.get_non_empty(ENV_REPLAY_OUTPUT) {
                match json::parse_str(raw) {
                    Ok(v) => output = Some(v),
                    Err(e) => w.push(format!(
                        "replay: {ENV_REPLAY_OUTPUT} is not JSON ({e}); the recorded output is used"
                    )),
                }
            }
            let var = |k: &str| env.get_non_empty(k).map(str::to_string);
            (var(ENV_REPLAY), var(ENV_REPLAY_FILE), var(ENV_REPLAY_FROM))
        }
        Some(other) => {
            w.push(format!(
                "replay = {} is not a run id or an object; running live",
                json::to_string(other)
            ));
            return None;
        }
    };
    let mut fork = match from.as_deref().map(ForkPoint::parse) {
        Some(Some(point)) => Some(point),
        Some(None) => {
            w.push(format!(
                "replay: from = {:?} is not <nodeId>#<n>; replaying the whole run",
                from.unwrap_or_default()
            ));
            None
        }
        None => None,
    };
    let source = if let Some(file) = file {
        ReplaySource::File(file)
    } else if let Some(run) = run {
        match parse_run_ref(&run) {
            Ok((id, point)) => {
                fork = fork.or(point);
                ReplaySource::Run(id)
            }
            Err(why) => {
                w.push(format!("replay: {why}; running live"));
                return None;
            }
        }
    } else {
        return None;
    };
    Some(ReplaySpec {
        source,
        fork,
        output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> EnvSnapshot {
        let mut e = EnvSnapshot::new();
        for (k, v) in pairs {
            e.set(*k, *v);
        }
        e
    }

    #[test]
    fn a_run_reference_with_a_fork_point() {
        let mut w = Vec::new();
        let spec = resolve(
            None,
            &env(&[(ENV_REPLAY, "run_0123456789ab@tool:book#2")]),
            &mut w,
        )
        .unwrap();
        assert_eq!(spec.source, ReplaySource::Run("run_0123456789ab".into()));
        assert_eq!(
            spec.fork,
            Some(ForkPoint {
                node_id: "tool:book".into(),
                n: 2
            })
        );
        assert!(w.is_empty());
    }

    #[test]
    fn a_file_with_from_and_output() {
        let mut w = Vec::new();
        let e = env(&[
            (ENV_REPLAY_FILE, "/tmp/r.ndjson"),
            (ENV_REPLAY_FROM, "llm:step#3"),
            (ENV_REPLAY_OUTPUT, "{\"a\":1}"),
        ]);
        let spec = resolve(None, &e, &mut w).unwrap();
        assert_eq!(spec.source, ReplaySource::File("/tmp/r.ndjson".into()));
        assert_eq!(spec.fork.unwrap().to_text(), "llm:step#3");
        assert_eq!(json::to_string(&spec.output.unwrap()), "{\"a\":1}");
    }

    #[test]
    fn bad_values_warn_and_run_live() {
        let mut w = Vec::new();
        assert!(resolve(None, &env(&[(ENV_REPLAY, "run x")]), &mut w).is_none());
        assert!(resolve(None, &env(&[(ENV_REPLAY, "run_1@nohash")]), &mut w).is_none());
        assert!(resolve(Some(&Value::Bool(true)), &env(&[]), &mut w).is_none());
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(resolve(None, &env(&[]), &mut w).is_none());
        assert_eq!(ForkPoint::parse("tool:a#0"), None);
        assert_eq!(ForkPoint::parse("#2"), None);
    }

    #[test]
    fn a_source_is_a_file_when_one_exists_else_a_run() {
        let mut w = Vec::new();
        let here = std::env::current_exe().unwrap().display().to_string();
        let opt = |s: &str| {
            json::parse_str(&format!(
                "{{\"source\":{}}}",
                json::to_string(&Value::from(s))
            ))
            .unwrap()
        };
        let spec = resolve(Some(&opt(&here)), &env(&[]), &mut w).unwrap();
        assert_eq!(spec.source, ReplaySource::File(here));
        let spec = resolve(Some(&opt("run_0123456789ab@llm:step#3")), &env(&[]), &mut w).unwrap();
        assert_eq!(spec.source, ReplaySource::Run("run_0123456789ab".into()));
        assert_eq!(spec.fork.unwrap().to_text(), "llm:step#3");
        assert!(resolve(Some(&opt("/no/such/run.ndjson")), &env(&[]), &mut w).is_none());
        assert_eq!(
            w,
            ["replay: \"/no/such/run.ndjson\" is neither a file nor a run id; running live"]
        );
    }

    #[test]
    fn the_option_beats_the_environment() {
        let mut w = Vec::new();
        let opt = json::parse_str(r#"{"file":"a.ndjson","from":"tool:x#1"}"#).unwrap();
        let spec = resolve(Some(&opt), &env(&[(ENV_REPLAY, "run_1")]), &mut w).unwrap();
        assert_eq!(spec.source, ReplaySource::File("a.ndjson".into()));
    }
}
