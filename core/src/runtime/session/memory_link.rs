//! An in-memory debugger for the session's unit tests: a [`Connector`] whose links carry
//! frames over channels instead of a socket, with the debugger's side in the test's hands
//! (accept or refuse connections, read what the session flushed, send control frames,
//! break the link, stall its writes like a debugger that stopped reading). Everything the session does above the socket runs as in production.

use crate::json::{self, Value};
use crate::transport::{Connector, Link, LinkReader, LinkWriter, TransportError};
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The debugger's side of in-memory links.
pub(crate) struct MemoryDebugger {
    state: Arc<Mutex<State>>,
    frames: Receiver<String>,
    stall: Arc<Stall>,
}

/// While set, every link's flush blocks (a debugger that stopped reading: the socket's
/// buffers are full), until it is cleared.
#[derive(Default)]
struct Stall {
    on: Mutex<bool>,
    changed: Condvar,
}

impl Stall {
    fn set(&self, on: bool) {
        *self.on.lock().unwrap() = on;
        self.changed.notify_all();
    }

    fn wait_clear(&self) {
        let mut on = self.on.lock().unwrap();
        while *on {
            on = self.changed.wait(on).unwrap();
        }
    }
}

struct State {
    accepting: bool,
    ack: Value,
    connects: usize,
    /// Every frame the session flushed (its `hello` first), over every link.
    frames: Sender<String>,
    /// The newest link's control channel and closed flag.
    link: Option<(Sender<Option<String>>, Arc<AtomicBool>)>,
}

struct MemoryConnector {
    state: Arc<Mutex<State>>,
    stall: Arc<Stall>,
}

struct MemoryReader {
    control: Receiver<Option<String>>,
}

struct MemoryWriter {
    queued: Vec<String>,
    frames: Sender<String>,
    control: Sender<Option<String>>,
    closed: Arc<AtomicBool>,
    stall: Arc<Stall>,
}

impl MemoryDebugger {
    /// A debugger that answers every `hello` with `ack_json` as the `hello.ack` payload
    /// while it accepts (it does from the start).
    pub(crate) fn new(ack_json: &str) -> MemoryDebugger {
        let (tx, rx) = crossbeam_channel::unbounded();
        MemoryDebugger {
            state: Arc::new(Mutex::new(State {
                accepting: true,
                ack: json::parse_str(ack_json).expect("the ack is JSON"),
                connects: 0,
                frames: tx,
                link: None,
            })),
            frames: rx,
            stall: Arc::default(),
        }
    }

    /// The connector a session reaches this debugger with.
    pub(crate) fn connector(&self) -> Box<dyn Connector> {
        Box::new(MemoryConnector {
            state: self.state.clone(),
            stall: self.stall.clone(),
        })
    }

    /// Stalls every link's writes (they block in `flush`) until called with `false`.
    pub(crate) fn stall(&self, on: bool) {
        self.stall.set(on);
    }

    /// [`MemoryDebugger::stall`] for another thread.
    pub(crate) fn staller(&self) -> impl Fn(bool) + Send + 'static {
        let stall = self.stall.clone();
        move |on| stall.set(on)
    }

    /// Whether the next connection attempts succeed.
    pub(crate) fn accept(&self, accepting: bool) {
        self.state.lock().unwrap().accepting = accepting;
    }

    /// How many connections were attempted (accepted or not).
    pub(crate) fn connects(&self) -> usize {
        self.state.lock().unwrap().connects
    }

    /// The next frame the session flushed, parsed, within `timeout`.
    pub(crate) fn next_frame(&self, timeout: Duration) -> Option<Value> {
        let text = self.frames.recv_timeout(timeout).ok()?;
        Some(json::parse_str(&text).expect("the session sends JSON"))
    }

    /// The next frame of type `kind`, skipping others, within `timeout` (panics otherwise).
    pub(crate) fn next_of(&self, kind: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = self
                .next_frame(left)
                .unwrap_or_else(|| panic!("no {kind} frame within {timeout:?}"));
            if frame.get("type").and_then(Value::as_str) == Some(kind) {
                return frame;
            }
        }
    }

    /// How many flushed frames are waiting to be read.
    pub(crate) fn pending(&self) -> usize {
        self.frames.len()
    }

    /// Every frame flushed so far (waits `quiet` for stragglers).
    pub(crate) fn drain(&self, quiet: Duration) -> Vec<Value> {
        std::iter::from_fn(|| self.next_frame(quiet)).collect()
    }

    /// Sends one control frame to the session over the newest link.
    pub(crate) fn send(&self, text: &str) {
        let state = self.state.lock().unwrap();
        let (control, _) = state.link.as_ref().expect("a link is open");
        control.send(Some(text.to_string())).unwrap();
    }

    /// Breaks the newest link from the debugger's side (a server that went away): the
    /// session's reader sees the end and its writer's next flush fails.
    pub(crate) fn drop_link(&self) {
        if let Some((control, closed)) = self.state.lock().unwrap().link.take() {
            closed.store(true, Ordering::Release);
            let _ = control.send(None);
        }
    }
}

impl Connector for MemoryConnector {
    fn connect(&self, hello_json: &str) -> Result<Link, TransportError> {
        let mut state = self.state.lock().unwrap();
        state.connects += 1;
        if !state.accepting {
            return Err(TransportError::Closed(
                "refused by the in-memory debugger".into(),
            ));
        }
        let _ = state.frames.send(hello_json.to_string());
        let (control_tx, control_rx) = crossbeam_channel::unbounded();
        let closed = Arc::new(AtomicBool::new(false));
        state.link = Some((control_tx.clone(), closed.clone()));
        Ok(Link {
            reader: Box::new(MemoryReader {
                control: control_rx,
            }),
            writer: Box::new(MemoryWriter {
                queued: Vec::new(),
                frames: state.frames.clone(),
                control: control_tx,
                closed,
                stall: self.stall.clone(),
            }),
            ack: state.ack.clone(),
        })
    }
}

impl LinkReader for MemoryReader {
    fn next_text(&mut self) -> Result<String, TransportError> {
        match self.control.recv() {
            Ok(Some(text)) => Ok(text),
            _ => Err(TransportError::Closed("the in-memory link ended".into())),
        }
    }
}

impl LinkWriter for MemoryWriter {
    fn queue(&mut self, text: String) -> Result<(), TransportError> {
        self.queued.push(text);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        self.stall.wait_clear();
        if self.closed.load(Ordering::Acquire) {
            return Err(TransportError::Closed("the in-memory link ended".into()));
        }
        for frame in self.queued.drain(..) {
            let _ = self.frames.send(frame);
        }
        Ok(())
    }

    fn close(mut self: Box<Self>, _reason: &str) {
        let _ = self.flush();
        self.abort();
    }

    fn abort(self: Box<Self>) {
        self.closed.store(true, Ordering::Release);
        let _ = self.control.send(None);
    }
}
