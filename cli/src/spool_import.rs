//! Storing spools left by apps that died ([`graphmind_core::spool`]): `graphmind serve`
//! picks them up at startup, before it listens, and `graphmind import --spool DIR` on
//! demand. Each record is stored as the ingest socket would have stored it: the same
//! envelope check, the hub's own keys removed from `exec.*` events, the payload budget, the
//! run-state rule (the first `run.finished` is terminal), and `(run_id, seq)` deduplication,
//! so a record the server already has (the app attached before it died) is not stored
//! twice. A run the dead app left unfinished is marked `abandoned`. The folder is deleted
//! once its records are committed; a spool whose owner still runs is left alone.

use crate::envelope::{self, MessageType as M, Parsed, WILDCARD_RUN_ID};
use crate::payload_guard::stored_frame;
use crate::server::HUB_STAMPED_KEYS;
use crate::storage;
use graphmind_core::event::{Direction, RunStatus};
use graphmind_core::json::Value;
use graphmind_core::spool::{find_left, LeftSpool};
use rusqlite::Connection;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The folder under the GraphMind home that `graphmind serve` always looks in.
pub const HOME_SPOOL_DIR: &str = "spool";

/// What storing spools did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Spool folders stored (and deleted).
    pub spools: usize,
    /// Records read.
    pub records: u64,
    /// Events stored.
    pub stored: u64,
    /// Records the database already had, or refused by the run-state rule.
    pub not_stored: u64,
    /// Records that were not a valid envelope.
    pub invalid: u64,
    /// Bytes skipped at torn or corrupt ends of segments.
    pub skipped_bytes: u64,
    /// Runs left unfinished, marked `abandoned`.
    pub abandoned: usize,
}

impl Summary {
    /// One line for the log.
    pub fn line(&self) -> String {
        let mut line = format!(
            "stored {} event(s) from {} spool(s) left by apps that ended without a debugger",
            self.stored, self.spools
        );
        if self.not_stored > 0 {
            line += &format!(", {} already stored", self.not_stored);
        }
        if self.invalid > 0 {
            line += &format!(", {} invalid record(s) skipped", self.invalid);
        }
        if self.skipped_bytes > 0 {
            line += &format!(
                ", {} byte(s) of a torn or corrupt end skipped",
                self.skipped_bytes
            );
        }
        if self.abandoned > 0 {
            line += &format!(", {} unfinished run(s) marked abandoned", self.abandoned);
        }
        line
    }
}

