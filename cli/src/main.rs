//! The `graphmind` binary.

/// mimalloc: values parsed on an ingest connection's thread are freed on the writer's and
/// the OTLP exporter's, and glibc's malloc serialises such cross-thread frees on the
/// allocating thread's arena lock (the language bindings use mimalloc for the same reason).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(graphmind_cli::main_with_args(&argv));
}
