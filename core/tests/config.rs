//! Runs every case of our configuration vectors (`tests/vectors/ours/environment.json`,
//! `kill-switch.json`, `server-environment.json`) through the resolvers and compares each
//! expected field. The comparison rules are the ones `tests/vectors/README.md` gives every
//! language's runner.

use graphmind_core::config::{
    resolve_json, resolve_server, EnvSnapshot, SdkFlavor, ServerConfigError, ServerFlags,
};
use graphmind_core::json::{self, Value};

fn load(name: &str) -> Vec<Value> {
    let path = format!(
        "{}/../tests/vectors/ours/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let doc = json::parse(&bytes).unwrap_or_else(|e| panic!("{path}: {e:?}"));
    let cases = doc
        .get("cases")
        .and_then(Value::as_array)
        .expect("a cases array")
        .clone();
    assert!(cases.len() >= 25, "{name}: only {} cases", cases.len());
    let mut names: Vec<&str> = cases
        .iter()
        .map(|c| c.get("name").and_then(Value::as_str).expect("a name"))
        .collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "{name}: duplicate case names");
    cases
}

/// JSON equality with numbers compared by value (`30` equals `30.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get_js(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Every expected field against the actual JSON; `warnings` lists the names the warnings
/// must start with, in order. Returns the mismatches.
fn compare(expected: &Value, actual: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for (key, want) in expected.as_object().expect("expected is an object").iter() {
        let key = key.to_string();
        let Some(got) = actual.get(&key) else {
            errors.push(format!("unknown field {key}"));
            continue;
        };
        if key == "warnings" {
            let want: Vec<&str> = want
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            let got: Vec<&str> = got
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            let ok = want.len() == got.len()
                && want.iter().zip(&got).all(|(n, line)| line.starts_with(n));
            if !ok {
                errors.push(format!("warnings: want names {want:?}, got {got:?}"));
            }
        } else if !same(want, got) {
            errors.push(format!(
                "{key}: want {}, got {}",
                json::to_string(want),
                json::to_string(got)
            ));
        }
    }
    errors
}

fn case_name(case: &Value) -> &str {
    case.get("name").and_then(Value::as_str).unwrap()
}

