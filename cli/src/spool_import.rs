//! Storing spools left by apps that died ([`graphmind_core::spool`]): `graphmind serve`
//! picks them up at startup, before it listens, and `graphmind import --spool DIR` on
//! demand. Each record is stored as the ingest socket would have stored it: the same
//! envelope check, the hub's own keys removed from `exec.*` events, the payload budget, the
//! run-state rule (the first `run.finished` is terminal), and `(run_id, seq)` deduplication,
//! so a record the server already has (the app attached before it died) is not stored
//! twice. A run the dead app left unfinished is marked `abandoned`. The folder is deleted
//! once its records are committed; a spool whose owner still runs is left alone.

use crate::envelope::{self, Envelope, MessageType as M, Parsed, WILDCARD_RUN_ID};
use crate::payload_guard::{stored_frame, MAX_PAYLOAD_BYTES};
use crate::server::strip_hub_stamps;
use crate::storage;
use graphmind_core::event::{Direction, RunStatus};
use graphmind_core::json::Value;
use graphmind_core::spool::{find_left, LeftSpool, ReadOutcome};
use rusqlite::Connection;
use std::collections::HashMap;
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

/// Records checked in one hand-over from the reading thread to the storing one.
const CHECK_BATCH: usize = 256;
/// Hand-overs the reading thread may be ahead by (bounding the memory in between).
const CHECK_AHEAD: usize = 16;

fn store_spool(conn: &Connection, left: LeftSpool, total: &mut Summary) -> Result<(), String> {
    let app = left.app.clone().unwrap_or_else(|| "unknown".into());
    let tx = conn.unchecked_transaction().map_err(|e| e.to_string())?;
    let mut store = Store {
        conn: &tx,
        insert: storage::EventInserter::new(&tx).map_err(|e| e.to_string())?,
        app: &app,
        runs: HashMap::new(),
    };
    let (mut stored, mut not_stored, mut invalid) = (0, 0, 0);
    // Two stages, in order: one thread reads the segments and checks each envelope (what
    // needs no database), this one stores them; on two cores the checks and SQLite overlap.
    let read = std::thread::scope(|scope| -> Result<ReadOutcome, ImportError> {
        let (send, checked) = crossbeam_channel::bounded::<Vec<Option<Checked>>>(CHECK_AHEAD);
        let left = &left;
        let reader = scope.spawn(move || {
            let mut batch = Vec::with_capacity(CHECK_BATCH);
            let read = left.each_record(|r| -> Result<(), ImportError> {
                batch.push(check(r.frame));
                if batch.len() == CHECK_BATCH {
                    send.send(std::mem::replace(
                        &mut batch,
                        Vec::with_capacity(CHECK_BATCH),
                    ))
                    .map_err(|_| ImportError::Stopped)?;
                }
                Ok(())
            })?;
            if !batch.is_empty() {
                send.send(batch).map_err(|_| ImportError::Stopped)?;
            }
            Ok(read)
        });
        let mut failed = None;
        'batches: for batch in &checked {
            for record in batch {
                let outcome = match record {
                    None => Ok(Outcome::Invalid),
                    Some(c) => store.store(c),
                };
                match outcome {
                    Ok(Outcome::Stored) => stored += 1,
                    Ok(Outcome::NotStored) => not_stored += 1,
                    Ok(Outcome::Invalid) => invalid += 1,
                    Err(e) => {
                        failed = Some(e);
                        break 'batches;
                    }
                }
            }
        }
        drop(checked); // a reader still sending stops
        let read = reader.join().unwrap_or(Err(ImportError::Stopped));
        match failed {
            Some(e) => Err(e.into()),
            None => read,
        }
    })
    .map_err(|e| e.to_string())?;
    let touched = std::mem::take(&mut store.runs)
        .into_iter()
        .filter_map(|(run, state)| Some((run, state.last_ts?)));
    for (run, last_ts) in touched {
        if storage::mark_abandoned(&tx, &run, last_ts).map_err(|e| e.to_string())? {
            total.abandoned += 1;
        }
    }
    drop(store); // its statement, before the commit
    tx.commit().map_err(|e| e.to_string())?;
    total.stored += stored;
    total.not_stored += not_stored;
    total.invalid += invalid;
    total.spools += 1;
    total.records += read.records;
    total.skipped_bytes += read.skipped_bytes;
    left.remove().map_err(|e| e.to_string())
}

