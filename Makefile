# GraphMind: one Rust core, every SDK. `make demo` shows it, `make test` proves it.
CARGO ?= cargo
.PHONY: setup test test-rust test-node bench bench-node demo fmt clippy

## Installs every system, Python and npm package the project needs (idempotent).
setup:
	@bash scripts/setup.sh

## Every test: the core's unit and conformance tests, then each layer's own suite.
test: setup test-rust test-node

test-rust:
	$(CARGO) test --workspace --release

## The Node binding: npm ci builds the addon with cargo (install script), then node --test
## against a real `graphmind serve`.
test-node:
	$(CARGO) build -p graphmind-cli --release
	cd bindings/node && npm ci --no-audit --no-fund && npm test

## Benchmarks, side by side with what a user would pick instead (criterion).
bench: setup
	$(CARGO) bench -p graphmind-core
	$(CARGO) bench -p graphmind-cli
	$(MAKE) bench-node

bench-node:
	cd bindings/node && npm ci --no-audit --no-fund && npm run bench

## Runs the example and prints what was recorded.
demo: setup
	$(CARGO) run --release -q -p graphmind-core --example demo

fmt:
	$(CARGO) fmt --all

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
