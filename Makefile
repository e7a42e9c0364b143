# GraphMind: one Rust core, every SDK. `make demo` shows it, `make test` proves it.
CARGO ?= cargo
.PHONY: setup test test-rust bench demo fmt clippy

## Installs every system, Python and npm package the project needs (idempotent).
setup:
	@bash scripts/setup.sh

## Every test: the core's unit and conformance tests, then each layer's own suite.
test: setup test-rust

test-rust:
	$(CARGO) test --workspace --release

## Benchmarks, side by side with what a user would pick instead (criterion).
bench: setup
	$(CARGO) bench -p graphmind-core
	$(CARGO) bench -p graphmind-cli

## Starts the server, runs the example agent against it, prints what was recorded.
demo: setup
	$(CARGO) build --release -q -p graphmind-cli -p graphmind-example-agent
	@bash scripts/demo.sh

fmt:
	$(CARGO) fmt --all

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
