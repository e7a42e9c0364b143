//! SQLite storage: the reference's model (a `runs` table, an `events` table keyed by
//! `(run_id, seq)`), WAL mode. Reads go through short-lived connections; every write goes
//! through the writer thread (`writer.rs`).

use crate::util::{object, or_null};
use graphmind_core::json::Value;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::time::Duration;

/// Largest WebSocket frame accepted on `/ingest` and `/ws/ui` (reference: `MAX_FRAME_BYTES`).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// Default page size of `GET /api/runs/:id/events`.
pub const PAGE_LIMIT_DEFAULT: i64 = 1000;
/// Largest page size of `GET /api/runs/:id/events`.
pub const PAGE_LIMIT_MAX: i64 = 5000;

const RUN_COLUMNS: &str =
    "r.id, r.app, r.started_at, r.finished_at, r.status, r.schema_version, r.source,
  (SELECT COUNT(*) FROM events e WHERE e.run_id = r.id) AS event_count,
  (SELECT COUNT(*) FROM events e WHERE e.run_id = r.id AND e.type = 'node.error') AS error_count";

/// Opens (creating if needed) the database at `path`: parent folder (mode 0700 when it is
/// created), WAL, `synchronous = NORMAL`, the schema brought to this build's version
/// (`migrations.rs`).
pub fn open(path: &Path) -> rusqlite::Result<Connection> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            let mut b = std::fs::DirBuilder::new();
            b.recursive(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                b.mode(0o700);
            }
            b.create(dir).map_err(|e| {
                rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                    Some(format!("cannot create {}: {e}", dir.display())),
                )
            })?;
        }
    }
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    // The schema first: a database from a newer GraphMind is refused before anything (WAL
    // mode included) writes to it.
    crate::migrations::migrate(&mut conn).map_err(|e| match e {
        crate::migrations::MigrateError::Sqlite(e) => e,
        other => rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
            Some(other.to_string()),
        ),
    })?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    harden_files(path);
    // Checkpoint (and fsync) every 32 MB of WAL rather than SQLite's 4 MB: a burst of
    // events then costs a few checkpoints instead of one per few thousand events.
    conn.pragma_update(None, "wal_autocheckpoint", 8192)?;
    Ok(conn)
}

/// Why `graphmind serve` cannot use the database at `path`, with what to do about it: a
/// file that is not SQLite (or is damaged) is never overwritten, the user moves it aside;
/// a file another process holds locked is waited for [`open`]'s busy timeout, then refused.
pub fn open_error_message(path: &Path, err: &rusqlite::Error) -> String {
    let shown = path.display();
    let hint = match err.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) | Some(rusqlite::ErrorCode::DatabaseCorrupt) => {
            format!(" — it is damaged or not a GraphMind database. It is left as it is: move it aside (mv {shown} {shown}.broken) to start with a fresh one, or pass --db another file.")
        }
        Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked) => {
            " — another process holds it locked (another graphmind on the same file?). Stop that process, or pass --db another file.".to_string()
        }
        Some(rusqlite::ErrorCode::DiskFull) => " — the disk is full. Free some space and start again.".to_string(),
        _ => String::new(),
    };
    format!("cannot open database {shown}: {err}{hint}")
}

/// Mode of the database file and its `-wal` / `-shm` companions.
pub const DB_FILE_MODE: u32 = 0o600;

/// Sets the database and its WAL pair to 0600 (they hold every prompt recorded). The
/// folder is only tightened when GraphMind created it (`--db /tmp/x.db` never touches
/// `/tmp`).
pub fn harden_files(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let name = path.as_os_str().to_owned();
        for suffix in ["", "-wal", "-shm"] {
            let mut p = name.clone();
            p.push(suffix);
            let p = std::path::PathBuf::from(p);
            if let Ok(meta) = std::fs::metadata(&p) {
                if meta.permissions().mode() & 0o777 != DB_FILE_MODE {
                    let _ =
                        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(DB_FILE_MODE));
                }
            }
        }
    }
}

