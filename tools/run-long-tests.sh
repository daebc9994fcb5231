#!/usr/bin/env bash
# tools/run-long-tests.sh - the long test mode: what CI's default run (tools/run-tests.sh) leaves
# out to stay within its time. Takes one or more stages (default: all of them, in this order):
#
#   asan   every library (MLIR-heavy ones included) and every test under ASan+UBSan, in
#          build-asan/ (a full second build: about as long as the main one, plus the tests at
#          ~3x their normal time)
#   tsan   the concurrency tests (threads on one backend, the C ABI from threads, the lazy
#          backend, the thread pool, the soak) under ThreadSanitizer, in build-tsan/. Debian's
#          Abseil is not built with TSan, so these tests link tests/reliability/TsanAbslMutex.cpp,
#          which gives TSan absl::Mutex's lock/unlock events (no suppressions: without it every
#          access guarded by an absl::Mutex is a false report); TsanAbslMutexCheck checks that
#          it hides no real race
#   soak   the soak test with SINTER_LONG_SOAK_CALLS calls per test (default 20,000,000: minutes)
#          and the scalar soak with SINTER_LONG_SOAK_SCALARS distinct eps / freq_base values per
#          cpu case, a tenth of it per vulkan case (default 16,000: about 15 minutes)
#   fuzz   each libFuzzer target for SINTER_LONG_FUZZ_TIME seconds (default 600) and the fusion
#          fuzzers (interpreter, cpu, vulkan) on 10000 graphs; builds only those targets
#
# CI's default run already has, inside the main build: ASan+UBSan twins of the plain-C++ libraries
# with the tests over them (ctest -L asan), each fuzzer for SINTER_FUZZ_TIME seconds, the soak
# at 1,000,000 calls (200,000 under ASan) and the scalar soak at 2,000 values (400 under ASan).
# Environment: SINTER_BUILD_DIR (main build, default build/), SINTER_JOBS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared="$(cd "$root/.." && pwd)/shared"
jobs=${SINTER_JOBS:-$(nproc)}
main=${SINTER_BUILD_DIR:-$root/build}
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(asan tsan soak fuzz)

# A sanitizer build of its own: no benchmarks, no fuzzers (they are clang-built and carry their
# own sanitizers) and no twins (everything is instrumented already).
configure_sanitized() { # dir flags
  cmake -S "$root" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSINTER_SHARED_DIR="$shared" \
    -DSINTER_BUILD_BENCH=OFF -DSINTER_BUILD_FUZZERS=OFF -DSINTER_SANITIZER_TWINS=OFF \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_C_FLAGS="$2" -DCMAKE_CXX_FLAGS="$2" -DCMAKE_EXE_LINKER_FLAGS="$2" \
    -DCMAKE_SHARED_LINKER_FLAGS="$2" >/dev/null
}

timed() { # name command... (prints the time, then returns the command's status)
  local start=$SECONDS status=0
  "${@:2}" || status=$?
  echo "run-long-tests: $1 took $((SECONDS - start)) s"
  return $status
}

stage_asan() {
  local dir=$root/build-asan
  configure_sanitized "$dir" \
    "-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  timed "asan build" ninja -C "$dir" -j "$jobs"
  # The package tests install and build consumers (cargo, cmake): not what a sanitizer is for.
  local skip="InstalledPackage|RustBinding|BenchReport"
  # SpirvKernelTest's VkRunner destroys its Vulkan instance, so the loader unloads lavapipe
  # before exit: a 128-byte realloc made by lavapipe's JIT code, reachable from the driver's
  # globals while it is loaded, is then a leak whose only frame LSan cannot name ("<unknown
  # module>", so lsan.supp cannot match it). The runtime keeps the driver loaded
  # (VulkanDevice.cpp), so the other Vulkan tests see no such leak. SpirvKernelTest runs without
  # leak detection; ASan's other checks and UBSan stay on.
  local no_leak_check="^SpirvKernelTest\\."
  local san_env=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    LSAN_OPTIONS=suppressions=$root/tests/reliability/lsan.supp)
  # Both runs happen even when the first fails; the stage fails if either did.
  local status=0
  (cd "$dir" && timed "asan tests" env "${san_env[@]}" \
    ctest --output-on-failure -j "$jobs" --timeout 3600 -LE slow -E "$skip|$no_leak_check") ||
    status=$?
  (cd "$dir" && timed "asan tests without leak detection" env "${san_env[@]}" \
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=1 \
    ctest --output-on-failure -j "$jobs" --timeout 3600 -LE slow -R "$no_leak_check") ||
    status=$?
  return $status
}

