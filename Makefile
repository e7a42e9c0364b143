# GraphMind: one Rust core, every SDK. `make demo` shows it, `make test` proves it.
CARGO ?= cargo
.PHONY: setup test test-rust test-python bench bench-python demo fmt clippy

## Installs every system, Python and npm package the project needs (idempotent).
setup:
	@bash scripts/setup.sh

## Every test: the core's unit and conformance tests, then each layer's own suite.
test: setup test-rust test-python

test-rust:
	$(CARGO) test --workspace --release

## The Python package: built into .venv with maturin (editable), then pytest against the real server.
test-python: setup
	$(CARGO) build -p graphmind-cli --release
	VIRTUAL_ENV=$(CURDIR)/.venv PATH=$(CURDIR)/.venv/bin:$$PATH .venv/bin/maturin develop --release -q
	.venv/bin/python -m pytest -q bindings/python/tests

## Benchmarks, side by side with what a user would pick instead (criterion).
bench: setup
	$(CARGO) bench -p graphmind-core
	$(CARGO) bench -p graphmind-cli
	$(MAKE) bench-python

bench-python: setup
	VIRTUAL_ENV=$(CURDIR)/.venv PATH=$(CURDIR)/.venv/bin:$$PATH .venv/bin/maturin develop --release -q
	.venv/bin/python bench/python_tool.py bench/sample-1k.json

## Runs the example and prints what was recorded.
demo: setup
	$(CARGO) run --release -q -p graphmind-core --example demo

fmt:
	$(CARGO) fmt --all

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