/// One run row with its derived counts (`GET /api/runs`).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// Run id.
    pub id: String,
    /// App name.
    pub app: String,
    /// Epoch ms.
    pub started_at: f64,
    /// Epoch ms, `None` while running.
    pub finished_at: Option<f64>,
    /// `running`, `ok`, `error`, `aborted` or `abandoned`.
    pub status: String,
    /// Envelope `gm` of the run's events.
    pub schema_version: i64,
    /// `live`, `import` or `demo`.
    pub source: String,
    /// Stored events.
    pub event_count: i64,
    /// Stored `node.error` events.
    pub error_count: i64,
}

impl RunRow {
    /// The reference's `RunInfo` JSON: the row plus `live` and `durationMs`.
    pub fn to_json(&self, live: bool) -> String {
        graphmind_core::json::to_string(&self.to_value(live))
    }

    /// [`RunRow::to_json`] as a JSON value.
    pub fn to_value(&self, live: bool) -> Value {
        let duration = self.finished_at.map(|f| (f - self.started_at).max(0.0));
        object([
            ("id", self.id.as_str().into()),
            ("app", self.app.as_str().into()),
            ("startedAt", self.started_at.into()),
            ("finishedAt", or_null(self.finished_at)),
            ("status", self.status.as_str().into()),
            ("schemaVersion", self.schema_version.into()),
            ("source", self.source.as_str().into()),
            ("eventCount", self.event_count.into()),
            ("errorCount", self.error_count.into()),
            ("live", live.into()),
            ("durationMs", or_null(duration)),
        ])
        .into()
    }
}

fn run_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: r.get(0)?,
        app: r.get(1)?,
        started_at: r.get(2)?,
        finished_at: r.get(3)?,
        status: r.get(4)?,
        schema_version: r.get(5)?,
        source: r.get(6)?,
        event_count: r.get(7)?,
        error_count: r.get(8)?,
    })
}

/// One run, or `None`.
pub fn get_run(conn: &Connection, id: &str) -> rusqlite::Result<Option<RunRow>> {
    conn.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs r WHERE r.id = ?1"))?
        .query_row([id], run_row)
        .optional()
}

/// Most runs in one page of the run list (`GET /api/runs`, `subscribe "*"`).
pub const RUNS_PAGE_MAX: usize = 500;

/// Where a page of the run list starts: just after this run (the list is ordered by
/// `started_at` then `id`, both descending). Spelled `<started_at>~<id>` in a `cursor`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCursor {
    /// The last run's start time.
    pub started_at: f64,
    /// The last run's id.
    pub id: String,
}

impl RunCursor {
    /// The cursor after `row`.
    pub fn after(row: &RunRow) -> RunCursor {
        RunCursor {
            started_at: row.started_at,
            id: row.id.clone(),
        }
    }

    /// Its text form.
    pub fn to_text(&self) -> String {
        format!("{}~{}", self.started_at, self.id)
    }

    /// Reads the text form; `None` when it is not one.
    pub fn parse(text: &str) -> Option<RunCursor> {
        let (at, id) = text.split_once('~')?;
        let started_at: f64 = at.parse().ok().filter(|x: &f64| x.is_finite())?;
        Some(RunCursor {
            started_at,
            id: id.to_owned(),
        })
    }
}

/// One page of runs, most recently started first: at most `limit` (capped at
/// [`RUNS_PAGE_MAX`]) after `cursor`, and the cursor of the next page when more follow.
pub fn list_runs_page(
    conn: &Connection,
    cursor: Option<&RunCursor>,
    limit: usize,
) -> rusqlite::Result<(Vec<RunRow>, Option<RunCursor>)> {
    let limit = limit.clamp(1, RUNS_PAGE_MAX);
    let mut rows: Vec<RunRow> = match cursor {
        None => conn
            .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs r ORDER BY r.started_at DESC, r.id DESC LIMIT ?1"))?
            .query_map(params![limit as i64 + 1], run_row)?
            .collect::<rusqlite::Result<_>>()?,
        Some(c) => conn
            .prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM runs r WHERE r.started_at < ?1 OR (r.started_at = ?1 AND r.id < ?2)
                 ORDER BY r.started_at DESC, r.id DESC LIMIT ?3"
            ))?
            .query_map(params![c.started_at, c.id, limit as i64 + 1], run_row)?
            .collect::<rusqlite::Result<_>>()?,
    };
    let next = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(RunCursor::after)
    } else {
        None
    };
    Ok((rows, next))
}

