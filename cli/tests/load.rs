//! The server under load, against the real `graphmind serve` on 127.0.0.1: many concurrent
//! well-behaved apps store every frame with a bounded resident size; thousands of slow or
//! idle sockets do not starve a viewer or the HTTP API. `GM_LOAD_CONNS`,
//! `GM_LOAD_FRAMES` and `GM_IDLE_CONNS` lengthen them (`make soak`).

mod common;
use common::*;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Resident size the server may reach while 1,000 apps stream 100,000 frames (its
/// `VmHWM`). The writer queue alone may hold 64 MiB (`MAX_QUEUED_BYTES`); the rest is a
/// small buffer and a thread stack's touched pages per connection.
const PEAK_RSS_BOUND_KB: u64 = 256 * 1024;
/// How much larger the server may stay once every app has left (allocator caches).
const RSS_GROWTH_AFTER_BOUND_KB: u64 = 128 * 1024;
/// How long the viewer and the API may take to answer while the idle sockets are open.
const ANSWER_BOUND: Duration = Duration::from_secs(5);

fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Raises this process's open-file limit to `want` (the hard limit too when allowed: the
/// tests run as root); the server it spawns inherits it. Returns the soft limit now in force.
fn raise_nofile(want: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a live rlimit struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if lim.rlim_cur >= want as libc::rlim_t {
            return lim.rlim_cur;
        }
        let raised = libc::rlimit {
            rlim_cur: want as libc::rlim_t,
            rlim_max: lim.rlim_max.max(want as libc::rlim_t),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
            let soft = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}

/// A `/proc/<pid>/status` field in kB (`VmRSS`, `VmHWM`, `Threads`...).
fn proc_status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// How many of a process's descriptors are sockets.
fn open_sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|t| t.to_string_lossy().starts_with("socket:"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Rows in the events table, read from the server's SQLite file.
fn stored_events(srv: &Server) -> (i64, i64) {
    let db =
        rusqlite::Connection::open_with_flags(&srv.db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    let events = db
        .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
        .unwrap();
    let ok_runs = db
        .query_row("SELECT COUNT(*) FROM runs WHERE status = 'ok'", [], |r| {
            r.get(0)
        })
        .unwrap();
    (events, ok_runs)
}

#[test]
fn a_thousand_concurrent_apps_have_every_frame_stored_in_bounded_memory() {
    let conns = env_count("GM_LOAD_CONNS", 1000) as usize;
    let frames_total = env_count("GM_LOAD_FRAMES", 100_000) as usize;
    // Each connection: hello, run.started, node events, run.finished.
    let per_conn = (frames_total / conns).max(4);
    let limit = raise_nofile(2 * conns as u64 + 512);
    assert!(
        limit >= 2 * conns as u64 + 64,
        "RLIMIT_NOFILE is {limit}; {conns} connections need more"
    );

    let srv = Server::start_quiet(&[], &[("GRAPHMIND_RETENTION", "off")]);
    let pid = srv.child.id();
    let rss_before = proc_status(pid, "VmRSS");

    const WORKERS: usize = 20;
    let open = Arc::new(Barrier::new(WORKERS + 1));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let open = open.clone();
            let port = srv.port;
            std::thread::spawn(move || {
                let mine: Vec<usize> = (0..conns).filter(|c| c % WORKERS == w).collect();
                let mut sockets: Vec<Ws> = mine
                    .iter()
                    .map(|c| {
                        let mut ws = Ws::connect(port, "/ingest");
                        ws.hello(&format!("load-{c}"), None);
                        ws
                    })
                    .collect();
                open.wait();
                // Interleaved: every connection of this worker has a frame in flight at once.
                for k in 1..per_conn {
                    for (ws, c) in sockets.iter_mut().zip(&mine) {
                        let run = format!("run_load_{c}");
                        if k == 1 {
                            ws.event(&run, "run.started", &format!(r#"{{"app":"load-{c}","sdk":{{"name":"t","version":"0"}}}}"#));
                        } else if k == per_conn - 1 {
                            ws.event(&run, "run.finished", r#"{"status":"ok"}"#);
                        } else if k % 2 == 0 {
                            ws.event(&run, "node.started", &format!(r#"{{"nodeId":"tool:t","kind":"tool","name":"t","instanceId":"i{k}","input":{{"k":{k}}}}}"#));
                        } else {
                            ws.event(&run, "node.finished", &format!(r#"{{"nodeId":"tool:t","instanceId":"i{}","durationMs":1,"status":"ok","output":"done"}}"#, k - 1));
                        }
                    }
                }
                for ws in &mut sockets {
                    let _ = ws.ws.close(None);
                    let _ = ws.ws.flush();
                }
                sockets.len()
            })
        })
        .collect();
    open.wait();
    let all_open = t0.elapsed();
    let threads_at_peak = proc_status(pid, "Threads");
    let opened: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(opened, conns);
    let sent = t0.elapsed();

    let want_events = (conns * (per_conn - 1)) as i64;
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut events, mut ok_runs) = stored_events(&srv);
    while (events < want_events || ok_runs < conns as i64) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        (events, ok_runs) = stored_events(&srv);
    }
    let stored = t0.elapsed();
    assert_eq!(
        events, want_events,
        "every frame of every well-behaved connection is stored"
    );
    assert_eq!(ok_runs, conns as i64, "every run ended ok");
    let run = srv.get_json("/api/runs/run_load_0/events?limit=5000");
    assert_eq!(i(&run, &["total"]), Some((per_conn - 1) as i64));

    std::thread::sleep(Duration::from_millis(500));
    let rss_after = proc_status(pid, "VmRSS");
    let peak = proc_status(pid, "VmHWM");
    eprintln!(
        "load: {conns} connections ({threads_at_peak} server threads), {} frames; all open {:.2} s, sent {:.2} s, stored {:.2} s; RSS before {rss_before} kB, peak {peak} kB, after {rss_after} kB",
        conns * per_conn,
        all_open.as_secs_f64(),
        sent.as_secs_f64(),
        stored.as_secs_f64()
    );
    assert!(
        peak < PEAK_RSS_BOUND_KB,
        "peak RSS {peak} kB over {PEAK_RSS_BOUND_KB} kB"
    );
    assert!(
        rss_after < rss_before + RSS_GROWTH_AFTER_BOUND_KB,
        "RSS after {rss_after} kB vs before {rss_before} kB"
    );
}

#[test]
fn thousands_of_idle_and_slow_sockets_do_not_starve_a_viewer_or_the_api() {
    let idle = env_count("GM_IDLE_CONNS", 2000) as usize;
    let limit = raise_nofile(2 * idle as u64 + 512);
    assert!(
        limit >= 2 * idle as u64 + 64,
        "RLIMIT_NOFILE is {limit}; {idle} sockets need more"
    );
    let srv = Server::start_quiet(&[], &[]);
    let pid = srv.child.id();

    // A third never finish their request head (slowloris), a third are upgraded ingest
    // sockets that never say hello, a third said hello and then went silent.
    let t0 = Instant::now();
    let mut slow = Vec::new();
    let mut silent = Vec::new();
    for n in 0..idle {
        match n % 3 {
            0 => {
                use std::io::Write;
                let mut s = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
                s.write_all(
                    format!(
                        "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nX-Slow: ",
                        srv.port
                    )
                    .as_bytes(),
                )
                .unwrap();
                slow.push(s);
            }
            1 => silent.push(Ws::connect(srv.port, "/ingest")),
            _ => {
                let mut ws = Ws::connect(srv.port, "/ingest");
                ws.hello(&format!("idle-{n}"), None);
                silent.push(ws);
            }
        }
    }
    let opened_in = t0.elapsed();
    // Connections are tasks, not threads (cli/src/sockets.rs): count the sockets held.
    let threads = proc_status(pid, "Threads");
    let held = open_sockets(pid);
    assert!(
        held >= idle,
        "the server holds every socket ({held} sockets for {idle})"
    );

    // The viewer gets its welcome and a live run's events in bounded time.
    let t = Instant::now();
    let mut ui = srv.ui();
    let welcome = ui.recv_within(ANSWER_BOUND).expect("welcome under load");
    assert_eq!(s(&welcome, &["type"]), Some("welcome"));
    let welcome_in = t.elapsed();
    ui.send(r#"{"type":"subscribe","runId":"*"}"#);
    ui.recv_type("runs");

    let t = Instant::now();
    let mut app = srv.ingest();
    app.hello("live-under-load", None);
    app.event(
        "run_live",
        "run.started",
        r#"{"app":"live-under-load","sdk":{"name":"t","version":"0"}}"#,
    );
    let upd = ui.recv_type("run.update");
    assert_eq!(s(&upd, &["run", "id"]), Some("run_live"));
    ui.send(r#"{"type":"subscribe","runId":"run_live"}"#);
    ui.recv_type("replay.end");
    let live = app.event(
        "run_live",
        "node.started",
        r#"{"nodeId":"tool:a","kind":"tool","name":"a","instanceId":"c"}"#,
    );
    let ev = ui.recv_type("event");
    assert_eq!(to_json(ev.get("envelope").unwrap()), live);
    let live_in = t.elapsed();
    assert!(live_in < ANSWER_BOUND * 2, "live events took {live_in:?}");

    let t = Instant::now();
    let (status, body) = srv.get("/api/runs");
    let api_in = t.elapsed();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("run_live"));
    assert!(api_in < ANSWER_BOUND, "GET /api/runs took {api_in:?}");
    eprintln!(
        "idle: {idle} sockets ({} slow heads, {} silent ingest) opened in {:.2} s, {threads} server threads, RSS {} kB; welcome {:.0} ms, live run {:.0} ms, GET /api/runs {:.0} ms",
        slow.len(),
        silent.len(),
        opened_in.as_secs_f64(),
        proc_status(pid, "VmRSS"),
        welcome_in.as_secs_f64() * 1e3,
        live_in.as_secs_f64() * 1e3,
        api_in.as_secs_f64() * 1e3
    );
    drop(slow);
    drop(silent);
    app.event("run_live", "run.finished", r#"{"status":"ok"}"#);
    srv.wait_run("run_live", |r| s(r, &["status"]) == Some("ok"));
}
