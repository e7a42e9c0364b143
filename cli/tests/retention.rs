//! Retention and abandon against the real binary: the startup prune (rank > keep or older
//! than keep-days, unfinished runs inside the window kept), VACUUM, the flags and
//! variables, and `runs --keep/--prune/--rm/--clear --yes`.

mod common;
use common::*;
use graphmind_cli::storage;
use std::path::Path;
use std::time::Duration;

const DAY: f64 = 86_400_000.0;

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64
}

/// `n` finished runs `f0..` one hour apart (f0 newest), each with `events` events of ~1 KB,
/// plus the given extra (id, age in days, finished).
fn seed(db: &Path, n: usize, events: usize, extra: &[(&str, f64, bool)]) {
    let c = storage::open(db).unwrap();
    c.execute_batch("BEGIN").unwrap();
    let t = now();
    let pad = "p".repeat(1000);
    let add = |id: &str, started: f64, finished: bool| {
        storage::ensure_run(&c, id, "seed", started, 1, "live").unwrap();
        for seq in 0..events {
            storage::EventInserter::new(&c)
                .unwrap()
                .insert(
                    id,
                    seq as i64,
                    started,
                    "node.token",
                    None,
                    &format!("{{\"pad\":\"{pad}\"}}"),
                )
                .unwrap();
        }
        if finished {
            storage::mark_finished(&c, id, "ok", started + 1.0).unwrap();
        }
    };
    for k in 0..n {
        add(&format!("f{k}"), t - (k as f64 + 1.0) * 3_600_000.0, true);
    }
    for (id, age, finished) in extra {
        add(id, t - age * DAY, *finished);
    }
    c.execute_batch("COMMIT").unwrap();
}

fn ids(srv: &Server) -> Vec<String> {
    let v = srv.get_json("/api/runs");
    let mut out: Vec<String> = v
        .get("runs")
        .and_then(|r| r.as_array())
        .unwrap()
        .iter()
        .map(|r| s(r, &["id"]).unwrap().to_owned())
        .collect();
    out.sort();
    out
}

fn freelist(db: &Path) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn startup_prune_keeps_the_newest_200_and_30_days_then_vacuums() {
    let dir = temp_dir();
    let db = dir.join("graphmind.db");
    // 205 finished runs (hours old), one finished 31 days ago, one unfinished 40 days ago,
    // one unfinished 10 days ago (ranked out, but inside the window: kept).
    seed(
        &db,
        205,
        2,
        &[
            ("old-done", 31.0, true),
            ("old-open", 40.0, false),
            ("recent-open", 10.0, false),
        ],
    );
    let srv = Server::start_in(dir, &[], &[]);
    let kept = ids(&srv);
    assert_eq!(
        kept.len(),
        201,
        "200 by rank + the unfinished run inside the window"
    );
    assert!(kept.contains(&"recent-open".to_string()));
    for gone in ["old-done", "old-open", "f200", "f204"] {
        assert!(!kept.contains(&gone.to_string()), "{gone} pruned");
    }
    assert!(kept.contains(&"f0".to_string()) && kept.contains(&"f198".to_string()));
    assert_eq!(freelist(&srv.db), 0, "VACUUM after the prune");
}

#[test]
fn keep_and_days_flags_and_variables_and_retention_off() {
    let dir = temp_dir();
    let db = dir.join("graphmind.db");
    seed(&db, 10, 1, &[("week-old", 7.0, true)]);
    // Variables: keep 8 runs.
    let mut srv = Server::start_in(
        dir.clone(),
        &[],
        &[("GRAPHMIND_KEEP_RUNS", "8"), ("GRAPHMIND_KEEP_DAYS", "30")],
    );
    assert_eq!(ids(&srv).len(), 8);
    srv.stop();
    // The flag beats the variable.
    let mut srv = Server::start_in(
        dir.clone(),
        &["--keep", "5"],
        &[("GRAPHMIND_KEEP_RUNS", "100")],
    );
    assert_eq!(ids(&srv).len(), 5);
    srv.stop();
    // Days: runs older than 0.1 day go (all the seed is 1+ hours old... f0..f1 are 1-2 h).
    let mut srv = Server::start_in(dir.clone(), &["--days", "0.1"], &[]);
    assert_eq!(ids(&srv), ["f0", "f1"]);
    srv.stop();
    // Off: nothing is touched even with --keep 0.
    let srv = Server::start_in(dir, &["--keep", "0"], &[("GRAPHMIND_RETENTION", "off")]);
    assert_eq!(ids(&srv).len(), 2);
}

#[test]
fn runs_command_lists_prunes_removes_and_clears() {
    let dir = temp_dir();
    let db = dir.join("graphmind.db");
    seed(&db, 30, 3, &[("ancient", 60.0, true)]);
    let db_s = db.to_str().unwrap();
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(BIN);
        isolate(&mut cmd, &dir);
        cmd.args(args).args(["--db", db_s]).output().unwrap()
    };
    let o = run(&["runs"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("31 run(s) in ")
            && text.contains("... and 6 more (--keep <n> to show more)"),
        "{text}"
    );
    let o = run(&["runs", "--keep", "40"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("more (--keep"));
    let o = run(&["runs", "--prune", "--keep", "20"]);
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "Kept the 20 newest run(s) from the last 30 day(s); deleted 11 run(s) and 33 event(s)."
    );
    assert_eq!(freelist(&db), 0, "VACUUM after --prune");
    let o = run(&["runs", "--rm", "f0"]);
    assert_eq!(
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).trim().to_owned()
        ),
        (Some(0), "Deleted run f0".to_owned())
    );
    let o = run(&["runs", "--rm", "f0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no run \"f0\""));
    let o = run(&["runs", "--clear"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("This deletes all 19 run(s)")
            && String::from_utf8_lossy(&o.stderr).contains("--yes")
    );
    let o = run(&["runs", "--clear", "--yes"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "Deleted 19 run(s) and 57 event(s)."
    );
    assert!(String::from_utf8_lossy(&run(&["runs"]).stdout).contains("No runs stored"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_default_grace_keeps_a_dropped_run_running_for_a_while() {
    let srv = Server::start(&[], &[]);
    let mut app = srv.ingest();
    app.hello("dropper", None);
    app.event(
        "run_d",
        "run.started",
        r#"{"app":"dropper","sdk":{"name":"t","version":"0"}}"#,
    );
    srv.wait_run("run_d", |r| i(r, &["eventCount"]) == Some(1));
    drop(app);
    let r = srv.wait_run("run_d", |r| {
        r.get("live").and_then(|l| l.as_bool()) == Some(false)
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        s(&srv.wait_run("run_d", |_| true), &["status"]),
        Some("running"),
        "15 s grace, not 1.5 s"
    );
    assert_eq!(s(&r, &["status"]), Some("running"));
}