/// Every run, most recently started first.
pub fn list_runs(conn: &Connection) -> rusqlite::Result<Vec<RunRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM runs r ORDER BY r.started_at DESC, r.id DESC"
    ))?;
    let rows = stmt.query_map([], run_row)?;
    rows.collect()
}

/// One stored event: its `seq` and the envelope text.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    /// Sender's seq.
    pub seq: i64,
    /// The envelope as stored (the frame as received, or rewritten around a shrunk payload).
    pub frame: String,
}

/// A page of one run's events in ascending `seq`, with `seq > after_seq`.
pub struct EventPage {
    /// The events.
    pub events: Vec<StoredEvent>,
    /// All events stored for the run.
    pub total: i64,
    /// More events follow this page.
    pub has_more: bool,
}

/// Events of one run after `after_seq`, at most `limit` (all when `None`).
pub fn list_events(
    conn: &Connection,
    run_id: &str,
    after_seq: i64,
    limit: Option<i64>,
) -> rusqlite::Result<EventPage> {
    let sql_limit = limit.map(|l| l + 1).unwrap_or(-1);
    let mut stmt = conn.prepare_cached("SELECT seq, frame_json FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq ASC LIMIT ?3")?;
    let mut events: Vec<StoredEvent> = stmt
        .query_map(params![run_id, after_seq, sql_limit], |r| {
            Ok(StoredEvent {
                seq: r.get(0)?,
                frame: r.get(1)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let has_more = matches!(limit, Some(l) if events.len() as i64 > l);
    if has_more {
        events.truncate(limit.unwrap_or(0) as usize);
    }
    let total: i64 = conn
        .prepare_cached("SELECT COUNT(*) FROM events WHERE run_id = ?1")?
        .query_row([run_id], |r| r.get(0))?;
    Ok(EventPage {
        events,
        total,
        has_more,
    })
}

/// Ids of every run still marked `running`.
pub fn running_run_ids(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare_cached("SELECT id FROM runs WHERE status = 'running'")?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    rows.collect()
}

/// Marks a `running` run `abandoned`, finished at its last stored event's `ts` (or
/// `fallback` when it has none). False when nothing changed.
pub fn mark_abandoned(conn: &Connection, id: &str, fallback: f64) -> rusqlite::Result<bool> {
    let n = conn
        .prepare_cached(
            "UPDATE runs SET status = 'abandoned',
           finished_at = COALESCE((SELECT MAX(ts) FROM events WHERE run_id = ?1), ?2)
         WHERE id = ?1 AND status = 'running'",
        )?
        .execute(params![id, fallback])?;
    Ok(n > 0)
}

/// Undoes [`mark_abandoned`] when the app comes back: only an `abandoned` run changes.
pub fn mark_resumed(conn: &Connection, id: &str) -> rusqlite::Result<bool> {
    let n = conn
        .prepare_cached("UPDATE runs SET status = 'running', finished_at = NULL WHERE id = ?1 AND status = 'abandoned'")?
        .execute([id])?;
    Ok(n > 0)
}

/// The `source` of a stored run (`live`, `demo`, `import`), or `None`.
pub fn run_source(conn: &Connection, id: &str) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached("SELECT source FROM runs WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()
}

/// Creates the run row if it does not exist (`status = running`).
pub fn ensure_run(
    conn: &Connection,
    id: &str,
    app: &str,
    started_at: f64,
    gm: i64,
    source: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO runs (id, app, started_at, finished_at, status, schema_version, source)
         VALUES (?1, ?2, ?3, NULL, 'running', ?4, ?5)",
    )?
    .execute(params![id, app, started_at, gm, source])?;
    Ok(())
}

/// What [`EventInserter`] runs: an event whose `(run_id, seq)` is already stored is not
/// stored again.
const INSERT_EVENT: &str = "INSERT OR IGNORE INTO events (run_id, seq, ts, type, node_id, frame_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// Stores events: `EventInserter::new(conn)?.insert(..)` for one, or one inserter kept for
/// many (the spool import: no look-up of the statement per event).
pub struct EventInserter<'c>(rusqlite::CachedStatement<'c>);

impl<'c> EventInserter<'c> {
    /// The statement, from `conn`'s cache (back to it when this is dropped).
    pub fn new(conn: &'c Connection) -> rusqlite::Result<Self> {
        conn.prepare_cached(INSERT_EVENT).map(EventInserter)
    }

    /// Stores one event; false when `(run_id, seq)` was already there (a replay).
    pub fn insert(
        &mut self,
        run_id: &str,
        seq: i64,
        ts: f64,
        kind: &str,
        node_id: Option<&str>,
        frame: &str,
    ) -> rusqlite::Result<bool> {
        let n = self
            .0
            .execute(params![run_id, seq, ts, kind, node_id, frame])?;
        Ok(n > 0)
    }
}

/// Applies `run.started`: the app name and the authoritative start time, never later than
/// a finish already stored (a `run.started` replayed after its `run.finished`).
pub fn mark_started(
    conn: &Connection,
    id: &str,
    app: &str,
    started_at: f64,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE runs SET app = ?1,
           started_at = CASE WHEN finished_at IS NOT NULL AND ?2 > finished_at THEN finished_at ELSE ?2 END
         WHERE id = ?3",
    )?
    .execute(params![app, started_at, id])?;
    Ok(())
}

/// The `seq` of the run's first stored `run.finished`, if any (the terminal event).
pub fn terminal_seq(conn: &Connection, id: &str) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT MIN(seq) FROM events WHERE run_id = ?1 AND type = 'run.finished'")?
        .query_row([id], |r| r.get(0))
}

