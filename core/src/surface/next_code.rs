//! The integer encoding of a step's [`Next`]: one number per move, the same in every
//! binding (the C ABI's `gm_next_kind` agrees for the five moves it has).
//!
//! A binding returns `(code, value)` (Python), packs `handle * CODE_SPAN + code` (Node) or
//! tags an array by the code's [`name`] (Ruby); the host-language code switches on the
//! constants the binding exports under these names, never on a literal.

use crate::json::Value;
use crate::step::Next;

/// Call the function with the live input.
pub const RUN: u8 = 0;
/// Return the function's own result (it has been recorded).
pub const RETURN_RESULT: u8 = 1;
/// Return the injected value instead of calling, of the result or of the error.
pub const RETURN_INJECTED: u8 = 2;
/// Re-raise the function's original error.
pub const RERAISE: u8 = 3;
/// Raise the binding's abort error: the run was aborted.
pub const ABORT: u8 = 4;
/// A debugger holds the step: wait for its decision, then hand it to the step.
pub const HELD: u8 = 5;
/// Raise the recorded error `{name, message, stack?}` (a replayed call).
pub const RAISE: u8 = 6;
/// Return a stream of these chunks (a replayed streamed model call).
pub const STREAM: u8 = 7;
/// Call the function with the edited input (the value) instead of the live one.
pub const RUN_EDITED: u8 = 8;

/// Every code is below this: a binding may pack a handle and a code into one number as
/// `handle * CODE_SPAN + code` (Node does, to cross once per call).
pub const CODE_SPAN: u8 = 16;

/// Every code with the name a binding exports it under, in code order.
pub const NAMED: [(&str, u8); 9] = [
    ("RUN", RUN),
    ("RETURN_RESULT", RETURN_RESULT),
    ("RETURN_INJECTED", RETURN_INJECTED),
    ("RERAISE", RERAISE),
    ("ABORT", ABORT),
    ("HELD", HELD),
    ("RAISE", RAISE),
    ("STREAM", STREAM),
    ("RUN_EDITED", RUN_EDITED),
];

const _: () = assert!((RUN_EDITED as usize) < CODE_SPAN as usize && NAMED.len() == 9);

/// The code of `next`.
pub fn code(next: &Next) -> u8 {
    match next {
        Next::Run { input: None } => RUN,
        Next::Run { input: Some(_) } => RUN_EDITED,
        Next::ReturnResult => RETURN_RESULT,
        Next::ReturnInjected(_) => RETURN_INJECTED,
        Next::Reraise => RERAISE,
        Next::Abort => ABORT,
        Next::Raise(_) => RAISE,
        Next::Stream(_) => STREAM,
    }
}

/// The lower-case name of a code (`run`, `return_result`, ...), for a binding that tags
/// by name instead of number; `None` for a number that is not a code.
pub fn name(code: u8) -> Option<&'static str> {
    Some(match code {
        RUN | RUN_EDITED => "run",
        RETURN_RESULT => "result",
        RETURN_INJECTED => "inject",
        RERAISE => "reraise",
        ABORT => "abort",
        HELD => "held",
        RAISE => "raise",
        STREAM => "stream",
        _ => return None,
    })
}

/// `next` as its code and the value that goes with it: the edited input (`RUN_EDITED`),
/// the injected value (`RETURN_INJECTED`), the recorded error as `{name, message, stack?}`
/// (`RAISE`) or the array of chunks (`STREAM`); `None` for the other codes.
pub fn split(next: Next) -> (u8, Option<Value>) {
    let code = code(&next);
    let value = match next {
        Next::Run { input } => input,
        Next::ReturnInjected(v) => Some(v),
        Next::Raise(error) => Some(error.to_value()),
        Next::Stream(chunks) => Some(Value::Array(chunks)),
        Next::ReturnResult | Next::Reraise | Next::Abort => None,
    };
    (code, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_named_in_order() {
        for (i, (_, a)) in NAMED.iter().enumerate() {
            assert_eq!(usize::from(*a), i);
            assert!(name(*a).is_some());
        }
        assert_eq!(name(CODE_SPAN), None);
    }

    #[test]
    fn split_carries_the_value_of_each_move() {
        let edited = Next::Run {
            input: Some(Value::from(1_i64)),
        };
        assert_eq!(split(edited), (RUN_EDITED, Some(Value::from(1_i64))));
        assert_eq!(split(Next::Run { input: None }), (RUN, None));
        assert_eq!(split(Next::Abort), (ABORT, None));
        assert_eq!(
            split(Next::Stream(vec![Value::Null])),
            (STREAM, Some(Value::Array(vec![Value::Null])))
        );
    }
}
