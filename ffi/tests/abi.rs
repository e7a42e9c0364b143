//! The C ABI's packaging: the committed header matches a fresh cbindgen run, and the shared
//! library exports only `gm_` symbols.

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn committed_header_matches_a_fresh_generation() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap();
    let fresh = std::env::temp_dir().join(format!("graphmind-h-{}.h", std::process::id()));
    cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .unwrap()
        .write_to_file(&fresh);
    let fresh_text = std::fs::read_to_string(&fresh).unwrap();
    let _ = std::fs::remove_file(&fresh);
    // Read the committed version from git, not the work tree (build.rs rewrites the latter).
    let out = Command::new("git")
        .args(["show", "HEAD:include/graphmind.h"])
        .current_dir(root())
        .output()
        .expect("git");
    assert!(out.status.success(), "include/graphmind.h is not committed");
    let committed = String::from_utf8(out.stdout).unwrap();
    assert!(
        committed == fresh_text,
        "include/graphmind.h differs from a fresh cbindgen generation: rebuild ffi and commit the header"
    );
}

#[test]
fn shared_library_exports_only_gm_symbols() {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("target"));
    let so = target.join(profile).join("libgraphmind.so");
    assert!(so.exists(), "{} not built", so.display());
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output()
        .expect("nm");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert!(names.len() > 60, "too few exports: {}", names.len());
    let foreign: Vec<&&str> = names.iter().filter(|n| !n.starts_with("gm_")).collect();
    assert!(foreign.is_empty(), "exported non-gm_ symbols: {foreign:?}");
    for required in [
        "gm_abi_version",
        "gm_session_new",
        "gm_step_start",
        "gm_gate_on_decision",
        "gm_serialize_payload",
    ] {
        assert!(names.contains(&required), "{required} not exported");
    }
}
