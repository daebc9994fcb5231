#!/usr/bin/env bash
# RunCargoTest.sh - CTest's RustBinding test: `cargo test --offline` of bindings/rust against the
# libsinter.so of this build, then examples/rust-consumer (a crate that depends on bindings/rust)
# built and run. Without LD_LIBRARY_PATH: both find libsinter.so through their run path.
#
# Usage: RunCargoTest.sh CARGO_OR_EMPTY CRATE_DIR LIB_DIR TARGET_DIR SHARED_DIR SINTER_RUN
# Exits 77 (CTest's SKIP_RETURN_CODE for this test) with a message when cargo or ../shared (the
# stories260K model) is missing, so a skip is reported, never silent.
set -euo pipefail
cargo="$1" crate="$2" libdir="$3" target="$4" shared="$5" sinter_run="$6"

if [[ -z "$cargo" || ! -x "$cargo" ]]; then
  cargo="$(command -v cargo || true)"
  [[ -z "$cargo" && -x "$HOME/.cargo/bin/cargo" ]] && cargo="$HOME/.cargo/bin/cargo"
fi
if [[ -z "$cargo" ]]; then
  echo "SKIPPED: cargo not found (not on PATH, not in ~/.cargo/bin); the Rust binding is untested"
  exit 77
fi
if [[ ! -f "$shared/models/stories260K.bin" ]]; then
  echo "SKIPPED: $shared/models/stories260K.bin not found (the Rust decode test needs ../shared)"
  exit 77
fi
if [[ ! -e "$libdir/libsinter.so" ]]; then
  echo "FAILED: $libdir/libsinter.so not found: build the CMake target 'sinter' first" >&2
  exit 1
fi

echo "cargo: $cargo ($("$cargo" --version))"
echo "libsinter: $libdir"
# SINTER_RUN: decode_matches_the_cpp_driver compares the Rust loop's tokens with sinter-run's.
export SINTER_LIB_DIR="$libdir" SINTER_SHARED_DIR="$shared" CARGO_TARGET_DIR="$target" \
  SINTER_RUN="$sinter_run"
# environment_backend_gives_the_golden decodes on Backend::from_environment(): lazy, one pattern off.
export SINTER_BACKEND=lazy SINTER_DISABLE_FUSION=swiglu
# cargo must not need the network: the crate has no dependencies.
export CARGO_NET_OFFLINE=true
# The binaries must find libsinter.so by their run path (build.rs), not by the environment.
unset LD_LIBRARY_PATH
cd "$crate"
# --nocapture shows each decode's backend and every SKIPPED line.
"$cargo" test --offline -- --test-threads=2 --nocapture

consumer="$(cd "$crate/../../examples/rust-consumer" && pwd)"
echo "== examples/rust-consumer, a crate that depends on bindings/rust"
"$cargo" build --offline --manifest-path "$consumer/Cargo.toml"
for kind in reference lazy; do
  "$target/debug/sinter-rust-consumer" "$kind"
done
