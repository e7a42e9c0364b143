//! The writer thread: the only place that writes SQLite, and the place live events fan
//! out to viewers.
//!
//! It takes every queued operation at once (up to [`MAX_BATCH`]) and stores the events in
//! one transaction, then hands their effects (pause registry, fan-out, `run.update`) to the
//! hub thread (`hub_task.rs`) in one command, in order, without waiting for it. Viewer
//! subscriptions are handled here too, between batches, so that replay-then-tail needs no
//! further locking: a subscriber gets the stored history and then exactly the events
//! committed after it, never one twice (a batch's fan-out goes to the subscribers it had
//! when its command was built).

use crate::hub::{ConnId, HubState, Outbox, Shared};
use crate::storage;
use crate::util::{js, now_ms, object};
use crossbeam_channel::{Receiver, Sender};
use graphmind_core::json::{self, Value};
use rusqlite::Connection;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex};

/// Most operations taken into one transaction.
pub const MAX_BATCH: usize = 8192;
/// Most events queued for the writer (admitted but not yet committed).
pub const MAX_QUEUED_EVENTS: usize = 16_384;
/// Most frame bytes queued for the writer. A single frame (at most 16 MiB) always fits.
pub const MAX_QUEUED_BYTES: usize = 64 * 1024 * 1024;

/// The writer queue's budget. Policy: **backpressure, never drop.** An ingest connection
/// takes a slot (one event, its frame's bytes) before it queues an event, and waits while
/// the queue is full; its thread then stops reading its socket, so TCP flow control slows
/// the app down (the SDKs buffer and replay). Slots come back once the batch holding the
/// event is committed. Memory held by queued events is therefore bounded by
/// [`MAX_QUEUED_EVENTS`] and [`MAX_QUEUED_BYTES`], and nothing that was accepted is lost.
/// Slots are taken before any hub command, so a waiting connection never holds up the hub
/// thread (which applies the writer's effects). Control operations (viewers, timers) are
/// small and rare and do not take slots.
pub struct Budget {
    state: Mutex<(usize, usize)>,
    freed: Condvar,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            state: Mutex::new((0, 0)),
            freed: Condvar::new(),
        }
    }
}

