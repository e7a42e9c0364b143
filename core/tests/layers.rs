//! The core's layers are one-directional: code in a layer's folder (`core/src/<layer>/`)
//! names only modules of its own layer or of the layers below it. Read from the source
//! tree itself: a layer's modules are the files and folders in its folder, and every
//! `crate::<module>` a line of code (not a comment) names is looked up there.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first: a layer may use the ones before it in this list.
const LAYERS: [&str; 5] = ["value", "protocol", "rules", "runtime", "surface"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Module name -> index of its layer. The `surface` layer is one module, its own folder.
fn module_layers() -> BTreeMap<String, usize> {
    let mut map = BTreeMap::new();
    for root_item in ["JsStr", "Map", "Number", "Value"] {
        map.insert(root_item.to_string(), 0); // `json`'s types, re-exported at the root
    }
    for (at, layer) in LAYERS.iter().enumerate() {
        map.insert(layer.to_string(), at);
        if *layer == "surface" {
            continue;
        }
        for entry in fs::read_dir(src().join(layer)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if name != "mod" {
                map.insert(name, at);
            }
        }
    }
    map
}

/// The module names a line of code reaches through `crate::` (`crate::a::b`, `crate::{a, b}`).
fn crate_names(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in line.match_indices("crate::") {
        let rest = &line[at + "crate::".len()..];
        let rest = rest.strip_prefix('{').unwrap_or(rest);
        let group_end = rest.find('}').unwrap_or(rest.len());
        let group = if line[at..].starts_with("crate::{") {
            &rest[..group_end]
        } else {
            rest
        };
        for part in group.split(',') {
            let name: String = part
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.push(name);
            }
            if !line[at..].starts_with("crate::{") {
                break;
            }
        }
    }
    names
}

#[test]
fn every_module_is_in_one_layer_folder() {
    let at_root: Vec<String> = fs::read_dir(src())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "lib.rs")
        .collect();
    for name in &at_root {
        assert!(
            LAYERS.contains(&name.as_str()),
            "core/src/{name} is outside the layer folders {LAYERS:?}"
        );
    }
    assert_eq!(at_root.len(), LAYERS.len(), "a layer folder is missing");
}

#[test]
fn no_layer_uses_a_layer_above_it() {
    let layers = module_layers();
    assert!(layers.contains_key("session") && layers.contains_key("json"));
    let mut upward = Vec::new();
    for (at, layer) in LAYERS.iter().enumerate() {
        let mut files = Vec::new();
        rust_files(&src().join(layer), &mut files);
        assert!(!files.is_empty(), "no source in core/src/{layer}");
        for file in files {
            let text = fs::read_to_string(&file).unwrap();
            for (number, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for name in crate_names(line) {
                    let used = layers.get(&name).copied();
                    let used = used.unwrap_or_else(|| panic!("{file:?}: unknown module {name}"));
                    if used > at {
                        upward.push(format!(
                            "{}:{}: {layer} uses {name} ({})",
                            file.strip_prefix(src()).unwrap().display(),
                            number + 1,
                            LAYERS[used]
                        ));
                    }
                }
            }
        }
    }
    assert!(upward.is_empty(), "upward uses:\n{}", upward.join("\n"));
}

#[test]
fn the_scanner_reads_grouped_and_plain_paths() {
    assert_eq!(crate_names("use crate::{a, b_c};"), ["a", "b_c"]);
    assert_eq!(
        crate_names("let x = crate::json::parse(crate::spool::X);"),
        ["json", "spool"]
    );
    assert_eq!(crate_names("$crate::event::declare::put"), ["event"]);
}