/// Why storing a spool stopped: reading it, or writing the database.
#[derive(Debug, thiserror::Error)]
enum ImportError {
    #[error(transparent)]
    Spool(#[from] graphmind_core::spool::SpoolError),
    #[error(transparent)]
    Db(#[from] rusqlite::Error),
    #[error("reading the spool stopped")]
    Stopped,
}

enum Outcome {
    Stored,
    NotStored,
    Invalid,
}

/// One record that passed the envelope check, with what storing it needs.
struct Checked {
    run_id: String,
    seq: i64,
    ts: f64,
    kind: String,
    /// The message `kind` names, if the protocol declares it.
    message: Option<M>,
    /// The text to store (the record as read unless the hub's keys were removed or the
    /// payload shrunk).
    frame: String,
    node_id: Option<String>,
    /// `run.started`: `payload.app`.
    app: Option<String>,
    /// `run.finished`: a valid `payload.status`.
    status: Option<String>,
}

/// The ingest socket's checks on one record, none of which needs the database: the envelope
/// check, the hub's own keys removed from `exec.*`, the payload budget. `None`: invalid.
///
/// The envelope is checked without building the payload's `input` and `output` (most of
/// a record's bytes; the frame is stored as read). Only a frame that must be written again
/// (an `exec.*` payload carrying the hub's keys, or one over the payload budget) is parsed
/// whole, as the socket parses it.
fn check(text: &str) -> Option<Checked> {
    if text.len() > MAX_PAYLOAD_BYTES {
        return check_whole(text);
    }
    let Parsed::Ok(mut env) = envelope::check_envelope(text) else {
        return None;
    };
    if !is_event(&env) {
        return None;
    }
    // An app's copy of the hub's own keys (rare): the frame is written again without them.
    if env.kind.starts_with("exec.") && strip_hub_stamps(&mut env.payload) {
        return check_whole(text);
    }
    Some(checked(env, text.to_owned()))
}

/// [`check`] on the whole parsed envelope, rewriting the frame when it changes.
fn check_whole(text: &str) -> Option<Checked> {
    let Parsed::Ok(mut env) = envelope::parse_envelope(text.as_bytes()) else {
        return None;
    };
    if !is_event(&env) {
        return None;
    }
    // The hub's own keys on `exec.*` are its word; an app's are removed (as live).
    let stripped = env.kind.starts_with("exec.") && strip_hub_stamps(&mut env.payload);
    let frame = if stripped {
        crate::server::rewrite_frame(text, &env)
    } else {
        stored_frame(text, &env).into_owned()
    };
    Some(checked(env, frame))
}

/// An event an app sends (not a command, not the wildcard run).
fn is_event(env: &Envelope) -> bool {
    env.run_id != WILDCARD_RUN_ID
        && env
            .message
            .is_none_or(|m| m.direction() == Direction::Event)
}

fn checked(env: Envelope, frame: String) -> Checked {
    let text_field = |k: &str| {
        env.payload
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    Checked {
        node_id: text_field("nodeId"),
        app: (env.message == Some(M::RunStarted))
            .then(|| text_field("app"))
            .flatten(),
        status: (env.message == Some(M::RunFinished))
            .then(|| text_field("status"))
            .flatten()
            .filter(|s| RunStatus::parse(s).is_some()),
        run_id: env.run_id,
        seq: env.seq as i64,
        ts: env.ts,
        message: env.message,
        kind: env.kind,
        frame,
    }
}

struct Store<'a> {
    conn: &'a Connection,
    insert: storage::EventInserter<'a>,
    app: &'a str,
    /// Each run met so far (one look-up per record).
    runs: HashMap<String, RunState>,
}

/// What storing a spool knows about one of its runs.
struct RunState {
    /// An imported run: read-only history, nothing is stored into it.
    read_only: bool,
    /// The seq of its stored `run.finished`, if any.
    terminal: Option<i64>,
    /// The latest `ts` stored into it; `None` while nothing was.
    last_ts: Option<f64>,
}

impl Store<'_> {
    /// Stores one checked record as the writer would: the run's row, the run-state rule
    /// (the first `run.finished` is terminal), `(run_id, seq)` deduplication.
    fn store(&mut self, env: Checked) -> rusqlite::Result<Outcome> {
        if !self.runs.contains_key(&env.run_id) {
            let state = self.open_run(&env.run_id, env.ts)?;
            self.runs.insert(env.run_id.clone(), state);
        }
        let Some(run) = self.runs.get_mut(&env.run_id) else {
            return Ok(Outcome::NotStored);
        };
        if run.read_only {
            return Ok(Outcome::NotStored);
        }
        let seq = env.seq;
        if let Some(end) = run.terminal {
            if env.message == Some(M::RunFinished) || seq > end {
                return Ok(Outcome::NotStored);
            }
        }
        if !self.insert.insert(
            &env.run_id,
            seq,
            env.ts,
            &env.kind,
            env.node_id.as_deref(),
            &env.frame,
        )? {
            return Ok(Outcome::NotStored);
        }
        run.last_ts = Some(run.last_ts.map_or(env.ts, |t| t.max(env.ts)));
        match env.message {
            Some(M::RunStarted) => {
                let app = env.app.as_deref().unwrap_or(self.app);
                storage::mark_started(self.conn, &env.run_id, app, env.ts)?;
            }
            Some(M::RunFinished) => {
                run.terminal = Some(seq);
                if let Some(status) = env.status {
                    storage::mark_finished(self.conn, &env.run_id, &status, env.ts)?;
                }
            }
            _ => {}
        }
        Ok(Outcome::Stored)
    }

    /// A run met for the first time: read-only when it was imported, else its row made
    /// sure of and its terminal seq read.
    fn open_run(&self, run_id: &str, ts: f64) -> rusqlite::Result<RunState> {
        let mut state = RunState {
            read_only: false,
            terminal: None,
            last_ts: None,
        };
        if storage::run_source(self.conn, run_id)?.as_deref() == Some("import") {
            state.read_only = true;
            return Ok(state);
        }
        storage::ensure_run(
            self.conn,
            run_id,
            self.app,
            ts,
            envelope::PROTOCOL_VERSION,
            "live",
        )?;
        state.terminal = storage::terminal_seq(self.conn, run_id)?;
        Ok(state)
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