stage_tsan() {
  local dir=$root/build-tsan
  configure_sanitized "$dir" "-fsanitize=thread -fno-omit-frame-pointer"
  local tests=(ConcurrencyTest CApiThreadTest LazyBackendTest ThreadPoolTest SoakTest
    TsanAbslMutexCheck)
  timed "tsan build" ninja -C "$dir" -j "$jobs" "${tests[@]}"
  (cd "$dir" && timed "tsan tests" env TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    SINTER_SOAK_CALLS=200000 ctest --output-on-failure -j "$jobs" --timeout 3600 \
    -R "$(IFS='|'; echo "${tests[*]}")")
}

stage_soak() {
  ninja -C "$main" -j "$jobs" SoakTest ScalarSoakTest
  # Both run even when the first fails; the stage fails if either did.
  local status=0
  (cd "$main" && timed "soak" env SINTER_SOAK_CALLS="${SINTER_LONG_SOAK_CALLS:-20000000}" \
    ctest --output-on-failure --timeout 3600 -R "^SoakTest\\.") || status=$?
  (cd "$main" && timed "scalar soak" env SINTER_SOAK_SCALARS="${SINTER_LONG_SOAK_SCALARS:-16000}" \
    ctest --output-on-failure --timeout 3600 -R "^ScalarSoakTest/") || status=$?
  return $status
}

stage_fuzz() {
  local seconds=${SINTER_LONG_FUZZ_TIME:-600}
  # Only what this stage runs (the fuzzers, the seed writers, the fusion-fuzzer tests), not the
  # whole build; then the seeds (the CTest fixtures that write them).
  ninja -C "$main" -j "$jobs" gguf_fuzz capi_fuzz trace_fuzz sinter-run sinter-dump \
    FusionFuzzTest CpuFuzzTest VulkanFuzzTest
  (cd "$main" && ctest --output-on-failure -R "_fuzz_seed_")
  local fuzz=$main/tests/fuzz
  timed "gguf fuzz" "$fuzz/GgufFuzz" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 "$fuzz/gguf_corpus" "$fuzz/gguf_seeds"
  timed "c abi fuzz" "$fuzz/CApiFuzz" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -max_len=4096 -timeout=20 -print_final_stats=1 -dict="$root/tests/fuzz/capi.dict" \
    "$fuzz/capi_corpus" "$root/tests/fuzz/capi_seeds"
  timed "trace fuzz" "$fuzz/TraceFuzz" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -max_len=16384 -timeout=20 -print_final_stats=1 "$fuzz/trace_corpus" "$fuzz/trace_seeds"
  # The interpreter (FusionFuzzTest), the cpu kinds (CpuFuzzTest) and the vulkan kind
  # (VulkanFuzzTest.FusionFuzzGraphsAgreeWithTheReference).
  (cd "$main" && timed "fusion fuzzers" env SINTER_FUZZ_GRAPHS=10000 \
    ctest --output-on-failure --timeout 3600 -R "FusionFuzz|CpuFuzz")
}

for stage in "${stages[@]}"; do
  case "$stage" in
  asan | tsan | soak | fuzz) "stage_$stage" ;;
  *)
    echo "run-long-tests: unknown stage '$stage' (asan, tsan, soak, fuzz)" >&2
    exit 2
    ;;
  esac
done
echo "run-long-tests: all stages passed: ${stages[*]}"
