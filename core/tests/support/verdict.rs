//! The verdict of a section of fixture cases, shared by the fixture-driven tests (`#[path]`).

/// Fails when no case of `section` ran or any failed, listing the failures.
pub fn finish(section: &str, n: usize, failures: Vec<String>) {
    assert!(n > 0, "{section}: no case ran");
    assert!(
        failures.is_empty(),
        "{section}: {} of {n} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
