//! The calling thread's CPU time, shared by the benches that report "app-thread cost"
//! (included with `#[path]` from the core, cli and ffi benches).
//!
//! On a shared 2-core machine wall time mostly measures who else was scheduled (the
//! session's own worker included, which runs on another core on any real machine).

use std::time::Duration;

/// CPU time the calling thread has used so far (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; CLOCK_THREAD_CPUTIME_ID exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
