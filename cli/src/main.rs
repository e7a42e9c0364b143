//! The `graphmind` binary.

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(graphmind_cli::main_with_args(&argv));
}
