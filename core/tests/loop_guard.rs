//! The loop guard against the reference fixtures (loop-guard v3 and the 0.6 loop kinds),
//! the spec's warning texts and the run bound.

use graphmind_core::json::{self, Value};
use graphmind_core::loop_guard::{
    LoopDetect, LoopGuard, LoopGuardConfig, LoopHide, LoopInfo, LoopKind, LoopMode, LoopValue,
    LoopVerdict, NodeStart, OutputTicket, MAX_LOOP_RUNS, REDACTED,
};
use graphmind_core::smart::{
    error_result_shape, error_text_key, parse_break_on, truncated_tool_call,
};

#[path = "support/loop_fixture.rs"]
mod loop_fixture;
use loop_fixture::{
    config_for, feed_end_event, int_of, kinds_config_for, list, load, start_of, str_of,
};

/// (at, repeats, firstAt) of every hold.
type Trip = (u64, u32, u64);

#[test]
fn loop_guard_fixture_sequences() {
    let fixture = load("reference/loop-guard-fixture.json");
    assert_eq!(fixture.get("version").unwrap().as_i64(), Some(3));
    let sequences = list(&fixture, "sequences");
    assert_eq!(sequences.len(), 32);
    for seq in sequences {
        let name = str_of(seq, "name").unwrap();
        let mut guard = LoopGuard::new(config_for(seq));
        let calls = list(seq, "calls");
        let fingerprints = list(seq, "fingerprints");
        let mut trips: Vec<Trip> = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            let start = start_of("run-1", call, i as u64);
            let outcome = guard.on_node_started(&start, true);
            assert_eq!(
                outcome.verdict,
                LoopVerdict::Continue,
                "{name}: attached never warns"
            );
            assert_eq!(
                outcome.fingerprint.as_deref(),
                fingerprints[i].as_str(),
                "{name}: fingerprint {i}"
            );
            let verdict = guard.consult_before(
                "run-1",
                start.kind,
                start.node_id,
                start.name,
                true,
                LoopHide::default(),
            );
            if let LoopVerdict::Hold(info) = verdict {
                assert_eq!(info.kind, LoopKind::Repeat, "{name}");
                assert_eq!(info.last_seq, i as u64, "{name}: lastSeq is the held call");
                assert_eq!(
                    Some(info.fingerprint.as_str()),
                    fingerprints[i].as_str(),
                    "{name}"
                );
                trips.push((i as u64, info.repeats, info.first_seq));
                // A retry re-enters the same gate without a new start: it runs on.
                let again = guard.consult_before(
                    "run-1",
                    start.kind,
                    start.node_id,
                    start.name,
                    true,
                    LoopHide::default(),
                );
                assert_eq!(again, LoopVerdict::Continue, "{name}: retry at {i}");
            }
        }
        let expected: Vec<Trip> = list(seq, "trips")
            .iter()
            .map(|t| {
                (
                    int_of(t, "at").unwrap(),
                    int_of(t, "repeats").unwrap() as u32,
                    int_of(t, "firstAt").unwrap(),
                )
            })
            .collect();
        assert_eq!(trips, expected, "{name}");
        assert_eq!(trips.first().map(|t| t.0), int_of(seq, "tripsAt"), "{name}");
        assert_eq!(
            trips.first().map(|t| t.1 as u64),
            int_of(seq, "repeatsAtTrip"),
            "{name}"
        );
    }
}

#[test]
fn detached_sequences_hold_nothing_and_warn_once_per_streak() {
    let fixture = load("reference/loop-guard-fixture.json");
    for seq in list(&fixture, "sequences") {
        let name = str_of(seq, "name").unwrap();
        let mut guard = LoopGuard::new(config_for(seq));
        // The streaks whose first trip the attached run saw: one warning each, at that call.
        let first_trips: Vec<u64> = {
            let trips = list(seq, "trips");
            let mut firsts: Vec<(u64, u64)> = Vec::new(); // (firstAt, at)
            for t in trips {
                let key = (int_of(t, "firstAt").unwrap(), int_of(t, "at").unwrap());
                if !firsts.iter().any(|f| f.0 == key.0) {
                    firsts.push(key);
                }
            }
            firsts.into_iter().map(|f| f.1).collect()
        };
        let mut warned = Vec::new();
        for (i, call) in list(seq, "calls").iter().enumerate() {
            let start = start_of("run-1", call, i as u64);
            let outcome = guard.on_node_started(&start, false);
            if let LoopVerdict::Warn(w) = &outcome.verdict {
                assert_eq!(w.key, format!("loop:{}", start.node_id));
                warned.push(i as u64);
            }
            let verdict = guard.consult_before(
                "run-1",
                start.kind,
                start.node_id,
                start.name,
                false,
                LoopHide::default(),
            );
            assert_eq!(
                verdict,
                LoopVerdict::Continue,
                "{name}: detached never holds"
            );
        }
        assert_eq!(warned, first_trips, "{name}");
    }
}

