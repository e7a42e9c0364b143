# GraphMind: one Rust core, every SDK. `make demo` shows it, `make test` proves it.
CARGO ?= cargo
.PHONY: setup soak test fmt-check dist test-dist test-rust test-c test-ruby test-python test-node test-cross test-viewer viewer install lib-c valgrind-agent bench bench-c bench-python bench-node demo fmt clippy

## Installs every system, Python and npm package the project needs (idempotent).
setup:
	@bash scripts/setup.sh

## Every test: the core's unit and conformance tests, then each layer's own suite.
## The viewer is built first so the server binary embeds it.
test: setup fmt-check viewer clippy test-rust test-c test-ruby test-python test-node test-cross test-viewer test-dist

## Every artifact a user installs, into dist/ (docs/install.md): the manylinux wheel and the
## sdist, the npm tarball, the platform and source gems, the C tarball, the packaged crates.
dist: setup viewer
	bash scripts/dist/build.sh

## Each artifact installed in a fresh environment with no cargo or rustc on PATH: its
## `graphmind serve`, its example agent, `graphmind runs`, versions (scripts/dist/test.sh);
## then the sdist and the source gem built where Rust is present (test-source.sh).
test-dist: dist
	bash scripts/dist/test-check-versions.sh
	bash scripts/dist/check-versions.sh
	DIST=$(CURDIR)/dist bash scripts/dist/check-versions.sh
	bash scripts/dist/test.sh
	bash scripts/dist/test-source.sh

## The long versions of the bounded delivery tests `make test` runs: floods of 100,000
## tool calls with 1 KB inputs in every language, the server SIGSTOPped 10 s mid-flood
## (past the 5 s write timeout: detach, ring, reconnect), and the exit race run hundreds
## of times with stderr on a file; the parsers fuzzed with 200,000 cases a property;
## 1,000 apps sending 1,000,000 frames; 5,000 idle and slow sockets.
soak: setup lib-c
	GM_FLOOD_CALLS=100000 GM_STOP_SECS=10 $(CARGO) test --release -p graphmind-cli --test delivery
	PROPTEST_CASES=200000 $(CARGO) test --release -p graphmind-cli --test fuzz
	GM_LOAD_FRAMES=1000000 GM_IDLE_CONNS=5000 $(CARGO) test --release -p graphmind-cli --test load -- --test-threads 1
	GM_FLOOD_CALLS=100000 GM_EXIT_RUNS=300 $(CARGO) test --release -p graphmind-ffi --test recording
	VIRTUAL_ENV=$(CURDIR)/.venv PATH=$(CURDIR)/.venv/bin:$$PATH .venv/bin/maturin develop --release -q
	GM_EXIT_RUNS=400 GM_FLOOD_CALLS=100000 GM_STOP_SECS=10 .venv/bin/python -m pytest -q bindings/python/tests/test_exit.py bindings/python/tests/test_delivery.py
	rake compile
	GM_EXIT_RUNS=200 GM_FLOOD_CALLS=100000 ruby -Ibindings/ruby/lib -Ibindings/ruby/test bindings/ruby/test/test_delivery.rb
	cd bindings/node && npm ci --no-audit --no-fund && GM_EXIT_RUNS=200 GM_FLOOD_CALLS=100000 node --test test/delivery.test.js

## The browser viewer (viewer/dist, embedded by cli/build.rs on the next cargo build).
viewer:
	cd viewer && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund 2>/dev/null || npm install --no-audit --no-fund; } && npx vite build

## The viewer's browser tests: Chromium against the real server binary. The tests that
## record through the Node SDK (why, cost, folding, replay) need its addon and its npm
## `openai`: `npm ci` in bindings/node builds and installs both (they fail, never skip).
test-viewer: viewer
	$(CARGO) build --release -p graphmind-cli -p graphmind-ffi
	cd bindings/node && npm ci --no-audit --no-fund
	cd viewer && GRAPHMIND_BIN=../target/release/graphmind npm test

## Builds first: `cargo test` links the tests against the rlib only, and the ABI test
## inspects the shared library (libgraphmind.so) that only `cargo build` produces.
test-rust:
	$(CARGO) build --workspace --release
	$(CARGO) test --workspace --release

## The Ruby gem (bindings/ruby) against a real `graphmind serve`.
test-ruby:
	rake test
## The Python package: built into .venv with maturin (editable), then pytest against the real server.
test-python: setup
	$(CARGO) build -p graphmind-cli --release
	VIRTUAL_ENV=$(CURDIR)/.venv PATH=$(CURDIR)/.venv/bin:$$PATH .venv/bin/maturin develop --release -q
	.venv/bin/python -m pytest -q bindings/python/tests examples/python/tests

## The Node binding: npm ci builds the addon with cargo (install script), then node --test
## against a real `graphmind serve`.
test-node:
	$(CARGO) build -p graphmind-cli --release
	cd bindings/node && npm ci --no-audit --no-fund && npm test

