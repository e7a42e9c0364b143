//! The fork protocol's hooks (see `docs/architecture.md`, "Fork", and [`crate::fork`]):
//! every lock the session's calls take is held across `fork()`, and the child starts over
//! with a fresh outbox and worker, never believing itself attached.

use super::*;

impl Session {
    /// Fork protocol, before `fork()`: takes every lock of the session (`shared`, then the
    /// outbox receiver's, the loop guard's, the replay's, the model-call memory's and the
    /// warner's) so that no other thread holds one mid-update at the moment of the fork.
    /// Every lock a session's calls take must be one of these: a lock outside the session
    /// (a process-wide table) may be held at the fork by a thread the child does not have,
    /// and the child's first wait for it never ends. Must be followed, on the same thread, by
    /// [`Session::after_fork_parent`] or [`Session::after_fork_child`]. A program that forks
    /// from several threads at once, or calls this twice, gets what it asked for: a wait.
    pub fn before_fork(&self) {
        let mut hold = ForkHold::new(self.fork_owner());
        // SAFETY: every lock lives inside `self.inner`, which the hold keeps alive.
        unsafe {
            hold.lock(&self.inner.shared);
            hold.lock(&self.inner.inbox);
            hold.lock(&self.inner.loop_guard);
            hold.lock(&self.inner.replay);
            hold.lock(&self.inner.llm_memory);
            hold.lock(self.inner.warner.rate_lock());
        }
        hold.keep();
    }

    /// What the session's model calls taught (see [`crate::llm_step`]).
    pub(crate) fn llm_memory(&self) -> &Mutex<crate::llm_step::LlmMemory> {
        &self.inner.llm_memory
    }

    /// The session's replay, when one runs (see [`crate::replay`]).
    pub(crate) fn replay_slot(&self) -> &Mutex<Option<crate::replay::Replayer>> {
        &self.inner.replay
    }

    /// Fork protocol, in the parent after `fork()`: lets go of the locks taken by
    /// [`Session::before_fork`] on this thread.
    pub fn after_fork_parent(&self) {
        self.release_fork_hold();
    }

    /// What a [`ForkHold`] of this session is keyed by: its shared allocation.
    pub(super) fn fork_owner(&self) -> Arc<dyn std::any::Any + Send + Sync> {
        self.inner.clone()
    }

    pub(super) fn release_fork_hold(&self) {
        crate::sync::release(&self.fork_owner());
    }

    /// Fork protocol, in the child after `fork()`: the parent's worker and socket do not
    /// exist here. The child gets a fresh channel and, on its next event, a fresh worker
    /// that reconnects and records; it never believes itself attached.
    pub fn after_fork_child(&self) {
        // The locks are std's: their waiters live in the kernel, which the child does not
        // inherit, so unlocking them here wakes nobody who is not here (see `crate::sync`).
        self.release_fork_hold();
        // The parent's queue, with its deferred loop-guard updates and the outputs its
        // worker was to key, does not exist here.
        self.inner.loop_backlog.store(0, Ordering::Release);
        self.inner.loop_outputs_pending.store(0, Ordering::Release);
        self.inner.loop_guard.lock().drop_later_outputs();
        event::reseed_ids();
        let mut shared = self.inner.shared.lock();
        // The parent's worker holds the receiving end in the parent; dropping the sender
        // here would run channel code over the parent's waiters, so it is let go unrun. A
        // fresh outbox is opened when the child first records (most children exec first).
        let (placeholder, _) = open_outbox_of(0, 0, 0);
        std::mem::forget(std::mem::replace(&mut shared.outbox, placeholder));
        shared.outbox_reopen = true;
        shared.worker_started = false;
        shared.worker = None;
        // The parent's thread: joining or detaching it here would act on a thread the
        // child does not have.
        std::mem::forget(shared.worker_join.take());
        shared.engine_attached = false;
        shared.engine.disarm();
        // Gates held by the parent's other threads do not exist in the child.
        drop(shared.engine.take_all());
        shared.editable.clear();
        shared.edit_schemas.clear();
        shared.hub_capabilities = None;
        shared.session_token = None;
        shared.implicit_run = None;
        shared.link_generation += 1;
        drop(shared);
        if let Some(inherited) = self.inner.inbox.lock().take() {
            std::mem::forget(inherited);
        }
        self.inner.attached.store(false, Ordering::Release);
        self.inner.buffered.store(0, Ordering::Relaxed);
        self.inner.pending_gaps.store(0, Ordering::Relaxed);
        self.inner.spooled.store(0, Ordering::Relaxed);
    }
}
