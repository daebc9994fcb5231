#!/usr/bin/env bash
# bench/vulkan/run-h200.sh - on an NVIDIA GPU machine: the Vulkan tests and the decode benchmark.
#
# Runs in the repository root of the device machine, with `.gl` (the Vulkan loader debs,
# /work/.library/device/README.md) and `.carry` (made here by bench/vulkan/pack-h200.sh: binaries,
# their libraries, test kernels, stories260K.bin) carried. Unpacks both, points the loader at the
# NVIDIA driver, runs the Vulkan unit tests, the vulkan rows of the conformance table and
# stories260K token for token, then the decode benchmark (tinyllama-1.1b and llama-7b, synthetic
# Q4_0, position 256; fused, fused with replay off, fused without prefetch, unfused, eager), and writes into $OUT (at most
# 8 files come back):
#   summary.json       per test binary: passed/failed/skipped and failing names; the benchmark rows
#                      (`... bench` alone: summary-bench.json, and bench.log for tests.log)
#   vulkan-decode.json Google Benchmark's JSON
#   tests.log          the test binaries' output
#   kernels.json       SINTER_STATS=1 of a few fused tokens, folded per kernel (fold-stats.py)
#   clocks.csv         nvidia-smi's clocks, power and throttle reasons every 2 s of the benchmark
#   pipelines.txt      the driver's statistics of every pipeline (SINTER_VK_PIPELINE_STATS=1)
# One device call (the timeouts below keep it inside the 600 s limit):
#   run(command="bash bench/vulkan/run-h200.sh", carry=[".gl", ".carry"], timeout_s=600)
# `bash bench/vulkan/run-h200.sh tests` or `... bench` runs one half (two calls, more slack);
# `... sweep` times the fused decode under quantized_matmul schedule overrides (sweep.json);
# `... ab` runs the fused decode of a packed baseline binary and of this build in turn (ab.json);
# `... envs` runs the fused decode under each runtime setting of SINTER_ENV_SWEEP in turn (envs.json);
# `... kernels` runs sinter-bench-vulkan-kernels (the read probe, quantized_matmul at the decode's
# shapes, attention, and a dependency's cost as a launch or a grid barrier) under each setting of
# SINTER_SWEEP (kernels.jsonl, one line per benchmark).
# SINTER_BENCH_PRESETS, SINTER_BENCH_MIN_TIME (seconds per benchmark, default 2),
# SINTER_SWEEP_MIN_TIME (seconds per sweep row and preset, default 0.5) and
# SINTER_VK_VALIDATION (default 0 unless the layer was packed) change what runs;
# SINTER_TEST_FILTER (a gtest filter, e.g. '*Overlap*') runs only those tests of each binary.
set -uo pipefail
what=${1:-all}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/bench/results/vulkan-h200}
mkdir -p "$out"
log="$out/tests.log"
[ "$what" = sweep ] && log="$out/sweep.log" # keep the tests' log of an earlier run in $OUT
[ "$what" = kernels ] && log="$out/kernels.log"
# `bench` after `tests` in one call keeps the tests' log and summary: its own are bench.log and
# summary-bench.json.
[ "$what" = bench ] && log="$out/bench.log"
[ "$what" = ab ] && log="$out/ab.log"
[ "$what" = envs ] && log="$out/envs.log"
: >"$log"
say() { echo "run-h200: $*" | tee -a "$log" >&2; }

# 1. The Vulkan loader (and the GL libraries beside it) from the carried debs.
if compgen -G "$root/.gl/*.deb" >/dev/null; then
  for f in "$root"/.gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
ldconfig -p | grep -c 'libvulkan.so.1' >/dev/null || say "warning: no libvulkan.so.1 after unpacking .gl"

# 2. Binaries and libraries built here (pack-h200.sh). Python's tarfile needs no xz binary.
dest=${SINTER_UNPACK_DIR:-/opt/sinter}
mkdir -p "$dest"
# SINTER_SKIP_UNPACK=1 keeps what an earlier run-h200.sh of the same call unpacked there.
if [ "${SINTER_SKIP_UNPACK:-0}" != 1 ] || [ ! -x "$dest/bin/sinter-bench-vulkan-decode" ]; then
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$root/.carry/vulkan-h200.tar.xz" "$dest" || { say "cannot unpack .carry/vulkan-h200.tar.xz"; exit 1; }
fi
export LD_LIBRARY_PATH="$dest/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SINTER_VK_TEST_SPV_DIR="$dest/spv" SINTER_SHARED_DIR="$dest/shared"
if compgen -G "$dest/layers/*.json" >/dev/null; then
  export VK_LAYER_PATH="$dest/layers"
  export SINTER_VK_VALIDATION=${SINTER_VK_VALIDATION:-1}
