#!/usr/bin/env bash
# `make test-dist`: installs each artifact of dist/ the way its users do, in a fresh
# environment (new venv / empty npm project / fresh GEM_HOME / empty prefix) with a fresh
# HOME and no cargo or rustc on PATH, then: `graphmind --version` is the package version,
# `graphmind serve` runs from what was installed, the language's example agent runs from the
# installed package, and `graphmind runs` lists its run. The wheel also under the oldest
# CPython here (3.9 when pyenv has it), and `auditwheel show` must report manylinux.
# Ends with the closing line "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
DIST=${DIST:-$root/dist}
version=$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' Cargo.toml)
# How long the server may take to print its port, and an agent to finish.
SERVER_START_SECS=10
AGENT_SECS=60
real_home=$HOME
work=$(mktemp -d /tmp/graphmind-dist.XXXXXX)
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
passed=0 failed=0
pass() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# The oldest and the newest CPython to install the wheel under (absolute paths: the
# environment below has no pyenv shims).
pythons() {
  local v p
  for v in 3.9 3.11; do
    p=$(ls -d "$real_home"/.pyenv/versions/$v.*/bin/python$v 2>/dev/null | sort -V | tail -1)
    [ -n "$p" ] || p=$(command -v python$v || true)
    [ -n "$p" ] && echo "$p"
  done | awk '!seen[$0]++'
}
PYTHONS=$(pythons)
[ -n "$PYTHONS" ] || PYTHONS=$(python3 -c 'import sys; print(sys.executable)')
AUDITWHEEL=$root/.venv-dist/bin/auditwheel

# A user's shell: system directories only (no ~/.cargo/bin), a fresh HOME.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=$work/home
mkdir -p "$HOME"
unset RUBYLIB RUBYOPT GEM_HOME GEM_PATH PYTHONPATH VIRTUAL_ENV NODE_PATH CARGO_TARGET_DIR GRAPHMIND_URL GRAPHMIND_DB GRAPHMIND_HOME
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  echo "test-dist: cargo or rustc is on PATH ($PATH): the test would not prove a Rust-free install"; exit 1
fi

# serve_and_run <name> <graphmind> <app-name> <agent command...>: starts the installed
# server on a free port with its own database, runs the agent against it, checks that
# `graphmind runs` lists a run of <app-name>, and stops the server.
serve_and_run() {
  local name=$1 bin=$2 app=$3; shift 3
  local dir=$work/$name db port
  mkdir -p "$dir"; db=$dir/graphmind.db
  GRAPHMIND_HOME=$dir "$bin" serve --port 0 --db "$db" --json --no-open >"$dir/server.json" 2>"$dir/server.log" &
  server_pid=$!
  for _ in $(seq $((SERVER_START_SECS * 20))); do [ -s "$dir/server.json" ] && break; sleep 0.05; done
  port=$(sed -nE 's/.*"port":([0-9]+).*/\1/p' "$dir/server.json")
  if [ -z "$port" ]; then fail "$name: graphmind serve did not start: $(cat "$dir/server.log")"; kill "$server_pid"; server_pid=; return; fi
  if GRAPHMIND_URL="ws://127.0.0.1:$port/ingest" timeout "$AGENT_SECS" "$@" >"$dir/agent.log" 2>&1; then
    pass "$name: example agent ran against the installed server"
  else
    fail "$name: example agent failed: $(tail -5 "$dir/agent.log")"
  fi
  if "$bin" runs --db "$db" >"$dir/runs.txt" 2>&1 && grep -q "$app" "$dir/runs.txt"; then
    pass "$name: graphmind runs lists the run of $app"
  else
    fail "$name: graphmind runs does not list $app: $(cat "$dir/runs.txt")"
  fi
  kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true; server_pid=
}

# check_version <name> <graphmind>: `graphmind --version` is the package version.
check_version() {
  local got; got=$("$2" --version 2>&1 || true)
  [ "$got" = "$version" ] && pass "$1: graphmind --version = $version" || fail "$1: graphmind --version said '$got', want $version"
}

