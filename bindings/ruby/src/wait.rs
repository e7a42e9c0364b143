//! Waiting with the GVL released.
//!
//! A held gate holds only the calling Ruby thread: the wait runs inside
//! `rb_thread_call_without_gvl2`, so every other Ruby thread keeps running. Its unblocking
//! function (called by Ruby for `Thread#raise`, `Thread#kill`, `Timeout` and Ctrl-C) sets a
//! flag that the wait checks between slices of [`WAIT_SLICE`]; the wait then returns
//! `None`, and [`await_gate`] asks Ruby, with the GVL back and unwinding caught, to deliver
//! what it has pending: an exception or a `throw` (Ruby 3.1's `Timeout` throws) releases the
//! gate as `continue` and goes on unwinding in Ruby; nothing pending (Ruby wakes blocked
//! threads for other reasons too, `Thread#wakeup` among them) waits on the same gate again,
//! so the debugger's pause stays the one it saw. The `2` variant is used because it returns
//! instead of raising from inside Rust frames.

use graphmind_core::gate::{GateDecision, PendingGate};
use graphmind_core::session::Session;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long one blocking slice lasts before the interrupt flag is checked again.
pub const WAIT_SLICE: Duration = Duration::from_millis(20);

struct Call<F, R> {
    f: Option<F>,
    out: Option<R>,
    interrupted: AtomicBool,
}

unsafe extern "C" fn trampoline<F: FnOnce(&AtomicBool) -> R, R>(data: *mut c_void) -> *mut c_void {
    // SAFETY: `data` is the `Call` owned by `call_without_gvl`, alive for this call.
    let call = unsafe { &mut *(data as *mut Call<F, R>) };
    if let Some(f) = call.f.take() {
        let flag = &call.interrupted;
        call.out = catch_unwind(AssertUnwindSafe(|| f(flag))).ok();
    }
    std::ptr::null_mut()
}

unsafe extern "C" fn unblock<F, R>(data: *mut c_void) {
    // SAFETY: only the atomic flag is touched, from Ruby's interrupting thread.
    let call = unsafe { &*(data as *const Call<F, R>) };
    call.interrupted.store(true, Ordering::Release);
}

/// Runs `f` without the GVL; `f` gets the interrupt flag. `None` when Ruby interrupted the
/// thread before `f` ran or `f` panicked.
fn call_without_gvl<F: FnOnce(&AtomicBool) -> R, R>(f: F) -> Option<R> {
    let mut call = Call {
        f: Some(f),
        out: None,
        interrupted: AtomicBool::new(false),
    };
    let data = &mut call as *mut Call<F, R> as *mut c_void;
    // SAFETY: `call` outlives the call; the callbacks match the data's type.
    unsafe {
        rb_sys::rb_thread_call_without_gvl2(
            Some(trampoline::<F, R>),
            data,
            Some(unblock::<F, R>),
            data,
        );
    }
    call.out
}

/// Runs `f` (which must not touch Ruby) without the GVL and without an unblocking function:
/// for bounded waits (`flush`, `dispose`).
pub fn without_gvl<R: Default>(f: impl FnOnce() -> R) -> R {
    let mut call = Call {
        f: Some(|_: &AtomicBool| f()),
        out: None,
        interrupted: AtomicBool::new(false),
    };
    type F0<G> = G;
    fn run<G: FnOnce(&AtomicBool) -> R, R>(call: &mut Call<G, R>) {
        let data = call as *mut Call<G, R> as *mut c_void;
        // SAFETY: as above; no unblocking function: the wait is bounded.
        unsafe {
            rb_sys::rb_thread_call_without_gvl(
                Some(trampoline::<G, R>),
                data,
                None,
                std::ptr::null_mut(),
            );
        }
    }
    run::<F0<_>, R>(&mut call);
    call.out.unwrap_or_default()
}

/// Waits for a held gate's decision; `None` when a Ruby interrupt cut the wait.
pub fn gate_without_gvl(pending: &PendingGate) -> Option<GateDecision> {
    call_without_gvl(|interrupted: &AtomicBool| loop {
        if interrupted.load(Ordering::Acquire) {
            return None;
        }
        if let Some(decision) = pending.wait_timeout(WAIT_SLICE) {
            return Some(decision);
        }
    })
    .flatten()
}

/// Waits for a held gate's decision (see the module doc): `Err` carries the exception or
/// `throw` Ruby delivered to this thread, after the gate was released as `continue`.
pub fn await_gate(session: &Session, pending: &PendingGate) -> Result<GateDecision, magnus::Error> {
    loop {
        if let Some(decision) = gate_without_gvl(pending) {
            return Ok(decision);
        }
        if let Err(interrupt) = deliver_pending_interrupts() {
            session.discard_gate(pending.pause_id());
            return Err(interrupt);
        }
    }
}

/// Lets Ruby raise (or throw) what it has pending for this thread, caught as an `Error`.
fn deliver_pending_interrupts() -> Result<(), magnus::Error> {
    magnus::rb_sys::protect(|| {
        // SAFETY: called with the GVL held; `protect` catches any unwinding it starts.
        unsafe { rb_sys::rb_thread_check_ints() };
        rb_sys::Qnil as rb_sys::VALUE
    })
    .map(|_| ())
}

/// `Session::ready` without the GVL, in slices so an interrupt ends it early.
pub fn ready_without_gvl(session: &Session, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    call_without_gvl(|interrupted: &AtomicBool| loop {
        let now = Instant::now();
        let slice = deadline.saturating_duration_since(now).min(WAIT_SLICE * 5);
        if session.ready(slice) {
            return true;
        }
        if interrupted.load(Ordering::Acquire) || Instant::now() >= deadline {
            return false;
        }
    })
    .unwrap_or(false)
}