## One scripted model exchange through every driver in tests/cross_language/drivers/ (each
## language's SDK with its OpenAI client) against one real server: the stored events must
## be identical. Builds what each driver loads (the Python package, the Ruby extension, the
## Node addon); bounded (each driver 120 s at most, about 5 s in all).
test-cross: setup
	$(CARGO) build -p graphmind-cli --release
	VIRTUAL_ENV=$(CURDIR)/.venv PATH=$(CURDIR)/.venv/bin:$$PATH .venv/bin/maturin develop --release -q
	rake compile
	cd bindings/node && npm ci --no-audit --no-fund
	.venv/bin/python tests/cross_language/run.py

## The C ABI: libgraphmind (.so/.a), the vectors through C, the examples against a real
## server (shared and static), valgrind memcheck, and `make install` + pkg-config + CMake.
VALGRIND ?= valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect -q
CSTRICT = -Wall -Wextra -Werror -pedantic
lib-c:
	$(CARGO) build --release -p graphmind-ffi -p graphmind-cli

test-c: lib-c
	@mkdir -p target/c
	cc -std=c99 $(CSTRICT) -g -Iinclude ffi/tests/c/vectors.c -Ltarget/release -lgraphmind -o target/c/vectors
	LD_LIBRARY_PATH=target/release target/c/vectors tests/vectors
	LD_LIBRARY_PATH=target/release $(VALGRIND) target/c/vectors tests/vectors
	GRAPHMIND_URL=ws://127.0.0.1:9/ingest $(MAKE) -s valgrind-agent
	$(CARGO) test --release -p graphmind-ffi
	bash ffi/tests/install.sh

valgrind-agent:
	cc -std=c99 $(CSTRICT) -g -Iinclude examples/c/agent.c -Ltarget/release -lgraphmind -o target/c/agent
	LD_LIBRARY_PATH=target/release $(VALGRIND) target/c/agent

## Installs libgraphmind.so/.a, graphmind.h, graphmind.pc and the CMake package under PREFIX.
PREFIX ?= /usr/local
GM_VERSION := $(shell grep -m1 '^version' Cargo.toml | cut -d'"' -f2)
install: lib-c
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/lib/cmake/graphmind
	install -m 644 include/graphmind.h $(DESTDIR)$(PREFIX)/include/graphmind.h
	install -m 755 target/release/libgraphmind.so $(DESTDIR)$(PREFIX)/lib/libgraphmind.so
	install -m 644 target/release/libgraphmind.a $(DESTDIR)$(PREFIX)/lib/libgraphmind.a
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(GM_VERSION)|g' ffi/graphmind.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/graphmind.pc
	sed -e 's|@VERSION@|$(GM_VERSION)|g' ffi/graphmindConfig.cmake.in > $(DESTDIR)$(PREFIX)/lib/cmake/graphmind/graphmindConfig.cmake
	sed -e 's|@VERSION@|$(GM_VERSION)|g' ffi/graphmindConfigVersion.cmake.in > $(DESTDIR)$(PREFIX)/lib/cmake/graphmind/graphmindConfigVersion.cmake

## Benchmarks, side by side with what a user would pick instead (criterion).
bench: setup
	$(CARGO) bench -p graphmind-core
	$(CARGO) bench -p graphmind-cli
	cd viewer && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund 2>/dev/null || npm install --no-audit --no-fund; } && npm run bench
	rake bench
	$(MAKE) -s bench-c
	$(MAKE) bench-python
	$(MAKE) bench-node

## One tool node through the C ABI vs the Rust API (goal: C overhead <= 10%).
bench-c: lib-c
	@mkdir -p target/c
	cc -std=c99 -O2 -Iinclude ffi/benches/tool_node.c -Ltarget/release -lgraphmind -o target/c/bench_tool_node
	GM_C_BENCH=$(CURDIR)/target/c/bench_tool_node $(CARGO) bench -p graphmind-ffi --bench tool_node

bench-node:
	cd bindings/node && npm ci --no-audit --no-fund && npm run bench

bench-python: setup
	VIRTUAL_ENV=$(CURDIR)/.venv PATH=$(CURDIR)/.venv/bin:$$PATH .venv/bin/maturin develop --release -q
	.venv/bin/python bench/python_tool.py bench/sample-1k.json
	.venv/bin/python bench/python_llm.py
	$(CARGO) build -p graphmind-cli --release
	.venv/bin/python bench/python_replay.py bench/sample-1k.json
	.venv/bin/python bench/python_spool.py bench/sample-1k.json

## `graphmind demo`: the server (or the one already on the port), the demo agent held at a
## loop and an error, the viewer link. Without a terminal (CI) it releases both holds itself
## and exits. GRAPHMIND_DEMO_PORT picks the port (default 4747).
demo: setup viewer
	$(CARGO) build --release -q -p graphmind-cli
	target/release/graphmind demo --port $${GRAPHMIND_DEMO_PORT:-4747}

fmt:
	$(CARGO) fmt --all

## Every Rust file as rustfmt writes it (default settings); `make fmt` fixes what this finds.
fmt-check:
	$(CARGO) fmt --all --check

## Every crate and its tests, benches and examples without a clippy warning (the release
## profile, the one CI builds, so it reuses that profile's dependencies).
clippy:
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings
