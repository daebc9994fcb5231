// VulkanKernelBench.cpp - single kernels on the `vulkan` backend: quantized_matmul and attention at
// the shapes of the decode benchmark's models; registers every benchmark of
// sinter-bench-vulkan-kernels (the hand-written probes of VulkanProbeBench.cpp among them) and
// runs them.
//
// BM_VulkanQMatmul/ROWS/COLS/OUTS/HOT: Q4_0 quantized_matmul of ROWS x COLS, 32 launches per
// synchronize, each reading another of enough weight buffers to be well past the L2 cache (HOT 1:
// all reading one buffer, so from the L2 cache where it fits: what a prefetched product takes);
// OUTS 1: all write the same output (so each waits for the one before, as in a decode), OUTS 3:
// launch i writes output i % 3 (no barrier inside a group of three, like Q, K and V); per launch:
// device microseconds (timestamps: the flush's first start to last end over its launches) and
// weight bytes per device second, beside the wall time and the host's recording time per launch.
// BM_VulkanQMatmulDirect/ROWS/COLS: the generated Q4_0 kernel dispatched directly (no backend),
// each launch reading the next of enough weight buffers to be past the L2 cache and waiting for the
// one before (a barrier): microseconds a step from the slope between 64 and 512 steps in one
// submission, and weight bytes per second of that. BM_VulkanAttention/HEADS/KVHEADS/DIM/SEQ: a
// decode layer's attention (below). SINTER_VK_QMATMUL changes the schedule (docs/ENVIRONMENT.md),
// so `bench/vulkan/run-h200.sh kernels` sweeps it.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/types/span.h"
#include "backends/VulkanBackend.h"
#include "bench/vulkan/PerStepMicros.h"
#include "bench/vulkan/VulkanBenchUtil.h"
#include "runtime/vulkan/DescriptorCache.h"
#include "runtime/vulkan/PipelineCache.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "sinter/DType.h"
#include "sinter/Status.h"
#include "support/Ops.h"
#include "support/Trace.h"

