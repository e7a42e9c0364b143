//! Fork hooks through `pthread_atfork`: every registered session runs the core's fork
//! protocol around each `fork()` of the process.

use crate::{gm_session, guard_value};
use graphmind_core::session::Session;
use parking_lot::Mutex;
use std::sync::OnceLock;

static SESSIONS: Mutex<Vec<Session>> = Mutex::new(Vec::new());
/// Whether the hooks were installed (tried once per process; the answer is kept, so a
/// failed install is reported to every later caller too).
static INSTALLED: OnceLock<bool> = OnceLock::new();

extern "C" {
    fn pthread_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
    ) -> i32;
}

unsafe extern "C" fn prepare() {
    let guard = SESSIONS.lock();
    for s in guard.iter() {
        s.before_fork();
    }
    // Held across fork(); released by parent()/child() on this same thread.
    std::mem::forget(guard);
}

unsafe fn sessions_locked() -> &'static Vec<Session> {
    // SAFETY: prepare() holds the lock on this thread; data_ptr is valid while it is held.
    &*SESSIONS.data_ptr()
}

unsafe extern "C" fn parent() {
    for s in sessions_locked() {
        s.after_fork_parent();
    }
    SESSIONS.force_unlock();
}

unsafe extern "C" fn child() {
    for s in sessions_locked() {
        s.after_fork_child();
    }
    SESSIONS.force_unlock();
}

pub(crate) fn unregister(session: &Session) {
    SESSIONS.lock().retain(|s| !s.same_as(session));
}

/// Registers `session` with the library's `pthread_atfork` hooks (installed once per
/// process): around every `fork()` the session runs its fork protocol, and the child
/// records through a fresh worker and link. `gm_session_free` unregisters it. Returns
/// false when `session` is NULL or the hooks could not be installed. Any thread.
///
/// # Safety
/// `session` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn gm_atfork_register(session: *const gm_session) -> bool {
    guard_value(false, || {
        let Some(s) = session.as_ref() else {
            return false;
        };
        let ok = *INSTALLED.get_or_init(|| pthread_atfork(Some(prepare), Some(parent), Some(child)) == 0);
        if ok {
            let mut list = SESSIONS.lock();
            if !list.iter().any(|x| x.same_as(&s.session)) {
                list.push(s.session.clone());
            }
        }
        ok
    })
}
