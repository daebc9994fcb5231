#!/usr/bin/env bash
# tools/check-format.sh - fails when a C/C++ source differs from clang-format-14's output.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
files=$(git ls-files '*.cpp' '*.h' '*.c' 2>/dev/null || true)
[ -n "$files" ] || { echo "check-format: no files"; exit 0; }
bad=0
for f in $files; do
  if ! clang-format-14 --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "check-format: $f is not clang-formatted (run: clang-format-14 -i $f)"
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "check-format: $(echo "$files" | wc -w) files formatted"
exit $bad
