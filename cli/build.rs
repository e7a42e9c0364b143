//! Embeds the browser viewer in the binary.
//!
//! When `viewer/dist` exists (built by `make viewer`: `npm ci` + `vite build`), every file in
//! it is embedded with `include_bytes!` through a generated `viewer_assets.rs` in `OUT_DIR`.
//! Otherwise a small page saying how to build the viewer is embedded instead, so
//! `cargo build` never needs npm.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

const NOT_BUILT: &str = "<!doctype html><meta charset=utf-8><title>GraphMind</title>\
<style>body{font:15px system-ui,sans-serif;max-width:40em;margin:4em auto;padding:0 1em}code,pre{background:#eee;padding:2px 6px;border-radius:4px}</style>\
<h1>GraphMind server</h1><p>The viewer is not built into this binary.</p>\
<p>Build it from the repository root, then rebuild the server:</p><pre>make viewer\ncargo build -p graphmind-cli</pre>\
<p>(<code>make viewer</code> runs <code>npm ci</code> and <code>vite build</code> in <code>viewer/</code>.) \
Or point <code>GRAPHMIND_VIEWER_DIST</code> at a built <code>dist</code> folder.</p>\
<p>The server works without it: apps connect to <code>/ingest</code>, viewers to <code>/ws/ui</code>, and runs are at <a href=\"/api/runs\">/api/runs</a>.</p>\n";

/// The viewer bundle inside the crate, for builds from the packaged crate (no `../viewer`).
const PACKAGED_VIEWER: &str = "viewer-dist";

fn collect(dir: &Path, base: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        if path.is_dir() {
            collect(&path, base, out);
        } else if let Ok(rel) = path.strip_prefix(base) {
            let rel = rel.to_string_lossy().replace('\\', "/");
            out.push((rel, path));
        }
    }
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let viewer = manifest.join("..").join("viewer");
    // In a checkout the viewer is `viewer/dist`; in the packaged crate (`cargo package`,
    // crates.io) it is the copy `make dist` puts in `cli/viewer-dist` (PACKAGED_VIEWER).
    let packaged = manifest.join(PACKAGED_VIEWER);
    let dist = if !viewer.join("dist").join("index.html").is_file()
        && packaged.join("index.html").is_file()
    {
        packaged
    } else {
        viewer.join("dist")
    };
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let mut files = Vec::new();
    if dist.join("index.html").is_file() {
        println!("cargo:rerun-if-changed={}", dist.display());
        collect(&dist, &dist, &mut files);
    } else {
        // Watch the folder the build will appear in (or its parent when there is none yet),
        // so a later `make viewer` is picked up without rebuilding on every `cargo build`.
        let watch = if viewer.is_dir() {
            viewer.clone()
        } else {
            manifest.join("build.rs")
        };
        println!("cargo:rerun-if-changed={}", watch.display());
        let page = out_dir.join("viewer-not-built.html");
        fs::write(&page, NOT_BUILT).expect("write placeholder page");
        files.push(("index.html".to_owned(), page));
    }
    let mut src = String::new();
    let _ = writeln!(
        src,
        "/// Whether `viewer/dist` was embedded (false: the not-built page only)."
    );
    let _ = writeln!(
        src,
        "pub const VIEWER_BUILT: bool = {};",
        dist.join("index.html").is_file()
    );
    let _ = writeln!(
        src,
        "/// The embedded files: (path relative to the bundle root, bytes)."
    );
    let _ = writeln!(src, "pub static VIEWER_ASSETS: &[(&str, &[u8])] = &[");
    for (rel, path) in &files {
        let _ = writeln!(
            src,
            "    ({:?}, include_bytes!({:?})),",
            rel,
            path.display().to_string()
        );
    }
    let _ = writeln!(src, "];");
    fs::write(out_dir.join("viewer_assets.rs"), src).expect("write viewer_assets.rs");
}
