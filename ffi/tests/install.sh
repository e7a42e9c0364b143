#!/usr/bin/env bash
# `make install PREFIX=<tmp>`, then builds the example agents the way a user would: with
# pkg-config (shared and --static) and with CMake find_package(graphmind), and runs them
# (kill switch on, so no server is needed here; ffi/tests/examples.rs runs them against one).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
strict=(-Wall -Wextra -Werror -pedantic)
make -s -C "$root" install PREFIX="$prefix" >/dev/null
for f in include/graphmind.h lib/libgraphmind.so lib/libgraphmind.a lib/pkgconfig/graphmind.pc \
         lib/cmake/graphmind/graphmindConfig.cmake lib/cmake/graphmind/graphmindConfigVersion.cmake; do
  [ -f "$prefix/$f" ] || { echo "install: $f missing"; exit 1; }
done
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
expect_ok() { # runs an agent with the kill switch on and checks it completed its tool loop
  local out; out=$(GRAPHMIND_DISABLED=1 LD_LIBRARY_PATH=$prefix/lib "$1")
  grep -q '^TOOL 1 ' <<<"$out" && grep -q '^DONE ok$' <<<"$out" || { echo "install: $1 failed: $out"; exit 1; }
  echo "install: $(basename "$1") ok"
}
[ "$(pkg-config --modversion graphmind)" = "$(grep -m1 '^version' "$root/Cargo.toml" | cut -d'"' -f2)" ]
cc -std=c99 "${strict[@]}" "$root/examples/c/agent.c" $(pkg-config --cflags --libs graphmind) -o "$tmp/agent-c-pc"
expect_ok "$tmp/agent-c-pc"
cc -std=c99 "${strict[@]}" "$root/examples/c/agent.c" $(pkg-config --cflags graphmind) \
   "$prefix/lib/libgraphmind.a" $(pkg-config --libs-only-l --static graphmind | sed 's/-lgraphmind//') -o "$tmp/agent-c-pc-static"
expect_ok "$tmp/agent-c-pc-static"
c++ -std=c++17 "${strict[@]}" "$root/examples/cpp/agent.cpp" $(pkg-config --cflags --libs graphmind) -o "$tmp/agent-cpp-pc"
expect_ok "$tmp/agent-cpp-pc"

mkdir -p "$tmp/cmake"
cat > "$tmp/cmake/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(graphmind_agents C CXX)
set(CMAKE_C_STANDARD 99)
set(CMAKE_CXX_STANDARD 17)
find_package(graphmind 0.1 REQUIRED CONFIG)
add_compile_options(-Wall -Wextra -Werror -pedantic)
add_executable(agent_c "$root/examples/c/agent.c")
target_link_libraries(agent_c PRIVATE graphmind::graphmind)
add_executable(agent_c_static "$root/examples/c/agent.c")
target_link_libraries(agent_c_static PRIVATE graphmind::static)
add_executable(agent_cpp "$root/examples/cpp/agent.cpp")
target_link_libraries(agent_cpp PRIVATE graphmind::graphmind)
CMAKE
cmake -S "$tmp/cmake" -B "$tmp/cmake/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/cmake/build" >/dev/null
for exe in agent_c agent_c_static agent_cpp; do expect_ok "$tmp/cmake/build/$exe"; done
echo "install: ok (pkg-config and CMake find_package)"
