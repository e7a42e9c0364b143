//! One accepted socket as the WebSocket layer sees it: reads never block, writes do.
//!
//! A connection's thread sleeps in `poll` on its socket and on its outbox's eventfd. If
//! reads blocked (even for a short timeout), a message queued for this socket while the
//! thread sat in a read would wait for that timeout: a debugger's `exec.resume` relayed to
//! an app would wait, and so would every `exec.paused` fanned out to a viewer. So a read
//! that finds nothing returns `WouldBlock` at once (`MSG_DONTWAIT`), and the thread goes
//! back to `poll`. Writes stay blocking with the socket's write timeout, so a peer that
//! accepts nothing for that long is dropped instead of buffered without bound.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::io::{AsRawFd, RawFd};

/// An accepted TCP stream with non-blocking reads and blocking writes.
pub struct Conn(pub TcpStream);

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes for the call.
            let n = unsafe {
                libc::recv(
                    self.0.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl AsRawFd for Conn {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    #[test]
    fn a_read_with_nothing_to_read_returns_at_once_and_data_still_arrives() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        // A blocking socket with a long timeout: the wrapper must not wait for it.
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut conn = Conn(server);
        let mut buf = [0u8; 16];
        let started = Instant::now();
        let err = conn.read(&mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(started.elapsed() < Duration::from_secs(1));
        client.write_all(b"hi").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match conn.read(&mut buf) {
                Ok(n) => {
                    assert_eq!(&buf[..n], b"hi");
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        }
        conn.write_all(b"back").unwrap();
        let mut got = [0u8; 4];
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"back");
    }
}
