#!/usr/bin/env bash
# `make dist`: every artifact a user installs, into dist/ (docs/install.md):
#   graphmind_ai-<v>-cp39-abi3-manylinux_2_17_x86_64.whl  the Python SDK + the server (bin/graphmind)
#   graphmind_ai-<v>.tar.gz                                 the Python sdist (builds with Rust present)
#   graphmind-node-<v>.tgz                                  @graphmind/node, prebuilt, + bin graphmind
#   graphmind-node-linux-x64-gnu-<v>.tgz                    its per-platform package (addon + server)
#   graphmind-<v>-x86_64-linux.gem / graphmind-<v>.gem      the platform gem (+ server) / source gem
#   libgraphmind-<v>-linux-x86_64.tar.gz                    lib, include, pkgconfig, cmake, bin/graphmind
#   crates/graphmind-{core,example-agent,cli}-<v>.crate                  `cargo package`d, verified
# Reuses the release builds earlier make targets made (target/release); the server and the
# Python extension are built once more with zig against glibc 2.17 (target/x86_64-unknown-
# linux-gnu), so the wheel is manylinux2014 and the server runs on any glibc >= 2.17.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
DIST=${DIST:-$root/dist}
version=$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' Cargo.toml)
# The glibc the portable builds target (manylinux2014 = glibc 2.17).
GLIBC=2.17
ZIG_TRIPLE=x86_64-unknown-linux-gnu
step() { echo "dist: [${SECONDS}s] $*"; }
[ -x .venv-dist/bin/maturin ] || { echo "dist: .venv-dist is missing: run make setup"; exit 1; }
export PATH=$root/.venv-dist/bin:$PATH
# The zig builds carry no debug info (stripped): the artifacts are what users download.
zigenv=(env CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=symbols)

rm -rf "$DIST" && mkdir -p "$DIST/crates"
stage=$root/target/dist
rm -rf "$stage" && mkdir -p "$stage"

step "release builds (reused when make test-rust made them)"
cargo build --release --workspace -q
step "the server and the Python extension for glibc $GLIBC (zig)"
"${zigenv[@]}" cargo-zigbuild zigbuild --release -q --target "$ZIG_TRIPLE.$GLIBC" -p graphmind-cli
server=$root/target/$ZIG_TRIPLE/release/graphmind
[ "$("$server" --version)" = "$version" ] || { echo "dist: $server --version is not $version"; exit 1; }

step "Python wheel"
# maturin's `data` folder puts the server in the wheel's scripts (bin/graphmind on install,
# as ruff and uv ship theirs). It must exist wherever pyproject.toml names it, so the wheel
# is built from a staged copy of pyproject.toml + the package that adds it; the checkout's
# pyproject.toml stays what `pip install .` and `maturin develop` read.
py=$stage/python
mkdir -p "$py/python" "$py/wheel-data/scripts"
cp -r bindings/python/graphmind "$py/python/"
find "$py/python" -name __pycache__ -prune -exec rm -rf {} +
cp docs/python.md "$py/README.md"
install -m 755 "$server" "$py/wheel-data/scripts/graphmind"
sed -E -e 's#^readme = ".*"#readme = "README.md"#' -e 's#^manifest-path = "#manifest-path = "../../../#' \
    -e 's#^python-source = ".*"#python-source = "python"#' pyproject.toml > "$py/pyproject.toml"
echo 'data = "wheel-data"' >> "$py/pyproject.toml"
(cd "$py" && "${zigenv[@]}" maturin build --release --zig --compatibility manylinux2014 --target "$ZIG_TRIPLE" \
   -o "$DIST" 2>&1 | grep -E '📦|warning|error' || true)
ls "$DIST"/graphmind_ai-"$version"-cp39-abi3-*manylinux_2_17_x86_64.whl >/dev/null
step "Python sdist"
maturin sdist -o "$DIST" 2>&1 | grep -E '📦|warning|error' || true
ls "$DIST/graphmind_ai-$version.tar.gz" >/dev/null

