// VulkanKernelBench.cpp - single kernels on the `vulkan` backend: what a streaming read can reach
// on the device, and quantized_matmul and attention at the shapes of the decode benchmark's models.
//
// BM_VulkanReadProbe/WG/U/V: a hand-written kernel (SPIR-V text below, assembled at start) reads
// a buffer once with workgroups of WG invocations, each loading U elements of V u32s (V = 4: 16
// bytes) per iteration of a grid-stride loop, all U loads issued before their use. It is the
// ceiling the generated kernels are compared with: the time of a 1 GiB pass minus that of a 128
// MiB pass (one submit-and-wait each, so the submission's cost cancels), in bytes read per second.
//
// BM_VulkanQMatmul/ROWS/COLS/OUTS/HOT: Q4_0 quantized_matmul of ROWS x COLS, 32 launches per
// synchronize, each reading another of enough weight buffers to be well past the L2 cache (HOT 1:
// all reading one buffer, so from the L2 cache where it fits: what a prefetched product takes);
// OUTS 1: all write the same output (so each waits for the one before, as in a decode), OUTS 3:
// launch i writes output i % 3 (no barrier inside a group of three, like Q, K and V); per launch:
// device microseconds (timestamps: the flush's first start to last end over its launches) and
// weight bytes per device second, beside the wall time and the host's recording time per launch.
// BM_VulkanAttention/HEADS/KVHEADS/DIM/SEQ: a decode layer's attention (below).
// SINTER_VK_QMATMUL changes the schedule (docs/ENVIRONMENT.md), so `bench/vulkan/run-h200.sh
// kernels` sweeps it.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "backends/VulkanBackend.h"
#include "codegen/spirv/SpirvCompiler.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "sinter/DType.h"
#include "sinter/Status.h"

