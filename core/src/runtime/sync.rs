//! The session's locks, and how they are carried across `fork()`.
//!
//! A forked child has one thread, the one that called `fork()`, but a copy of all the
//! parent's memory. A lock that queues its waiters in user memory (parking_lot keeps them
//! in a process-wide table) therefore hands the child every parent thread that was waiting
//! at the fork as a waiter that will never run: a later unlock in the child may wake one of
//! them, or hand it the lock outright, and the child's real waiters sleep forever.
//! std's locks keep their waiters in the kernel (a futex on Linux), which the child does
//! not inherit, so these wrap them. They do not poison: a panic inside a critical section
//! is contained by the caller, and the state stays usable, as with parking_lot.
//!
//! The fork protocol: before `fork()` the forking thread takes every lock of a session
//! ([`ForkHold`]), so that no other thread holds one mid-update at the fork; after it,
//! the same thread lets them go, in the parent and in the child alike.

use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

/// A guard of [`Mutex`].
pub type MutexGuard<'a, T> = std::sync::MutexGuard<'a, T>;

/// A mutual-exclusion lock whose waiters a forked child does not inherit; never poisoned.
#[derive(Debug, Default)]
pub struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    /// A new, unlocked lock around `value`.
    pub const fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }

    /// Waits for the lock and returns its guard.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A condition variable for [`Mutex`], with the same fork behaviour.
#[derive(Debug, Default)]
pub struct Condvar(std::sync::Condvar);

impl Condvar {
    /// A condition variable no thread waits on.
    pub const fn new() -> Self {
        Condvar(std::sync::Condvar::new())
    }

    /// Releases `guard`, waits for a notification or `deadline`, and locks again. Returns
    /// the guard and whether the deadline passed. Wakes may be spurious: callers loop.
    pub fn wait_until<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Instant,
    ) -> (MutexGuard<'a, T>, bool) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (guard, true);
        }
        let (guard, result) = self
            .0
            .wait_timeout(guard, left)
            .unwrap_or_else(PoisonError::into_inner);
        (guard, result.timed_out())
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// The locks one owner (a session) holds across `fork()`: taken by [`ForkHold::lock`] in
/// the order given, kept on the forking thread by [`ForkHold::keep`], let go by
/// [`release`] on that thread after the fork.
pub struct ForkHold {
    // Field order is drop order: the guards go before the owner that keeps their locks alive.
    guards: Vec<Box<dyn Any>>,
    owner: Arc<dyn Any + Send + Sync>,
}

thread_local! {
    /// What this thread holds across a fork, per owner.
    static HELD_ACROSS_FORK: RefCell<Vec<ForkHold>> = const { RefCell::new(Vec::new()) };
}

impl ForkHold {
    /// An empty hold for `owner`, whose allocation contains every lock it will take.
    pub fn new(owner: Arc<dyn Any + Send + Sync>) -> Self {
        ForkHold {
            guards: Vec::new(),
            owner,
        }
    }

    /// Takes `mutex` and keeps its guard until [`release`].
    ///
    /// # Safety
    /// `mutex` must live inside the owner's allocation (so the guard, which this hold
    /// outlives the borrow of, never outlives the lock).
    pub unsafe fn lock<T: 'static>(&mut self, mutex: &Mutex<T>) {
        let guard = mutex.lock();
        // SAFETY: per the contract, the owner Arc in this hold keeps `mutex` alive, and the
        // guards are dropped before it.
        let guard: MutexGuard<'static, T> = std::mem::transmute(guard);
        self.guards.push(Box::new(guard));
    }

    /// Keeps the hold on this thread until [`release`] for the same owner.
    pub fn keep(self) {
        HELD_ACROSS_FORK.with(|held| held.borrow_mut().push(self));
    }
}

/// Lets go of the locks this thread keeps for `owner`; false when it keeps none (the
/// protocol was not followed: nothing to release).
pub fn release(owner: &Arc<dyn Any + Send + Sync>) -> bool {
    let hold = HELD_ACROSS_FORK.with(|held| {
        let mut held = held.borrow_mut();
        let at = held.iter().position(|h| Arc::ptr_eq(&h.owner, owner))?;
        Some(held.remove(at))
    });
    hold.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_hold_keeps_its_locks_until_released_on_its_thread() {
        let owner: Arc<(Mutex<u32>, Mutex<String>)> =
            Arc::new((Mutex::new(1), Mutex::new("a".into())));
        let as_any: Arc<dyn Any + Send + Sync> = owner.clone();
        let mut hold = ForkHold::new(as_any.clone());
        unsafe {
            hold.lock(&owner.0);
            hold.lock(&owner.1);
        }
        hold.keep();
        let other = {
            let owner = owner.clone();
            std::thread::spawn(move || *owner.0.lock() + 1)
        };
        std::thread::sleep(Duration::from_millis(30));
        assert!(
            !other.is_finished(),
            "another thread waits while the hold is kept"
        );
        assert!(release(&as_any));
        assert_eq!(other.join().unwrap(), 2);
        assert!(!release(&as_any), "a hold is released once");
        assert_eq!(*owner.1.lock(), "a");
    }

    #[test]
    fn a_condvar_wait_ends_at_its_deadline_or_on_notify() {
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let guard = pair.0.lock();
        let (guard, timed_out) = pair
            .1
            .wait_until(guard, Instant::now() + Duration::from_millis(20));
        assert!(timed_out && !*guard);
        drop(guard);
        let notifier = {
            let pair = pair.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                *pair.0.lock() = true;
                pair.1.notify_all();
            })
        };
        let mut guard = pair.0.lock();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !*guard {
            let (next, timed_out) = pair.1.wait_until(guard, deadline);
            guard = next;
            assert!(!timed_out);
        }
        drop(guard);
        notifier.join().unwrap();
    }

    #[test]
    fn a_panic_inside_the_lock_does_not_poison_it() {
        let lock = Arc::new(Mutex::new(0));
        let l = lock.clone();
        let _ = std::thread::spawn(move || {
            let _g = l.lock();
            panic!("inside");
        })
        .join();
        *lock.lock() += 1;
        assert_eq!(*lock.lock(), 1);
    }
}
