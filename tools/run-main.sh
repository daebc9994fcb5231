#!/usr/bin/env bash
# tools/run-main.sh - the README's first command: install, build, and run the main job, an
# end-to-end greedy decode of a built-in (synthetic, deterministic) TinyLlama-1.1B model with
# Q4_0 weights. Extra arguments go to sinter-run (e.g. --backend reference --steps 4).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/setup.sh"
bash "$root/tools/build.sh"
build=${SINTER_BUILD_DIR:-$root/build}
exec "$build/tools/sinter-run/sinter-run" --synthetic tinyllama-1.1b --dtype q4_0 \
  --backend reference --steps 2 "$@"