step "npm package"
strip -o "$stage/libgraphmind_node.so" target/release/libgraphmind_node.so
node bindings/node/scripts/pack.js --addon "$stage/libgraphmind_node.so" --server "$server" --out "$DIST" >/dev/null
ls "$DIST/graphmind-node-$version.tgz" "$DIST/graphmind-node-linux-x64-gnu-$version.tgz" >/dev/null

step "Ruby gems"
# The platform gem ships the extension and the server from bindings/ruby (gitignored copies).
strip -o bindings/ruby/lib/graphmind_native.so.tmp target/release/libgraphmind_native.so
mv bindings/ruby/lib/graphmind_native.so.tmp bindings/ruby/lib/graphmind_native.so
install -D -m 755 "$server" bindings/ruby/libexec/graphmind
gem build graphmind.gemspec --silent --output "$DIST/graphmind-$version-x86_64-linux.gem"
# The source gem: the Ruby sources, extconf.rb and the Rust sources of the four crates it
# compiles (the server needs the demo's agent, examples/rust), under a workspace manifest trimmed to them (the checkout's lists every binding).
gs=$stage/gem-src
mkdir -p "$gs/bindings/ruby" "$gs/viewer" "$gs/docs" "$gs/examples"
cp -r core cli Cargo.lock graphmind.gemspec "$gs/"
cp -r examples/rust "$gs/examples/"
cp -r bindings/ruby/Cargo.toml bindings/ruby/src bindings/ruby/lib bindings/ruby/exe bindings/ruby/ext "$gs/bindings/ruby/"
cp -r viewer/dist "$gs/viewer/" 2>/dev/null || true
cp docs/ruby.md "$gs/docs/"
sed -E 's|^members = .*|members = ["core", "cli", "examples/rust", "bindings/ruby"]|' Cargo.toml > "$gs/Cargo.toml"
(cd "$gs" && GRAPHMIND_GEM=source gem build graphmind.gemspec --silent --output "$DIST/graphmind-$version.gem")

step "C tarball"
lib=libgraphmind-$version-linux-x86_64
make -s install DESTDIR="$stage/c" PREFIX="/$lib" >/dev/null
c=$stage/c/$lib
# Relocatable: pkg-config resolves the prefix from where the .pc file is.
sed -i 's|^prefix=.*|prefix=${pcfiledir}/../..|' "$c/lib/pkgconfig/graphmind.pc"
strip -o "$c/lib/libgraphmind.so" target/release/libgraphmind.so
strip --strip-debug "$c/lib/libgraphmind.a"
install -D -m 755 "$server" "$c/bin/graphmind"
cp docs/c.md "$c/README.md"
tar -C "$stage/c" -czf "$DIST/$lib.tar.gz" "$lib"

step "crates (cargo package, verified)"
# The cli crate carries the built viewer (cli/build.rs reads cli/viewer-dist when there is
# no ../viewer): a copy, so the packaged crate builds the same server.
rm -rf cli/viewer-dist && cp -r viewer/dist cli/viewer-dist
# Verifying a crate builds it (dev profile, target/debug) against its siblings as just packaged,
# which cargo treats as registry crates: immutable per name and version, so neither their
# extracted sources in CARGO_HOME nor their build in target/debug is redone when the code has
# changed under the same version (the cli crate then failed to verify against yesterday's
# core). Remove both first; nothing else builds graphmind crates into target/debug.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
for crate in graphmind-core graphmind-example-agent graphmind-cli; do
  rm -rf "$cargo_home"/registry/src/*/"$crate-$version" "$cargo_home"/registry/cache/*/"$crate-$version.crate"
  rm -rf target/debug/.fingerprint/"$crate"-* target/debug/deps/lib"${crate//-/_}"-* target/debug/deps/"${crate//-/_}"-*
done
cargo package -q -p graphmind-core -p graphmind-example-agent -p graphmind-cli --allow-dirty
tar -tzf target/package/graphmind-cli-"$version".crate | grep -q '/viewer-dist/index.html' \
  || { echo "dist: the cli crate lacks the viewer"; exit 1; }
cp target/package/graphmind-{core,example-agent,cli}-"$version".crate "$DIST/crates/"

step "sizes"
find "$DIST" -type f -printf '%s %P\n' | sort -k2 | awk '{printf "  %8.2f MB  %s\n", $1/1e6, $2}'
