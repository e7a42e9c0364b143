//! `graphmind runs`: list, prune and delete stored runs, reading the database directly (no
//! server needed). `record` lives in `export.rs`.

use crate::args::RunsArgs;
use crate::retention;
use crate::storage;
use crate::util::now_ms;
use std::path::Path;

fn ago(ms: f64, now: f64) -> String {
    let s = ((now - ms) / 1000.0).round().max(0.0) as u64;
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", (s as f64 / 60.0).round()),
        3600..=172_799 => format!("{}h ago", (s as f64 / 3600.0).round()),
        _ => format!("{}d ago", (s as f64 / 86_400.0).round()),
    }
}

/// `graphmind runs`: one line per run, newest first (the newest 25, or `--keep N`);
/// `--prune [--keep N] [--days N]`, `--rm RUN_ID`, `--clear --yes`. Returns the exit code.
pub fn runs(db: &Path, a: &RunsArgs) -> i32 {
    if !db.exists() {
        println!("No database at {} — nothing recorded yet.", db.display());
        return 0;
    }
    let conn = match storage::open(db) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("graphmind runs: cannot read {}: {e}", db.display());
            return 1;
        }
    };
    if let Some(id) = &a.rm {
        return match retention::delete_run(&conn, id) {
            Ok((true, _)) => {
                println!("Deleted run {id}");
                0
            }
            Ok((false, _)) => {
                eprintln!("graphmind runs: no run \"{id}\"");
                1
            }
            Err(e) => {
                eprintln!("graphmind runs: {e}");
                1
            }
        };
    }
    if a.clear {
        if !a.yes {
            let count = storage::list_runs(&conn).map(|r| r.len()).unwrap_or(0);
            eprintln!(
                "This deletes all {count} run(s) in {}. Re-run with --yes to confirm.",
                db.display()
            );
            return 1;
        }
        return match retention::prune(&conn, 0, 0.0, f64::INFINITY) {
            Ok(r) => {
                retention::vacuum(&conn);
                println!(
                    "Deleted {} run(s) and {} event(s).",
                    r.runs_deleted, r.events_deleted
                );
                0
            }
            Err(e) => {
                eprintln!("graphmind runs: {e}");
                1
            }
        };
    }
    if a.prune {
        let keep = a.keep.unwrap_or(crate::config::DEFAULT_KEEP_RUNS);
        let days = a.days.unwrap_or(crate::config::DEFAULT_KEEP_DAYS);
        return match retention::prune(&conn, keep, days, now_ms()) {
            Ok(r) => {
                retention::vacuum(&conn);
                println!("Kept the {keep} newest run(s) from the last {days} day(s); deleted {} run(s) and {} event(s).", r.runs_deleted, r.events_deleted);
                0
            }
            Err(e) => {
                eprintln!("graphmind runs: {e}");
                1
            }
        };
    }
    let rows = match storage::list_runs(&conn) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("graphmind runs: cannot read {}: {e}", db.display());
            return 1;
        }
    };
    if rows.is_empty() {
        println!("No runs stored in {}.", db.display());
        return 0;
    }
    let now = now_ms();
    let limit = a.keep.map(|k| k as usize).unwrap_or(25);
    println!("{} run(s) in {}\n", rows.len(), db.display());
    println!(
        "  {:<24} {:<20} {:<9} {:>7}  STARTED",
        "RUN", "APP", "STATUS", "EVENTS"
    );
    for r in rows.iter().take(limit) {
        let id: String = r.id.chars().take(24).collect();
        let app: String = r.app.chars().take(20).collect();
        let status = if r.status == "error" {
            format!("{} !", r.status)
        } else {
            r.status.clone()
        };
        let source = if r.source == "live" {
            String::new()
        } else {
            format!("  ({})", r.source)
        };
        println!(
            "  {id:<24} {app:<20} {status:<9} {:>7}  {}{source}",
            r.event_count,
            ago(r.started_at, now)
        );
    }
    if rows.len() > limit {
        println!(
            "  ... and {} more (--keep <n> to show more)",
            rows.len() - limit
        );
    }
    println!("\nTidy up:    graphmind runs --prune");
    0
}
