//! Opening the viewer in the user's browser, and `graphmind open`.
//!
//! The browser is handed the private redirect file (`~/.graphmind/run/open-<port>.html`,
//! mode 0600), never the URL: the viewer token stays out of every command line another
//! user could read in the process list. `$BROWSER` (its first `:`-separated entry, `%s`
//! replaced by the file) wins, then `xdg-open` (macOS: `open`). Nothing is opened under
//! `--no-open`, when `CI` is set, or on a Linux session with neither `DISPLAY`,
//! `WAYLAND_DISPLAY` nor `$BROWSER`.

use crate::config::DEFAULT_PORT;
use crate::tokens;
use std::path::Path;
use std::process::{Command, Stdio};

/// Why the browser was not opened, when it was not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// `--no-open`.
    Flag,
    /// `CI` is set.
    Ci,
    /// No display and no `$BROWSER`.
    NoDisplay,
    /// The opener could not be started.
    Failed(String),
}

impl Skip {
    /// Human text for "not opened: ...".
    pub fn reason(&self) -> String {
        match self {
            Skip::Flag => "--no-open".into(),
            Skip::Ci => "CI is set".into(),
            Skip::NoDisplay => "no display".into(),
            Skip::Failed(why) => why.clone(),
        }
    }
}

fn set(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Whether `CI` asks for no browser (`CI=1`, `CI=true`; not `CI=0` / `CI=false`).
pub fn in_ci() -> bool {
    set("CI")
        .is_some_and(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "false" | "no"))
}

/// Whether a browser may be opened now (`open` is false under `--no-open`).
pub fn may_open(open: bool) -> Result<(), Skip> {
    if !open {
        return Err(Skip::Flag);
    }
    if in_ci() {
        return Err(Skip::Ci);
    }
    let display =
        set("DISPLAY").is_some() || set("WAYLAND_DISPLAY").is_some() || cfg!(target_os = "macos");
    if set("BROWSER").is_none() && !display {
        return Err(Skip::NoDisplay);
    }
    Ok(())
}

/// Starts the browser on the private file `page` (detached; it is not waited for).
pub fn open_file(page: &Path) -> Result<String, Skip> {
    let target = page.display().to_string();
    let mut cmd = match set("BROWSER") {
        Some(b) => {
            let first = b.split(':').next().unwrap_or_default().trim().to_owned();
            let mut words = first
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>();
            if words.is_empty() {
                return Err(Skip::Failed("$BROWSER is empty".into()));
            }
            if words.iter().any(|w| w.contains("%s")) {
                words = words
                    .into_iter()
                    .map(|w| w.replace("%s", &target))
                    .collect();
            } else {
                words.push(target.clone());
            }
            let mut c = Command::new(&words[0]);
            c.args(&words[1..]);
            c
        }
        None => {
            let mut c = Command::new(if cfg!(target_os = "macos") {
                "open"
            } else {
                "xdg-open"
            });
            c.arg(&target);
            c
        }
    };
    let program = cmd.get_program().to_string_lossy().into_owned();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match cmd.spawn() {
        Ok(mut child) => {
            // Reap it in the background so it never lingers as a zombie.
            let _ = std::thread::Builder::new()
                .name("graphmind-browser".into())
                .spawn(move || child.wait());
            Ok(program)
        }
        Err(e) => Err(Skip::Failed(format!("cannot start {program}: {e}"))),
    }
}

/// Opens `page` if allowed; the line to print either way.
pub fn open_line(open: bool, page: &Path) -> String {
    match may_open(open).and_then(|()| open_file(page)) {
        Ok(program) => format!("opened the viewer in your browser ({program})"),
        Err(skip) => format!(
            "browser not opened ({}); open {}",
            skip.reason(),
            page.display()
        ),
    }
}

/// `graphmind open [--port N] [--no-open]`: prints the viewer link of the server on this
/// machine (with its token) and opens it. Exit 0, or 3 when no server runs there.
pub fn open_command(port: Option<u16>, open: bool, home: &Path) -> i32 {
    let port = port.unwrap_or(DEFAULT_PORT);
    let file = match tokens::read_run_file(home, port) {
        Ok(f) => f,
        Err(e) => {
            eprintln!(
                "graphmind open: {} (start one with `graphmind serve` or `graphmind demo`)",
                e.message
            );
            return crate::control_cli::EXIT_UNREACHABLE;
        }
    };
    if !matches!(crate::control_cli::request(port, "GET", "/health", "", "", crate::demo::PROBE_TIMEOUT), Ok(r) if r.status == 200)
    {
        eprintln!("graphmind open: no GraphMind server answers on port {port} (its run file {} is left from one that stopped); start one with `graphmind serve`", file.path.display());
        return crate::control_cli::EXIT_UNREACHABLE;
    }
    let url = match tokens::read_viewer_url(home, port) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("graphmind open: {}", e.message);
            return 1;
        }
    };
    println!("{url}");
    eprintln!(
        "graphmind open: {}",
        open_line(open, &tokens::opener_path(home, port))
    );
    0
}
