#!/usr/bin/env bash
# Sets the one version of every package: Cargo.toml's [workspace.package] version (which the
# crates and, through maturin, the Python wheel read), plus the copies that a package format
# needs written in its own file: bindings/node/package.json (+ lock), viewer/package.json,
# bindings/ruby/lib/graphmind/version.rb. scripts/dist/check-versions.sh fails when they drift.
#   scripts/set-version.sh 0.2.0
set -euo pipefail
cd "$(dirname "$0")/.."
new=${1:?usage: scripts/set-version.sh X.Y.Z}
[[ $new =~ ^[0-9]+\.[0-9]+\.[0-9]+([-.][0-9A-Za-z.]+)?$ ]] || { echo "set-version: '$new' is not X.Y.Z"; exit 2; }
sed -i -E '/^\[workspace.package\]/,/^\[/ s/^version = "[^"]*"/version = "'"$new"'"/' Cargo.toml
sed -i -E 's/^(graphmind-core = \{ path = "core", version = ")[^"]*"/\1'"$new"'"/' Cargo.toml
sed -i -E 's/^(graphmind-example-agent = \{ path = "examples\/rust", version = ")[^"]*"/\1'"$new"'"/' Cargo.toml
sed -i -E 's/^(  VERSION = )"[^"]*"/\1"'"$new"'"/' bindings/ruby/lib/graphmind/version.rb
for f in bindings/node/package.json viewer/package.json; do
  (cd "$(dirname "$f")" && npm version --no-git-tag-version --allow-same-version "$new" >/dev/null)
done
cargo update --workspace -q 2>/dev/null || true
scripts/dist/check-versions.sh
