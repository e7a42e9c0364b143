//! JSONTestSuite's parsing cases (`tests/vectors/jsontestsuite/test_parsing`), read by the
//! JSON parser's and the wire parser's tests (`#[path]`).

use std::path::PathBuf;

/// Every case as (file name, bytes), sorted by name: `y_` must parse, `n_` must not, `i_`
/// either way.
pub fn suite() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/vectors/jsontestsuite/test_parsing");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 300,
        "JSONTestSuite not found in {}",
        dir.display()
    );
    files
}
