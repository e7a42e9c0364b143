#!/usr/bin/env bash
# The one-version test: every package's version equals Cargo.toml's [workspace.package]
# version. Checks the source files always, and with DIST=<dir> the built artifacts as well
# (file names, the wheel's METADATA, the npm package.json, the gem's spec, the tarball's .pc).
# Exits 1 naming each file that disagrees.
set -euo pipefail
cd "$(dirname "$0")/../.."
want=$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' Cargo.toml)
bad=0
check() { # check <what> <found>
  if [ "$2" = "$want" ]; then echo "version: $1 = $2"; else echo "version: $1 is '$2', Cargo.toml says '$want'"; bad=1; fi
}
check "Cargo.toml graphmind-core dependency" "$(sed -n 's/^graphmind-core = { path = "core", version = "\([^"]*\)".*/\1/p' Cargo.toml)"
check "Cargo.toml graphmind-example-agent dependency" "$(sed -n 's/^graphmind-example-agent = { path = "examples\/rust", version = "\([^"]*\)".*/\1/p' Cargo.toml)"
json_version() { node -p "require('./$1').version"; }
check bindings/node/package.json "$(json_version bindings/node/package.json)"
check bindings/node/package-lock.json "$(json_version bindings/node/package-lock.json)"
check viewer/package.json "$(json_version viewer/package.json)"
check bindings/ruby/lib/graphmind/version.rb "$(sed -n 's/^  VERSION = "\(.*\)"/\1/p' bindings/ruby/lib/graphmind/version.rb)"
grep -q '^dynamic = \["version"\]' pyproject.toml && check "pyproject.toml (from Cargo.toml)" "$want" \
  || { echo "version: pyproject.toml must take its version from Cargo.toml (dynamic = [\"version\"])"; bad=1; }
for toml in core cli ffi bindings/python bindings/ruby bindings/node; do
  grep -q '^version.workspace = true' "$toml/Cargo.toml" || { echo "version: $toml/Cargo.toml does not inherit the workspace version"; bad=1; }
done
if [ -n "${DIST:-}" ]; then
  whl=$(ls "$DIST"/graphmind_ai-*.whl | head -1)
  check "$whl METADATA" "$(python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print(next(z.read(n).decode() for n in z.namelist() if n.endswith(".dist-info/METADATA")))' "$whl" | sed -n 's/^Version: //p')"
  check "$(ls "$DIST"/graphmind_ai-*.tar.gz) name" "$(basename "$(ls "$DIST"/graphmind_ai-*.tar.gz)" .tar.gz | sed 's/^graphmind_ai-//')"
  for tgz in "$DIST/graphmind-node-$want.tgz" "$DIST/graphmind-node-linux-x64-gnu-$want.tgz"; do
    check "$tgz package.json" "$(tar -xOzf "$tgz" package/package.json | node -p 'JSON.parse(require("fs").readFileSync(0)).version')"
  done
  for gem in "$DIST"/graphmind-[0-9]*.gem; do
    check "$gem spec" "$(gem spec "$gem" version | sed -n 's/^version: //p')"
  done
  lib=$(ls "$DIST"/libgraphmind-*-linux-x86_64.tar.gz)
  check "$lib name" "$(basename "$lib" | sed -E 's/^libgraphmind-(.*)-linux-x86_64\.tar\.gz$/\1/')"
  check "$lib graphmind.pc" "$(tar -xOzf "$lib" --wildcards '*/lib/pkgconfig/graphmind.pc' | sed -n 's/^Version: //p')"
fi
[ $bad = 0 ] && echo "version: all packages at $want" || exit 1
