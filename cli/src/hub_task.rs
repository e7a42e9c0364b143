//! The hub thread and its handle: the one thread (`graphmind-hub`) that owns the server's
//! [`HubState`] (connections, run owners, pauses, viewers, breakpoints, step mode), fed by
//! a channel of commands.
//!
//! Everyone else (the connection tasks, the HTTP routes, the writer and timer threads)
//! holds a [`Hub`] and hands it closures: [`Hub::call`] runs one on the hub thread and
//! waits for its result, [`Hub::tell`] queues one and returns at once. Commands run one at
//! a time in the order they were queued, so a command sees every command queued before it
//! (a long-poll woken after the writer `tell`s a pause open finds the pause); a site that
//! reads and then writes does both in one command, as it did under the old mutex.
//!
//! A command that panics is caught and logged; the state stays in use (the old mutex's
//! poison recovery), and a `call` whose command panicked gets [`HubError`].

use crate::hub::HubState;
use crossbeam_channel::{unbounded, Receiver, Sender};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// One unit of work for the hub thread.
pub type Command = Box<dyn FnOnce(&mut HubState) + Send>;

/// The name of the hub thread.
pub const THREAD_NAME: &str = "graphmind-hub";

/// Why a [`Hub::call`] has no result: its command panicked (logged on the hub thread), or
/// the hub thread has ended. Callers answer as a server that is going down would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubError;

impl std::fmt::Display for HubError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the hub did not answer (its command panicked or its thread ended)")
    }
}

impl std::error::Error for HubError {}

/// The handle to the hub thread: cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Hub {
    tx: Sender<Command>,
}

impl Hub {
    /// Starts the hub thread owning `state`. It runs until every handle is dropped.
    pub fn start(state: HubState) -> std::io::Result<Hub> {
        let (tx, rx) = unbounded::<Command>();
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || run(state, rx))?;
        Ok(Hub { tx })
    }

    /// A handle whose commands go nowhere (the hub thread has ended): for tests.
    #[cfg(test)]
    fn detached() -> Hub {
        let (tx, _) = unbounded::<Command>();
        Hub { tx }
    }

    /// Runs `f` on the hub thread and waits for its result. `Err` when `f` panicked or the
    /// hub thread has ended: never waits forever.
    pub fn call<R, F>(&self, f: F) -> Result<R, HubError>
    where
        F: FnOnce(&mut HubState) -> R + Send + 'static,
        R: Send + 'static,
    {
        let (reply, answer) = crossbeam_channel::bounded(1);
        // If `f` panics, `reply` is dropped unwinding and `recv` below returns at once.
        let cmd: Command = Box::new(move |h| {
            let _ = reply.send(f(h));
        });
        self.tx.send(cmd).map_err(|_| HubError)?;
        answer.recv().map_err(|_| HubError)
    }

    /// Queues `f` for the hub thread and returns at once; it runs after every command
    /// queued before it. Dropped (and logged) when the hub thread has ended.
    pub fn tell<F>(&self, f: F)
    where
        F: FnOnce(&mut HubState) + Send + 'static,
    {
        if self.tx.send(Box::new(f)).is_err() {
            tracing::error!("hub: a command was dropped: the hub thread has ended");
        }
    }
}

/// The hub thread: runs each command in turn until every [`Hub`] is gone.
fn run(mut state: HubState, rx: Receiver<Command>) {
    for cmd in rx {
        // The state is plain data and every command leaves it consistent between its
        // steps, as under the old mutex (whose poisoning was ignored): keep serving.
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| cmd(&mut state))) {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-text panic".into());
            tracing::error!("hub: a command panicked ({what}); the hub keeps serving");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::ControlPolicy;
    use std::sync::{Arc, Mutex};

    fn hub() -> Hub {
        Hub::start(HubState::new(Vec::new(), ControlPolicy::default())).unwrap()
    }

    #[test]
    fn call_returns_the_commands_result() {
        let hub = hub();
        assert_eq!(hub.call(|h| h.socket_count()), Ok(0));
        assert_eq!(hub.call(|h| h.mode().to_owned()), Ok("run".to_owned()));
    }

    #[test]
    fn tells_run_in_order_before_a_later_call() {
        let hub = hub();
        let seen = Arc::new(Mutex::new(Vec::new()));
        for i in 0..100 {
            let seen = seen.clone();
            hub.tell(move |_| seen.lock().unwrap().push(i));
        }
        let n = hub.call(|_| ()).map(|_| seen.lock().unwrap().len());
        assert_eq!(n, Ok(100), "a call runs after every tell queued before it");
        assert_eq!(*seen.lock().unwrap(), (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn a_panicking_command_is_an_error_and_the_hub_keeps_serving() {
        let hub = hub();
        hub.call(|h| h.begin_shutdown()).unwrap();
        let r: Result<(), _> = hub.call(|_| panic!("boom"));
        assert_eq!(r, Err(HubError));
        hub.tell(|_| panic!("boom in a tell"));
        // the state survived both, with what the earlier command did
        assert_eq!(hub.call(|h| h.is_shutting_down()), Ok(true));
    }

    #[test]
    fn call_after_the_thread_ended_does_not_wait() {
        let hub = Hub::detached();
        assert_eq!(hub.call(|h| h.socket_count()), Err(HubError));
        hub.tell(|h| h.begin_shutdown()); // dropped, logged
    }
}
