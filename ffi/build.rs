//! Writes `include/graphmind.h` with cbindgen and gives the cdylib a linker version script
//! that exports only the `gm_` symbols.

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=graphmind.map");
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("ffi/cbindgen.toml");
    let header = dir.join("../include/graphmind.h");
    // GM_HEADER_OUT lets the drift test generate to a scratch file instead.
    let out = std::env::var_os("GM_HEADER_OUT")
        .map(PathBuf::from)
        .unwrap_or(header);
    println!("cargo:rerun-if-env-changed=GM_HEADER_OUT");
    cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate graphmind.h")
        .write_to_file(out);
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
            dir.join("graphmind.map").display()
        );
    }
}
