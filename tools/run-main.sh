#!/usr/bin/env bash
# tools/run-main.sh - the README's first command: install, build, and run the main job, greedy
# decodes through Sinter's fastest backend on this machine (`--backend auto`: vulkan on a GPU,
# else the cpu kind's JIT kernels): the real stories260K model from ../shared, then a built-in
# (synthetic, deterministic) TinyLlama-1.1B with Q4_0 weights. Extra arguments go to the second
# sinter-run (e.g. --steps 64, or --backend reference for the scalar oracle). It ends with a
# summary of both runs (tools/run-summary.py over the records `sinter-run --json` writes):
# device, backend, calls and kernels a token, load / compile / prompt / generation times.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/setup.sh"
bash "$root/tools/build.sh"
build=${SINTER_BUILD_DIR:-$root/build}
run="$build/bin/sinter-run"
model="$root/../shared/models/stories260K.bin"
records=$(mktemp -d)
trap 'rm -rf "$records"' EXIT
rc=0 # the first failure's exit status; the summary still shows the runs that worked
keep() { [ "$rc" -ne 0 ] || rc=$1; }
if [ -f "$model" ]; then
  "$run" --model "$model" --backend auto --steps 64 --json "$records/1.json" || keep $?
else
  echo "run-main: $model is absent (../shared beside the checkout); skipping stories260K" >&2
fi
echo
"$run" --synthetic tinyllama-1.1b --dtype q4_0 --backend auto --steps 32 \
  --json "$records/2.json" "$@" || keep $?
echo
python3 "$root/tools/run-summary.py" "$records/1.json" "$records/2.json"
exit $rc
