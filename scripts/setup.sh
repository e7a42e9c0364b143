#!/usr/bin/env bash
# Installs everything `make test`, `make bench` and `make demo` need on a fresh machine.
# Idempotent: each step checks first and does nothing when the tool is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }

# System packages (Debian). Added here as the parts that need them land.
for pkg_cmd in "pkg-config:pkg-config" "cmake:cmake" "valgrind:valgrind"; do
  pkg=${pkg_cmd%%:*}; cmd=${pkg_cmd##*:}
  have "$cmd" || need_apt+=("$pkg")
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
echo "setup: ok"