else
  export SINTER_VK_VALIDATION=${SINTER_VK_VALIDATION:-0}
fi

# 3. The NVIDIA ICD: the standard places first, then where this workplace's images keep it.
if ! ls /etc/vulkan/icd.d/nvidia*.json /usr/share/vulkan/icd.d/nvidia*.json >/dev/null 2>&1; then
  icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  [ -f "$icd" ] && export VK_DRIVER_FILES=$icd
  egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  [ -f "$egl" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$egl
fi
export SINTER_VK_DEVICE=${SINTER_VK_DEVICE:-nvidia}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1 || true

# 4. Tests, each with its gtest JSON (folded into summary.json below).
tests=(VulkanDeviceTest VulkanRuntimeTest VulkanBackendTest VulkanStories260KTest VulkanFuzzTest
  ConformanceTest SpirvKernelTest)
[ "$what" = bench ] || [ "$what" = sweep ] || [ "$what" = kernels ] || [ "$what" = ab ] ||
  [ "$what" = envs ] && tests=()
for t in "${tests[@]}"; do
  filter=${SINTER_TEST_FILTER:-*}
  [ "$t" = ConformanceTest ] && [ -z "${SINTER_TEST_FILTER:-}" ] && filter='*vulkan*'
  say "== $t"
  limit=45
  [ "$t" = SpirvKernelTest ] && limit=150 # builds a few hundred kernels
  # 164 rows: 40 s on a warm H100, past 45 s on a fresh one (2026-12-06: 149 done at 45 s).
  [ "$t" = ConformanceTest ] && limit=90
  timeout $limit "$dest/bin/$t" --gtest_filter="$filter" --gtest_output="json:/tmp/sinter-$t.json" \
    >>"$log" 2>&1
  say "$t exit $?"
done

# 5. The decode benchmark, then a few SINTER_STATS tokens for per-kernel times.
if [ "$what" != tests ] && [ "$what" != sweep ] && [ "$what" != kernels ] && [ "$what" != ab ] &&
  [ "$what" != envs ]; then
  say "== sinter-bench-vulkan-decode"
  # The GPU's clocks, power and throttle reasons every 2 s while the benchmark runs (clocks.csv).
  nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.draw,power.limit,clocks_throttle_reasons.active,utilization.gpu,utilization.memory \
    --format=csv -l 2 >"$out/clocks.csv" 2>/dev/null &
  sampler=$!
  timeout 300 "$dest/bin/sinter-bench-vulkan-decode" \
    --benchmark_min_time="${SINTER_BENCH_MIN_TIME:-2}" \
    --benchmark_out="$out/vulkan-decode.json" --benchmark_out_format=json >>"$log" 2>&1
  say "bench exit $?"
  kill "$sampler" 2>/dev/null
  # Per-kernel device times of the fused decode (SINTER_STATS=1 prints one line per dispatch
  # per flush: tens of MB), folded here into kernels.json: per kernel name, launches and
  # microseconds per token, bytes/s, and the share of the token's kernel time.
  # of_peak there is over the device copy bandwidth the benchmark measured (the floor's), when it
  # did; else over 4.07 TB/s.
  floor_gbps=$(python3 -c 'import json, sys
for b in json.load(open(sys.argv[1])).get("benchmarks", []):
    if b.get("copy_GB_per_s"): print(round(b["copy_GB_per_s"], 1)); break' "$out/vulkan-decode.json" 2>/dev/null)
  say "floor bandwidth for kernels.json: ${floor_gbps:-4070 (not measured)} GB/s"
  for preset in ${SINTER_BENCH_PRESETS:-tinyllama-1.1b llama-7b}; do
    preset=${preset//,/ }
    # The driver's statistics of each pipeline (SINTER_VK_PIPELINE_STATS=1) go to pipelines.txt.
    SINTER_STATS=1 SINTER_VK_PIPELINE_STATS=1 SINTER_BENCH_PRESETS=$preset timeout 100 \
      "$dest/bin/sinter-bench-vulkan-decode" --benchmark_filter=/fused/ --benchmark_min_time=0.01 \
      2>&1 | tee >(grep -a 'vulkan pipeline' | sed "s/^/$preset: /" >>"$out/pipelines.txt") |
      SINTER_PEAK_GBPS=${floor_gbps:-} python3 "$root/bench/vulkan/fold-stats.py" "$preset" >>"$out/kernels.json"
    say "stats run $preset exit ${PIPESTATUS[0]}"
  done
fi

# 5b. `run-h200.sh sweep`: the fused decode under quantized_matmul schedule overrides
# (SINTER_VK_QMATMUL, docs/ENVIRONMENT.md), one line of sweep.json per setting and preset.
if [ "$what" = sweep ]; then
  settings=${SINTER_SWEEP:-"default rows=4 rows=1 wg=256 wg=64 step=4 rows=4,step=4 rows=1,wg=64"}
  for q in $settings; do
    [ "$q" = default ] && q=
    SINTER_VK_QMATMUL="$q" SINTER_VK_PIPELINE_STATS=1 timeout 90 \
      "$dest/bin/sinter-bench-vulkan-decode" --benchmark_filter=/fused/ \
      --benchmark_min_time="${SINTER_SWEEP_MIN_TIME:-0.5}" \
      --benchmark_format=json 2> >(tee -a "$log" | grep -a 'vulkan pipeline' | sed "s/^/${q:-default}: /" \
      >>"$out/pipelines.txt") |
      python3 -c '
import json, sys
for b in json.load(sys.stdin).get("benchmarks", []):
    print(json.dumps({"qmatmul": sys.argv[1] or "default", "name": b["name"].split("/min")[0],
                      "tokens_per_s": round(b.get("tokens_per_s", 0), 1),
                      "error": b.get("error_message", "")}))' "$q" >>"$out/sweep.json"
    say "sweep '$q' exit ${PIPESTATUS[0]}"
  done
  cat "$out/sweep.json"
  exit 0
fi

# Google Benchmark's JSON of the fused decode on stdin -> one JSON line per preset: the label
# (`decode_rows KEY VALUE ROUND`), the round and the host's share of a token (ab and envs).
decode_rows() {
  python3 -c '
import json, sys
keys = ("tokens_per_s", "between_flushes_us_per_token", "lookup_us_per_token", "run_us_per_token",
        "presubmit_us_per_token", "wait_us_per_token", "outside_wait_us_per_token", "dispatches_per_token",
        "queue_submits_per_token", "overlap_flushes_per_token")
for b in json.load(sys.stdin).get("benchmarks", []):
    row = {sys.argv[1]: sys.argv[2], "round": int(sys.argv[3]), "name": b["name"].split("/min")[0]}
    row.update({k: round(b[k], 1) for k in keys if k in b})
    if b.get("error_message"): row["error"] = b["error_message"]
    print(json.dumps(row))' "$@"
}

# 5b'. `run-h200.sh ab`: the fused decode of the baseline binary (pack-h200.sh with
# SINTER_PACK_BASELINE) and of this build in turn, SINTER_AB_ROUNDS times (default 2), so a change
# of host or kernel code is measured side by side on one machine; one line of ab.json per
# binary, round and preset, with the host's share of a token.
# SINTER_AB_BASELINE_ENV and SINTER_AB_CURRENT_ENV (VAR=value words) set variables for one side
# only; with a baseline environment and no baseline binary, both sides run this build's binary, so
# a runtime setting (e.g. SINTER_VK_WAIT=spin) is compared with the default side by side.
if [ "$what" = ab ]; then
  base_bin="$dest/bin/sinter-bench-vulkan-decode-baseline"
  if [ ! -x "$base_bin" ]; then
    [ -n "${SINTER_AB_BASELINE_ENV:-}${SINTER_AB_CURRENT_ENV:-}" ] ||
      { say "ab: no baseline binary packed (SINTER_PACK_BASELINE) and no SINTER_AB_*_ENV"; exit 1; }
    base_bin="$dest/bin/sinter-bench-vulkan-decode"
  fi
  for round in $(seq "${SINTER_AB_ROUNDS:-2}"); do
    for which in baseline current; do
      bin="$dest/bin/sinter-bench-vulkan-decode"
      side_env=${SINTER_AB_CURRENT_ENV:-}
      [ "$which" = baseline ] && bin=$base_bin && side_env=${SINTER_AB_BASELINE_ENV:-}
      # shellcheck disable=SC2086 # the words are VAR=value pairs
      timeout 120 env $side_env "$bin" --benchmark_filter=/fused/ \
        --benchmark_min_time="${SINTER_BENCH_MIN_TIME:-2}" --benchmark_format=json 2>>"$log" |
        decode_rows binary "$which" "$round" | tee -a "$out/ab.json"
      say "ab $which round $round exit ${PIPESTATUS[0]}"
    done
  done
  exit 0
fi

# 5b''. `run-h200.sh envs`: the fused decode under each setting of SINTER_ENV_SWEEP (words
# separated by spaces; each `default` or comma-separated VAR=value pairs, e.g.
# "default SINTER_VK_WAIT=block SINTER_VK_DIRECT_PARAMS=0,SINTER_VK_QMATMUL=attnsplit=4+attnwg=128"), the
# settings taken in turn SINTER_AB_ROUNDS times (default 2) so that a drift of the machine falls
# on all of them; one line of envs.json per setting, round and preset.
if [ "$what" = envs ]; then
  for round in $(seq "${SINTER_AB_ROUNDS:-2}"); do
    for setting in ${SINTER_ENV_SWEEP:-default}; do
      vars=()
      [ "$setting" = default ] || IFS=, read -r -a vars <<<"$setting"
      # A value may hold commas of its own (SINTER_VK_QMATMUL=a=1,b=2): write those as '+'.
      vars=("${vars[@]//+/,}")
      timeout 120 env ${vars[@]+"${vars[@]}"} "$dest/bin/sinter-bench-vulkan-decode" \
        --benchmark_filter=/fused/ --benchmark_min_time="${SINTER_BENCH_MIN_TIME:-1}" \
        --benchmark_format=json 2>>"$log" |
        decode_rows setting "$setting" "$round" | tee -a "$out/envs.json"
      say "envs '$setting' round $round exit ${PIPESTATUS[0]}"
    done
  done
  exit 0
fi

# 5c. `run-h200.sh kernels`: single kernels under each SINTER_SWEEP setting; the read probe runs
# with the first setting only (it does not depend on them). SINTER_KERNELS_FILTER (a benchmark
# regex, e.g. Attention) runs only those, under every setting.
if [ "$what" = kernels ]; then
  settings=${SINTER_SWEEP:-"default"}
  filter=${SINTER_KERNELS_FILTER:-.}
  for q in $settings; do
    [ "$q" = default ] && q=
    SINTER_VK_QMATMUL="$q" timeout "${SINTER_KERNELS_TIMEOUT:-120}" \
      "$dest/bin/sinter-bench-vulkan-kernels" --benchmark_filter="$filter" \
      --benchmark_format=json 2>>"$log" |
      python3 -c '
import json, sys
for b in json.load(sys.stdin).get("benchmarks", []):
    row = {"qmatmul": sys.argv[1] or "default", "name": b["name"].split("/min")[0].split("/iter")[0]}
    for k in ("read_GB_per_s", "read_GB_per_s_1GiB", "us_per_launch", "us_per_step", "GB_per_s", "dispatches_per_layer",
              "wall_us_per_launch", "record_us_per_launch", "error_message"):
        if k in b: row[k] = round(b[k], 2) if isinstance(b[k], float) else b[k]
    print(json.dumps(row))' "$q" | tee -a "$out/kernels.jsonl"
    say "kernels '$q' exit ${PIPESTATUS[0]}"
    filter=${SINTER_KERNELS_FILTER:-QMatmul}
  done
  exit 0
fi

# 6. summary.json: test counts and benchmark rows side by side.
summary_file=summary.json
[ "$what" = bench ] && summary_file=summary-bench.json
python3 - "$out" "$summary_file" ${tests[@]+"${tests[@]}"} <<'PY'
import json, os, sys
out, summary_file, names = sys.argv[1], sys.argv[2], sys.argv[3:]
summary = {"tests": {}, "bench": []}
for name in names:
    path = f"/tmp/sinter-{name}.json"
    if not os.path.exists(path):
        summary["tests"][name] = {"error": "no gtest output (crashed or timed out)"}
        continue
    data = json.load(open(path))
    cases = [t for s in data.get("testsuites", []) for t in s.get("testsuite", [])]
    failed = [c["classname"] + "." + c["name"] for c in cases if c.get("failures")]
    skipped = [c for c in cases if c.get("result") == "SKIPPED"]
    summary["tests"][name] = {"total": len(cases), "failed": len(failed),
                              "skipped": len(skipped), "passed": len(cases) - len(failed) - len(skipped),
                              "failing": failed[:50]}
bench = os.path.join(out, "vulkan-decode.json")
if os.path.exists(bench):
    for b in json.load(open(bench)).get("benchmarks", []):
        row = {k: v for k, v in b.items() if k in ("name", "real_time", "time_unit", "error_message",
               "tokens_per_s", "GB_per_s", "hbm_fraction", "MB_per_token", "kernels_per_token",
               "dispatches_per_token", "submits_per_token", "barriers_per_token", "kernel_ms",
               "copy_GB_per_s", "cmd_copy_GB_per_s", "add_GB_per_s", "floor_GB_per_s",
               "floor_us_per_token", "floor_fraction",
               "plan_misses", "replays_per_token", "host_us_per_token", "queue_submits_per_token",
               "overlap_flushes_per_token", "wait_us_per_token", "outside_wait_us_per_token",
               "presubmit_us_per_token", "lookup_us_per_token", "between_flushes_us_per_token")}
        summary["bench"].append(row)
kernels = os.path.join(out, "kernels.json")
if os.path.exists(kernels):
    summary["kernels"] = []
    for line in open(kernels):
        if line.strip():
            k = json.loads(line)
            k["kernels"] = k.get("kernels", [])[:12]
            summary["kernels"].append(k)
json.dump(summary, open(os.path.join(out, summary_file), "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
