#!/usr/bin/env bash
# Installs everything `make test`, `make bench` and `make demo` need on a fresh machine.
# Idempotent: each step checks first and does nothing when the tool is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }

# System packages (Debian). Added here as the parts that need them land.
for pkg_cmd in "pkg-config:pkg-config" "chromium:chromium" "ruby:ruby" "rake:rake" "bundler:bundle" "cmake:cmake" "valgrind:valgrind"; do
  pkg=${pkg_cmd%%:*}; cmd=${pkg_cmd##*:}
  have "$cmd" || need_apt+=("$pkg")
done
# The Ruby gem's build (ruby.h, libclang for rb-sys' bindgen) and test framework.
for pkg_file in "ruby-dev:/usr/include/ruby-3.1.0/ruby.h" "libclang-dev:/usr/lib/llvm-14/lib/libclang.so" \
                "ruby-minitest:/usr/lib/ruby/vendor_ruby/minitest.rb"; do
  pkg=${pkg_file%%:*}; file=${pkg_file#*:}
  [ -e "$file" ] || dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
# gcc's sanitizer runtimes for the C contract test (-fsanitize=address,undefined). They come
# with gcc on Debian (libgcc-12-dev depends on them); checked here for a trimmed image.
for pkg in libasan8 libubsan1; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}"
fi

# The reference Python SDK, graphmind-ai 0.5.1: a test-only oracle, in its own venv because
# it shares the import name `graphmind` with ours.
if [ ! -x .venv-ref/bin/python ] || ! .venv-ref/bin/python -c 'import graphmind' 2>/dev/null; then
  echo "setup: installing the reference SDK graphmind-ai==0.5.1 into .venv-ref"
  python3 -m venv .venv-ref
  .venv-ref/bin/pip install -q graphmind-ai==0.5.1
fi
# Real MCP peers for the mcp-proxy / mcp tests (offline over stdio once installed):
# the npm reference servers in .mcp-peers/ (gitignored) and the PyPI `mcp` 1.x client.
if [ ! -f .mcp-peers/node_modules/@modelcontextprotocol/server-everything/package.json ] \
   || [ ! -f .mcp-peers/node_modules/@modelcontextprotocol/server-filesystem/package.json ]; then
  echo "setup: installing the npm MCP servers into .mcp-peers"
  mkdir -p .mcp-peers
  [ -f .mcp-peers/package.json ] || echo '{"private":true}' > .mcp-peers/package.json
  (cd .mcp-peers && npm install --no-audit --no-fund -q @modelcontextprotocol/server-everything @modelcontextprotocol/server-filesystem)
fi
if [ ! -x .venv-mcp/bin/python ] || ! .venv-mcp/bin/python -c 'import mcp' 2>/dev/null; then
  echo "setup: installing the PyPI MCP client (mcp 1.x) into .venv-mcp"
  python3 -m venv .venv-mcp
  .venv-mcp/bin/pip install -q 'mcp>=1.0,<2'
fi
# Arize Phoenix, the real OpenTelemetry backend of cli/tests/otlp_phoenix.rs (issue #24),
# pinned, in its own venv (about 850 MB). If the venv cannot be made, say so loudly and
# leave .venv-phoenix.skipped: that test then reports SKIPPED instead of failing.
if [ ! -x .venv-phoenix/bin/phoenix ] || ! .venv-phoenix/bin/python -c 'import importlib.metadata as m; assert m.version("arize-phoenix") == "20.26.1"' 2>/dev/null; then
  echo "setup: installing arize-phoenix==20.26.1 into .venv-phoenix"
  if python3 -m venv .venv-phoenix && .venv-phoenix/bin/pip install -q 'arize-phoenix==20.26.1'; then
    rm -f .venv-phoenix.skipped
  else
    echo "setup: !!! COULD NOT create .venv-phoenix: the Phoenix OTLP test will be SKIPPED !!!" >&2
    echo "python3 -m venv / pip install arize-phoenix==20.26.1 failed on $(date -u)" > .venv-phoenix.skipped
  fi
fi
# The viewer's build and test tools (Vite, TypeScript, playwright-core driving Debian's
# chromium), pinned by viewer/package-lock.json. Installed when missing or out of date.
if [ -f viewer/package-lock.json ] && have npm; then
  if [ ! -d viewer/node_modules ] || [ viewer/package-lock.json -nt viewer/node_modules/.package-lock.json ]; then
    echo "setup: installing the viewer's npm packages (npm ci in viewer/)"
    # The lock lists Vite 8's Windows-only optional package (napi-windows-process-start-time);
    # a lock without it made npm 11's `npm ci` refuse, and `npm install` rewrite the lock on
    # every set-up. `npm install` stays as the fallback for an npm that refuses otherwise.
    (cd viewer && { npm ci --no-audit --no-fund 2>/dev/null || npm install --no-audit --no-fund; })
  fi
fi
# Our Python package's venv: maturin builds it, pytest and the client libraries test it.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import maturin, pytest, websockets, httpx, openai, anthropic, langchain_core, opentelemetry.sdk' 2>/dev/null; then
  echo "setup: installing maturin, pytest and the Python test dependencies into .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q maturin pytest websockets httpx openai anthropic langchain-core opentelemetry-sdk
fi
# `make dist`: maturin with zig (PyPI `ziglang`, via cargo-zigbuild) builds the manylinux2014
# wheel and the glibc 2.17 server without Docker; auditwheel checks the wheel's tag.
if [ ! -x .venv-dist/bin/python ] || ! .venv-dist/bin/python -c 'import maturin, ziglang, auditwheel' 2>/dev/null \
   || [ ! -x .venv-dist/bin/cargo-zigbuild ]; then
  echo "setup: installing maturin, ziglang, cargo-zigbuild and auditwheel into .venv-dist"
  python3 -m venv .venv-dist
  .venv-dist/bin/pip install -q maturin ziglang cargo-zigbuild auditwheel
fi
echo "setup: ok"