# installed_from <name> <path> <prefix>: the installed thing lives under the fresh environment.
installed_from() {
  case $2 in "$3"/*) pass "$1: loaded from $2" ;; *) fail "$1: loaded from $2, not from $3" ;; esac
}

test_wheel() {
  local whl; whl=$(ls "$DIST"/graphmind_ai-"$version"-cp39-abi3-*.whl)
  local tags; tags=$("$AUDITWHEEL" show "$whl" 2>&1 || true)
  grep -qE '"manylinux_2_[0-9]+_x86_64"' <<<"$tags" && pass "wheel: auditwheel show: $(grep -oE '"manylinux_2_[0-9]+_x86_64"' <<<"$tags" | head -1)" \
    || fail "wheel: auditwheel show reports no manylinux tag: $tags"
  local py
  for py in $PYTHONS; do
    local pv; pv=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    local venv=$work/venv-$pv
    "$py" -m venv "$venv"
    if "$venv/bin/pip" install -q --no-index --disable-pip-version-check "$whl"; then pass "wheel: pip install under CPython $pv"; else fail "wheel: pip install under CPython $pv"; continue; fi
    check_version "wheel/py$pv" "$venv/bin/graphmind"
    installed_from "wheel/py$pv" "$("$venv/bin/python" -c 'import graphmind; print(graphmind.__file__)')" "$venv"
    serve_and_run "wheel-py$pv" "$venv/bin/graphmind" example-agent "$venv/bin/python" "$root/examples/python/agent.py"
  done
}

test_npm() {
  local tgz=$DIST/graphmind-node-$version.tgz project=$work/npm
  mkdir -p "$project"
  (cd "$project" && echo '{"name":"dist-test","private":true}' > package.json)
  if (cd "$project" && npm install -q --no-audit --no-fund --offline "$tgz" >"$work/npm-install.log" 2>&1); then
    pass "npm: npm install $(basename "$tgz") (no build script, offline)"
  else
    fail "npm: npm install: $(tail -5 "$work/npm-install.log")"; return
  fi
  check_version npm "$project/node_modules/.bin/graphmind"
  cp "$root/examples/node/agent.js" "$project/agent.js"
  installed_from npm "$(cd "$project" && node -p "require.resolve('@graphmind/node')")" "$project/node_modules"
  serve_and_run npm "$project/node_modules/.bin/graphmind" node-example-agent node "$project/agent.js"
  # The loader names the file it looked for when none fits.
  local msg; msg=$(cd "$project" && node -e "require('@graphmind/node/native').loadAddon({dir: '/nonexistent', triple: 'linux-x64-musl'})" 2>&1 || true)
  grep -q '/nonexistent/graphmind.linux-x64-musl.node' <<<"$msg" && grep -q '@graphmind/node-linux-x64-musl' <<<"$msg" \
    && pass "npm: the loader names what it looked for" || fail "npm: loader error does not name the file: $msg"
  # With no addon next to it, the loader takes the per-platform package (napi-rs fallback).
  local plat=$DIST/graphmind-node-linux-x64-gnu-$version.tgz project2=$work/npm-platform
  mkdir -p "$project2" && echo '{"name":"dist-test-platform","private":true}' > "$project2/package.json"
  if (cd "$project2" && npm install -q --no-audit --no-fund --offline "$tgz" "$plat" >"$work/npm-install2.log" 2>&1); then
    local got; got=$(cd "$project2" && node -e "
      const n = require('@graphmind/node/native');
      const addon = n.loadAddon({ dir: '/nonexistent' });
      console.log(typeof addon.constants === 'function', require.resolve('@graphmind/node-linux-x64-gnu'), n.serverPath({ dir: '/nonexistent' }));" 2>&1 || true)
    local server; server=$(awk '{print $3}' <<<"$got")
    if [[ $got == "true $project2/node_modules/@graphmind/node-linux-x64-gnu/graphmind.linux-x64-gnu.node $project2/node_modules/@graphmind/node-linux-x64-gnu/graphmind" ]] \
       && [ "$("$server" --version)" = "$version" ]; then
      pass "npm: the loader falls back to @graphmind/node-linux-x64-gnu (addon and server)"
    else
      fail "npm: platform-package fallback: $got"
    fi
  else
    fail "npm: npm install of the platform package: $(tail -5 "$work/npm-install2.log")"
  fi
}

test_gem() {
  local gem=$DIST/graphmind-$version-x86_64-linux.gem
  export GEM_HOME=$work/gems GEM_PATH=$work/gems
  if gem install --local --no-document "$gem" >"$work/gem-install.log" 2>&1; then pass "gem: gem install $(basename "$gem")"; else fail "gem: gem install: $(tail -5 "$work/gem-install.log")"; return; fi
  check_version gem "$GEM_HOME/bin/graphmind"
  installed_from gem "$(ruby -e 'require "graphmind"; print $LOADED_FEATURES.grep(/graphmind_native/).first')" "$GEM_HOME"
  serve_and_run gem "$GEM_HOME/bin/graphmind" ruby-example ruby "$root/examples/ruby/agent.rb"
  unset GEM_HOME GEM_PATH
}

test_c() {
  local tgz=$DIST/libgraphmind-$version-linux-x86_64.tar.gz prefix=$work/prefix
  mkdir -p "$prefix" && tar -xzf "$tgz" -C "$prefix" --strip-components=1
  local f missing=
  for f in lib/libgraphmind.so lib/libgraphmind.a include/graphmind.h lib/pkgconfig/graphmind.pc \
           lib/cmake/graphmind/graphmindConfig.cmake lib/cmake/graphmind/graphmindConfigVersion.cmake bin/graphmind; do
    [ -e "$prefix/$f" ] || missing="$missing $f"
  done
  [ -z "$missing" ] && pass "c: tarball has lib, include, pkgconfig, cmake, bin" || fail "c: tarball lacks$missing"
  check_version c "$prefix/bin/graphmind"
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  [ "$(pkg-config --modversion graphmind)" = "$version" ] && pass "c: pkg-config --modversion graphmind = $version" || fail "c: pkg-config version"
  if cc -std=c99 "$root/examples/c/agent.c" $(pkg-config --cflags --libs graphmind) -Wl,-rpath,"$prefix/lib" -o "$work/agent-c" \
     && cc -std=c99 "$root/examples/c/agent.c" $(pkg-config --cflags graphmind) "$prefix/lib/libgraphmind.a" \
          $(pkg-config --libs-only-l --static graphmind | sed 's/-lgraphmind//') -o "$work/agent-c-static"; then
    pass "c: examples/c/agent.c builds with pkg-config (shared and static)"
  else
    fail "c: examples/c/agent.c does not build with pkg-config"; return
  fi
  mkdir -p "$work/cmake"
  printf 'cmake_minimum_required(VERSION 3.16)\nproject(agent C)\nfind_package(graphmind %s REQUIRED CONFIG)\nadd_executable(agent "%s")\ntarget_link_libraries(agent PRIVATE graphmind::graphmind)\n' \
    "$version" "$root/examples/c/agent.c" > "$work/cmake/CMakeLists.txt"
  if cmake -S "$work/cmake" -B "$work/cmake/build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 && cmake --build "$work/cmake/build" >>"$work/cmake.log" 2>&1; then
    pass "c: find_package(graphmind $version) from the tarball builds the agent"
  else
    fail "c: CMake: $(tail -5 "$work/cmake.log")"
  fi
  unset PKG_CONFIG_PATH
  serve_and_run c "$prefix/bin/graphmind" c-agent "$work/agent-c"
  serve_and_run c-static "$prefix/bin/graphmind" c-agent "$work/agent-c-static"
}

test_wheel
test_npm
test_gem
test_c
echo "test-dist: $passed passed, $failed failed"
[ "$failed" = 0 ]