namespace sinter::bench {
namespace {

// A `vulkan` backend with device timestamps (device time per launch, apart from the host's) and
// its stats sink in `vulkan`; `fusion` as the benchmark needs.
absl::StatusOr<std::unique_ptr<ComputeBackend>> timedBackend(bool fusion,
                                                             VulkanBackendOptions &vulkan) {
  BackendOptions options;
  options.kind = "vulkan";
  options.fusion = fusion;
  vulkan.deviceOptions.timestamps = true;
  vulkan.stats = std::make_shared<runtime::vulkan::VulkanStatsSink>();
  return createVulkanBackend(options, vulkan);
}

void BM_VulkanQMatmul(benchmark::State &state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const int outputs = static_cast<int>(std::max<int64_t>(1, state.range(2)));
  const bool hot = state.range(3) != 0;
  VulkanBackendOptions vulkan;
  auto backend = timedBackend(/*fusion=*/false, vulkan);
  if (!backend.ok()) {
    state.SkipWithError(std::string(backend.status().message()).c_str());
    return;
  }
  ComputeBackend &be = **backend;
  const uint64_t wBytes = uint64_t(rows) * cols / 32 * 18;
  // Enough weight buffers that a round of launches reads at least 256 MB (the H200's L2 is 60 MB).
  const int buffers =
      hot ? 1 : static_cast<int>(std::max<uint64_t>(2, (256ull << 20) / wBytes + 1));
  uint64_t seed = 7;
  std::vector<BufferHandle> ws;
  for (int i = 0; i < std::min(buffers, 4); ++i) {
    auto h = be.allocate(wBytes);
    if (!h.ok()) {
      state.SkipWithError(std::string(h.status().message()).c_str());
      return;
    }
    (void)be.copyToDevice(randomQ4_0(rows, cols, seed), *h);
    ws.push_back(*h);
  }
  // The rest share the first buffers' contents (copied on the device: the bytes differ from the
  // cache's point of view, being other addresses).
  while (static_cast<int>(ws.size()) < buffers) {
    auto h = be.allocate(wBytes);
    if (!h.ok()) {
      state.SkipWithError(std::string(h.status().message()).c_str());
      return;
    }
    (void)be.copyBuffer(ws[ws.size() % 4], *h, wBytes);
    ws.push_back(*h);
  }
  std::mt19937 rng(7);
  std::vector<float> xs(cols);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float &v : xs)
    v = normal(rng);
  auto x = be.allocate(cols * 4);
  std::vector<BufferHandle> outs;
  for (int i = 0; i < outputs; ++i)
    if (auto h = be.allocate(rows * 4); h.ok())
      outs.push_back(*h);
  if (!x.ok() || static_cast<int>(outs.size()) != outputs) {
    state.SkipWithError("cannot allocate x and out");
    return;
  }
  (void)be.copyToDevice(
      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t *>(xs.data()), xs.size() * 4), *x);
  constexpr int kLaunches = 32;
  int next = 0;
  auto round = [&]() -> absl::Status {
    for (int i = 0; i < kLaunches; ++i) {
      SINTER_RETURN_IF_ERROR(
          be.quantizedMatmul(ws[next], *x, outs[i % outputs], rows, cols, DType::Q4_0));
      next = (next + 1) % buffers;
    }
    return be.synchronize();
  };
  if (absl::Status s = round(); !s.ok()) { // compiles the plan
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  runtime::vulkan::VulkanCompilerStats before = vulkan.stats->get();
  auto start = Clock::now();
  for (auto _ : state)
    if (absl::Status s = round(); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  runtime::vulkan::VulkanCompilerStats after = vulkan.stats->get();
  const double launches = double(state.iterations()) * kLaunches;
  // Device time: the flushes' spans (first start to last end, the gaps between launches
  // included) over the launches; the wall time adds the host's recording and the submission.
  const double device = after.spanSeconds - before.spanSeconds;
  state.counters["us_per_launch"] = device / launches * 1e6;
  state.counters["GB_per_s"] = device > 0 ? double(wBytes) * launches / device / 1e9 : 0.0;
  state.counters["wall_us_per_launch"] = seconds / launches * 1e6;
  state.counters["record_us_per_launch"] =
      (after.recordSeconds - before.recordSeconds) / launches * 1e6;
  for (BufferHandle h : ws)
    (void)be.free(h);
  (void)be.free(*x);
  for (BufferHandle h : outs)
    (void)be.free(h);
}

// Attention of one decode layer: per head attn_score, softmax and attn_value (as the decoder
// records them; the runtime launches them as one attention kernel over the heads), HEADS query
// heads on KVHEADS K/V heads of DIM at SEQ positions, over kLayers layers whose caches are apart
// (well past the L2 cache at llama-7b's shape) and whose q is the layer before's output (each
// launch waits for the one before, as in a decode). Per launch: device microseconds and K/V bytes
// per device second.
void BM_VulkanAttention(benchmark::State &state) {
  const uint32_t heads = uint32_t(state.range(0)), kvHeads = uint32_t(state.range(1));
  const uint32_t dim = uint32_t(state.range(2)), seq = uint32_t(state.range(3));
  const uint32_t kvDim = kvHeads * dim, group = heads / kvHeads;
  constexpr int kLayers = 16;
  VulkanBackendOptions vulkan;
  auto backend = timedBackend(/*fusion=*/true, vulkan); // attention over heads is a fusion
  if (!backend.ok()) {
    state.SkipWithError(std::string(backend.status().message()).c_str());
    return;
  }
  ComputeBackend &be = **backend;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto filled = [&](size_t n) -> absl::StatusOr<BufferHandle> {
    std::vector<float> v(n);
    for (float &f : v)
      f = normal(rng);
    SINTER_ASSIGN_OR_RETURN(BufferHandle h, be.allocate(n * 4));
    SINTER_RETURN_IF_ERROR(be.copyToDevice(
        absl::Span<const uint8_t>(reinterpret_cast<const uint8_t *>(v.data()), n * 4), h));
    return h;
  };
  std::vector<BufferHandle> all;
  std::vector<BufferHandle> kc, vc, qs;
  for (int l = 0; l < kLayers; ++l) {
    auto k = filled(size_t(seq) * kvDim), v = filled(size_t(seq) * kvDim);
    if (!k.ok() || !v.ok()) {
      state.SkipWithError("cannot allocate the caches");
      return;
    }
    kc.push_back(*k);
    vc.push_back(*v);
  }
  for (int i = 0; i < 2; ++i)
    if (auto q = filled(size_t(heads) * dim); q.ok())
      qs.push_back(*q);
  auto scores = be.allocate(size_t(seq) * 4);
  if (qs.size() != 2 || !scores.ok()) {
    state.SkipWithError("cannot allocate q and scores");
    return;
  }
  auto round = [&]() -> absl::Status {
    for (int l = 0; l < kLayers; ++l) {
      BufferHandle q = qs[l % 2], out = qs[(l + 1) % 2];
      for (uint32_t h = 0; h < heads; ++h) {
        const uint32_t kvOff = h / group * dim;
        SINTER_RETURN_IF_ERROR(be.attnScore(q, kc[l], *scores, dim, seq, h * dim, kvOff, kvDim));
        SINTER_RETURN_IF_ERROR(be.softmax(*scores, *scores, seq));
        SINTER_RETURN_IF_ERROR(be.attnValue(*scores, vc[l], out, dim, seq, kvOff, kvDim, h * dim));
      }
    }
    return be.synchronize();
  };
  if (absl::Status s = round(); !s.ok()) { // compiles the plan
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  runtime::vulkan::VulkanCompilerStats before = vulkan.stats->get();
  for (auto _ : state)
    if (absl::Status s = round(); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  runtime::vulkan::VulkanCompilerStats after = vulkan.stats->get();
  const double launches = double(state.iterations()) * kLayers;
  const double device = after.spanSeconds - before.spanSeconds;
  const double kvBytes = 2.0 * seq * kvDim * 4;
  state.counters["us_per_launch"] = device / launches * 1e6;
  state.counters["GB_per_s"] = device > 0 ? kvBytes * launches / device / 1e9 : 0.0;
  state.counters["dispatches_per_layer"] = double(after.dispatches - before.dispatches) / launches;
  for (BufferHandle h : kc)
    (void)be.free(h);
  for (BufferHandle h : vc)
    (void)be.free(h);
  for (BufferHandle h : qs)
    (void)be.free(h);
  (void)be.free(*scores);
}

void BM_VulkanQMatmulDirect(benchmark::State &state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  auto device = runtime::vulkan::VulkanDevice::create();
  if (!device.ok()) {
    state.SkipWithError(std::string(device.status().message()).c_str());
    return;
  }
  runtime::vulkan::VulkanDevice &d = **device;
  // The backend's kernel builder (SINTER_VK_QMATMUL applies), integers as push constants.
  runtime::vulkan::VulkanKernelBuilder build =
      spirvCodegenBuilder(d.caps(), /*paramsInBuffer=*/false);
  OpCall op =
      ops::quantizedMatmul(Trace::handleOfSlot(0), Trace::handleOfSlot(1), Trace::handleOfSlot(2),
                           static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), DType::Q4_0);
  codegen::KernelSpec spec = codegen::singleOpSpec(op, 0);
  spec.rowsHint = static_cast<uint32_t>(rows);
  absl::StatusOr<runtime::vulkan::VulkanKernel> kernel = build(spec);
  if (!kernel.ok()) {
    state.SkipWithError(std::string(kernel.status().message()).c_str());
    return;
  }
  absl::StatusOr<std::shared_ptr<const runtime::vulkan::Pipeline>> p =
      d.pipelines().get(kernel->binary);
  if (!p.ok()) {
    state.SkipWithError(std::string(p.status().message()).c_str());
    return;
  }
  const uint64_t wBytes = uint64_t(rows) * cols / 32 * 18;
  const int buffers = static_cast<int>(std::max<uint64_t>(2, (256ull << 20) / wBytes + 1));
  uint64_t seed = 7;
  std::vector<uint8_t> gguf = randomQ4_0(rows, cols, seed);
  std::vector<runtime::vulkan::BufferRef> ws;
  std::vector<VkDescriptorSet> sets;
  std::mt19937 rng(7);
  std::vector<float> xs(cols);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float &v : xs)
    v = normal(rng);
  auto x = d.createBuffer(cols * 4), out = d.createBuffer(rows * 4);
  if (!x.ok() || !out.ok() ||
      !d.write(*x, absl::Span<const uint8_t>(reinterpret_cast<const uint8_t *>(xs.data()),
                                             xs.size() * 4))
           .ok()) {
    state.SkipWithError("cannot allocate x and out");
    return;
  }
  for (int i = 0; i < buffers; ++i) {
    auto w = d.createBuffer((wBytes + 15) / 16 * 16);
    if (!w.ok() || !d.write(*w, gguf).ok()) {
      state.SkipWithError("cannot allocate and fill the weights");
      return;
    }
    ws.push_back(*w);
    runtime::vulkan::BufferRef refs[3] = {*w, *x, *out};
    auto set = d.descriptors().get(**p, refs);
    if (!set.ok()) {
      state.SkipWithError(std::string(set.status().message()).c_str());
      return;
    }
    sets.push_back(*set);
  }
  std::vector<uint32_t> words;
  for (uint8_t i : kernel->pushConstantInts)
    words.push_back(static_cast<uint32_t>(op.ints[i]));
  int64_t ints[5];
  for (int i = 0; i < 5; ++i)
    ints[i] = static_cast<int64_t>(op.ints[i]);
  const std::array<uint32_t, 3> grid = kernel->grid(ints);
  auto run = [&](uint32_t steps) -> absl::StatusOr<double> {
    return timedCommands(d, nullptr, [&](VkCommandBuffer cmd) {
      vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, (*p)->pipeline);
      if (!words.empty())
        vkCmdPushConstants(cmd, (*p)->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           static_cast<uint32_t>(4 * words.size()), words.data());
      for (uint32_t i = 0; i < steps; ++i) {
        if (i > 0)
          runtime::vulkan::recordMemoryBarrier(
              cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, (*p)->layout, 0, 1,
                                &sets[i % sets.size()], 0, nullptr);
        vkCmdDispatch(cmd, grid[0], grid[1], grid[2]);
      }
    });
  };
  const double us = perStepMicros(state, run);
  state.counters["us_per_step"] = us;
  state.counters["GB_per_s"] = us > 0 ? double(wBytes) / us / 1e3 : 0.0;
  state.counters["workgroups"] = double(grid[0]) * grid[1];
  d.freeBuffer(*x);
  d.freeBuffer(*out);
  for (const runtime::vulkan::BufferRef &w : ws)
    d.freeBuffer(w);
}

void registerAll() {
  registerReadProbes();
  // llama-7b (4096, 11008) and tinyllama-1.1b (2048, 5632, 256 K/V rows) shapes.
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096},
                                                                    {11008, 4096},
                                                                    {4096, 11008},
                                                                    {32000, 4096},
                                                                    {2048, 2048},
                                                                    {256, 2048},
                                                                    {5632, 2048},
                                                                    {2048, 5632}})
    benchmark::RegisterBenchmark("BM_VulkanQMatmul", BM_VulkanQMatmul)
        ->Args({rows, cols, 1, 0})
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime()
        ->MinTime(0.3);
  // The generated kernel dispatched directly.
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096},
                                                                    {11008, 4096},
                                                                    {4096, 11008},
                                                                    {32000, 4096},
                                                                    {2048, 2048},
                                                                    {5632, 2048},
                                                                    {2048, 5632}})
    benchmark::RegisterBenchmark("BM_VulkanQMatmulDirect", BM_VulkanQMatmulDirect)
        ->Args({rows, cols})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(5);
  // The same weights every launch: from the L2 cache (a bound on what prefetching them gains).
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {4096, 4096}, {11008, 4096}, {4096, 11008}, {2048, 2048}, {5632, 2048}, {2048, 5632}})
    benchmark::RegisterBenchmark("BM_VulkanQMatmul", BM_VulkanQMatmul)
        ->Args({rows, cols, 1, 1})
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime()
        ->MinTime(0.3);
  // Attention at the decode benchmark's position (256) and at 16 (its fixed cost): tinyllama-1.1b
  // (32 heads on 4 K/V heads of 64), llama-7b (32 of 128).
  for (auto [heads, kvHeads, dim] : std::vector<std::array<int64_t, 3>>{{32, 4, 64}, {32, 32, 128}})
    for (int64_t seq : {256, 16})
      benchmark::RegisterBenchmark("BM_VulkanAttention", BM_VulkanAttention)
          ->Args({heads, kvHeads, dim, seq})
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime()
          ->MinTime(0.3);
  registerChainProbes();
  // The decode's Q, K and V: three launches on one x with no barrier between them (outputs
  // apart), a barrier every third; against /1 it shows whether the device overlaps them.
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096}, {2048, 2048}})
    benchmark::RegisterBenchmark("BM_VulkanQMatmul", BM_VulkanQMatmul)
        ->Args({rows, cols, 3, 0})
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime()
        ->MinTime(0.3);
}

} // namespace
} // namespace sinter::bench

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  sinter::bench::registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
