#!/usr/bin/env bash
# `make test-dist`, second half: the two source packages install where Rust is present.
# The sdist is built into a wheel by pip (maturin, cargo) and imported from a new venv; the
# source gem is installed into a fresh GEM_HOME (extconf.rb runs cargo), its extension is
# required and its `graphmind --version` is the package version. Both build in one shared
# target folder (target/dist-source), so their dependencies compile once.
# Ends with the closing line "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
DIST=${DIST:-$root/dist}
version=$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' Cargo.toml)
work=$(mktemp -d /tmp/graphmind-dist-src.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
pass() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
export CARGO_TARGET_DIR=$root/target/dist-source

unset GEM_HOME GEM_PATH RUBYLIB RUBYOPT VIRTUAL_ENV PYTHONPATH

# The sdist: pip builds it (maturin from .venv-dist, no build isolation: no network needed).
sdist=$DIST/graphmind_ai-$version.tar.gz
if PATH=$root/.venv-dist/bin:$PATH pip wheel -q --no-deps --no-build-isolation -w "$work/wheels" "$sdist" >"$work/sdist.log" 2>&1; then
  pass "sdist: pip builds a wheel from $(basename "$sdist")"
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q --no-index --disable-pip-version-check "$work"/wheels/graphmind_ai-*.whl
  got=$(cd "$work" && "$work/venv/bin/python" -c 'import graphmind, graphmind._native as n; print(graphmind.__version__, n.__file__)')
  case $got in "$version $work/venv/"*) pass "sdist: the built package imports from the venv ($got)" ;; *) fail "sdist: import said: $got" ;; esac
else
  fail "sdist: pip wheel failed: $(tail -5 "$work/sdist.log")"
fi

# The source gem: extconf.rb compiles the extension and the server with cargo.
gem=$DIST/graphmind-$version.gem
export GEM_HOME=$work/gems GEM_PATH=$work/gems
if gem install --local --no-document "$gem" >"$work/gem.log" 2>&1; then
  pass "source gem: gem install compiled $(basename "$gem")"
  got=$("$GEM_HOME/bin/graphmind" --version 2>&1 || true)
  [ "$got" = "$version" ] && pass "source gem: graphmind --version = $version" || fail "source gem: graphmind --version said '$got'"
  got=$(cd "$work" && ruby -e 'require "graphmind"; print Graphmind::VERSION, " ", $LOADED_FEATURES.grep(/graphmind_native/).first')
  case $got in "$version $GEM_HOME/"*) pass "source gem: require \"graphmind\" loads $got" ;; *) fail "source gem: require said: $got" ;; esac
else
  fail "source gem: gem install failed: $(tail -5 "$work/gem.log")"
fi
echo "test-dist-source: $passed passed, $failed failed"
[ "$failed" = 0 ]
