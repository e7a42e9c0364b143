//! One pause per failure: the failures whose error gate was already offered.
//!
//! A framework's error climbs through every level it passed (a LangGraph tool, the node that
//! ran it, the graph): each level's callback reports the same failure. The innermost level
//! offers the error gate; the levels above record `node.error` and finish `error` without
//! pausing again. A skin names each failure it reports with a [`FailureId`] (in Node, one
//! number per thrown object); the rule of who pauses lives here, in [`GatedFailures`], and in
//! [`crate::step::Step::error_once`].

use std::collections::{HashSet, VecDeque};

/// The failures remembered at most (the oldest forgotten first): a failure climbs through
/// its levels within one call stack, so only the most recent few ever matter.
pub const MAX_GATED_FAILURES: usize = 1024;

/// A skin's name for one failure (the same thrown value at every level). `0`: unnamed, the
/// failure is gated wherever it is reported.
pub type FailureId = u64;

/// The failures whose error gate was offered (bounded by [`MAX_GATED_FAILURES`]).
#[derive(Debug, Default)]
pub struct GatedFailures {
    seen: HashSet<FailureId>,
    order: VecDeque<FailureId>,
}

impl GatedFailures {
    /// No failure gated yet.
    pub fn new() -> GatedFailures {
        GatedFailures::default()
    }

    /// Whether `failure` gets its error gate here: `true` the first time a named failure is
    /// reported (it is remembered from now on) and for every unnamed one; `false` when a
    /// level below already offered it.
    pub fn first_report(&mut self, failure: FailureId) -> bool {
        if failure == 0 {
            return true;
        }
        if !self.seen.insert(failure) {
            return false;
        }
        self.order.push_back(failure);
        if self.order.len() > MAX_GATED_FAILURES {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }

    /// How many failures are remembered.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_failure_is_gated_once_an_unnamed_one_always() {
        let mut gated = GatedFailures::new();
        assert!(gated.first_report(7));
        assert!(!gated.first_report(7));
        assert!(gated.first_report(8));
        assert!(gated.first_report(0));
        assert!(gated.first_report(0));
        assert_eq!(gated.len(), 2);
    }

    #[test]
    fn the_oldest_failures_are_forgotten_past_the_bound() {
        let mut gated = GatedFailures::new();
        for id in 1..=(MAX_GATED_FAILURES as u64 + 1) {
            assert!(gated.first_report(id));
        }
        assert_eq!(gated.len(), MAX_GATED_FAILURES);
        // 1 was forgotten: a report of it is a first one again.
        assert!(gated.first_report(1));
        assert!(!gated.first_report(MAX_GATED_FAILURES as u64 + 1));
    }
}
