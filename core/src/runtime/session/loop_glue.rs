//! Glue between node events and the loop guard ([`crate::loop_guard`]): keys an event
//! before the guard's lock is taken, applies it, keeps the books of dropped events, and
//! turns a verdict into the warning printed once the lock is released.

use super::*;

/// A node event of a known node as the loop guard takes it, keyed before the guard's lock
/// is taken: a watched start with its input's key, a watched finish with its outcome's keys
/// (a successful output's left to the worker), or a node the guard does not watch.
pub(super) enum LoopKeys<'a> {
    Start(&'a NodeRef, StartFingerprint),
    Finish(&'a NodeRef, FinishKey),
    Unwatched,
}

/// [`LoopKeys`] of `node`'s `node.started` or `node.finished`.
pub(super) fn key_loop_event<'a>(
    keyer: &LoopKeyer,
    event_type: MessageType,
    node: &'a NodeRef,
    payload: &Payload,
) -> Option<LoopKeys<'a>> {
    if !keyer.applies_to(node.kind.as_str(), &node.node_id, &node.name) {
        return Some(LoopKeys::Unwatched);
    }
    match event_type {
        MessageType::NodeStarted => Some(LoopKeys::Start(
            node,
            keyer.fingerprint_start(&node.node_id, LoopValue::Read(payload.member("input"))),
        )),
        MessageType::NodeFinished => Some(LoopKeys::Finish(
            node,
            keyer.key_finish_later(payload.status(), LoopValue::Read(payload.member("output"))),
        )),
        _ => None,
    }
}

/// Applies one node event to the loop guard (`attached`: whether a debugger would hold),
/// with its keys when they were computed beforehand. Returns the warning to print once the
/// guard's lock is released (a binding's warning sink may need its interpreter lock), and
/// the ticket of a finish whose output the worker is to key.
pub(super) fn note_loop(
    guard: &mut LoopGuard,
    run_id: &str,
    event_type: MessageType,
    payload: &Payload,
    seq: u64,
    attached: bool,
    keys: Option<LoopKeys<'_>>,
) -> (Option<LoopWarning>, Option<OutputTicket>) {
    match (event_type, keys, payload.as_built()) {
        (_, Some(LoopKeys::Unwatched), _) => (None, None),
        (_, Some(LoopKeys::Start(node, fp)), _) => {
            let start = NodeStart::new(
                run_id,
                &node.node_id,
                node.kind.as_str(),
                LoopValue::Read(payload.member("input")),
                seq,
            )
            .name(&node.name)
            .instance(&node.instance_id);
            (
                warning_of(guard.record_start(&start, fp, attached).verdict),
                None,
            )
        }
        (_, Some(LoopKeys::Finish(node, key)), _) => (
            None,
            guard.record_finish(run_id, &node.node_id, Some(&node.instance_id), key),
        ),
        // Unkeyed events arrive built: the worker builds before it notes, and a typed event
        // noted on the application thread was keyed first.
        (MessageType::NodeStarted, None, Some(payload)) => {
            (note_loop_start(guard, run_id, payload, seq, attached), None)
        }
        (MessageType::NodeFinished, None, Some(payload)) => {
            note_loop_finish(guard, run_id, payload);
            (None, None)
        }
        (MessageType::NodeError, None, Some(payload)) => {
            note_loop_error(guard, run_id, payload);
            (None, None)
        }
        _ => (None, None),
    }
}

pub(super) fn warning_of(verdict: LoopVerdict) -> Option<LoopWarning> {
    match verdict {
        LoopVerdict::Warn(warning) => Some(warning),
        _ => None,
    }
}

/// Keeps the loop guard's books for a watched event that was dropped (the worker fell
/// behind): a start that never reached the wire is not "the call right before" the next
/// one; a finish closes its open call as a call that equals nothing (without keying its
/// output: dropping must stay cheap); an error still marks its open call.
pub(super) fn note_dropped(guard: &mut LoopGuard, event: &mut OutEvent) {
    let payload = &*event.payload.built();
    let run_id = event.run_id.as_str();
    let text = |key: &str| payload.get(key).and_then(Value::as_str);
    match event.event_type {
        MessageType::NodeStarted => {
            guard.on_unidentified_start(run_id, text("kind").unwrap_or("tool"), event.seq)
        }
        MessageType::NodeFinished => {
            if let Some(node_id) = text("nodeId") {
                guard.on_node_finished(
                    run_id,
                    node_id,
                    text("instanceId"),
                    text("status"),
                    LoopValue::Unreadable,
                    false,
                );
            }
        }
        MessageType::NodeError => note_loop_error(guard, run_id, payload),
        _ => {}
    }
}

pub(super) fn note_loop_start(
    guard: &mut LoopGuard,
    run_id: &str,
    payload: &Value,
    seq: u64,
    attached: bool,
) -> Option<LoopWarning> {
    let text = |key: &str| payload.get(key).and_then(Value::as_str);
    let (Some(kind), Some(node_id)) = (text("kind"), text("nodeId")) else {
        if let Some(kind) = text("kind") {
            guard.on_unidentified_start(run_id, kind, seq);
        }
        return None;
    };
    let mut start = NodeStart::new(
        run_id,
        node_id,
        kind,
        LoopValue::Read(payload.get("input")),
        seq,
    );
    if let Some(name) = text("name") {
        start = start.name(name);
    }
    if let Some(instance) = text("instanceId") {
        start = start.instance(instance);
    }
    warning_of(guard.observe_start(&start, attached).verdict)
}

pub(super) fn note_loop_finish(guard: &mut LoopGuard, run_id: &str, payload: &Value) {
    let Some(node_id) = payload.get("nodeId").and_then(Value::as_str) else {
        return;
    };
    let instance = payload.get("instanceId").and_then(Value::as_str);
    let status = payload.get("status").and_then(Value::as_str);
    guard.on_node_finished(
        run_id,
        node_id,
        instance,
        status,
        LoopValue::Read(payload.get("output")),
        true,
    );
}

pub(super) fn note_loop_error(guard: &mut LoopGuard, run_id: &str, payload: &Value) {
    let Some(node_id) = payload.get("nodeId").and_then(Value::as_str) else {
        return;
    };
    let instance = payload.get("instanceId").and_then(Value::as_str);
    let error = payload.get("error");
    let name = error.and_then(|e| e.get("name")).and_then(Value::as_js_str);
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_js_str);
    guard.on_node_error(run_id, node_id, instance, name, message);
}
