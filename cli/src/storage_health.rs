//! What the writer could not store. A full disk (or any other SQLite write failure) does
//! not stop the server: it keeps reading every socket, fanning live events out and
//! answering the API, and counts the events it could not write. The count and the last
//! error are logged (throttled) and shown in `/health` as `storage`, from the first
//! failure on; storing resumes by itself once a write succeeds again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// The writer's record of failed writes.
#[derive(Default)]
pub struct StorageHealth {
    unstored: AtomicU64,
    failing: AtomicBool,
    ever_failed: AtomicBool,
    last_error: Mutex<String>,
}

impl StorageHealth {
    /// `events` could not be stored because of `err`; returns the total not stored so far.
    pub fn failed(&self, events: u64, err: &rusqlite::Error) -> u64 {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = describe(err);
        self.failing.store(true, Ordering::Relaxed);
        self.ever_failed.store(true, Ordering::Relaxed);
        self.unstored.fetch_add(events, Ordering::Relaxed) + events
    }

    /// A write succeeded: returns the total not stored if storage was failing until now.
    pub fn succeeded(&self) -> Option<u64> {
        self.failing
            .swap(false, Ordering::Relaxed)
            .then(|| self.unstored.load(Ordering::Relaxed))
    }

    /// `/health`'s `storage` member, or `None` while no write ever failed.
    pub fn health_value(&self) -> Option<graphmind_core::json::Map> {
        if !self.ever_failed.load(Ordering::Relaxed) {
            return None;
        }
        let error = self
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Some(crate::util::object([
            ("ok", (!self.failing.load(Ordering::Relaxed)).into()),
            (
                "unstoredEvents",
                self.unstored.load(Ordering::Relaxed).into(),
            ),
            ("lastError", error.into()),
        ]))
    }
}

/// SQLite's error, with the cause a user can act on named for a full disk.
pub fn describe(err: &rusqlite::Error) -> String {
    if err.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
        format!("the disk is full ({err})")
    } else {
        err.to_string()
    }
}
