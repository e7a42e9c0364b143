//! An event's payload on its way from an application thread to the worker.
//!
//! `node.started` and `node.finished` are sent for every call, so the application thread
//! hands them over typed and the worker builds their JSON object: the map, its keys and
//! the conversions of every field cost the worker's time, not the caller's. Every other
//! event is built where it is made.

use crate::event::{Message, NodeFinished, NodeStarted};
use crate::json::Value;

/// What an application thread queues as an event's payload.
pub(super) enum Payload {
    /// Already a JSON object.
    Built(Value),
    /// A `node.started`, built by the worker.
    Started(Box<NodeStarted>),
    /// A `node.finished`, built by the worker.
    Finished(Box<NodeFinished>),
}

impl Payload {
    /// The payload as its JSON object, built in place on first use.
    pub(super) fn built(&mut self) -> &mut Value {
        if !matches!(self, Payload::Built(_)) {
            let typed = std::mem::replace(self, Payload::Built(Value::Null));
            *self = Payload::Built(match typed {
                Payload::Started(started) => started.into_value(),
                Payload::Finished(finished) => finished.into_value(),
                Payload::Built(value) => value,
            });
        }
        match self {
            Payload::Built(value) => value,
            _ => unreachable!("built just above"),
        }
    }

    /// The payload when it is already built (what the loop guard's payload path reads).
    pub(super) fn as_built(&self) -> Option<&Value> {
        match self {
            Payload::Built(value) => Some(value),
            _ => None,
        }
    }

    /// A node event's `input` or `output` (what the loop guard and a deferred member use);
    /// `None` when absent.
    pub(super) fn member(&self, key: &str) -> Option<&Value> {
        match self {
            Payload::Built(value) => value.get(key),
            Payload::Started(started) if key == "input" => started.input.as_ref(),
            Payload::Finished(finished) if key == "output" => finished.output.as_ref(),
            _ => None,
        }
    }

    /// A `node.finished`'s status.
    pub(super) fn status(&self) -> Option<&str> {
        match self {
            Payload::Built(value) => value.get("status").and_then(Value::as_str),
            Payload::Finished(finished) => Some(finished.status.as_str()),
            Payload::Started(_) => None,
        }
    }

    /// Sets the member `key` (a deferred `input` or `output` once read).
    pub(super) fn set_member(&mut self, key: &'static str, value: Value) {
        match self {
            Payload::Started(started) if key == "input" => started.input = Some(value),
            Payload::Finished(finished) if key == "output" => finished.output = Some(value),
            _ => {
                if let Some(map) = self.built().as_object_mut() {
                    map.insert(key, value);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{NodeKind, RunStatus};

    #[test]
    fn a_typed_payload_builds_what_its_message_builds() {
        let mut started = NodeStarted::new("tool:search", NodeKind::Tool, "search", "inst_1");
        started.input = Some(Value::from("q"));
        let mut payload = Payload::Started(Box::new(started.clone()));
        assert_eq!(payload.member("input"), Some(&Value::from("q")));
        assert_eq!(payload.member("output"), None);
        payload.set_member("input", Value::from("edited"));
        started.input = Some(Value::from("edited"));
        assert_eq!(payload.built(), &started.into_value());
        assert!(payload.as_built().is_some());

        let finished = NodeFinished::new("tool:search", 1.5, RunStatus::Error);
        let mut payload = Payload::Finished(Box::new(finished.clone()));
        assert_eq!(payload.status(), Some("error"));
        payload.set_member("output", Value::from(7i64));
        assert_eq!(payload.member("output"), Some(&Value::from(7i64)));
        let built = payload.built().clone();
        assert_eq!(built.get("output"), Some(&Value::from(7i64)));
        assert_eq!(built.get("status").and_then(Value::as_str), Some("error"));
        // A member a typed payload has no field for lands in the built object.
        let mut payload = Payload::Finished(Box::new(finished));
        payload.set_member("input", Value::Null);
        assert_eq!(
            payload.as_built().and_then(|v| v.get("input")),
            Some(&Value::Null)
        );
    }
}
