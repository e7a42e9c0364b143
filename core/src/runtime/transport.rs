//! The WebSocket link to `graphmind serve`: URL parsing, a connect with a hard timeout, the
//! `hello` -> `hello.ack` handshake, and the split into a reading half and a writing half.
//!
//! Everything here runs on the session's worker thread (connect, handshake, writes) or its
//! reader thread (reads); never on an application thread. Plain `ws://` only: the debugger
//! is a local service (see the spec's "Keep it local").
//!
//! The session sees a link only through three traits: a [`Connector`] opens a [`Link`],
//! whose halves are a [`LinkReader`] and a [`LinkWriter`]. [`WebSocketConnector`] is the
//! real one; the session's unit tests use an in-memory one (`session::memory_link`).

use crate::json::{self, Value};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};
use thiserror::Error;
use tungstenite::protocol::{Role, WebSocketConfig};
use tungstenite::{Message, WebSocket};

/// The largest frame either side may send (`MAX_FRAME_BYTES` of the reference server).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// How long a write may block before the link counts as dead.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a connection attempt or a live link failed.
#[derive(Debug, Error)]
pub enum TransportError {
    /// The URL is not a `ws://host:port/path` URL.
    #[error("invalid GraphMind URL {url:?}: {why}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The host name did not resolve.
    #[error("could not resolve {0}")]
    Resolve(String),
    /// The TCP connect failed or timed out.
    #[error("could not connect to {addr}: {source}")]
    Connect {
        /// The address tried.
        addr: String,
        /// The socket error.
        source: io::Error,
    },
    /// The WebSocket upgrade failed.
    #[error("WebSocket upgrade failed: {0}")]
    Upgrade(String),
    /// No `hello.ack` arrived in time.
    #[error("the debugger did not complete the handshake within {0} ms")]
    HandshakeTimeout(u128),
    /// The debugger speaks another protocol version.
    #[error("the debugger speaks protocol v{received}, this client speaks v{supported}")]
    VersionMismatch {
        /// The debugger's version.
        received: String,
        /// Ours.
        supported: u32,
    },
    /// The link closed or failed.
    #[error("connection lost: {0}")]
    Closed(String),
}

/// A parsed `ws://` endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or address, without brackets.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
}

impl Endpoint {
    /// Parses `ws://host[:port][/path]` (port 80 by default, path `/` by default).
    pub fn parse(url: &str) -> Result<Endpoint, TransportError> {
        let invalid = |why| TransportError::InvalidUrl {
            url: url.to_string(),
            why,
        };
        let rest = url.strip_prefix("ws://").ok_or_else(|| {
            invalid(if url.starts_with("wss://") {
                "wss:// is not supported; the debugger is local (use ws://)"
            } else {
                "it must start with ws://"
            })
        })?;
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(invalid("it must name a host (and no user info)"));
        }
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let end = bracketed
                .find(']')
                .ok_or_else(|| invalid("unclosed [ in the host"))?;
            let host = &bracketed[..end];
            let after = &bracketed[end + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) => p
                    .parse::<u16>()
                    .map_err(|_| invalid("the port is not a number from 0 to 65535"))?,
                None if after.is_empty() => 80,
                None => return Err(invalid("unexpected text after the host")),
            };
            (host.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    p.parse::<u16>()
                        .map_err(|_| invalid("the port is not a number from 0 to 65535"))?,
                ),
                None => (authority.to_string(), 80),
            }
        };
        if host.is_empty() {
            return Err(invalid("it must name a host"));
        }
        Ok(Endpoint { host, port, path })
    }

    fn url(&self) -> String {
        if self.host.contains(':') {
            format!("ws://[{}]:{}{}", self.host, self.port, self.path)
        } else {
            format!("ws://{}:{}{}", self.host, self.port, self.path)
        }
    }
}

/// A live, attached link: the reading half for the reader thread, the writing half for the
/// worker, and the debugger's `hello.ack` payload.
pub struct Link {
    /// Reads control frames (owned by the reader thread).
    pub reader: Box<dyn LinkReader>,
    /// Writes event frames (owned by the worker thread).
    pub writer: Box<dyn LinkWriter>,
    /// The `hello.ack` payload.
    pub ack: Value,
}

/// Opens a [`Link`] to a debugger: connects, sends the `hello` frame and waits for
/// `hello.ack`. Called on the session's worker thread only; must be bounded in time.
pub trait Connector: Send + Sync {
    /// A live link, or why there is none.
    fn connect(&self, hello_json: &str) -> Result<Link, TransportError>;
}

