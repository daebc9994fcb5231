#!/usr/bin/env bash
# tools/run-tests.sh - the README's second command (and what CI runs): install, build, check the
# formatting, then run every test: the gtest suites through CTest and the lit suite (a CTest test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/setup.sh"
bash "$root/tools/check-format.sh"
bash "$root/tools/build.sh"
build=${SINTER_BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure -j "${SINTER_JOBS:-$(nproc)}" --timeout 900