/// The folders `graphmind serve` looks in: `--spool-dir`, `GRAPHMIND_SPOOL_DIR`, and
/// `<home>/spool` (each once).
pub fn serve_dirs(flag: Option<&str>, env: Option<&str>, home: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let candidates = [
        flag.map(PathBuf::from),
        env.filter(|v| !v.trim().is_empty()).map(PathBuf::from),
        Some(home.join(HOME_SPOOL_DIR)),
    ];
    for d in candidates.into_iter().flatten() {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// SQLite's page cache while storing spools, KiB: a whole 64 MiB spool's pages stay in
/// memory until the commit instead of being spilled to the WAL mid-transaction.
pub const IMPORT_CACHE_KIB: i64 = 256 * 1024;

/// Stores every left spool found in `dirs` (each a spool folder or a folder of them).
pub fn pick_up(conn: &Connection, dirs: &[PathBuf]) -> Result<Summary, String> {
    let _ = conn.pragma_update(None, "cache_size", -IMPORT_CACHE_KIB);
    let mut total = Summary::default();
    for dir in dirs {
        for left in find_left(dir) {
            store_spool(conn, left, &mut total)?;
        }
    }
    Ok(total)
}

fn store_spool(conn: &Connection, left: LeftSpool, total: &mut Summary) -> Result<(), String> {
    let (records, read) = left.records().map_err(|e| e.to_string())?;
    let app = left.app.clone().unwrap_or_else(|| "unknown".into());
    let tx = conn.unchecked_transaction().map_err(|e| e.to_string())?;
    let mut store = Store {
        conn: &tx,
        app: &app,
        terminal: HashMap::new(),
        read_only: HashSet::new(),
        touched: HashMap::new(),
    };
    for r in &records {
        match store.record(&r.frame).map_err(|e| e.to_string())? {
            Outcome::Stored => total.stored += 1,
            Outcome::NotStored => total.not_stored += 1,
            Outcome::Invalid => total.invalid += 1,
        }
    }
    for (run, last_ts) in std::mem::take(&mut store.touched) {
        if storage::mark_abandoned(&tx, &run, last_ts).map_err(|e| e.to_string())? {
            total.abandoned += 1;
        }
    }
    tx.commit().map_err(|e| e.to_string())?;
    total.spools += 1;
    total.records += records.len() as u64;
    total.skipped_bytes += read.skipped_bytes;
    left.remove().map_err(|e| e.to_string())
}

enum Outcome {
    Stored,
    NotStored,
    Invalid,
}

struct Store<'a> {
    conn: &'a Connection,
    app: &'a str,
    /// Per known run, its terminal seq, if any.
    terminal: HashMap<String, Option<i64>>,
    read_only: HashSet<String>,
    /// Runs stored into, with their last `ts`.
    touched: HashMap<String, f64>,
}

impl Store<'_> {
    fn record(&mut self, text: &str) -> rusqlite::Result<Outcome> {
        let Parsed::Ok(mut env) = envelope::parse_envelope(text.as_bytes()) else {
            return Ok(Outcome::Invalid);
        };
        if env.run_id == WILDCARD_RUN_ID
            || env
                .message
                .is_some_and(|m| m.direction() != Direction::Event)
        {
            return Ok(Outcome::Invalid);
        }
        // The hub's own keys on `exec.*` are its word; an app's are removed (as live).
        let mut stripped = false;
        if env.kind.starts_with("exec.") {
            if let Some(obj) = env.payload.as_object_mut() {
                for k in HUB_STAMPED_KEYS {
                    stripped |= obj.remove(k).is_some();
                }
            }
        }
        let frame = if stripped {
            crate::server::rewrite_frame(text, &env)
        } else {
            stored_frame(text, &env)
        };
        if self.read_only.contains(&env.run_id) {
            return Ok(Outcome::NotStored);
        }
        if !self.terminal.contains_key(&env.run_id) {
            if storage::run_source(self.conn, &env.run_id)?.as_deref() == Some("import") {
                self.read_only.insert(env.run_id);
                return Ok(Outcome::NotStored);
            }
            storage::ensure_run(
                self.conn,
                &env.run_id,
                self.app,
                env.ts,
                envelope::PROTOCOL_VERSION,
                "live",
            )?;
            let end = storage::terminal_seq(self.conn, &env.run_id)?;
            self.terminal.insert(env.run_id.clone(), end);
        }
        let seq = env.seq as i64;
        if let Some(Some(end)) = self.terminal.get(&env.run_id) {
            if env.message == Some(M::RunFinished) || seq > *end {
                return Ok(Outcome::NotStored);
            }
        }
        let text_field = |k: &str| {
            env.payload
                .get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let node_id = text_field("nodeId");
        if !storage::insert_event(
            self.conn,
            &env.run_id,
            seq,
            env.ts,
            &env.kind,
            node_id.as_deref(),
            &frame,
        )? {
            return Ok(Outcome::NotStored);
        }
        match env.message {
            Some(M::RunStarted) => {
                let app = text_field("app").unwrap_or_else(|| self.app.to_owned());
                storage::mark_started(self.conn, &env.run_id, &app, env.ts)?;
            }
            Some(M::RunFinished) => {
                self.terminal.insert(env.run_id.clone(), Some(seq));
                if let Some(status) = text_field("status").filter(|s| RunStatus::parse(s).is_some())
                {
                    storage::mark_finished(self.conn, &env.run_id, &status, env.ts)?;
                }
            }
            _ => {}
        }
        let last = self.touched.entry(env.run_id).or_insert(env.ts);
        *last = last.max(env.ts);
        Ok(Outcome::Stored)
    }
}

/// `graphmind import --spool DIR`: stores the left spools in `DIR` (a spool folder or a
/// folder of them) into the database at `db`.
pub fn import_spool(db: &Path, dir: &str) -> i32 {
    let path = Path::new(dir);
    if !path.is_dir() {
        eprintln!("graphmind import: {dir} is not a folder");
        return 1;
    }
    let conn = match crate::import::open_db(db) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match pick_up(&conn, &[path.to_owned()]) {
        Ok(s) if s.spools == 0 => {
            println!("No spool to import in {dir} (a spool whose app still runs is left to it).");
            0
        }
        Ok(s) => {
            println!("Imported: {}.", s.line());
            0
        }
        Err(e) => {
            eprintln!("graphmind import: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_looks_in_the_flag_the_variable_and_the_home_once_each() {
        let home = Path::new("/h/.graphmind");
        assert_eq!(
            serve_dirs(None, None, home),
            vec![PathBuf::from("/h/.graphmind/spool")]
        );
        assert_eq!(
            serve_dirs(Some("/a"), Some(" "), home),
            vec![PathBuf::from("/a"), PathBuf::from("/h/.graphmind/spool")]
        );
        assert_eq!(
            serve_dirs(Some("/a"), Some("/h/.graphmind/spool"), home).len(),
            2
        );
    }
}
