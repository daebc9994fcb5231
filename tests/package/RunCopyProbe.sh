#!/usr/bin/env bash
# RunCopyProbe.sh - CTest's VulkanCopyProbe test: sinter-bench-vulkan-decode's copy probe (the
# device copy bandwidth the decode benchmark's floor divides by, bench/vulkan/CopyProbe.h) on
# whatever Vulkan device the machine has (lavapipe in CI). The probe checks its own copy and
# reports a wrong word as an error; here the benchmark must end without an error and report both
# bandwidths above zero.
#
# Usage: RunCopyProbe.sh PYTHON3 DECODE_BENCH
# Exits 77 (the test's SKIP_RETURN_CODE), saying why, without python3 or without a Vulkan device.
set -euo pipefail
python="$1" bench="$2"
if [[ -z "$python" || ! -x "$python" ]]; then
  python="$(command -v python3 || true)"
fi
if [[ -z "$python" ]]; then
  echo "SKIPPED: python3 not found; the copy probe is untested"
  exit 77
fi
json="$("$bench" --benchmark_filter='^BM_VulkanCopyBandwidth' --benchmark_min_time=0.01 \
  --benchmark_format=json)"
"$python" -c '
import json, sys
rows = json.loads(sys.argv[1])["benchmarks"]
if len(rows) != 1:
    sys.exit("expected one BM_VulkanCopyBandwidth row, got %d" % len(rows))
row = rows[0]
error = row.get("error_message", "")
if "no Vulkan driver" in error or "no physical device" in error:
    print("SKIPPED: " + error)
    sys.exit(77)
if error:
    sys.exit("copy probe failed: " + error)
for key in ("copy_GB_per_s", "cmd_copy_GB_per_s"):
    if not row.get(key, 0) > 0:
        sys.exit("%s is %r" % (key, row.get(key)))
print("device copy bandwidth %.2f GB/s, vkCmdCopyBuffer %.2f GB/s" %
      (row["copy_GB_per_s"], row["cmd_copy_GB_per_s"]))
' "$json"
