//! Every variable, option, flag and named limit on the two product pages (the spec's
//! `environment.md` and `limits.md`) appears in `docs/configuration.md` or `docs/limits.md`,
//! so a difference from the spec cannot go unwritten: a new name on those pages fails here
//! until our docs say what we do with it.
//!
//! The spec lives beside the checkout (`../shared/spec`, as CI lays it out), or where
//! `GRAPHMIND_SPEC_DIR` points.

use std::collections::BTreeSet;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn spec_dir() -> PathBuf {
    match std::env::var_os("GRAPHMIND_SPEC_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => root().join("../shared/spec"),
    }
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (set GRAPHMIND_SPEC_DIR to the spec's folder)",
            path.display()
        )
    })
}

/// Words made of letters, digits, `_` and `-` (so `--max-frame-bytes` stays one word).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .map(|w| w.trim_end_matches('-'))
        .filter(|w| !w.is_empty())
}

/// A variable or a named constant: UPPER_SNAKE with an underscore (`GRAPHMIND_DB`,
/// `MAX_FRAME_BYTES`), or one of the bare variables the pages name.
fn is_upper_name(w: &str) -> bool {
    let upper = w
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    upper
        && w.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && ((w.contains('_') && !w.ends_with('_'))
            || matches!(w, "GRAPHMIND" | "CI" | "ENV" | "ENVIRONMENT"))
}

/// A session option as the pages spell it (`connectTimeoutMs`, `bufferSize`, `hideInputs`,
/// `allowNodes`, Python's `buffer_size`, `pause_timeout`), or a CLI flag.
fn is_option_name(w: &str) -> bool {
    if w.starts_with("--") {
        return w.len() > 2;
    }
    let camel = w.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && w.chars().any(|c| c.is_ascii_uppercase())
        && w.chars().all(|c| c.is_ascii_alphanumeric());
    let camel_option = camel
        && (["Ms", "Size", "Bytes", "Attach"]
            .iter()
            .any(|s| w.ends_with(s))
            || ["hide", "allow", "ignore", "loop"]
                .iter()
                .any(|p| w.starts_with(p)));
    let snake_option = w.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        && ["_size", "_bytes", "_timeout", "_guard", "_nodes"]
            .iter()
            .any(|s| w.ends_with(s));
    camel_option || snake_option
}

#[test]
fn every_name_on_the_spec_pages_is_in_our_configuration_or_limits_page() {
    let spec = spec_dir();
    let pages = [
        read(spec.join("environment.md")),
        read(spec.join("limits.md")),
    ];
    let names: BTreeSet<&str> = pages
        .iter()
        .flat_map(|p| words(p))
        .filter(|w| is_upper_name(w) || is_option_name(w))
        .collect();
    assert!(
        names.len() > 60,
        "the pages name {} things: {names:?}",
        names.len()
    );
    for known in [
        "GRAPHMIND_DB",
        "MAX_FRAME_BYTES",
        "DEFAULT_ABANDON_GRACE_MS",
        "bufferSize",
        "--max-frame-bytes",
        "allowNodes",
    ] {
        assert!(names.contains(known), "the reader finds {known}");
    }
    let docs = read(root().join("docs/configuration.md")) + &read(root().join("docs/limits.md"));
    let ours: BTreeSet<&str> = words(&docs).collect();
    let missing: Vec<&&str> = names.iter().filter(|n| !ours.contains(**n)).collect();
    assert!(
        missing.is_empty(),
        "named on the spec pages but in neither docs/configuration.md nor docs/limits.md: {missing:?}"
    );
}
