#!/usr/bin/env bash
# RunPackageTest.sh - CTest's InstalledPackage test: install this build into a temporary prefix,
# run the installed commands (prefix/bin, without LD_LIBRARY_PATH), then build examples/consumer
# against the installed tree only, once with find_package(Sinter) and once with pkg-config
# (through CMake and with a bare `cc`), and run the programs.
#
# Usage: RunPackageTest.sh BUILD_DIR SOURCE_DIR WORK_DIR CMAKE C_COMPILER CXX_COMPILER GENERATOR
# Exits 77 (the test's SKIP_RETURN_CODE), saying why, when pkg-config is missing.
set -euo pipefail
build="$1" source="$2" work="$3" cmake="$4" cc="$5" cxx="$6" generator="$7"

if ! command -v pkg-config >/dev/null; then
  echo "SKIPPED: pkg-config not found; the installed package is untested"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"

echo "== cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"
libdir="$(dirname "$(find "$prefix" -name 'libsinter.so' | head -n 1)")"
test -f "$prefix/include/sinter/sinter.h"
test -f "$prefix/include/sinter/ComputeBackend.h"
test -f "$libdir/cmake/Sinter/SinterConfig.cmake"
test -f "$libdir/pkgconfig/sinter.pc"
echo "installed: $(cd "$prefix" && find . -type f | sort | tr '\n' ' ')"

# The commands run from prefix/bin on their run path alone.
unset LD_LIBRARY_PATH
for tool in sinter-run sinter-bench sinter-dump sinter-opt; do
  test -x "$prefix/bin/$tool" || { echo "$prefix/bin/$tool is not installed"; exit 1; }
  echo "$tool: run path $(readelf -d "$prefix/bin/$tool" | grep -oE '\[[^]]*ORIGIN[^]]*\]')"
  "$prefix/bin/$tool" --help >"$work/$tool-help.log" ||
    { cat "$work/$tool-help.log"; echo "$prefix/bin/$tool --help failed"; exit 1; }
done
"$prefix/bin/sinter-run" --synthetic nano --backend lazy --steps 4 --no-stop --check
"$prefix/bin/sinter-dump" --synthetic nano --steps 1 >"$work/sinter-dump.log" ||
  { cat "$work/sinter-dump.log"; exit 1; }
echo "sinter-dump: $(grep -ci kernel "$work/sinter-dump.log") lines about kernels"

# Only the installed tree: the consumer must not see the source tree or the build tree.
configure_and_run() {
  local name="$1"
  shift
  echo "== consumer with $name"
  "$cmake" -S "$source/examples/consumer" -B "$work/$name" -G "$generator" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release "$@" \
    >"$work/$name-configure.log" || { cat "$work/$name-configure.log"; exit 1; }
  grep -- "-- Sinter" "$work/$name-configure.log"
  "$cmake" --build "$work/$name" >"$work/$name-build.log" || { cat "$work/$name-build.log"; exit 1; }
  "$work/$name/consumer_c" reference
  "$work/$name/consumer_c" lazy
  "$work/$name/consumer_cpp" reference
  "$work/$name/consumer_cpp" lazy
  SINTER_BACKEND=lazy "$work/$name/consumer_cpp"
  # The cpu kind where this build has it (the lead wires it into the factory).
  if out="$("$work/$name/consumer_c" cpu 2>&1)"; then
    echo "$out"
    "$work/$name/consumer_cpp" cpu
  elif grep -q UNIMPLEMENTED <<<"$out"; then
    echo "note: kind cpu is not built here: $out"
  else
    echo "$out"
    exit 1
  fi
}

configure_and_run find_package -DCMAKE_PREFIX_PATH="$prefix"
PKG_CONFIG_PATH="$libdir/pkgconfig" configure_and_run pkg_config \
  -DSINTER_CONSUMER_USE_PKG_CONFIG=ON

echo "== cc \$(pkg-config --cflags --libs sinter)"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Werror -o "$work/consumer_c_bare" "$source/examples/consumer/consumer.c" \
  $(pkg-config --cflags --libs sinter) -Wl,-rpath,"$(pkg-config --variable=libdir sinter)"
"$work/consumer_c_bare"
echo "InstalledPackage: all consumers built against $prefix and passed"
