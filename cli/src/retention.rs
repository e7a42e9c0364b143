//! Retention, as the reference does it: at server start (unless `GRAPHMIND_RETENTION=off`)
//! every run outside the keep window is deleted — ranked past `keep_runs` (newest first)
//! or started before `now - keep_days` — except a run still unfinished
//! (`finished_at IS NULL`) inside the day window; then the file is `VACUUM`ed.
//! `graphmind runs --prune/--rm/--clear --yes` use the same functions.

use rusqlite::{params, Connection};
use std::path::Path;

/// Milliseconds in a day.
pub const DAY_MS: f64 = 24.0 * 60.0 * 60.0 * 1000.0;

/// What a prune deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneResult {
    /// Runs deleted.
    pub runs_deleted: u64,
    /// Events deleted with them.
    pub events_deleted: u64,
}

/// Ids of the runs a prune with this policy deletes at `now` (epoch ms).
pub fn prunable_runs(
    conn: &Connection,
    keep_runs: u64,
    keep_days: f64,
    now: f64,
) -> rusqlite::Result<Vec<String>> {
    let cutoff = now - keep_days * DAY_MS;
    let keep = i64::try_from(keep_runs).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare(
        "SELECT id FROM (
           SELECT id, started_at, finished_at,
                  ROW_NUMBER() OVER (ORDER BY started_at DESC, id DESC) AS rn
           FROM runs
         )
         WHERE (rn > ?1 OR started_at < ?2)
           AND NOT (finished_at IS NULL AND started_at >= ?2)",
    )?;
    let rows = stmt.query_map(params![keep, cutoff], |r| r.get(0))?;
    rows.collect()
}

/// Deletes one run and its events; false when there was no such run.
pub fn delete_run(conn: &Connection, id: &str) -> rusqlite::Result<(bool, u64)> {
    let events = conn.execute("DELETE FROM events WHERE run_id = ?1", [id])? as u64;
    let runs = conn.execute("DELETE FROM runs WHERE id = ?1", [id])?;
    Ok((runs > 0, events))
}

/// Deletes every prunable run in one transaction.
pub fn prune(
    conn: &Connection,
    keep_runs: u64,
    keep_days: f64,
    now: f64,
) -> rusqlite::Result<PruneResult> {
    let ids = prunable_runs(conn, keep_runs, keep_days, now)?;
    if ids.is_empty() {
        return Ok(PruneResult::default());
    }
    let tx = conn.unchecked_transaction()?;
    let mut result = PruneResult::default();
    for id in &ids {
        let (_, events) = delete_run(&tx, id)?;
        result.events_deleted += events;
        result.runs_deleted += 1;
    }
    tx.commit()?;
    Ok(result)
}

/// `VACUUM`, best effort (a busy database keeps its pages).
pub fn vacuum(conn: &Connection) {
    let _ = conn.execute_batch("VACUUM;");
}

/// The startup prune of `graphmind serve`: prune, then VACUUM when anything went. Errors
/// are logged, never fatal.
pub fn startup_prune(db: &Path, keep_runs: u64, keep_days: f64) {
    if !db.exists() {
        return;
    }
    let conn = match crate::storage::open(db) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(
                "graphmind: retention skipped (cannot open {}: {e})",
                db.display()
            );
            return;
        }
    };
    match prune(&conn, keep_runs, keep_days, crate::util::now_ms()) {
        Ok(r) => {
            vacuum(&conn);
            if r.runs_deleted > 0 {
                tracing::info!(
                    "Retention: deleted {} run(s) and {} event(s) beyond the newest {keep_runs} / {keep_days} day(s) (GRAPHMIND_KEEP_RUNS, GRAPHMIND_KEEP_DAYS; GRAPHMIND_RETENTION=off to keep everything).",
                    r.runs_deleted, r.events_deleted
                );
            }
        }
        Err(e) => tracing::error!("graphmind: retention failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage;

    #[test]
    fn prune_rules() {
        let dir = std::env::temp_dir().join(format!("gm-retention-{}", crate::util::new_token()));
        let c = storage::open(&dir.join("t.db")).unwrap();
        let now = 100.0 * DAY_MS;
        // r0..r4 finished, one a day apart (r0 newest); "old-running" unfinished 40 days ago;
        // "new-running" unfinished today.
        for i in 0..5 {
            let id = format!("r{i}");
            storage::ensure_run(&c, &id, "a", now - (i as f64 + 1.0) * DAY_MS, 1, "live").unwrap();
            storage::EventInserter::new(&c)
                .unwrap()
                .insert(&id, 0, 0.0, "run.started", None, "{}")
                .unwrap();
            storage::mark_finished(&c, &id, "ok", now - i as f64 * DAY_MS).unwrap();
        }
        storage::ensure_run(&c, "old-running", "a", now - 40.0 * DAY_MS, 1, "live").unwrap();
        storage::ensure_run(&c, "new-running", "a", now - 0.5 * DAY_MS, 1, "live").unwrap();
        let mut ids = prunable_runs(&c, 3, 30.0, now).unwrap();
        ids.sort();
        // Ranked past 3: r2? ranks: new-running(1) r0(2) r1(3) r2(4) r3(5) r4(6) old(7).
        assert_eq!(ids, ["old-running", "r2", "r3", "r4"]);
        // An unfinished run inside the day window is kept even when ranked out.
        assert!(!prunable_runs(&c, 0, 30.0, now)
            .unwrap()
            .contains(&"new-running".to_string()));
        // Days: only r4 (5 days old) and the 40-day-old run go at 4.5 days.
        let mut ids = prunable_runs(&c, 200, 4.5, now).unwrap();
        ids.sort();
        assert_eq!(ids, ["old-running", "r4"]);
        let r = prune(&c, 3, 30.0, now).unwrap();
        assert_eq!(
            r,
            PruneResult {
                runs_deleted: 4,
                events_deleted: 3
            }
        );
        assert_eq!(storage::list_runs(&c).unwrap().len(), 3);
        let _ = std::fs::remove_dir_all(dir);
    }
}
