//! `LoopGuard::may_hold_next` is conservative: replaying every reference loop fixture, no
//! start holds at its before-gate unless the guard said beforehand that the next start
//! could; and calls that neither repeat nor fail alike are never flagged.

use graphmind_core::json;
use graphmind_core::loop_guard::{
    LoopGuard, LoopGuardConfig, LoopHide, LoopMode, LoopValue, LoopVerdict, NodeStart,
};

#[path = "support/loop_fixture.rs"]
mod loop_fixture;
use loop_fixture::{config_for, feed_end_event, kinds_config_for, list, load, start_of, str_of};

/// Starts `start`, consults its before-gate, and checks the prediction made before it.
/// Returns (predicted, held).
fn start_and_check(guard: &mut LoopGuard, start: &NodeStart<'_>, name: &str) -> (bool, bool) {
    let predicted = guard.may_hold_next(start.run_id, true);
    guard.on_node_started(start, true);
    let verdict = guard.consult_before(
        start.run_id,
        start.kind,
        start.node_id,
        start.name,
        true,
        LoopHide::default(),
    );
    let held = matches!(verdict, LoopVerdict::Hold(_));
    assert!(
        predicted || !held,
        "{name}: seq {} held though may_hold_next said it could not",
        start.seq
    );
    (predicted, held)
}

#[test]
fn never_false_before_a_hold_in_any_fixture() {
    let (mut quiet, mut holds) = (0, 0);
    let v3 = load("reference/loop-guard-fixture.json");
    for seq in list(&v3, "sequences") {
        let name = str_of(seq, "name").unwrap();
        let mut guard = LoopGuard::new(config_for(seq));
        for (i, call) in list(seq, "calls").iter().enumerate() {
            let (predicted, held) =
                start_and_check(&mut guard, &start_of("run-1", call, i as u64), name);
            quiet += usize::from(!predicted);
            holds += usize::from(held);
        }
    }
    let kinds = load("reference/loop-kinds-fixture.json");
    for seq in list(&kinds, "sequences") {
        let name = str_of(seq, "name").unwrap();
        let mut guard = LoopGuard::new(kinds_config_for(seq));
        for (i, event) in list(seq, "events").iter().enumerate() {
            if feed_end_event(&mut guard, event, name) {
                continue;
            }
            let (predicted, held) =
                start_and_check(&mut guard, &start_of("run", event, i as u64), name);
            quiet += usize::from(!predicted);
            holds += usize::from(held);
        }
    }
    assert!(holds > 20, "the fixtures hold ({holds})");
    assert!(
        quiet > 50,
        "and the prediction is not always `true` ({quiet})"
    );
}

#[test]
fn distinct_calls_never_may_hold_and_only_mode_pause_attached_can() {
    let mut guard = LoopGuard::new(LoopGuardConfig::default());
    for i in 0..200u64 {
        let input = json::parse(format!("{{\"message\":\"call {i}\"}}").as_bytes()).unwrap();
        let start = NodeStart::new("r", "tool:echo", "tool", LoopValue::Read(Some(&input)), i);
        assert!(!guard.may_hold_next("r", true), "call {i}");
        guard.on_node_started(&start, true);
        guard.on_node_finished(
            "r",
            "tool:echo",
            None,
            Some("ok"),
            LoopValue::Read(Some(&input)),
            true,
        );
    }
    // Two identical calls: a third could hold (threshold 3), but not while detached.
    let same = json::parse(b"{\"message\":\"again\"}").unwrap();
    for i in 0..2 {
        guard.on_node_started(
            &NodeStart::new(
                "r",
                "tool:echo",
                "tool",
                LoopValue::Read(Some(&same)),
                300 + i,
            ),
            true,
        );
    }
    assert!(guard.may_hold_next("r", true));
    assert!(!guard.may_hold_next("r", false));
    assert!(!guard.may_hold_next("other-run", true));
    let warn = LoopGuard::new(LoopGuardConfig {
        mode: LoopMode::Warn,
        ..LoopGuardConfig::default()
    });
    assert!(!warn.may_hold_next("r", true));
}
