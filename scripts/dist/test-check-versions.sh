#!/usr/bin/env bash
# The one-version test fails when a package disagrees: check-versions.sh is run on a copy of
# the version files, as it is (must pass), then with each copy set to another version in turn
# (each must fail and name the file). Ends with "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
FILES=(Cargo.toml core/Cargo.toml cli/Cargo.toml ffi/Cargo.toml bindings/python/Cargo.toml bindings/ruby/Cargo.toml
       bindings/node/Cargo.toml pyproject.toml bindings/node/package.json bindings/node/package-lock.json
       viewer/package.json bindings/ruby/lib/graphmind/version.rb scripts/dist/check-versions.sh)
work=$(mktemp -d /tmp/graphmind-versions.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
fresh() { rm -rf "$work/t"; for f in "${FILES[@]}"; do install -D "$root/$f" "$work/t/$f"; done; }
expect() { # expect <pass|fail> <what> [file-named-in-output]
  local out rc=0; out=$(bash "$work/t/scripts/dist/check-versions.sh" 2>&1) || rc=$?
  if { [ "$1" = pass ] && [ $rc = 0 ]; } || { [ "$1" = fail ] && [ $rc != 0 ] && grep -q "${3:-.}" <<<"$out"; }; then
    echo "ok: check-versions: $2"; passed=$((passed + 1))
  else
    echo "FAIL: check-versions: $2 (exit $rc): $out"; failed=$((failed + 1))
  fi
}
fresh; expect pass "agreeing versions pass"
fresh; sed -i -E 's/^(  VERSION = )"[^"]*"/\1"9.9.9"/' "$work/t/bindings/ruby/lib/graphmind/version.rb"
expect fail "a gem version that disagrees fails" version.rb
fresh; sed -i -E '0,/"version": "[^"]*"/s//"version": "9.9.9"/' "$work/t/bindings/node/package.json"
expect fail "an npm version that disagrees fails" bindings/node/package.json
fresh; sed -i -E 's/^dynamic = \["version"\].*/version = "9.9.9"/' "$work/t/pyproject.toml"
expect fail "a Python version of its own fails" pyproject.toml
fresh; sed -i -E 's/^(graphmind-core = \{ path = "core", version = ")[^"]*"/\19.9.9"/' "$work/t/Cargo.toml"
expect fail "a crate dependency on another version fails" graphmind-core
echo "check-versions: $passed passed, $failed failed"
[ "$failed" = 0 ]
