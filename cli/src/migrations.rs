//! The database schema, versioned: `PRAGMA user_version` says which of [`MIGRATIONS`] a
//! database has, and [`migrate`] applies the missing ones in order, each in its own
//! transaction, so a schema change never breaks a database written by an older GraphMind.
//!
//! A small table of steps rather than the `rusqlite_migration` crate: its 2.x line is built
//! against rusqlite 0.40, and the server uses 0.43 (two SQLite builds in one binary).
//!
//! Adding a change: append a step with the next version; never edit a released step (a
//! database that has it will not run it again). Databases from before versioning read
//! version 0; step 1 is the schema they already have, written so that it changes nothing
//! there (`IF NOT EXISTS`).

use rusqlite::{Connection, TransactionBehavior};

/// One schema change.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The `user_version` a database has once this step ran (1, 2, ...: one more than the step
    /// before).
    pub version: u32,
    /// What the step changes, for the error message when it fails.
    pub what: &'static str,
    /// The SQL, run as one batch inside the step's transaction.
    pub sql: &'static str,
}

/// Every schema change, oldest first.
pub const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    what: "the runs and events tables and the error-event index",
    sql: "
CREATE TABLE IF NOT EXISTS runs (
  id             TEXT PRIMARY KEY,
  app            TEXT NOT NULL,
  started_at     REAL NOT NULL,
  finished_at    REAL,
  status         TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  source         TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
  run_id     TEXT NOT NULL,
  seq        INTEGER NOT NULL,
  ts         REAL NOT NULL,
  type       TEXT NOT NULL,
  node_id    TEXT,
  frame_json TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
);
-- Only error events are counted per run (`errorCount`); a partial index keeps every
-- other insert to one b-tree.
CREATE INDEX IF NOT EXISTS idx_events_errors ON events (run_id) WHERE type = 'node.error';
",
}];

