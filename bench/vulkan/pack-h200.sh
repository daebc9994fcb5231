#!/usr/bin/env bash
# bench/vulkan/pack-h200.sh - build here, pack for bench/vulkan/run-h200.sh on an H200 machine.
#
# The device machine has no compilers' dependencies (MLIR, LLVM, Abseil, GTest, the Vulkan
# headers), so the Vulkan tests and the decode benchmark are built here (x86-64, the
# same as there) and carried: stripped binaries, every shared library they need that a bare
# CUDA image lacks (ldd, minus glibc and the GCC runtime), the assembled test kernels and
# stories260K.bin, as one .carry/vulkan-h200.tar.xz. The Vulkan loader travels as the .gl debs
# (/work/.library/device/README.md). The Khronos validation layer is left out unless
# SINTER_PACK_VALIDATION=1 (it adds ~5 MB compressed; run-h200.sh then runs the tests with it).
# The carried tree must stay under 64 MiB with the working tree: the script prints the size.
#
# usage: bench/vulkan/pack-h200.sh [build-dir]     (default build-vk; configured as HELPER_RULES)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-vk}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
targets=(VulkanDeviceTest VulkanRuntimeTest VulkanBackendTest VulkanStories260KTest
  VulkanFuzzTest ConformanceTest SpirvKernelTest sinter-bench-vulkan-decode
  sinter-bench-vulkan-kernels)
nice ninja -C "$build" -j"${SINTER_JOBS:-2}" "${targets[@]}"
mkdir -p "$stage/bin" "$stage/lib" "$stage/spv" "$stage/shared/models" "$stage/layers"
for t in "${targets[@]}"; do
  f=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
  [ -n "$f" ] || { echo "pack: $t not built" >&2; exit 1; }
  strip -o "$stage/bin/$t" "$f"
done
# SINTER_PACK_BASELINE=<a sinter-bench-vulkan-decode built from another commit>: carried as
# bin/sinter-bench-vulkan-decode-baseline for `run-h200.sh ab` (the two side by side in one run).
if [ -n "${SINTER_PACK_BASELINE:-}" ]; then
  strip -o "$stage/bin/sinter-bench-vulkan-decode-baseline" "$SINTER_PACK_BASELINE"
fi
cp "$build"/tests/unit/vulkan/spv/*.spv "$stage/spv/"
cp "${SINTER_SHARED_DIR:-$root/../shared}/models/stories260K.bin" "$stage/shared/models/"
# Libraries: everything ldd resolves except the C library, the GCC runtime and the loader (the
# .gl debs bring libvulkan.so.1).
skip='^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux.*|linux-vdso|libvulkan)\.so'
for b in "$stage"/bin/*; do
  ldd "$b" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $skip ]]; then cp -L "$path" "$stage/lib/$name"; fi
done
if [ "${SINTER_PACK_VALIDATION:-0}" = 1 ]; then
  cp -L /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so "$stage/lib/"
  cp /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json "$stage/layers/"
fi
mkdir -p "$root/.carry"
grep -qx '/.carry/' "$root/.git/info/exclude" || echo '/.carry/' >>"$root/.git/info/exclude"
# One solid xz stream with a dictionary larger than any binary: the test binaries share most of
# their (statically linked) code, so each after the first costs little.
# SINTER_PACK_XZ_PRESET=6 packs in a few minutes instead of ~10 (a few MB larger).
tar -C "$stage" -cf - . |
  xz --lzma2=preset="${SINTER_PACK_XZ_PRESET:-9e}",dict=256MiB -T1 >"$root/.carry/vulkan-h200.tar.xz"
du -sh "$stage" "$root/.carry/vulkan-h200.tar.xz"
echo "pack: carry .carry and .gl; run: bash bench/vulkan/run-h200.sh"
