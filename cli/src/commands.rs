//! `graphmind runs` and `graphmind record`: read the database directly (no server needed).

use crate::storage;
use crate::util::now_ms;
use graphmind_core::json;
use std::io::Write;
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

/// `graphmind runs`: one line per run, newest first. Returns the exit code.
pub fn runs(db: &Path) -> i32 {
    if !db.exists() {
        println!("No database at {} — nothing recorded yet.", db.display());
        return 0;
    }
    let rows = match storage::open(db).and_then(|c| storage::list_runs(&c)) {
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
    let id_w = rows.iter().map(|r| r.id.chars().count()).max().unwrap_or(3).max(3);
    println!("{} run(s) in {}\n", rows.len(), db.display());
    println!("  {:<id_w$} {:<20} {:<10} {:>7}  STARTED", "RUN", "APP", "STATUS", "EVENTS");
    for r in &rows {
        let app: String = r.app.chars().take(20).collect();
        let source = if r.source == "live" { String::new() } else { format!("  ({})", r.source) };
        println!("  {:<id_w$} {:<20} {:<10} {:>7}  {}{source}", r.id, app, r.status, r.event_count, ago(r.started_at, now));
    }
    0
}

/// `graphmind record`: the run's envelopes as NDJSON in `seq` order. Returns the exit code.
pub fn record(db: &Path, run_id: &str, out: Option<&str>) -> i32 {
    if !db.exists() {
        eprintln!("graphmind record: no database at {} — nothing recorded yet.", db.display());
        return 1;
    }
    let conn = match storage::open(db) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("graphmind record: cannot read {}: {e}", db.display());
            return 1;
        }
    };
    if !matches!(storage::get_run(&conn, run_id), Ok(Some(_))) {
        eprintln!("graphmind record: no run \"{run_id}\" in {}", db.display());
        let recent = storage::list_runs(&conn).unwrap_or_default();
        if !recent.is_empty() {
            eprintln!("Recent runs:");
            for r in recent.iter().take(10) {
                eprintln!("  {}  {}  {}", r.id, r.app, r.status);
            }
        }
        return 1;
    }
    let page = match storage::list_events(&conn, run_id, -1, None) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("graphmind record: {e}");
            return 1;
        }
    };
    let mut body = String::new();
    for ev in &page.events {
        // A frame sent pretty-printed would break the one-envelope-per-line format: compact it.
        if ev.frame.contains(['\n', '\r']) {
            match json::parse_str(&ev.frame) {
                Ok(v) => body.push_str(&json::to_string(&v)),
                Err(_) => body.push_str(&ev.frame.replace(['\n', '\r'], " ")),
            }
        } else {
            body.push_str(&ev.frame);
        }
        body.push('\n');
    }
    let default_out = format!("graphmind-run-{run_id}.ndjson");
    let target = out.unwrap_or(&default_out);
    if target == "-" {
        let mut stdout = std::io::stdout().lock();
        if stdout.write_all(body.as_bytes()).and_then(|_| stdout.flush()).is_err() {
            return 1;
        }
    } else {
        if let Err(e) = std::fs::write(target, body.as_bytes()) {
            eprintln!("graphmind record: cannot write {target}: {e}");
            return 1;
        }
        eprintln!("exported run {run_id} ({} events) → {target}", page.events.len());
    }
    eprintln!("Note: an export contains the run's prompts, inputs, outputs and errors verbatim; read it before you share it.");
    0
}
