// VulkanBenchUtil.cpp - the helpers of VulkanBenchUtil.h that are not templates: a hand-written
// kernel's SPIR-V text assembled into a kernel binary, and random Q4_0 weights.
#include "bench/vulkan/VulkanBenchUtil.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "codegen/spirv/SpirvCompiler.h"

namespace sinter::bench {

absl::StatusOr<runtime::vulkan::KernelBinary> assembledKernel(const std::string &text,
                                                              std::string name, uint32_t pushBytes,
                                                              uint32_t wg, uint32_t numBuffers) {
  SINTER_ASSIGN_OR_RETURN(std::vector<uint32_t> words, codegen::assembleSpirv(text));
  runtime::vulkan::KernelBinary k;
  k.spirv = std::move(words);
  k.name = std::move(name);
  k.numBuffers = numBuffers;
  k.pushConstantBytes = pushBytes;
  k.localSize = {wg, 1, 1};
  return k;
}

ProbeSizes probeSizes(const runtime::vulkan::VulkanDevice &device, uint64_t perPass) {
  const uint64_t most = std::min<uint64_t>(1ull << 30, device.caps().maxStorageBufferRange);
  ProbeSizes sizes;
  sizes.big = most / perPass * perPass;
  sizes.small = most / 8 / perPass * perPass;
  return sizes;
}

absl::StatusOr<double> timedDispatch(runtime::vulkan::VulkanDevice &device,
                                     const runtime::vulkan::KernelBinary &kernel,
                                     absl::Span<const runtime::vulkan::BufferRef> buffers,
                                     uint32_t n, uint32_t groups) {
  std::vector<uint8_t> push(4);
  std::memcpy(push.data(), &n, 4);
  auto start = Clock::now();
  SINTER_RETURN_IF_ERROR(device.dispatchOnce(kernel, buffers, push, {groups, 1, 1}));
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<uint8_t> randomQ4_0(int64_t rows, int64_t cols, uint64_t &state) {
  const int64_t blocks = rows * cols / 32;
  std::vector<uint8_t> bytes(blocks * 18 + 8);
  for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(bytes.data() + i, &z, 8);
  }
  bytes.resize(blocks * 18);
  for (int64_t b = 0; b < blocks; ++b)
    bytes[18 * b + 1] = 0x14; // f16 exponent near 2^-10
  return bytes;
}

} // namespace sinter::bench