/// The reading half of a [`Link`].
pub trait LinkReader: Send {
    /// Blocks for the next text frame; `Err` when the link is gone (closed by either side).
    fn next_text(&mut self) -> Result<String, TransportError>;
}

/// The writing half of a [`Link`].
pub trait LinkWriter: Send {
    /// Queues one text frame without flushing (call [`LinkWriter::flush`] after a batch).
    fn queue(&mut self, text: String) -> Result<(), TransportError>;
    /// Hands every queued frame to the other side.
    fn flush(&mut self) -> Result<(), TransportError>;
    /// Closes the link normally; also wakes the reading half.
    fn close(self: Box<Self>, reason: &str);
    /// Drops the link without a goodbye (it is already broken); also wakes the reading half.
    fn abort(self: Box<Self>);
}

/// The WebSocket [`Connector`] to `graphmind serve` at one URL, with the session's connect
/// and handshake timeouts.
#[derive(Clone, Debug)]
pub struct WebSocketConnector {
    /// The debugger's `ws://` URL.
    pub url: String,
    /// Bound on the TCP connect.
    pub connect_timeout: Duration,
    /// Bound on the WebSocket upgrade and the `hello` -> `hello.ack` exchange.
    pub handshake_timeout: Duration,
    /// The protocol version the `hello.ack` must confirm.
    pub protocol_version: u32,
}

impl Connector for WebSocketConnector {
    fn connect(&self, hello_json: &str) -> Result<Link, TransportError> {
        connect(
            &self.url,
            self.connect_timeout,
            self.handshake_timeout,
            hello_json,
            self.protocol_version,
        )
    }
}

/// The reading half of a WebSocket [`Link`].
struct WsReader {
    socket: WebSocket<TcpStream>,
}

/// The writing half of a WebSocket [`Link`].
struct WsWriter {
    socket: WebSocket<TcpStream>,
    stream: TcpStream,
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .max_message_size(Some(MAX_FRAME_BYTES))
}

/// Connects to `url`, sends `hello_json`, and waits for `hello.ack`. Blocks for at most
/// `connect_timeout` + `handshake_timeout` (plus name resolution): call it from the worker.
pub fn connect(
    url: &str,
    connect_timeout: Duration,
    handshake_timeout: Duration,
    hello_json: &str,
    protocol_version: u32,
) -> Result<Link, TransportError> {
    let endpoint = Endpoint::parse(url)?;
    let addrs: Vec<SocketAddr> = (endpoint.host.as_str(), endpoint.port)
        .to_socket_addrs()
        .map_err(|_| TransportError::Resolve(endpoint.host.clone()))?
        .collect();
    let mut last_error = None;
    let mut stream = None;
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, connect_timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last_error = Some((addr.to_string(), e)),
        }
    }
    let stream = match stream {
        Some(s) => s,
        None => {
            let (addr, source) = last_error.unwrap_or_else(|| {
                (
                    endpoint.host.clone(),
                    io::Error::new(io::ErrorKind::NotFound, "no address"),
                )
            });
            return Err(TransportError::Connect { addr, source });
        }
    };
    let _ = stream.set_nodelay(true);
    let handshake_deadline = Instant::now() + handshake_timeout;
    let _ = stream.set_read_timeout(Some(handshake_timeout));
    let _ = stream.set_write_timeout(Some(handshake_timeout));
    let writer_stream = stream
        .try_clone()
        .map_err(|e| TransportError::Upgrade(e.to_string()))?;

    let (mut socket, _response) =
        tungstenite::client::client_with_config(endpoint.url(), stream, Some(ws_config()))
            .map_err(|e| match e {
                tungstenite::HandshakeError::Failure(e) => TransportError::Upgrade(e.to_string()),
                tungstenite::HandshakeError::Interrupted(_) => {
                    TransportError::HandshakeTimeout(handshake_timeout.as_millis())
                }
            })?;
    socket
        .send(Message::text(hello_json.to_string()))
        .map_err(|e| TransportError::Upgrade(e.to_string()))?;

    let ack = loop {
        let remaining = handshake_deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(TransportError::HandshakeTimeout(
                handshake_timeout.as_millis(),
            ));
        }
        let _ = socket.get_ref().set_read_timeout(Some(remaining));
        let message = match socket.read() {
            Ok(m) => m,
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(TransportError::HandshakeTimeout(
                    handshake_timeout.as_millis(),
                ))
            }
            Err(e) => return Err(TransportError::Closed(e.to_string())),
        };
        let Message::Text(text) = message else {
            continue;
        };
        let Ok(envelope) = json::parse(text.as_bytes()) else {
            continue;
        };
        if envelope.get("type").and_then(Value::as_str) != Some("hello.ack") {
            continue; // anything before the ack is ignored
        }
        let gm = envelope.get("gm").and_then(Value::as_i64);
        let acked = envelope
            .get("payload")
            .and_then(|p| p.get("versions"))
            .and_then(|v| v.get("protocol"))
            .and_then(Value::as_i64);
        for version in [gm, acked].into_iter().flatten() {
            if version != protocol_version as i64 {
                return Err(TransportError::VersionMismatch {
                    received: version.to_string(),
                    supported: protocol_version,
                });
            }
        }
        break envelope.get("payload").cloned().unwrap_or(Value::Null);
    };
    // Reads block without a timeout from here on: a dead server shows up as EOF or a reset.
    let _ = socket.get_ref().set_read_timeout(None);
    let _ = writer_stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let shutdown_handle = writer_stream
        .try_clone()
        .map_err(|e| TransportError::Upgrade(e.to_string()))?;
    let writer = WebSocket::from_raw_socket(writer_stream, Role::Client, Some(ws_config()));
    Ok(Link {
        reader: Box::new(WsReader { socket }),
        writer: Box::new(WsWriter {
            socket: writer,
            stream: shutdown_handle,
        }),
        ack,
    })
}

