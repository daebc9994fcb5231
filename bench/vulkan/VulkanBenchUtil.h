// VulkanBenchUtil.h - what the Vulkan benchmarks and the copy probe share: hand-written SPIR-V
// assembled into a kernel, random Q4_0 weights, and a one-shot command buffer timed on the wall
// clock (VulkanKernelBench.cpp, VulkanProbeBench.cpp, CopyProbe.cpp). No Google Benchmark here:
// the copy probe is sinter-bench's too (PerStepMicros.h has the benchmarks' helper).
#ifndef SINTER_BENCH_VULKAN_VULKANBENCHUTIL_H
#define SINTER_BENCH_VULKAN_VULKANBENCHUTIL_H

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "sinter/Status.h"

namespace sinter::bench {

using Clock = std::chrono::steady_clock;

/// A hand-written kernel: `text` assembled (and validated), with its interface as given:
/// `numBuffers` storage buffers, `pushBytes` of push constants, workgroups of `wg` invocations.
absl::StatusOr<runtime::vulkan::KernelBinary> assembledKernel(const std::string &text,
                                                              std::string name, uint32_t pushBytes,
                                                              uint32_t wg, uint32_t numBuffers = 2);

/// The two sizes a streaming probe times, so that the slope between them cancels the
/// submission: the device's largest binding up to 1 GiB and an eighth of it, each a whole number
/// of `perPass` bytes (one pass of the probe's grid); `small` is 0 when the binding holds fewer
/// than eight passes.
struct ProbeSizes {
  uint64_t small = 0, big = 0;
};
ProbeSizes probeSizes(const runtime::vulkan::VulkanDevice &device, uint64_t perPass);

/// The wall seconds of one submit-and-wait dispatch of `kernel` (`groups` workgroups) over
/// `buffers`, with `n` as its one push-constant word.
absl::StatusOr<double> timedDispatch(runtime::vulkan::VulkanDevice &device,
                                     const runtime::vulkan::KernelBinary &kernel,
                                     absl::Span<const runtime::vulkan::BufferRef> buffers,
                                     uint32_t n, uint32_t groups);

/// Q4_0 weights of `rows` x `cols` with random quants and scales near 2^-10 (no NaN or Inf);
/// splitmix64, 8 bytes a step, so that hundreds of MB take a fraction of a second.
std::vector<uint8_t> randomQ4_0(int64_t rows, int64_t cols, uint64_t &state);

/// Records `body` into a one-time command buffer after a fill of `zero` (when given) and its
/// barrier, submits it and waits; the wall seconds of the submission.
template <typename Body>
absl::StatusOr<double> timedCommands(runtime::vulkan::VulkanDevice &device,
                                     const runtime::vulkan::BufferRef *zero, Body body) {
  SINTER_ASSIGN_OR_RETURN(VkCommandBuffer cmd, device.beginCommands(/*oneShot=*/true));
  if (zero) {
    vkCmdFillBuffer(cmd, zero->buffer, zero->offset, zero->size, 0);
    runtime::vulkan::recordMemoryBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                         VK_ACCESS_TRANSFER_WRITE_BIT,
                                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                         VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }
  body(cmd);
  vkEndCommandBuffer(cmd);
  auto start = Clock::now();
  absl::Status s = device.submitAndWait(cmd);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  device.freeCommands(cmd);
  SINTER_RETURN_IF_ERROR(s);
  return seconds;
}

/// The benchmarks of VulkanProbeBench.cpp, registered in two groups so that the executable keeps
/// its order: the read probes before the quantized_matmul benchmarks, the launch, grid and flag
/// chains after the attention ones.
void registerReadProbes();
void registerChainProbes();

} // namespace sinter::bench

#endif // SINTER_BENCH_VULKAN_VULKANBENCHUTIL_H
