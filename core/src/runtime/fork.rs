//! Fork safety for the whole process: `pthread_atfork` hooks that run the fork protocol of
//! every registered session ([`Session::before_fork`] and its two `after_fork_*`).
//!
//! The hooks run inside `fork()` itself, on the forking thread, with nothing between them
//! and the fork. That matters for interpreters: Ruby's `Process._fork` and Python's
//! `os.register_at_fork` run interpreter code after their "before" hooks (more hooks, a
//! flush of standard output), and a session lock held there could be wanted by another
//! interpreter thread that holds the GVL or GIL while it waits for it, so neither thread
//! would ever run again. Inside `fork()` the forking thread holds the interpreter lock and
//! runs no interpreter code until the locks are let go; every other holder of a session
//! lock is core code, which never waits for an interpreter while it holds one.
//!
//! Ruby and Python register every session they create; a C program opts in with
//! `gm_atfork_register` (or calls the three protocol functions itself; never both).

use crate::session::{Session, WeakSession};
use crate::sync::{Mutex, MutexGuard};
use std::cell::RefCell;
use std::sync::OnceLock;

/// Every registered session, weakly: registering never keeps a session alive.
static REGISTERED: Mutex<Vec<WeakSession>> = Mutex::new(Vec::new());
/// Whether the hooks were installed (tried once per process; the answer is kept).
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// What `prepare` holds across a fork: the registry's guard and the sessions it locked.
type HeldAcrossFork = (MutexGuard<'static, Vec<WeakSession>>, Vec<Session>);

thread_local! {
    /// From `prepare` to `parent` or `child`, on the forking thread: the registry (so no
    /// session joins or leaves it across the fork) and the sessions whose locks are held.
    static HELD: RefCell<Option<HeldAcrossFork>> = const { RefCell::new(None) };
}

#[cfg(unix)]
extern "C" {
    fn pthread_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
    ) -> i32;
}

/// Registers `session` with the process's fork hooks (installed on first use). Returns
/// whether the hooks are installed; false on a platform without `fork()`, or when the
/// install failed. Registering twice is a no-op, and a disabled session (the kill switch)
/// is not registered: it records nothing a child could inherit. Any thread.
pub fn register(session: &Session) -> bool {
    if !session.is_enabled() {
        return true;
    }
    if !install() {
        return false;
    }
    let mut registered = REGISTERED.lock();
    registered.retain(WeakSession::is_alive);
    if !registered.iter().any(|s| s.is(session)) {
        registered.push(session.downgrade());
    }
    true
}

/// Removes `session` from the fork hooks (a freed C session). Any thread.
pub fn unregister(session: &Session) {
    REGISTERED.lock().retain(|s| s.is_alive() && !s.is(session));
}

#[cfg(unix)]
fn install() -> bool {
    // SAFETY: the three hooks are `extern "C"` functions without arguments, as required.
    *INSTALLED
        .get_or_init(|| unsafe { pthread_atfork(Some(prepare), Some(parent), Some(child)) == 0 })
}

#[cfg(not(unix))]
fn install() -> bool {
    false
}

extern "C" fn prepare() {
    // A panic must not cross into C (it would abort the app): the fork then goes ahead
    // without this protocol, as it would without GraphMind.
    let _ = std::panic::catch_unwind(|| {
        let registered = REGISTERED.lock();
        let sessions: Vec<Session> = registered.iter().filter_map(WeakSession::upgrade).collect();
        for session in &sessions {
            session.before_fork();
        }
        HELD.with(|held| *held.borrow_mut() = Some((registered, sessions)));
    });
}

/// Runs `after` on every session `prepare` held, then lets the registry go.
fn after_fork(after: fn(&Session)) {
    let _ = std::panic::catch_unwind(|| {
        if let Some((registered, sessions)) = HELD.with(|held| held.borrow_mut().take()) {
            sessions.iter().for_each(after);
            drop(sessions);
            drop(registered);
        }
    });
}

extern "C" fn parent() {
    after_fork(Session::after_fork_parent);
}

extern "C" fn child() {
    after_fork(Session::after_fork_child);
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::config::{self, EnvSnapshot, Options, SdkFlavor};
    use std::time::Duration;

    /// How long a forked child may take before it counts as hung: its own alarm ends it.
    const CHILD_LIMIT_S: u32 = 20;

    /// In a child, first: ends it with SIGALRM should it still run after [`CHILD_LIMIT_S`].
    fn bound_child() {
        // SAFETY: alarm is async-signal-safe; the child has no other use for SIGALRM.
        unsafe { libc::alarm(CHILD_LIMIT_S) };
    }

    /// Waits for child `pid` (bounded by its alarm); its exit status, or `None` when a
    /// signal ended it (the alarm: it hung).
    fn wait_child(pid: libc::pid_t) -> Option<i32> {
        let mut status = 0;
        // SAFETY: pid is our child; status is a valid out pointer.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status))
    }

    #[test]
    fn a_fork_waits_for_the_model_call_memory_and_the_replay_held_by_another_thread() {
        // The hang of 2026-12-05: a tool step's schema lookup waited in the child for a
        // process-wide lock that another parent thread held at the fork.
        let mut config =
            config::resolve(&Options::default(), &EnvSnapshot::new(), SdkFlavor::Native);
        config.url = "ws://127.0.0.1:1/ingest".into();
        let session = Session::new(config, std::sync::Arc::new(|_: &str| {}));
        assert!(register(&session));
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let holder = {
            let session = session.clone();
            std::thread::spawn(move || {
                let _memory = session.llm_memory().lock();
                let _replay = session.replay_slot().lock();
                held_tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(300));
            })
        };
        held_rx.recv().unwrap();
        // SAFETY: the child uses only the session (the fork hooks carried its locks across)
        // and exits with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            bound_child();
            let schema = crate::llm_step::declared_tool_schema(&session, Some("r"), "lookup");
            let replay = crate::replay::end(&session);
            // SAFETY: ends the child without running the parent's destructors.
            unsafe {
                libc::_exit(if schema.is_none() && replay.is_none() {
                    0
                } else {
                    3
                })
            };
        }
        let status = wait_child(pid);
        holder.join().unwrap();
        unregister(&session);
        assert_eq!(
            status,
            Some(0),
            "the child used the session's locks (None: it hung)"
        );
    }

    #[test]
    fn a_child_warns_on_stderr_while_another_parent_thread_held_the_stderr_lock() {
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _stderr = std::io::stderr().lock();
            held_tx.send(()).unwrap();
            let _ = done_rx.recv_timeout(Duration::from_secs(CHILD_LIMIT_S.into()));
        });
        held_rx.recv().unwrap();
        // SAFETY: the child only writes a warning and exits with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            bound_child();
            crate::warn::stderr_sink()("[graphmind] a warning from a forked child (test)");
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(0) };
        }
        let status = wait_child(pid);
        done_tx.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(
            status,
            Some(0),
            "the child's warning took no lock (None: it hung)"
        );
    }
}