impl Budget {
    /// Waits for room for one event of `bytes`, then takes it.
    pub fn acquire(&self, bytes: usize) {
        let bytes = bytes.min(MAX_QUEUED_BYTES);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.0 >= MAX_QUEUED_EVENTS || st.1 + bytes > MAX_QUEUED_BYTES {
            st = self.freed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.0 += 1;
        st.1 += bytes;
    }

    /// Gives back `events` slots holding `bytes`.
    pub fn release(&self, events: usize, bytes: usize) {
        if events == 0 {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0 = st.0.saturating_sub(events);
        st.1 =
            st.1.saturating_sub(bytes.min(MAX_QUEUED_BYTES * events.max(1)));
        self.freed.notify_all();
    }

    /// Events and bytes queued now.
    pub fn queued(&self) -> (usize, usize) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One event to store, as decided by its ingest connection.
#[derive(Debug)]
pub struct EventWrite {
    /// The app connection that sent it.
    pub conn: ConnId,
    /// Run id.
    pub run_id: String,
    /// Sender seq.
    pub seq: i64,
    /// Sender ts.
    pub ts: f64,
    /// Message type.
    pub kind: String,
    /// `payload.nodeId`, when a string.
    pub node_id: Option<String>,
    /// The text to store (the frame as received unless shrunk).
    pub frame: String,
    /// App name for a new run row.
    pub app: String,
    /// `live` / `demo` for a new run row.
    pub source: &'static str,
    /// The connection just became the run's owner.
    pub owner_changed: bool,
    /// `run.started`: `payload.app` (or the connection's app).
    pub started_app: Option<String>,
    /// `run.finished`: a valid `payload.status`.
    pub finished_status: Option<String>,
    /// `exec.paused` / `exec.resumed` / `exec.refused`: `payload.pauseId`.
    pub pause_id: Option<String>,
    /// The queue slot this event holds (its frame's bytes), given back after commit.
    pub cost: usize,
    /// `exec.paused` / `exec.refused`: the payload (what the pause registry keeps).
    pub pause_payload: Option<Value>,
}

/// Work for the writer thread.
pub enum Op {
    /// Store one event.
    Event(Box<EventWrite>),
    /// An abandon timer fired for this run (ownership already checked).
    Abandon(String),
    /// The run's `live` flag changed: push `run.update`.
    RunChanged(String),
    /// Mark every `running` run abandoned (startup: no process owns them).
    ReconcileOrphans,
    /// A viewer subscribes to one run: replay, then tail.
    Subscribe {
        conn: ConnId,
        tx: Outbox,
        run_id: String,
    },
    /// A viewer subscribes to the run list (`*`).
    SubscribeAll {
        conn: ConnId,
        tx: Outbox,
        cursor: Option<storage::RunCursor>,
    },
    /// A viewer unsubscribes from one run.
    Unsubscribe { conn: ConnId, run_id: String },
    /// A viewer socket closed.
    UiGone(ConnId),
    /// Answer once everything queued before has been stored and fanned out.
    Flush(Sender<()>),
}

enum Effect {
    Fanout {
        run_id: String,
        frame: String,
    },
    Paused {
        conn: ConnId,
        run_id: String,
        pause_id: String,
        ts: f64,
        payload: Value,
    },
    Resumed {
        run_id: String,
        pause_id: String,
    },
    Refused {
        run_id: String,
        pause_id: String,
        payload: Value,
    },
    Finished(String),
}

struct Writer {
    shared: Arc<Shared>,
    db: Connection,
    /// Events stored in the open transaction (lost with it if it rolls back).
    in_tx_events: usize,
    known_runs: HashSet<String>,
    read_only: HashSet<String>,
    /// The `seq` of each known run's terminal `run.finished` (the first one stored).
    terminal: HashMap<String, i64>,
    subs: HashMap<String, Vec<(ConnId, Outbox)>>,
    effects: Vec<Effect>,
    updates: Vec<String>,
    /// Stored events for the live OTLP export, handed over once per commit.
    otlp: crate::otlp_export::Offers,
}

/// Runs the writer loop until every sender is gone.
pub fn run(shared: Arc<Shared>, db: Connection, rx: Receiver<Op>) {
    let mut w = Writer {
        shared,
        db,
        in_tx_events: 0,
        known_runs: HashSet::new(),
        read_only: HashSet::new(),
        terminal: HashMap::new(),
        subs: HashMap::new(),
        effects: Vec::new(),
        updates: Vec::new(),
        otlp: Default::default(),
    };
    let mut batch: Vec<Op> = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        w.process(&mut batch);
    }
}

impl Writer {
    fn process(&mut self, batch: &mut Vec<Op>) {
        let mut in_tx = false;
        let (mut events, mut bytes) = (0usize, 0usize);
        for op in batch.drain(..) {
            match op {
                Op::Event(e) => {
                    if !in_tx {
                        in_tx = self.db.execute_batch("BEGIN").is_ok();
                        self.in_tx_events = 0;
                    }
                    events += 1;
                    bytes += e.cost;
                    match self.store(*e) {
                        Ok(()) => self.in_tx_events += 1,
                        Err(err) => {
                            // SQLite may have rolled the whole transaction back (a full
                            // disk does): then every event stored in it is gone too.
                            let lost = if in_tx && self.db.is_autocommit() {
                                in_tx = false;
                                self.forget_uncommitted();
                                let stored = std::mem::take(&mut self.in_tx_events);
                                1 + stored
                            } else {
                                1
                            };
                            self.storage_failed(lost, &err);
                        }
                    }
                }
                Op::Abandon(run) => {
                    if !in_tx {
                        in_tx = self.db.execute_batch("BEGIN").is_ok();
                    }
                    if storage::mark_abandoned(&self.db, &run, now_ms()).unwrap_or(false) {
                        self.updates.push(run);
                    }
                }
                Op::RunChanged(run) => self.updates.push(run),
                other => {
                    self.commit(&mut in_tx);
                    self.shared
                        .budget
                        .release(std::mem::take(&mut events), std::mem::take(&mut bytes));
                    self.control(other);
                }
            }
        }
        self.commit(&mut in_tx);
        self.shared.budget.release(events, bytes);
    }

    /// Commits the open transaction (if any), then performs the collected effects.
    fn commit(&mut self, in_tx: &mut bool) {
        if *in_tx {
            match self.db.execute_batch("COMMIT") {
                Ok(()) => {
                    if let Some(total) = self.shared.storage.succeeded() {
                        tracing::info!("storage: writing again; {total} event(s) could not be stored while it failed");
                    }
                }
                Err(err) => {
                    let _ = self.db.execute_batch("ROLLBACK");
                    self.forget_uncommitted();
                    let lost = std::mem::take(&mut self.in_tx_events);
                    self.storage_failed(lost, &err);
                }
            }
            *in_tx = false;
        }
        if let Some(x) = &self.shared.otlp {
            x.hand_over(&mut self.otlp);
        }
        if self.effects.is_empty() && self.updates.is_empty() {
            return;
        }
        // Who gets which live message is decided here (the subscriptions are the writer's);
        // the hub thread delivers them, in the batch's order with the pause effects (a
        // `resume.result` still reaches a viewer before the `exec.resumed` that caused it).
        let mut steps = Vec::new();
        for effect in std::mem::take(&mut self.effects) {
            match effect {
                Effect::Fanout { run_id, frame } => {
                    if let Some(subs) = self.subs.get(&run_id) {
                        let msg = event_message(&js(&run_id), &frame);
                        let to = subs.iter().map(|(_, tx)| tx.clone()).collect();
                        steps.push(HubStep::Fanout(to, msg));
                    }
                }
                pause => steps.push(HubStep::Pause(pause)),
            }
        }
        let updates = std::mem::take(&mut self.updates);
        let mut seen = HashSet::new();
        let mut rows = Vec::new();
        for run in updates {
            if seen.insert(run.clone()) {
                if let Ok(Some(row)) = storage::get_run(&self.db, &run) {
                    rows.push(row);
                }
            }
        }
        if !steps.is_empty() || !rows.is_empty() {
            self.tell_effects(steps, rows);
        }
        // A long-poll woken now queues its look after the effects told above.
        self.shared.notify();
    }

    /// Hands a batch's effects to the hub thread in one command, in order, then the
    /// `run.update`s of `rows`. Told, never waited for: the writer goes on storing.
    fn tell_effects(&self, steps: Vec<HubStep>, rows: Vec<storage::RunRow>) {
        self.shared.hub.tell(move |h| {
            for step in steps {
                match step {
                    HubStep::Fanout(to, msg) => {
                        for tx in to {
                            let _ = tx.live(msg.clone());
                        }
                    }
                    HubStep::Pause(effect) => apply(h, effect),
                }
            }
            for row in rows {
                h.send_run_update(row.to_value(h.is_live(&row.id)));
            }
        });
    }

    /// Counts and reports `events` that could not be stored.
    fn storage_failed(&mut self, events: usize, err: &rusqlite::Error) {
        let total = self.shared.storage.failed(events as u64, err);
        let path = self.shared.db_path.display().to_string();
        let why = crate::storage_health::describe(err);
        crate::hub::throttled_log!(tracing::Level::ERROR, self.shared.log_throttle, "storage", "storage: cannot write {path}: {why}; {total} event(s) not stored so far. The server keeps serving (live events still reach viewers); storing resumes once a write succeeds.");
    }

    /// Drops what the writer remembers about rows a rolled-back transaction took away
    /// (a run row it created, a terminal seq), so the next event writes them again.
    fn forget_uncommitted(&mut self) {
        self.known_runs.clear();
        self.terminal.clear();
    }

    fn store(&mut self, e: EventWrite) -> rusqlite::Result<()> {
        if e.owner_changed && storage::mark_resumed(&self.db, &e.run_id)? {
            self.updates.push(e.run_id.clone());
        }
        if self.read_only.contains(&e.run_id) {
            return Ok(());
        }
        if !self.known_runs.contains(&e.run_id) {
            // An imported run is read-only history: nothing live is written into it.
            if storage::run_source(&self.db, &e.run_id)?.as_deref() == Some("import") {
                crate::hub::throttled_log!(
                    tracing::Level::WARN,
                    self.shared.log_throttle,
                    "ingest-import",
                    "ingest: refusing frames for run \"{}\": it was imported and is read-only",
                    e.run_id
                );
                self.read_only.insert(e.run_id);
                return Ok(());
            }
            storage::ensure_run(
                &self.db,
                &e.run_id,
                &e.app,
                e.ts,
                crate::envelope::PROTOCOL_VERSION,
                e.source,
            )?;
            if let Some(end) = storage::terminal_seq(&self.db, &e.run_id)? {
                self.terminal.insert(e.run_id.clone(), end);
            }
            self.known_runs.insert(e.run_id.clone());
        }
        // The run-state rule (docs/server.md, "Run state"): the first `run.finished` stored
        // is terminal. A second one, and any event the app numbered after it, is refused:
        // not stored, not fanned out, and the run's status and times stay as they were.
        if let Some(&end) = self.terminal.get(&e.run_id) {
            if e.kind == "run.finished" || e.seq > end {
                let (run, kind, seq) = (e.run_id.clone(), e.kind.clone(), e.seq);
                crate::hub::throttled_log!(tracing::Level::WARN, self.shared.log_throttle, "after-run-finished", "ingest: refusing {kind} (seq {seq}) for run \"{run}\": it already finished (seq {end}); the first run.finished wins");
                if e.owner_changed {
                    self.updates.push(e.run_id);
                }
                return Ok(());
            }
        }
        let inserted = storage::EventInserter::new(&self.db)?.insert(
            &e.run_id,
            e.seq,
            e.ts,
            &e.kind,
            e.node_id.as_deref(),
            &e.frame,
        )?;
        if !inserted {
            if e.owner_changed {
                self.updates.push(e.run_id);
            }
            return Ok(());
        }
        if self.shared.otlp.is_some() {
            self.otlp.push(&e.run_id, &e.app, &e.kind, e.ts, &e.frame);
        }
        let mut lifecycle = e.owner_changed;
        if let Some(app) = &e.started_app {
            storage::mark_started(&self.db, &e.run_id, app, e.ts)?;
            lifecycle = true;
        }
        if e.kind == "run.finished" {
            self.terminal.insert(e.run_id.clone(), e.seq);
        }
        if let Some(status) = &e.finished_status {
            storage::mark_finished(&self.db, &e.run_id, status, e.ts)?;
            self.effects.push(Effect::Finished(e.run_id.clone()));
            lifecycle = true;
        } else if e.kind == "run.finished" {
            lifecycle = true;
        }
        if let Some(pause_id) = e.pause_id {
            if e.kind == "exec.paused" {
                let payload = e.pause_payload.unwrap_or_default();
                self.effects.push(Effect::Paused {
                    conn: e.conn,
                    run_id: e.run_id.clone(),
                    pause_id,
                    ts: e.ts,
                    payload,
                });
            } else if e.kind == "exec.refused" {
                let payload = e.pause_payload.unwrap_or_default();
                self.effects.push(Effect::Refused {
                    run_id: e.run_id.clone(),
                    pause_id,
                    payload,
                });
            } else {
                self.effects.push(Effect::Resumed {
                    run_id: e.run_id.clone(),
                    pause_id,
                });
            }
        }
        if lifecycle {
            self.updates.push(e.run_id.clone());
        }
        self.effects.push(Effect::Fanout {
            run_id: e.run_id,
            frame: e.frame,
        });
        Ok(())
    }

    fn control(&mut self, op: Op) {
        match op {
            Op::Subscribe { conn, tx, run_id } => {
                let subs = self.subs.entry(run_id.clone()).or_default();
                if subs.iter().any(|(c, _)| *c == conn) {
                    let _ = tx.text(replay_start(&run_id, 0));
                    let _ = tx.text(replay_end(&run_id));
                    return;
                }
                let events = storage::list_events(&self.db, &run_id, -1, None)
                    .map(|p| p.events)
                    .unwrap_or_default();
                let _ = tx.text(replay_start(&run_id, events.len()));
                let rid = js(&run_id);
                for ev in events {
                    let _ = tx.text(event_message(&rid, &ev.frame));
                }
                let _ = tx.text(replay_end(&run_id));
                subs.push((conn, tx));
            }
            Op::SubscribeAll { conn, tx, cursor } => {
                // One page (the newest runs, or those after `cursor`): the frame stays far
                // under the 16 MiB frame limit however many runs are stored. A later page
                // is a `runs.page` answer, so a viewer's list is replaced only by the first.
                let (rows, next) =
                    storage::list_runs_page(&self.db, cursor.as_ref(), storage::RUNS_PAGE_MAX)
                        .unwrap_or_default();
                let kind = if cursor.is_some() {
                    "runs.page"
                } else {
                    "runs"
                };
                let next = next.map_or(Value::Null, |c| Value::from(c.to_text()));
                // One command: no `run.update` reaches this viewer between its joining the
                // run-list subscribers and its page (the liveness read there).
                self.shared.hub.tell(move |h| {
                    h.set_wildcard(conn);
                    let runs: Vec<Value> =
                        rows.iter().map(|r| r.to_value(h.is_live(&r.id))).collect();
                    let page = object([
                        ("type", Value::from(kind)),
                        ("runs", Value::Array(runs)),
                        ("nextCursor", next),
                    ]);
                    let _ = tx.text(json::to_string(&Value::Object(page)));
                });
            }
            Op::Unsubscribe { conn, run_id } => {
                if let Some(subs) = self.subs.get_mut(&run_id) {
                    subs.retain(|(c, _)| *c != conn);
                    if subs.is_empty() {
                        self.subs.remove(&run_id);
                    }
                }
            }
            Op::UiGone(conn) => {
                self.subs.retain(|_, subs| {
                    subs.retain(|(c, _)| *c != conn);
                    !subs.is_empty()
                });
            }
            Op::ReconcileOrphans => {
                let ids = storage::running_run_ids(&self.db).unwrap_or_default();
                // Startup: one look for all of them (none is live unless an app has
                // re-claimed it already).
                let asked = ids.clone();
                let live: HashSet<String> = self
                    .shared
                    .hub
                    .call(move |h| asked.into_iter().filter(|id| h.is_live(id)).collect())
                    .unwrap_or_default();
                let mut reconciled = 0;
                for id in ids {
                    if live.contains(&id) {
                        continue;
                    }
                    if storage::mark_abandoned(&self.db, &id, now_ms()).unwrap_or(false) {
                        reconciled += 1;
                        self.updates.push(id);
                    }
                }
                if reconciled > 0 {
                    tracing::info!("Reconciled {reconciled} run(s) left in flight by a previous session (marked abandoned).");
                }
                let mut no_tx = false;
                self.commit(&mut no_tx);
            }
            Op::Flush(reply) => {
                // Through the hub: answered once the effects told before it are applied too.
                self.shared.hub.tell(move |_| {
                    let _ = reply.send(());
                });
            }
            Op::Event(_) | Op::Abandon(_) | Op::RunChanged(_) => unreachable!("handled in process"),
        }
    }
}

/// One step of a batch's effects, run on the hub thread.
enum HubStep {
    /// A live `event` message for these viewers.
    Fanout(Vec<Outbox>, String),
    /// A pause effect (any [`Effect`] but `Fanout`).
    Pause(Effect),
}

/// Applies a pause effect to the hub state.
fn apply(h: &mut HubState, effect: Effect) {
    match effect {
        Effect::Fanout { .. } => {}
        Effect::Paused {
            conn,
            run_id,
            pause_id,
            ts,
            payload,
        } => h.pause_opened(conn, &run_id, &pause_id, ts, &payload),
        Effect::Refused {
            run_id,
            pause_id,
            payload,
        } => h.pause_refused(&run_id, &pause_id, &payload),
        Effect::Resumed { run_id, pause_id } => h.pause_resumed(&run_id, &pause_id),
        Effect::Finished(run) => h.run_finished(&run),
    }
}

/// `replay.start`: the stored events of `run_id` that follow, `count` of them.
fn replay_start(run_id: &str, count: usize) -> String {
    json::to_string(&Value::Object(object([
        ("type", Value::from("replay.start")),
        ("runId", Value::from(run_id)),
        ("count", Value::from(count as u64)),
    ])))
}

/// `replay.end`: the stored events of `run_id` have all been sent.
fn replay_end(run_id: &str) -> String {
    json::to_string(&Value::Object(object([
        ("type", Value::from("replay.end")),
        ("runId", Value::from(run_id)),
    ])))
}

/// `event`: one stored frame for a viewer, `run_id_json` being the run id already written
/// as a JSON string. The frame is embedded as the text it is (checked as an envelope when
/// it arrived): writing it again from a value would cost the live fan-out a parse per event.
fn event_message(run_id_json: &str, frame: &str) -> String {
    format!("{{\"type\":\"event\",\"runId\":{run_id_json},\"envelope\":{frame}}}")
}
