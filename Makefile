# GraphMind: one Rust core, every SDK. `make demo` shows it, `make test` proves it.
CARGO ?= cargo
.PHONY: setup test test-rust test-ruby test-python test-node test-viewer viewer bench bench-python bench-node demo fmt clippy

## Installs every system, Python and npm package the project needs (idempotent).
setup:
	@bash scripts/setup.sh

## Every test: the core's unit and conformance tests, then each layer's own suite.
## The viewer is built first so the server binary embeds it.
test: setup viewer test-rust test-ruby test-python test-node test-viewer

## The browser viewer (viewer/dist, embedded by cli/build.rs on the next cargo build).
viewer:
	cd viewer && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund 2>/dev/null || npm install --no-audit --no-fund; } && npx vite build

## The viewer's browser tests: Chromium against the real server binary.
test-viewer:
	$(CARGO) build --release -p graphmind-cli
	cd viewer && GRAPHMIND_BIN=../target/release/graphmind npm test

test-rust:
	$(CARGO) test --workspace --release

## The Ruby gem (bindings/ruby) against a real `graphmind serve`.
test-ruby:
	rake test
## The Python package: built into .venv with maturin (editable), then pytest against the real server.
test-python: setup
	$(CARGO) build -p graphmind-cli --release
	VIRTUAL_ENV=$(CURDIR)/.venv PATH=$(CURDIR)/.venv/bin:$$PATH .venv/bin/maturin develop --release -q
	.venv/bin/python -m pytest -q bindings/python/tests

## The Node binding: npm ci builds the addon with cargo (install script), then node --test
## against a real `graphmind serve`.
test-node:
	$(CARGO) build -p graphmind-cli --release
	cd bindings/node && npm ci --no-audit --no-fund && npm test

## Benchmarks, side by side with what a user would pick instead (criterion).
bench: setup
	$(CARGO) bench -p graphmind-core
	$(CARGO) bench -p graphmind-cli
	cd viewer && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund 2>/dev/null || npm install --no-audit --no-fund; } && npm run bench
	rake bench
	$(MAKE) bench-python
	$(MAKE) bench-node

bench-node:
	cd bindings/node && npm ci --no-audit --no-fund && npm run bench

bench-python: setup
	VIRTUAL_ENV=$(CURDIR)/.venv PATH=$(CURDIR)/.venv/bin:$$PATH .venv/bin/maturin develop --release -q
	.venv/bin/python bench/python_tool.py bench/sample-1k.json

## Starts the server, runs the example agent against it, prints what was recorded.
demo: setup viewer
	$(CARGO) build --release -q -p graphmind-cli -p graphmind-example-agent
	@bash scripts/demo.sh

fmt:
	$(CARGO) fmt --all

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