namespace sinter {
namespace {

using Clock = std::chrono::steady_clock;

// The read probe. @WG@ invocations per workgroup, @U@ loads per iteration (the body lines are
// generated), elements of type @ELEM@ (uint or v4uint). Bindings: 0 the buffer (NonWritable),
// 1 one u32 per invocation (the XOR of what it read, so the loads cannot be dropped). Push
// constant: the element count, a multiple of U x the grid's invocations.
constexpr const char *kReadProbe = R"(
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %main "main" %gid %nwg
               OpExecutionMode %main LocalSize @WG@ 1 1
               OpDecorate %gid BuiltIn GlobalInvocationId
               OpDecorate %nwg BuiltIn NumWorkgroups
               OpDecorate %rt_e ArrayStride @STRIDE@
               OpMemberDecorate %In 0 Offset 0
               OpMemberDecorate %In 0 NonWritable
               OpDecorate %In Block
               OpDecorate %src DescriptorSet 0
               OpDecorate %src Binding 0
               OpDecorate %rt_u ArrayStride 4
               OpMemberDecorate %Out 0 Offset 0
               OpDecorate %Out Block
               OpDecorate %dst DescriptorSet 0
               OpDecorate %dst Binding 1
               OpMemberDecorate %PC 0 Offset 0
               OpDecorate %PC Block
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
       %uint = OpTypeInt 32 0
     %v3uint = OpTypeVector %uint 3
     %v4uint = OpTypeVector %uint 4
       %bool = OpTypeBool
       %rt_e = OpTypeRuntimeArray %@ELEM@
         %In = OpTypeStruct %rt_e
       %rt_u = OpTypeRuntimeArray %uint
        %Out = OpTypeStruct %rt_u
         %PC = OpTypeStruct %uint
       %p_In = OpTypePointer StorageBuffer %In
      %p_Out = OpTypePointer StorageBuffer %Out
       %p_PC = OpTypePointer PushConstant %PC
      %p_in3 = OpTypePointer Input %v3uint
       %p_se = OpTypePointer StorageBuffer %@ELEM@
       %p_su = OpTypePointer StorageBuffer %uint
       %p_pu = OpTypePointer PushConstant %uint
        %src = OpVariable %p_In StorageBuffer
        %dst = OpVariable %p_Out StorageBuffer
         %pc = OpVariable %p_PC PushConstant
        %gid = OpVariable %p_in3 Input
        %nwg = OpVariable %p_in3 Input
         %c0 = OpConstant %uint 0
        %cwg = OpConstant %uint @WG@
         %cu = OpConstant %uint @U@
       %zero = OpConstantNull %@ELEM@
       %main = OpFunction %void None %fn
      %entry = OpLabel
       %gid3 = OpLoad %v3uint %gid
         %g0 = OpCompositeExtract %uint %gid3 0
       %nwg3 = OpLoad %v3uint %nwg
       %nwgx = OpCompositeExtract %uint %nwg3 0
     %stride = OpIMul %uint %nwgx %cwg
       %step = OpIMul %uint %stride %cu
         %pn = OpAccessChain %p_pu %pc %c0
          %n = OpLoad %uint %pn
               OpBranch %header
     %header = OpLabel
          %i = OpPhi %uint %g0 %entry %inext %cont
        %acc = OpPhi %@ELEM@ %zero %entry %acc_@U@ %cont
       %more = OpULessThan %bool %i %n
               OpLoopMerge %merge %cont None
               OpBranchConditional %more %body %merge
       %body = OpLabel
@BODY@
               OpBranch %cont
       %cont = OpLabel
      %inext = OpIAdd %uint %i %step
               OpBranch %header
      %merge = OpLabel
@FOLD@
         %po = OpAccessChain %p_su %dst %c0 %g0
               OpStore %po %folded
               OpReturn
               OpFunctionEnd
)";

absl::StatusOr<runtime::vulkan::KernelBinary> readProbe(uint32_t wg, uint32_t unroll,
                                                        uint32_t vec) {
  const std::string elem = vec == 4 ? "v4uint" : "uint";
  // Constants precede the function: they go before the template's %zero. The body loads
  // elements i + u * stride for every u first, then XORs them.
  std::string constants;
  for (uint32_t u = 0; u < unroll; ++u)
    absl::StrAppend(&constants, "         %k", u, " = OpConstant %uint ", u, "\n");
  std::string body = "      %acc_0 = OpCopyObject %" + elem + " %acc\n";
  for (uint32_t u = 0; u < unroll; ++u)
    absl::StrAppend(&body, "       %o", u, " = OpIMul %uint %stride %k", u, "\n", "       %a", u,
                    " = OpIAdd %uint %i %o", u, "\n", "       %p", u,
                    " = OpAccessChain %p_se %src %c0 %a", u, "\n", "       %v", u, " = OpLoad %",
                    elem, " %p", u, "\n");
  for (uint32_t u = 0; u < unroll; ++u)
    absl::StrAppend(&body, "      %acc_", u + 1, " = OpBitwiseXor %", elem, " %acc_", u, " %v", u,
                    "\n");
  std::string fold;
  if (vec == 4)
    fold = "         %f0 = OpCompositeExtract %uint %acc 0\n"
           "         %f1 = OpCompositeExtract %uint %acc 1\n"
           "         %f2 = OpCompositeExtract %uint %acc 2\n"
           "         %f3 = OpCompositeExtract %uint %acc 3\n"
           "         %x01 = OpBitwiseXor %uint %f0 %f1\n"
           "         %x23 = OpBitwiseXor %uint %f2 %f3\n"
           "     %folded = OpBitwiseXor %uint %x01 %x23\n";
  else
    fold = "     %folded = OpCopyObject %uint %acc\n";
  std::string text = absl::StrReplaceAll(
      kReadProbe, {{"@WG@", absl::StrCat(wg)},
                   {"@U@", absl::StrCat(unroll)},
                   {"@ELEM@", elem},
                   {"@STRIDE@", absl::StrCat(4 * vec)},
                   {"@BODY@", body},
                   {"@FOLD@", fold},
                   {"       %zero = OpConstantNull", constants + "       %zero = OpConstantNull"}});
  SINTER_ASSIGN_OR_RETURN(std::vector<uint32_t> words, codegen::assembleSpirv(text));
  runtime::vulkan::KernelBinary k;
  k.spirv = std::move(words);
  k.name = absl::StrCat("read_probe_wg", wg, "_u", unroll, "_v", vec);
  k.numBuffers = 2;
  k.pushConstantBytes = 4;
  k.localSize = {wg, 1, 1};
  return k;
}

void BM_VulkanReadProbe(benchmark::State &state) {
  const uint32_t wg = static_cast<uint32_t>(state.range(0));
  const uint32_t unroll = static_cast<uint32_t>(state.range(1));
  const uint32_t vec = static_cast<uint32_t>(state.range(2));
  auto device = runtime::vulkan::VulkanDevice::create();
  if (!device.ok()) {
    state.SkipWithError(std::string(device.status().message()).c_str());
    return;
  }
  auto kernel = readProbe(wg, unroll, vec);
  if (!kernel.ok()) {
    state.SkipWithError(std::string(kernel.status().message()).c_str());
    return;
  }
  // 2048 invocations (a full Hopper core) for each of 132 cores, whatever WG is: each then loops.
  const uint32_t groups = 132 * 2 * 1024 / wg;
  const uint64_t perPass = uint64_t(groups) * wg * unroll * vec * 4; // bytes one iteration reads
  // 1 GiB, or the largest binding the device allows (lavapipe: 128 MiB), and an eighth of it.
  const uint64_t most = std::min<uint64_t>(1ull << 30, (*device)->caps().maxStorageBufferRange);
  const uint64_t big = most / perPass * perPass, small = most / 8 / perPass * perPass;
  if (small == 0) {
    state.SkipWithError("the device's largest binding is below one pass of the grid");
    return;
  }
  auto src = (*device)->createBuffer(big);
  auto dst = (*device)->createBuffer(uint64_t(groups) * wg * 4);
  if (!src.ok() || !dst.ok()) {
    state.SkipWithError("cannot allocate the probe's buffers");
    return;
  }
  auto pass = [&](uint64_t bytes) -> absl::StatusOr<double> {
    uint32_t n = static_cast<uint32_t>(bytes / (4 * vec));
    std::vector<uint8_t> push(4);
    std::memcpy(push.data(), &n, 4);
    auto start = Clock::now();
    runtime::vulkan::BufferRef refs[2] = {*src, *dst};
    SINTER_RETURN_IF_ERROR((*device)->dispatchOnce(*kernel, refs, push, {groups, 1, 1}));
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  for (uint64_t bytes : {small, big}) // warm-up: the pipeline is created
    if (auto s = pass(bytes); !s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      return;
    }
  std::vector<double> bigTimes, smallTimes;
  for (auto _ : state) {
    auto b = pass(big), s = pass(small);
    if (!b.ok() || !s.ok()) {
      state.SkipWithError("dispatch failed");
      return;
    }
    bigTimes.push_back(*b);
    smallTimes.push_back(*s);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double slope = (median(bigTimes) - median(smallTimes)) / double(big - small);
  state.counters["read_GB_per_s"] = slope > 0 ? 1e-9 / slope : 0.0;
  state.counters["read_GB_per_s_1GiB"] = double(big) / median(bigTimes) / 1e9;
  (*device)->freeBuffer(*src);
  (*device)->freeBuffer(*dst);
}

// Q4_0 weights of `rows` x `cols` with random quants and scales near 2^-10 (no NaN or Inf);
// splitmix64, 8 bytes a step, so that hundreds of MB take a fraction of a second.
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

void registerAll() {
  for (int64_t wg : {256, 1024})
    for (int64_t unroll : {1, 4, 8})
      benchmark::RegisterBenchmark("BM_VulkanReadProbe", BM_VulkanReadProbe)
          ->Args({wg, unroll, 4})
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->Iterations(20);
  benchmark::RegisterBenchmark("BM_VulkanReadProbe", BM_VulkanReadProbe)
      ->Args({256, 8, 1})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(20);
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
} // namespace sinter

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  sinter::registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
