// PerStepMicros.h - the per-step time of a Vulkan probe benchmark from the slope between two step
// counts (VulkanKernelBench.cpp, VulkanProbeBench.cpp).
#ifndef SINTER_BENCH_VULKAN_PERSTEPMICROS_H
#define SINTER_BENCH_VULKAN_PERSTEPMICROS_H

#include <algorithm>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/status/statusor.h"

namespace sinter::bench {

/// Per step microseconds of `run(steps)` (which returns the wall seconds of one submit-and-wait
/// and checks the result), from the slope between 64 and 512 steps; 0 after SkipWithError.
template <typename Run> double perStepMicros(benchmark::State &state, Run run) {
  std::vector<double> small, big;
  for (auto _ : state) {
    absl::StatusOr<double> s = run(64), b = run(512);
    if (!s.ok() || !b.ok()) {
      state.SkipWithError(std::string((s.ok() ? b : s).status().message()).c_str());
      return 0;
    }
    small.push_back(*s);
    big.push_back(*b);
  }
  std::sort(small.begin(), small.end());
  std::sort(big.begin(), big.end());
  return (big[big.size() / 2] - small[small.size() / 2]) / (512 - 64) * 1e6;
}

} // namespace sinter::bench

#endif // SINTER_BENCH_VULKAN_PERSTEPMICROS_H
