#!/usr/bin/env bash
# tools/build.sh - configures and builds Sinter into build/ (Release with light debug info).
#
# Used by the README's two commands. Set SINTER_BUILD_DIR to build elsewhere and SINTER_JOBS to
# cap parallelism (default: all cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SINTER_BUILD_DIR:-$root/build}
jobs=${SINTER_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSINTER_SHARED_DIR="$(cd "$root/.." && pwd)/shared" >/dev/null
ninja -C "$build" -j "$jobs"
