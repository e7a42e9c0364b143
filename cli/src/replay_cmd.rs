//! `graphmind replay RUN_ID [--from NODE#N] [--output JSON|@file] [--exec CMD] [--port N]`:
//! the command line that starts an app in replay mode against this server
//! (`docs/replay.md`). It checks the run exists (and the fork point is one of its calls),
//! prints the line, and with `--exec` runs the command with those variables set. The rules
//! of replay itself are the core's (`graphmind_core::replay`); this only builds the line.

use crate::args::ReplayArgs;
use graphmind_core::json;
use graphmind_core::replay::fetch::{self, LoadError};
use graphmind_core::replay::spec::{self, ForkPoint, ENV_REPLAY, ENV_REPLAY_OUTPUT};

/// The port asked when `--port` is not given.
pub const DEFAULT_PORT: u16 = 4747;
/// Exit code: bad arguments.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: no server on that port.
pub const EXIT_NO_SERVER: i32 = 3;
/// Exit code: no such run, or no such call in it.
pub const EXIT_NOT_FOUND: i32 = 4;

/// `text` as one word for a POSIX shell (single-quoted unless it is plain).
pub fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:@#=,".contains(&b))
    {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The variables that put an app in replay mode: `(name, value)` in order.
pub fn replay_env(
    url: &str,
    run: &str,
    from: Option<&ForkPoint>,
    output: Option<&json::Value>,
) -> Vec<(String, String)> {
    let mut env = vec![("GRAPHMIND_URL".to_string(), url.to_string())];
    let reference = match from {
        Some(f) => format!("{run}@{}", f.to_text()),
        None => run.to_string(),
    };
    env.push((ENV_REPLAY.to_string(), reference));
    if let Some(v) = output {
        env.push((ENV_REPLAY_OUTPUT.to_string(), json::to_string(v)));
    }
    env
}

/// The printed line: the variables, then the command (or a placeholder for it).
pub fn command_line(env: &[(String, String)], exec: Option<&str>) -> String {
    let mut parts: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{k}={}", shell_quote(v)))
        .collect();
    parts.push(
        exec.unwrap_or("<the command that starts your app>")
            .to_string(),
    );
    parts.join(" ")
}

/// `graphmind replay`.
pub fn main(a: &ReplayArgs) -> i32 {
    let (run, mut from) = match spec::parse_run_ref(&a.run_id) {
        Ok(parsed) => parsed,
        Err(why) => {
            eprintln!("graphmind replay: {why}");
            return EXIT_USAGE;
        }
    };
    if let Some(raw) = &a.from {
        match ForkPoint::parse(raw) {
            Some(f) => from = Some(f),
            None => {
                eprintln!("graphmind replay: --from must be <nodeId>#<n>, n from 1 (e.g. --from 'tool:book#1'), got {raw:?}");
                return EXIT_USAGE;
            }
        }
    }
    let output = match &a.output {
        None => None,
        Some(raw) => match crate::control_cli::read_json_arg("--output", raw) {
            Ok(v) => Some(v),
            Err(why) => {
                eprintln!("graphmind replay: {why}");
                return EXIT_USAGE;
            }
        },
    };
    if output.is_some() && from.is_none() {
        eprintln!("graphmind replay: --output edits the call just before the fork point; give --from <nodeId>#<n> too");
        return EXIT_USAGE;
    }
    let port = a.port.unwrap_or(DEFAULT_PORT);
    let url = format!("ws://127.0.0.1:{port}/ingest");
    let recording = match fetch::load_run(&url, &run) {
        Ok(r) => r,
        Err(LoadError::NoSuchRun { .. }) => {
            eprintln!("graphmind replay: the server on port {port} has no run {run} (graphmind runs lists them)");
            return EXIT_NOT_FOUND;
        }
        Err(LoadError::Fetch { why, .. }) => {
            eprintln!("graphmind replay: no GraphMind server answered on 127.0.0.1:{port} ({why}); start it with graphmind serve");
            return EXIT_NO_SERVER;
        }
        Err(e) => {
            eprintln!("graphmind replay: {e}");
            return EXIT_NOT_FOUND;
        }
    };
    if let Some(f) = &from {
        if recording.execution(&f.node_id, f.n).is_none() {
            let mut calls: Vec<String> = recording
                .nodes
                .iter()
                .map(|(id, list)| format!("{id} x{}", list.len()))
                .collect();
            calls.sort();
            eprintln!(
                "graphmind replay: run {run} has no call {} (its calls: {})",
                f.to_text(),
                calls.join(", ")
            );
            return EXIT_NOT_FOUND;
        }
    }
    let env = replay_env(&url, &run, from.as_ref(), output.as_ref());
    println!("{}", command_line(&env, a.exec.as_deref()));
    let Some(exec) = &a.exec else { return 0 };
    match std::process::Command::new("sh")
        .arg("-c")
        .arg(exec)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .status()
    {
        Ok(status) => status.code().unwrap_or(1),
        Err(e) => {
            eprintln!("graphmind replay: cannot run {exec:?}: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_quotes_what_a_shell_would_split() {
        let from = ForkPoint::parse("tool:book#2").unwrap();
        let out = json::parse_str(r#"{"a":"it's"}"#).unwrap();
        let env = replay_env(
            "ws://127.0.0.1:4747/ingest",
            "run_0123456789ab",
            Some(&from),
            Some(&out),
        );
        assert_eq!(
            command_line(&env, Some("python agent.py")),
            "GRAPHMIND_URL=ws://127.0.0.1:4747/ingest GRAPHMIND_REPLAY=run_0123456789ab@tool:book#2 GRAPHMIND_REPLAY_OUTPUT='{\"a\":\"it'\\''s\"}' python agent.py"
        );
        assert_eq!(shell_quote(""), "''");
    }
}