fn search_calls(guard: &mut LoopGuard, n: u64, attached: bool) -> Vec<LoopVerdict> {
    let input = json::parse_str(r#"{"q":"flights"}"#).unwrap();
    (0..n)
        .map(|i| {
            guard
                .on_node_started(
                    &NodeStart::new("r", "tool:search", "tool", LoopValue::from(&input), i),
                    attached,
                )
                .verdict
        })
        .collect()
}

#[test]
fn warning_texts_are_the_specs() {
    let mut guard = LoopGuard::new(LoopGuardConfig {
        mode: LoopMode::Warn,
        ..Default::default()
    });
    let verdicts = search_calls(&mut guard, 4, true);
    let LoopVerdict::Warn(w) = &verdicts[2] else {
        panic!("{verdicts:?}")
    };
    assert_eq!(
        w.line(),
        "[graphmind] possible loop: search (tool:search) was called 3× in a row with identical arguments; \
         GRAPHMIND_ON_LOOP=warn, so it is not being held. Polling on purpose? add it to loopGuard.allowNodes; \
         GRAPHMIND_ON_LOOP=off silences this"
    );
    assert_eq!(verdicts[3], LoopVerdict::Continue, "one warning per streak");
    assert_eq!(verdicts[0], LoopVerdict::Continue);

    let mut guard = LoopGuard::new(LoopGuardConfig::default());
    let verdicts = search_calls(&mut guard, 3, false);
    let LoopVerdict::Warn(w) = &verdicts[2] else {
        panic!("{verdicts:?}")
    };
    assert_eq!(
        w.line(),
        "[graphmind] possible loop: search (tool:search) was called 3× in a row with identical arguments; \
         no debugger is attached to hold it (start `npx graphmind-ai` to pause it there). Polling on purpose? \
         add it to loopGuard.allowNodes; GRAPHMIND_ON_LOOP=off silences this"
    );
}

#[test]
fn mode_warn_never_holds_and_the_count_keeps_running_for_a_later_debugger() {
    let mut guard = LoopGuard::new(LoopGuardConfig::default());
    let input = json::parse_str("{}").unwrap();
    for i in 0..3 {
        guard.on_node_started(
            &NodeStart::new("r", "tool:s", "tool", LoopValue::from(&input), i),
            false,
        );
        assert_eq!(
            guard.consult_before("r", "tool", "tool:s", "s", false, LoopHide::default()),
            LoopVerdict::Continue
        );
    }
    // A debugger attaches: the next identical call holds with the whole streak.
    guard.on_node_started(
        &NodeStart::new("r", "tool:s", "tool", LoopValue::from(&input), 3),
        true,
    );
    let LoopVerdict::Hold(info) =
        guard.consult_before("r", "tool", "tool:s", "s", true, LoopHide::default())
    else {
        panic!("should hold")
    };
    assert_eq!((info.repeats, info.first_seq, info.last_seq), (4, 0, 3));

    let mut guard = LoopGuard::new(LoopGuardConfig {
        mode: LoopMode::Warn,
        ..Default::default()
    });
    for i in 0..4 {
        guard.on_node_started(
            &NodeStart::new("r", "tool:s", "tool", LoopValue::from(&input), i),
            true,
        );
        assert_eq!(
            guard.consult_before("r", "tool", "tool:s", "s", true, LoopHide::default()),
            LoopVerdict::Continue
        );
    }
    let mut guard = LoopGuard::new(LoopGuardConfig {
        mode: LoopMode::Off,
        ..Default::default()
    });
    let out = guard.on_node_started(
        &NodeStart::new("r", "tool:s", "tool", LoopValue::from(&input), 0),
        true,
    );
    assert_eq!(out.fingerprint, None, "off: not even fingerprinting");
}

#[test]
fn hold_fingerprint_follows_hide_inputs() {
    let mut guard = LoopGuard::new(LoopGuardConfig {
        threshold: 1,
        ..Default::default()
    });
    let input = json::parse_str(r#"{"email":"a@b.c"}"#).unwrap();
    let out = guard.on_node_started(
        &NodeStart::new("r", "tool:s", "tool", LoopValue::from(&input), 0),
        true,
    );
    let hide = LoopHide::for_node(false, false, true, false, true);
    let LoopVerdict::Hold(info) = guard.consult_before("r", "tool", "tool:s", "s", true, hide)
    else {
        panic!()
    };
    assert_eq!(info.fingerprint, REDACTED);
    assert_ne!(out.fingerprint.as_deref(), Some(REDACTED));
    assert_eq!(
        json::to_string(&info.to_wire()),
        r#"{"repeats":1,"firstSeq":0,"lastSeq":0,"fingerprint":"__REDACTED__"}"#
    );
    // Output switches do not hide a v3 fingerprint.
    guard.on_node_started(
        &NodeStart::new("r", "tool:s", "tool", LoopValue::from(&input), 1),
        true,
    );
    let LoopVerdict::Hold(info) = guard.consult_before(
        "r",
        "tool",
        "tool:s",
        "s",
        true,
        LoopHide {
            input: false,
            output: true,
        },
    ) else {
        panic!()
    };
    assert_eq!(Some(info.fingerprint.as_str()), out.fingerprint.as_deref());
}

#[test]
fn runs_are_bounded_least_recently_used_first() {
    let mut guard = LoopGuard::new(LoopGuardConfig::default());
    fn start(run: &str, seq: u64) -> impl FnOnce(&mut LoopGuard) + '_ {
        move |g: &mut LoopGuard| {
            let input = json::parse_str("{}").unwrap();
            g.on_node_started(
                &NodeStart::new(run, "tool:s", "tool", LoopValue::from(&input), seq),
                true,
            );
        }
    }
    // "keep" makes two calls, then MAX_LOOP_RUNS other runs come and go, "keep" stays
    // most recently used in between; "old" is evicted.
    start("old", 0)(&mut guard);
    start("old", 1)(&mut guard);
    start("keep", 0)(&mut guard);
    start("keep", 1)(&mut guard);
    for i in 0..(MAX_LOOP_RUNS - 2) {
        let run = format!("other-{i}");
        start(&run, 0)(&mut guard);
    }
    start("keep", 2)(&mut guard); // touch: now most recently used
    start("new", 0)(&mut guard); // evicts the least recently used: "old"
    assert_eq!(guard.tracked_runs(), MAX_LOOP_RUNS);
    assert!(matches!(
        guard.consult_before("keep", "tool", "tool:s", "s", true, LoopHide::default()),
        LoopVerdict::Hold(_)
    ));
    start("old", 2)(&mut guard);
    assert_eq!(
        guard.consult_before("old", "tool", "tool:s", "s", true, LoopHide::default()),
        LoopVerdict::Continue,
        "evicted: starts again"
    );
}

// -- the 0.6 loop kinds ------------------------------------------------------

#[derive(Debug, PartialEq)]
struct Hold {
    at: u64,
    kind: &'static str,
    repeats: u32,
    first_at: u64,
    period: Option<u32>,
    laps: Option<u32>,
}

fn hold_of(at: u64, info: &LoopInfo) -> Hold {
    let (kind, period, laps) = match info.kind {
        LoopKind::Repeat => ("repeat", None, None),
        LoopKind::Cycle { period, laps } => ("cycle", Some(period), Some(laps)),
        LoopKind::ErrorRepeat => ("error-repeat", None, None),
    };
    Hold {
        at,
        kind,
        repeats: info.repeats,
        first_at: info.first_seq,
        period,
        laps,
    }
}

fn expected_hold(v: &Value) -> Hold {
    let kind = match str_of(v, "kind").unwrap() {
        "repeat" => "repeat",
        "cycle" => "cycle",
        "error-repeat" => "error-repeat",
        other => panic!("unknown kind {other}"),
    };
    Hold {
        at: int_of(v, "at").unwrap(),
        kind,
        repeats: int_of(v, "repeats").unwrap() as u32,
        first_at: int_of(v, "firstAt").unwrap(),
        period: int_of(v, "period").map(|p| p as u32),
        laps: int_of(v, "laps").map(|p| p as u32),
    }
}

#[test]
fn loop_kinds_sequences() {
    let fixture = load("reference/loop-kinds-fixture.json");
    let defaults = fixture.get("defaults").unwrap();
    assert_eq!(
        int_of(defaults, "historySize"),
        Some(graphmind_core::loop_guard::LOOP_HISTORY_SIZE as u64)
    );
    assert_eq!(
        int_of(defaults, "cycleLaps"),
        Some(graphmind_core::loop_guard::CYCLE_LAPS as u64)
    );
    assert_eq!(
        int_of(defaults, "errorRepeatCount"),
        Some(graphmind_core::loop_guard::ERROR_REPEAT_COUNT as u64)
    );
    let sequences = list(&fixture, "sequences");
    assert_eq!(sequences.len(), 41);
    for seq in sequences {
        run_hold_sequence(seq, kinds_config_for(seq));
    }
}

/// Runs one sequence of loop-kinds events (attached, each start's before-gate consulted and
/// a retry checked) and compares its holds with `holds`.
fn run_hold_sequence(seq: &Value, config: LoopGuardConfig) {
    let name = str_of(seq, "name").unwrap();
    let mut guard = LoopGuard::new(config);
    let mut holds = Vec::new();
    for (i, event) in list(seq, "events").iter().enumerate() {
        let i = i as u64;
        if feed_end_event(&mut guard, event, name) {
            continue;
        }
        let node_id = str_of(event, "nodeId").unwrap();
        let start = start_of("run", event, i);
        guard.on_node_started(&start, true);
        let verdict = guard.consult_before(
            "run",
            start.kind,
            node_id,
            start.name,
            true,
            LoopHide::default(),
        );
        if let LoopVerdict::Hold(info) = verdict {
            assert_eq!(info.last_seq, i, "{name}");
            assert_eq!(info.fingerprint.len(), 32, "{name}");
            holds.push(hold_of(i, &info));
            let again = guard.consult_before(
                "run",
                start.kind,
                node_id,
                start.name,
                true,
                LoopHide::default(),
            );
            assert_eq!(again, LoopVerdict::Continue, "{name}: retry at {i}");
        }
    }
    let expected: Vec<Hold> = list(seq, "holds").iter().map(expected_hold).collect();
    assert_eq!(holds, expected, "{name}");
}

/// Our loop-hold defaults and opt-ins (`tests/vectors/ours/loop-detect.json`): alternating
/// calls and the same error with other arguments are held only with their detector on.
#[test]
fn our_loop_detect_vectors() {
    let doc = load("ours/loop-detect.json");
    let cases = list(&doc, "cases");
    assert_eq!(cases.len(), 10);
    for case in cases {
        run_hold_sequence(case, config_for(case));
    }
}

#[test]
fn loop_kinds_error_result_shapes() {
    let fixture = load("reference/loop-kinds-fixture.json");
    let cases = list(&fixture, "errorResult");
    assert_eq!(cases.len(), 25);
    for case in cases {
        let got = error_result_shape(case.get("result").unwrap()).map(|s| s.as_str());
        assert_eq!(
            got,
            str_of(case, "shape"),
            "{}",
            str_of(case, "name").unwrap()
        );
    }
}

#[test]
fn loop_kinds_truncated_tool_calls() {
    let fixture = load("reference/loop-kinds-fixture.json");
    let cases = list(&fixture, "truncated");
    assert_eq!(cases.len(), 13);
    for case in cases {
        let name = str_of(case, "name").unwrap();
        let got = truncated_tool_call(case.get("result").unwrap());
        match case.get("fires").unwrap() {
            Value::Null => assert_eq!(got, None, "{name}"),
            fires => {
                let got = got.unwrap_or_else(|| panic!("{name}: should fire"));
                assert_eq!(
                    Some(got.finish_reason.as_str()),
                    str_of(fires, "finishReason"),
                    "{name}"
                );
                assert_eq!(
                    Some(got.tool_calls as u64),
                    int_of(fires, "toolCalls"),
                    "{name}"
                );
                assert_eq!(
                    Some(got.unparsed as u64),
                    int_of(fires, "unparsed"),
                    "{name}"
                );
            }
        }
    }
}

#[test]
fn loop_kinds_break_on_env() {
    let fixture = load("reference/loop-kinds-fixture.json");
    let cases = list(&fixture, "breakOnEnv");
    assert_eq!(cases.len(), 13);
    for case in cases {
        let raw = str_of(case, "raw");
        assert_eq!(
            Some(parse_break_on(raw)),
            case.get("on").unwrap().as_bool(),
            "{raw:?}"
        );
    }
}

#[test]
fn loop_kinds_error_text() {
    let fixture = load("reference/loop-kinds-fixture.json");
    let cases = list(&fixture, "errorText");
    assert_eq!(cases.len(), 4);
    for case in cases {
        let text = case.get("text").unwrap().as_js_str().unwrap();
        let key = case.get("key").unwrap().as_js_str().unwrap();
        assert_eq!(
            &error_text_key(text),
            key,
            "{}",
            str_of(case, "name").unwrap()
        );
    }
}

#[test]
fn loop_kind_warnings_name_the_node_and_counts_only() {
    let mut guard = LoopGuard::new(LoopGuardConfig {
        detect: LoopDetect::ALL,
        ..LoopGuardConfig::default()
    });
    let mut warnings = Vec::new();
    for i in 0..4u64 {
        let input = json::parse_str(&format!(r#"{{"sql":"select {i}"}}"#)).unwrap();
        let out = guard.on_node_started(
            &NodeStart::new("r", "tool:db", "tool", LoopValue::from(&input), i * 3).instance("x"),
            false,
        );
        if let LoopVerdict::Warn(w) = out.verdict {
            warnings.push(w);
        }
        let (n, m) = (
            json::JsStr::from("Error"),
            json::JsStr::from("secret table missing"),
        );
        guard.on_node_error("r", "tool:db", Some("x"), Some(&n), Some(&m));
        guard.on_node_finished(
            "r",
            "tool:db",
            Some("x"),
            Some("error"),
            LoopValue::Read(None),
            true,
        );
    }
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].key, "loop-error:tool:db");
    assert_eq!(
        warnings[0].line(),
        "[graphmind] possible loop: db (tool:db) failed 3× in a row with the same error and is being called again; \
         no debugger is attached to hold it (start `npx graphmind-ai` to pause it there). Polling on purpose? add it \
         to loopGuard.allowNodes (GRAPHMIND_LOOP_ALLOW); GRAPHMIND_ON_LOOP=off silences this"
    );
    assert!(!warnings[0].message.contains("secret"));
}

// -- properties ---------------------------------------------------------------

mod properties {
    use super::*;
    use graphmind_core::json::JsStr;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Event {
        Start {
            run: u8,
            node: u8,
            kind: u8,
            input: u8,
            instance: Option<u8>,
            unreadable: bool,
        },
        Error {
            run: u8,
            node: u8,
            instance: Option<u8>,
            message: u8,
        },
        Finish {
            run: u8,
            node: u8,
            instance: Option<u8>,
            status: u8,
            output: u8,
        },
        Gate {
            run: u8,
            node: u8,
            kind: u8,
        },
    }

    fn event() -> impl Strategy<Value = Event> {
        let run = 0u8..80;
        prop_oneof![
            (
                run.clone(),
                0u8..4,
                0u8..3,
                0u8..3,
                prop::option::of(0u8..4),
                any::<bool>()
            )
                .prop_map(|(run, node, kind, input, instance, unreadable)| {
                    Event::Start {
                        run,
                        node,
                        kind,
                        input,
                        instance,
                        unreadable,
                    }
                }),
            (run.clone(), 0u8..4, prop::option::of(0u8..4), 0u8..2).prop_map(
                |(run, node, instance, message)| Event::Error {
                    run,
                    node,
                    instance,
                    message
                }
            ),
            (
                run.clone(),
                0u8..4,
                prop::option::of(0u8..4),
                0u8..4,
                0u8..3
            )
                .prop_map(|(run, node, instance, status, output)| Event::Finish {
                    run,
                    node,
                    instance,
                    status,
                    output
                }),
            (run, 0u8..4, 0u8..3).prop_map(|(run, node, kind)| Event::Gate { run, node, kind }),
        ]
    }

    const KINDS: [&str; 3] = ["tool", "llm", "agent"];
    const STATUSES: [&str; 4] = ["ok", "error", "aborted", "weird"];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Any interleaving of events: no panic, the run bound holds, a hold's seqs are
        /// ordered and a retry never holds twice.
        #[test]
        fn any_event_order_is_safe(events in prop::collection::vec(event(), 0..300), attached in any::<bool>()) {
            let config = LoopGuardConfig { threshold: 2, kinds: vec!["tool".into(), "llm".into()], detect: LoopDetect::ALL, ..Default::default() };
            let mut guard = LoopGuard::new(config);
            let inputs: Vec<Value> = (0..3).map(|i| json::parse_str(&format!(r#"{{"q":{i},"_meta":{{"t":{i}}}}}"#)).unwrap()).collect();
            let outputs: Vec<Value> = vec![
                json::parse_str(r#"{"isError":true}"#).unwrap(),
                json::parse_str(r#"{"error":"x"}"#).unwrap(),
                json::parse_str(r#""fine""#).unwrap(),
            ];
            for (seq, e) in events.iter().enumerate() {
                match e {
                    Event::Start { run, node, kind, input, instance, unreadable } => {
                        let (run, node) = (format!("r{run}"), format!("tool:n{node}"));
                        let instance = instance.map(|i| format!("i{i}"));
                        let value = if *unreadable { LoopValue::Unreadable } else { LoopValue::from(&inputs[*input as usize]) };
                        let mut start = NodeStart::new(&run, &node, KINDS[*kind as usize], value, seq as u64);
                        if let Some(i) = &instance { start = start.instance(i); }
                        guard.on_node_started(&start, attached);
                    }
                    Event::Error { run, node, instance, message } => {
                        let m = JsStr::from(if *message == 0 { "boom" } else { "bang" });
                        let instance = instance.map(|i| format!("i{i}"));
                        guard.on_node_error(&format!("r{run}"), &format!("tool:n{node}"), instance.as_deref(), Some(&JsStr::from("E")), Some(&m));
                    }
                    Event::Finish { run, node, instance, status, output } => {
                        let instance = instance.map(|i| format!("i{i}"));
                        guard.on_node_finished(&format!("r{run}"), &format!("tool:n{node}"), instance.as_deref(),
                            Some(STATUSES[*status as usize]), LoopValue::from(&outputs[*output as usize]), true);
                    }
                    Event::Gate { run, node, kind } => {
                        let (run, node) = (format!("r{run}"), format!("tool:n{node}"));
                        let name = &node[5..];
                        let verdict = guard.consult_before(&run, KINDS[*kind as usize], &node, name, true, LoopHide::default());
                        if let LoopVerdict::Hold(info) = verdict {
                            prop_assert!(info.first_seq <= info.last_seq);
                            prop_assert!(info.repeats >= 2);
                            let again = guard.consult_before(&run, KINDS[*kind as usize], &node, name, true, LoopHide::default());
                            prop_assert_eq!(again, LoopVerdict::Continue);
                        }
                    }
                }
                prop_assert!(guard.tracked_runs() <= MAX_LOOP_RUNS);
            }
        }

        /// A session's attached path: successful outputs keyed later (by its worker, which
        /// catches up at the end of each round here), and a start waits for them only when
        /// `awaits_output` says it must. It reaches the verdicts keying at once does, call by
        /// call, on runs of repeated laps (so that cycles, repeats and error repeats occur).
        #[test]
        fn keying_outputs_later_changes_no_verdict(segments in prop::collection::vec(segment(), 1..40), attached in any::<bool>()) {
            let config = LoopGuardConfig { threshold: 3, kinds: vec!["tool".into(), "llm".into()], detect: LoopDetect::ALL, ..Default::default() };
            let mut now = LoopGuard::with_salt(config.clone(), [9; 32]);
            let mut later = LoopGuard::with_salt(config, [9; 32]);
            let keyer = later.keyer().clone();
            let inputs: Vec<Value> = (0..2).map(|i| json::parse_str(&format!(r#"{{"q":{i}}}"#)).unwrap()).collect();
            let outputs: Vec<Value> = vec![
                json::parse_str(r#""fine""#).unwrap(),
                json::parse_str(r#"{"rows":[1,2]}"#).unwrap(),
                json::parse_str(r#"{"isError":true}"#).unwrap(),
            ];
            let (mut seq, mut holds, mut cycles) = (0u64, 0, 0);
            let mut waiting: Vec<(String, OutputTicket, usize)> = Vec::new();
            for (lap, repeats, changed) in segments {
                for round in 0..repeats {
                    for (run, ticket, output) in waiting.drain(..) {
                        later.fill_output(&run, ticket, Some(keyer.key_output(Some(&outputs[output]))));
                    }
                    for (at, call) in lap.iter().enumerate() {
                        let call = match changed {
                            Some((r, i)) if r == round && i == at % lap.len() => Call { output: (call.output + 1) % 3, ..*call },
                            _ => *call,
                        };
                        seq += 1;
                        let (run, node, kind) = (format!("r{}", call.run), format!("tool:n{}", call.node), KINDS[call.kind as usize]);
                        let value = LoopValue::from(&inputs[call.input as usize]);
                        let start = NodeStart::new(&run, &node, kind, value, seq);
                        let fp = keyer.fingerprint_start(&node, value);
                        if later.awaits_output(&run, kind, &node, fp) {
                            for (run, ticket, output) in waiting.drain(..) {
                                later.fill_output(&run, ticket, Some(keyer.key_output(Some(&outputs[output]))));
                            }
                        }
                        prop_assert!(!later.awaits_output(&run, kind, &node, fp) || waiting.is_empty());
                        prop_assert_eq!(now.observe_start(&start, attached), later.record_start(&start, fp, attached));
                        let verdict = now.consult_before(&run, kind, &node, &node[5..], true, LoopHide::default());
                        prop_assert_eq!(&verdict, &later.consult_before(&run, kind, &node, &node[5..], true, LoopHide::default()));
                        if let LoopVerdict::Hold(info) = &verdict {
                            holds += 1;
                            cycles += usize::from(matches!(info.kind, LoopKind::Cycle { .. }));
                        }
                        let status = Some(if call.failed { "error" } else { "ok" });
                        if call.failed {
                            for guard in [&mut now, &mut later] {
                                guard.on_node_error(&run, &node, None, Some(&JsStr::from("E")), Some(&JsStr::from("boom")));
                            }
                        }
                        let output = &outputs[call.output as usize];
                        now.on_node_finished(&run, &node, None, status, LoopValue::from(output), true);
                        let key = keyer.key_finish_later(status, LoopValue::from(output));
                        if let Some(ticket) = later.record_finish(&run, &node, None, key) {
                            waiting.push((run.clone(), ticket, call.output as usize));
                        }
                        // Conservative while keys are still to come.
                        prop_assert!(!now.may_hold_next(&run, true) || later.may_hold_next(&run, true));
                    }
                }
            }
            if std::env::var_os("GM_COUNT_HOLDS").is_some() {
                eprintln!("holds {holds}, cycles {cycles}");
            }
        }
    }

    /// One call of a lap: which run, node, kind and input, whether it fails, what it returns.
    #[derive(Debug, Clone, Copy)]
    struct Call {
        run: u8,
        node: u8,
        kind: u8,
        input: u8,
        failed: bool,
        output: u8,
    }

    /// A lap of 1 to 4 calls repeated 1 to 5 times, one call's output changed in one round.
    fn segment() -> impl Strategy<Value = (Vec<Call>, usize, Option<(usize, usize)>)> {
        let call = (
            0u8..2,
            0u8..3,
            prop_oneof![4 => Just(0u8), 1 => Just(1u8)],
            0u8..2,
            prop::bool::weighted(0.2),
            0u8..3,
        )
            .prop_map(|(run, node, kind, input, failed, output)| Call {
                run,
                node,
                kind,
                input,
                failed,
                output,
            });
        (
            prop::collection::vec(call, 1..5),
            1usize..6,
            prop::option::weighted(0.3, (0usize..5, 0usize..4)),
        )
    }
}
