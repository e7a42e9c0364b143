//! Warnings to the host's log: never more than one per key per interval, never a panic.
//!
//! GraphMind must never spam or crash the app it debugs: every internal failure degrades
//! to a no-op plus at most one line per key per `warn_interval`, prefixed `[graphmind] `.

use crate::sync::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The default interval between two warnings with the same key (60 s, as the reference).
pub const DEFAULT_WARN_INTERVAL: Duration = Duration::from_secs(60);

/// Where warnings go: the binding's logger, or standard error.
pub type WarnSink = Arc<dyn Fn(&str) + Send + Sync + 'static>;

/// The sink that writes each warning as one line on standard error.
pub fn stderr_sink() -> WarnSink {
    Arc::new(write_stderr_line)
}

/// Writes `line` and a newline to standard error in one `write`, without std's process-wide
/// stderr lock: a forked child whose parent had another thread inside that lock at the fork
/// would wait for it forever on its first warning (the fork protocol carries only the
/// session's own locks across). One write keeps the line whole among other writers.
fn write_stderr_line(line: &str) {
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    #[cfg(unix)]
    {
        use std::io::Write;
        use std::os::fd::FromRawFd;
        // SAFETY: descriptor 2 is borrowed for one write and never closed (ManuallyDrop). A
        // failed write (descriptor 2 closed) is ignored, where eprintln would panic.
        let mut stderr = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(2) });
        let _ = stderr.write_all(text.as_bytes());
    }
    #[cfg(not(unix))]
    eprint!("{text}");
}

/// A rate-limited warner.
pub struct Warner {
    interval: Duration,
    sink: WarnSink,
    last: Mutex<HashMap<String, Instant>>,
}

impl Warner {
    /// A warner that writes to `sink`, one line per key per `interval`.
    pub fn new(interval: Duration, sink: WarnSink) -> Self {
        Warner {
            interval,
            sink,
            last: Mutex::new(HashMap::new()),
        }
    }

    /// The lock of the rate table, which the fork protocol holds across `fork()`.
    pub(crate) fn rate_lock(&self) -> &Mutex<HashMap<String, Instant>> {
        &self.last
    }

    /// Writes `[graphmind] message` unless `key` warned less than an interval ago.
    /// Returns whether it was written.
    pub fn warn(&self, key: &str, message: &str) -> bool {
        let now = Instant::now();
        {
            let mut last = self.last.lock();
            if let Some(previous) = last.get(key) {
                if now.duration_since(*previous) < self.interval {
                    return false;
                }
            }
            last.insert(key.to_string(), now);
        }
        let line = format!("[graphmind] {message}");
        let sink = self.sink.clone();
        // A sink that panics must not take the app down.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(&line))).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_key_per_interval_and_a_panicking_sink_is_contained() {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = lines.clone();
        let warner = Warner::new(
            Duration::from_secs(60),
            Arc::new(move |l: &str| seen.lock().push(l.to_string())),
        );
        assert!(warner.warn("a", "first"));
        assert!(!warner.warn("a", "again"));
        assert!(warner.warn("b", "other"));
        assert_eq!(*lines.lock(), ["[graphmind] first", "[graphmind] other"]);
        let panicky = Warner::new(Duration::ZERO, Arc::new(|_: &str| panic!("sink broke")));
        assert!(!panicky.warn("x", "y"));
    }
}