/// The schema version this build writes.
pub fn latest() -> u32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Why a database could not be brought to this build's schema.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The database was written by a newer GraphMind; it is left untouched.
    #[error("its schema is version {found}, newer than this graphmind knows (up to {known}): upgrade graphmind, or pass --db another file")]
    Newer {
        /// The database's `user_version`.
        found: u32,
        /// [`latest`].
        known: u32,
    },
    /// A step failed; its transaction was rolled back, so the database keeps the version
    /// before it.
    #[error("schema step {version} ({what}) failed: {source}")]
    Step {
        /// The failed step's version.
        version: u32,
        /// The failed step's description.
        what: &'static str,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Reading or writing `user_version` failed.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// The database's schema version (`PRAGMA user_version`; 0 before versioning).
pub fn version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Brings `conn`'s database to [`latest`] with [`MIGRATIONS`].
pub fn migrate(conn: &mut Connection) -> Result<(), MigrateError> {
    migrate_with(conn, MIGRATIONS)
}

/// Applies the steps of `steps` the database lacks, oldest first. Each step and its new
/// version commit together (`BEGIN IMMEDIATE`: two processes opening one old database at
/// once migrate it once; the second sees the new version inside its transaction).
pub fn migrate_with(conn: &mut Connection, steps: &[Migration]) -> Result<(), MigrateError> {
    let known = steps.last().map_or(0, |m| m.version);
    let found = version(conn)?;
    if found > known {
        return Err(MigrateError::Newer { found, known });
    }
    if found == known {
        return Ok(());
    }
    for step in steps {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if version(&tx)? >= step.version {
            continue;
        }
        let fail = |source| MigrateError::Step {
            version: step.version,
            what: step.what,
            source,
        };
        tx.execute_batch(step.sql).map_err(fail)?;
        tx.pragma_update(None, "user_version", step.version)
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_db(name: &str) -> (std::path::PathBuf, Connection) {
        let dir =
            std::env::temp_dir().join(format!("gm-migrations-{}-{name}", crate::util::new_token()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("graphmind.db");
        let conn = Connection::open(&path).unwrap();
        (path, conn)
    }

    /// The schema exactly as builds before versioning wrote it (no `user_version`).
    const UNVERSIONED_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, app TEXT NOT NULL, started_at REAL NOT NULL,
  finished_at REAL, status TEXT NOT NULL, schema_version INTEGER NOT NULL, source TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, ts REAL NOT NULL,
  type TEXT NOT NULL, node_id TEXT, frame_json TEXT NOT NULL, PRIMARY KEY (run_id, seq));
CREATE INDEX IF NOT EXISTS idx_events_errors ON events (run_id) WHERE type = 'node.error';
INSERT INTO runs VALUES ('run_old', 'app', 1.0, 2.0, 'ok', 1, 'sdk');
INSERT INTO events VALUES ('run_old', 1, 1.0, 'run.started', NULL, '{\"type\":\"run.started\"}');
";

    #[test]
    fn a_database_from_before_versioning_migrates_and_keeps_its_rows() {
        let (path, mut conn) = temp_db("old");
        conn.execute_batch(UNVERSIONED_SCHEMA).unwrap();
        assert_eq!(version(&conn).unwrap(), 0);
        migrate(&mut conn).unwrap();
        assert_eq!(version(&conn).unwrap(), latest());
        let n: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM events WHERE run_id = 'run_old'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 1);
        drop(conn);
        // and through the server's own open: the run is listed
        let conn = crate::storage::open(&path).unwrap();
        let runs = crate::storage::list_runs_page(&conn, None, 10).unwrap();
        assert!(format!("{runs:?}").contains("run_old"), "{runs:?}");
    }

    #[test]
    fn a_fresh_database_gets_every_step_and_a_second_open_runs_none() {
        let (_path, mut conn) = temp_db("fresh");
        migrate(&mut conn).unwrap();
        assert_eq!(version(&conn).unwrap(), latest());
        migrate(&mut conn).unwrap();
        assert_eq!(version(&conn).unwrap(), latest());
    }

    const NEXT: &[Migration] = &[
        MIGRATIONS[0],
        Migration {
            version: 2,
            what: "a tags column",
            sql: "ALTER TABLE runs ADD COLUMN tags TEXT;",
        },
    ];

    #[test]
    fn steps_apply_in_order_and_a_failed_step_keeps_the_version_before_it() {
        let (_path, mut conn) = temp_db("steps");
        conn.execute_batch(UNVERSIONED_SCHEMA).unwrap();
        migrate_with(&mut conn, NEXT).unwrap();
        assert_eq!(version(&conn).unwrap(), 2);
        let tags: Option<String> = conn
            .query_row("SELECT tags FROM runs WHERE id = 'run_old'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(tags, None);

        let broken = &[
            NEXT[0],
            NEXT[1],
            Migration {
                version: 3,
                what: "a bad step",
                sql: "CREATE TABLE x (a); ALTER TABLE nope ADD COLUMN b;",
            },
        ];
        let err = migrate_with(&mut conn, broken).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("schema step 3 (a bad step) failed"),
            "{err}"
        );
        assert_eq!(version(&conn).unwrap(), 2);
        let x: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'x'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(x, 0, "the failed step's first statement was rolled back");
    }

    #[test]
    fn a_database_from_a_newer_graphmind_is_refused_untouched() {
        let (path, mut conn) = temp_db("newer");
        migrate(&mut conn).unwrap();
        conn.pragma_update(None, "user_version", latest() + 5)
            .unwrap();
        let err = migrate(&mut conn).unwrap_err();
        assert!(matches!(err, MigrateError::Newer { .. }), "{err}");
        assert_eq!(version(&conn).unwrap(), latest() + 5);
        drop(conn);
        let err = crate::storage::open(&path).unwrap_err();
        let msg = crate::storage::open_error_message(&path, &err);
        assert!(msg.contains("newer than this graphmind knows"), "{msg}");
    }
}