impl LinkReader for WsReader {
    fn next_text(&mut self) -> Result<String, TransportError> {
        loop {
            match self.socket.read() {
                Ok(Message::Text(text)) => return Ok(text.to_string()),
                Ok(Message::Binary(bytes)) => match String::from_utf8(bytes.to_vec()) {
                    Ok(text) => return Ok(text),
                    Err(_) => continue,
                },
                Ok(Message::Close(frame)) => {
                    return Err(TransportError::Closed(match frame {
                        Some(f) => format!(
                            "closed by the debugger ({} {})",
                            u16::from(f.code),
                            f.reason
                        ),
                        None => "closed by the debugger".to_string(),
                    }))
                }
                Ok(_) => continue,
                Err(e) => return Err(TransportError::Closed(e.to_string())),
            }
        }
    }
}

impl LinkWriter for WsWriter {
    fn queue(&mut self, text: String) -> Result<(), TransportError> {
        self.socket
            .write(Message::text(text))
            .map_err(|e| TransportError::Closed(e.to_string()))
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        self.socket
            .flush()
            .map_err(|e| TransportError::Closed(e.to_string()))
    }

    /// Sends a normal closure and shuts the socket down, which also wakes the reader thread.
    fn close(mut self: Box<Self>, reason: &str) {
        let _ = self.socket.close(Some(tungstenite::protocol::CloseFrame {
            code: tungstenite::protocol::frame::coding::CloseCode::Normal,
            reason: reason.to_string().into(),
        }));
        let _ = self.socket.flush();
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// Shuts the socket down without a close frame.
    fn abort(self: Box<Self>) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_endpoints() {
        let e = Endpoint::parse("ws://127.0.0.1:4747/ingest").unwrap();
        assert_eq!(
            e,
            Endpoint {
                host: "127.0.0.1".into(),
                port: 4747,
                path: "/ingest".into()
            }
        );
        let e = Endpoint::parse("ws://[::1]:9/x?y=1").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("::1", 9, "/x?y=1")
        );
        assert_eq!(Endpoint::parse("ws://localhost").unwrap().port, 80);
        assert!(Endpoint::parse("http://x").is_err());
        assert!(Endpoint::parse("wss://x")
            .unwrap_err()
            .to_string()
            .contains("not supported"));
        assert!(Endpoint::parse("ws://x:99999/").is_err());
    }

    #[test]
    fn a_closed_port_fails_fast() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let started = Instant::now();
        let err = connect(
            &format!("ws://127.0.0.1:{port}/ingest"),
            Duration::from_millis(300),
            Duration::from_millis(1000),
            "{}",
            1,
        )
        .err()
        .unwrap();
        assert!(matches!(err, TransportError::Connect { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_millis(300));
    }

    #[test]
    fn a_silent_server_times_out_the_handshake() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let _keep = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            std::thread::sleep(Duration::from_millis(800));
            drop(stream);
        });
        let started = Instant::now();
        let err = connect(
            &format!("ws://127.0.0.1:{port}/ingest"),
            Duration::from_millis(300),
            Duration::from_millis(200),
            "{}",
            1,
        )
        .err()
        .unwrap();
        assert!(matches!(err, TransportError::HandshakeTimeout(_)), "{err}");
        assert!(started.elapsed() < Duration::from_millis(700));
    }
}