fn run_app_file(name: &str) -> usize {
    let cases = load(name);
    let mut failures = Vec::new();
    for case in &cases {
        let flavor_name = case
            .get("flavor")
            .and_then(Value::as_str)
            .expect("a flavor");
        let flavor =
            SdkFlavor::parse(flavor_name).unwrap_or_else(|| panic!("unknown flavor {flavor_name}"));
        let env = EnvSnapshot::from_json(case.get("env").expect("env"));
        let config = resolve_json(case.get("options").unwrap_or(&Value::Null), &env, flavor);
        let errors = compare(case.get("expected").expect("expected"), &config.to_json());
        if !errors.is_empty() {
            failures.push(format!(
                "{name} / {}:\n    {}",
                case_name(case),
                errors.join("\n    ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    cases.len()
}

#[test]
fn environment_vectors() {
    let n = run_app_file("environment.json");
    eprintln!("environment.json: {n} cases passed");
}

#[test]
fn kill_switch_vectors() {
    let n = run_app_file("kill-switch.json");
    eprintln!("kill-switch.json: {n} cases passed");
}

#[test]
fn server_environment_vectors() {
    let cases = load("server-environment.json");
    let mut failures = Vec::new();
    for case in &cases {
        let env = EnvSnapshot::from_json(case.get("env").expect("env"));
        let flags = ServerFlags::from_json(case.get("flags").unwrap_or(&Value::Null));
        let expected = case.get("expected").expect("expected");
        let errors = match (
            resolve_server(&flags, &env),
            expected.get("error").and_then(Value::as_str),
        ) {
            (Ok(config), None) => compare(expected, &config.to_json()),
            (Ok(_), Some(want)) => vec![format!("want error {want}, got a configuration")],
            (Err(e), None) => vec![format!("unexpected error {e}")],
            (Err(e), Some(want)) => {
                let got = match e {
                    ServerConfigError::PauseOnError(_) => "pauseOnError",
                    ServerConfigError::Days(_) => "days",
                };
                if got == want {
                    vec![]
                } else {
                    vec![format!("want error {want}, got {got}")]
                }
            }
        };
        if !errors.is_empty() {
            failures.push(format!(
                "{}:\n    {}",
                case_name(case),
                errors.join("\n    ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    eprintln!("server-environment.json: {} cases passed", cases.len());
}

#[test]
fn resolution_reads_only_the_snapshot() {
    // Whatever the process environment holds, an empty snapshot resolves to the defaults.
    let config = resolve_json(&Value::Null, &EnvSnapshot::new(), SdkFlavor::Native);
    assert!(config.enabled);
    assert_eq!(config.url, graphmind_core::config::DEFAULT_URL);
    assert!(config.warnings.is_empty());
    // from_process is a plain copy of the environment.
    let process = EnvSnapshot::from_process();
    if let Ok(path) = std::env::var("PATH") {
        assert_eq!(process.get("PATH"), Some(path.as_str()));
    }
}

fn load_reference(name: &str) -> Value {
    let path = format!(
        "{}/../tests/vectors/reference/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    json::parse(&bytes).unwrap_or_else(|e| panic!("{path}: {e:?}"))
}

#[test]
fn reference_break_on_env_cases() {
    // loop-kinds-fixture.json `breakOnEnv`: the GRAPHMIND_BREAK_ON_* spelling table.
    let doc = load_reference("loop-kinds-fixture.json");
    let cases = doc
        .get("breakOnEnv")
        .and_then(Value::as_array)
        .expect("breakOnEnv");
    assert!(!cases.is_empty());
    for case in cases {
        let raw = case.get("raw").and_then(Value::as_str);
        let want = case.get("on").and_then(Value::as_bool).expect("on");
        assert_eq!(
            graphmind_core::config::parse_break_on(raw),
            want,
            "raw {raw:?}"
        );
        // And through the resolver, under both variables.
        let mut env = EnvSnapshot::new();
        if let Some(raw) = raw {
            env.set("GRAPHMIND_BREAK_ON_ERROR_RESULT", raw)
                .set("GRAPHMIND_BREAK_ON_TRUNCATED", raw);
        }
        let config = resolve_json(&Value::Null, &env, SdkFlavor::Node);
        assert_eq!(
            (config.break_on_error_result, config.break_on_truncated),
            (want, want),
            "raw {raw:?}"
        );
    }
    eprintln!(
        "loop-kinds-fixture.json breakOnEnv: {} cases passed",
        cases.len()
    );
}

#[test]
fn reference_loop_guard_defaults() {
    // Both loop fixtures state the defaults an unconfigured session must resolve to.
    for name in ["loop-guard-fixture.json", "loop-kinds-fixture.json"] {
        let defaults = load_reference(name)
            .get("defaults")
            .cloned()
            .expect("defaults");
        for flavor in [
            SdkFlavor::Node,
            SdkFlavor::Python,
            SdkFlavor::Ruby,
            SdkFlavor::Native,
        ] {
            let guard = resolve_json(&Value::Null, &EnvSnapshot::new(), flavor)
                .to_json()
                .get("loopGuard")
                .cloned()
                .unwrap();
            for key in ["threshold", "mode", "kinds", "ignoreKeys"] {
                assert!(
                    same(defaults.get(key).unwrap(), guard.get(key).unwrap()),
                    "{name} {key} for {flavor:?}"
                );
            }
        }
    }
}

#[test]
fn non_finite_numbers_fall_back() {
    // JSON cannot carry NaN or Infinity, but a Rust caller (or a binding) can.
    use graphmind_core::config::{resolve, LoopGuardOption, LoopGuardOverrides, Options};
    let options = Options {
        connect_timeout_ms: Some(f64::NAN),
        retry_interval_ms: Some(f64::INFINITY),
        pause_timeout_ms: Some(f64::NEG_INFINITY),
        loop_guard: Some(LoopGuardOption::Fields(LoopGuardOverrides {
            threshold: Some(f64::INFINITY),
            ..Default::default()
        })),
        ..Default::default()
    };
    let config = resolve(&options, &EnvSnapshot::new(), SdkFlavor::Native);
    assert_eq!(config.connect_timeout_ms, 300);
    assert_eq!(config.retry_interval_ms, 10_000);
    assert_eq!(config.pause_timeout_ms, None);
    assert_eq!(config.loop_guard.threshold, 3);
    let names: Vec<&str> = config
        .warnings
        .iter()
        .map(|w| w.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "connectTimeoutMs",
            "retryIntervalMs",
            "pauseTimeoutMs",
            "loopGuard.threshold"
        ]
    );
}

/// `describe_disabled` names the variable that switched a session off, by each flavor's rule.
#[test]
fn the_reason_a_session_is_off_names_the_variable_that_did_it() {
    use graphmind_core::config::{describe_disabled, resolve_enabled, EnvSnapshot, SdkFlavor};
    let env = |pairs: &[(&str, &str)]| {
        let mut e = EnvSnapshot::new();
        for (k, v) in pairs {
            e.set(*k, *v);
        }
        e
    };
    let why = |pairs: &[(&str, &str)], flavor| {
        let e = env(pairs);
        let (_, reason) = resolve_enabled(None, &e, flavor);
        describe_disabled(reason, &e, flavor)
    };
    let python = [
        ("ENVIRONMENT", ""),
        ("APP_ENV", "Prod"),
        ("ENV", "production"),
    ];
    assert_eq!(
        why(&python, SdkFlavor::Python).as_deref(),
        Some("APP_ENV=Prod is set (GRAPHMIND=1 records there anyway)"),
        "the first variable set (an empty one is skipped) decides, and is the one named"
    );
    assert_eq!(
        why(&python, SdkFlavor::Node),
        None,
        "Node reads NODE_ENV alone"
    );
    assert_eq!(
        why(&[("NODE_ENV", "production")], SdkFlavor::Node).as_deref(),
        Some("NODE_ENV=production is set (GRAPHMIND=1 records there anyway)")
    );
    assert_eq!(
        why(
            &[("NODE_ENV", "production"), ("GRAPHMIND", "1")],
            SdkFlavor::Node
        ),
        None
    );
    assert_eq!(
        why(&[("GRAPHMIND_DISABLED", "yes")], SdkFlavor::Ruby).as_deref(),
        Some("GRAPHMIND_DISABLED=yes is set")
    );
}

#[test]
fn token_flush_interval_is_the_facades_name_for_the_token_interval() {
    let options = json::parse_str(r#"{"tokenFlushIntervalMs": 5}"#).unwrap();
    let config = resolve_json(&options, &EnvSnapshot::new(), SdkFlavor::Node);
    assert_eq!(config.token_interval_ms, 5);
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}
