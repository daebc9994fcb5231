#!/usr/bin/env bash
# RunBenchReport.sh - CTest's BenchReport test: bench/report.py in its tiny mode (stories260K, 4
# tokens, every backend kind) into a folder of the build, then bench/report_check.py on the result:
# report.svg is well-formed SVG with a bar or a note per backend, report.md has a table row per
# backend, with figures for reference and lazy.
#
# Usage: RunBenchReport.sh PYTHON3 SOURCE_DIR BUILD_DIR OUT_DIR SHARED_DIR
# Exits 77 (the test's SKIP_RETURN_CODE), saying why, without python3 or ../shared.
set -euo pipefail
python="$1" source="$2" build="$3" out="$4" shared="$5"

if [[ -z "$python" || ! -x "$python" ]]; then
  python="$(command -v python3 || true)"
fi
if [[ -z "$python" ]]; then
  echo "SKIPPED: python3 not found; the bench report is untested"
  exit 77
fi
if [[ ! -f "$shared/models/stories260K.bin" ]]; then
  echo "SKIPPED: $shared/models/stories260K.bin not found (the report decodes it)"
  exit 77
fi
rm -rf "$out"
SINTER_SHARED_DIR="$shared" "$python" "$source/bench/report.py" --build "$build" --tiny \
  --shared "$shared" --out "$out"
cat "$out/report.md"
"$python" "$source/bench/report_check.py" "$out" --backends reference,lazy,cpu,vulkan \
  --measured reference,lazy
