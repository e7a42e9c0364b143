//! Fork hooks for C: `gm_atfork_register` puts a session in the core's process-wide
//! `pthread_atfork` registry (`graphmind_core::fork`), where Ruby and Python sessions are too.

use crate::{gm_session, guard_value};

/// Registers `session` with the library's `pthread_atfork` hooks (installed once per
/// process): around every `fork()` the session runs its fork protocol, and the child
/// records through a fresh worker and link. `gm_session_free` unregisters it. A session
/// registered here must not also be passed to the three `gm_session_*fork*` functions:
/// the hooks already run them. Returns false when `session` is NULL or the hooks could not
/// be installed; a disabled session needs no hooks, and gets true. Any thread.
///
/// # Safety
/// `session` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn gm_atfork_register(session: *const gm_session) -> bool {
    guard_value(false, || {
        let Some(s) = session.as_ref() else {
            return false;
        };
        graphmind_core::fork::register(&s.session)
    })
}