/// Applies `run.finished`: terminal status and finish time.
pub fn mark_finished(
    conn: &Connection,
    id: &str,
    status: &str,
    finished_at: f64,
) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE runs SET status = ?1, finished_at = ?2 WHERE id = ?3")?
        .execute(params![status, finished_at, id])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_round_trip() {
        let dir = std::env::temp_dir().join(format!("gm-storage-{}", crate::util::new_token()));
        let path = dir.join("sub").join("t.db");
        let c = open(&path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("sub"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(mode, 0o700);
        }
        ensure_run(&c, "r", "app", 10.0, 1, "live").unwrap();
        assert!(EventInserter::new(&c)
            .unwrap()
            .insert("r", 0, 10.0, "run.started", None, "{}")
            .unwrap());
        assert!(!EventInserter::new(&c)
            .unwrap()
            .insert("r", 0, 10.0, "run.started", None, "{}")
            .unwrap());
        assert!(EventInserter::new(&c)
            .unwrap()
            .insert("r", 1, 12.0, "node.error", Some("tool:x"), "{\"a\":1}")
            .unwrap());
        let run = get_run(&c, "r").unwrap().unwrap();
        assert_eq!(
            (run.event_count, run.error_count, run.status.as_str()),
            (2, 1, "running")
        );
        assert!(mark_abandoned(&c, "r", 99.0).unwrap());
        let run = get_run(&c, "r").unwrap().unwrap();
        assert_eq!(
            (run.status.as_str(), run.finished_at),
            ("abandoned", Some(12.0))
        );
        assert!(!mark_abandoned(&c, "r", 99.0).unwrap());
        assert!(mark_resumed(&c, "r").unwrap());
        mark_finished(&c, "r", "ok", 20.0).unwrap();
        assert!(!mark_resumed(&c, "r").unwrap());
        let page = list_events(&c, "r", -1, Some(1)).unwrap();
        assert_eq!((page.events.len(), page.total, page.has_more), (1, 2, true));
        assert!(get_run(&c, "r")
            .unwrap()
            .unwrap()
            .to_json(false)
            .contains("\"durationMs\":10"));
        let _ = std::fs::remove_dir_all(dir);
    }
}
