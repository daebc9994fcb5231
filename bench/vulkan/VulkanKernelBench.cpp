// VulkanKernelBench.cpp - single kernels on the `vulkan` backend: what a streaming read can reach
// on the device, quantized_matmul and attention at the shapes of the decode benchmark's models,
// and what a dependency between launches costs.
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
// BM_VulkanQMatmulLayout/ROWS/COLS/TILED: the generated Q4_0 kernel dispatched directly (no
// backend), on GGUF weights (TILED 0) or the same kernel schedule's tiled-weights variant
// (TILED 1, codegen/TiledWeights.h), each launch reading the next of enough weight buffers to be
// past the L2 cache and waiting for the one before (a barrier): microseconds a step from the
// slope between 64 and 512 steps in one submission, and weight bytes per second of that.
// BM_VulkanAttention/HEADS/KVHEADS/DIM/SEQ: a decode layer's attention (below).
// BM_VulkanLaunchChain/G and BM_VulkanGridSync/G: what a dependency between two steps costs, as a
// launch and a barrier or as a barrier across a resident grid inside one launch (below).
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
#include "codegen/TiledWeights.h"
#include "codegen/spirv/SpirvCompiler.h"
#include "runtime/vulkan/DescriptorCache.h"
#include "runtime/vulkan/PipelineCache.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "sinter/DType.h"
#include "sinter/Status.h"
#include "support/Ops.h"
#include "support/Trace.h"

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

// A hand-written kernel: `text` assembled (and validated), with its interface as given:
// `numBuffers` storage buffers, `pushBytes` of push constants, workgroups of `wg` invocations.
absl::StatusOr<runtime::vulkan::KernelBinary> assembledKernel(const std::string &text,
                                                              std::string name, uint32_t pushBytes,
                                                              uint32_t wg,
                                                              uint32_t numBuffers = 2) {
  SINTER_ASSIGN_OR_RETURN(std::vector<uint32_t> words, codegen::assembleSpirv(text));
  runtime::vulkan::KernelBinary k;
  k.spirv = std::move(words);
  k.name = std::move(name);
  k.numBuffers = numBuffers;
  k.pushConstantBytes = pushBytes;
  k.localSize = {wg, 1, 1};
  return k;
}

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
  return assembledKernel(text, absl::StrCat("read_probe_wg", wg, "_u", unroll, "_v", vec), 4, wg);
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

// What a dependency between two steps costs, two ways. BM_VulkanLaunchChain/G: N launches of a
// trivial kernel (G workgroups of 256; invocation i reads element (7i + 1) mod n of the buffer the
// launch before wrote, adds 1 and writes element i of the other), a barrier between launches.
// BM_VulkanGridSync/G: one launch of G workgroups that does the same N times with a barrier
// across the grid between steps (an atomic counter each workgroup adds to and waits on; all G
// workgroups must be resident at once, so it runs only on a GPU with G at most twice its SMs:
// 512 invocations an SM, a quarter of what a Hopper SM holds). Per step: the slope of the wall
// time between N = 64 and N = 512 (one submit-and-wait each, so the submission cancels). Both
// check the result: every element of the last buffer is N.
constexpr const char *kStepCommon = R"(
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %main "main" %gid %lidx %nwg
               OpExecutionMode %main LocalSize 256 1 1
               OpDecorate %gid BuiltIn GlobalInvocationId
               OpDecorate %lidx BuiltIn LocalInvocationIndex
               OpDecorate %nwg BuiltIn NumWorkgroups
               OpDecorate %rt ArrayStride 4
               OpMemberDecorate %Buf 0 Offset 0
               OpDecorate %Buf Block
               OpDecorate %a DescriptorSet 0
               OpDecorate %a Binding 0
               OpDecorate %a Coherent
               OpDecorate %b DescriptorSet 0
               OpDecorate %b Binding 1
               OpDecorate %b Coherent
               OpMemberDecorate %PC 0 Offset 0
               OpMemberDecorate %PC 1 Offset 4
               OpDecorate %PC Block
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
       %uint = OpTypeInt 32 0
     %v3uint = OpTypeVector %uint 3
       %bool = OpTypeBool
         %rt = OpTypeRuntimeArray %uint
        %Buf = OpTypeStruct %rt
         %PC = OpTypeStruct %uint %uint
      %p_Buf = OpTypePointer StorageBuffer %Buf
       %p_PC = OpTypePointer PushConstant %PC
      %p_in3 = OpTypePointer Input %v3uint
       %p_in = OpTypePointer Input %uint
       %p_su = OpTypePointer StorageBuffer %uint
       %p_pu = OpTypePointer PushConstant %uint
          %a = OpVariable %p_Buf StorageBuffer
          %b = OpVariable %p_Buf StorageBuffer
         %pc = OpVariable %p_PC PushConstant
        %gid = OpVariable %p_in3 Input
       %lidx = OpVariable %p_in Input
        %nwg = OpVariable %p_in3 Input
         %c0 = OpConstant %uint 0
         %c1 = OpConstant %uint 1
         %c2 = OpConstant %uint 2
         %c7 = OpConstant %uint 7
   %sc_wg = OpConstant %uint 2
  %sc_dev = OpConstant %uint 1
   %sem_ar = OpConstant %uint 328
)";
// One step (binding 0 -> binding 1); push word 0: n.
constexpr const char *kStepKernel = R"(
       %main = OpFunction %void None %fn
      %entry = OpLabel
       %gid3 = OpLoad %v3uint %gid
          %i = OpCompositeExtract %uint %gid3 0
         %pn = OpAccessChain %p_pu %pc %c0
          %n = OpLoad %uint %pn
         %i7 = OpIMul %uint %i %c7
        %i71 = OpIAdd %uint %i7 %c1
          %j = OpUMod %uint %i71 %n
         %pj = OpAccessChain %p_su %a %c0 %j
          %v = OpLoad %uint %pj
         %v1 = OpIAdd %uint %v %c1
         %pi = OpAccessChain %p_su %b %c0 %i
               OpStore %pi %v1
               OpReturn
               OpFunctionEnd
)";
// N steps in one launch: binding 0 holds both halves (2n words), binding 1 the counter; push
// words n and N. Step p reads half p % 2 and writes half (p + 1) % 2, then the grid barrier:
// the workgroup's invocations meet, invocation 0 makes the writes visible to the device, adds 1
// to the counter and waits for it to reach (p + 1) G, and the workgroup meets again.
constexpr const char *kGridKernel = R"(
       %main = OpFunction %void None %fn
      %entry = OpLabel
       %gid3 = OpLoad %v3uint %gid
          %i = OpCompositeExtract %uint %gid3 0
        %lid = OpLoad %uint %lidx
       %nwg3 = OpLoad %v3uint %nwg
         %ng = OpCompositeExtract %uint %nwg3 0
         %pn = OpAccessChain %p_pu %pc %c0
          %n = OpLoad %uint %pn
         %ps = OpAccessChain %p_pu %pc %c1
      %steps = OpLoad %uint %ps
         %i7 = OpIMul %uint %i %c7
        %i71 = OpIAdd %uint %i7 %c1
          %j = OpUMod %uint %i71 %n
      %first = OpIEqual %bool %lid %c0
         %pc0 = OpAccessChain %p_su %b %c0 %c0
               OpBranch %header
     %header = OpLabel
          %p = OpPhi %uint %c0 %entry %pnext %cont
       %more = OpULessThan %bool %p %steps
               OpLoopMerge %merge %cont None
               OpBranchConditional %more %body %merge
       %body = OpLabel
       %half = OpUMod %uint %p %c2
        %src = OpIMul %uint %half %n
       %half1 = OpISub %uint %c1 %half
        %dst = OpIMul %uint %half1 %n
         %sj = OpIAdd %uint %src %j
         %pj = OpAccessChain %p_su %a %c0 %sj
          %v = OpLoad %uint %pj
         %v1 = OpIAdd %uint %v %c1
         %di = OpIAdd %uint %dst %i
         %pi = OpAccessChain %p_su %a %c0 %di
               OpStore %pi %v1
               OpControlBarrier %sc_wg %sc_wg %sem_ar
               OpSelectionMerge %joined None
               OpBranchConditional %first %arrive %joined
     %arrive = OpLabel
               OpMemoryBarrier %sc_dev %sem_ar
      %added = OpAtomicIAdd %uint %pc0 %sc_dev %c0 %c1
         %p1 = OpIAdd %uint %p %c1
     %target = OpIMul %uint %p1 %ng
               OpBranch %spin
       %spin = OpLabel
               OpLoopMerge %spun %spincont None
               OpBranch %spinbody
   %spinbody = OpLabel
        %now = OpAtomicLoad %uint %pc0 %sc_dev %c0
       %done = OpUGreaterThanEqual %bool %now %target
               OpBranchConditional %done %spun %spincont
   %spincont = OpLabel
               OpBranch %spin
       %spun = OpLabel
               OpMemoryBarrier %sc_dev %sem_ar
               OpBranch %joined
     %joined = OpLabel
               OpControlBarrier %sc_wg %sc_wg %sem_ar
               OpBranch %cont
       %cont = OpLabel
      %pnext = OpIAdd %uint %p %c1
               OpBranch %header
      %merge = OpLabel
               OpReturn
               OpFunctionEnd
)";

// BM_VulkanFlagChain/G: the launch chain's N launches with no barrier between them; launch p
// (push word 1) waits for launch p - 1 through a counter instead. Binding 2 holds a counter per
// launch: invocation 0 of each workgroup spins until counter p - 1 reaches G (then makes the
// device's writes visible), the workgroup meets, does its step, meets again, and invocation 0
// makes its writes visible and adds 1 to counter p; the workgroup that adds the last resets
// counter p - 1 to 0 (every workgroup of launch p is past its wait then), so a run leaves only the
// last launch's counter set (checked). It relies on the device starting a launch's workgroups
// only after every workgroup of the launches before it has started, which Vulkan does not
// promise. On an H100 it was slower than a launch and a barrier from 66 workgroups on (README,
// 2026-12-07); the runtime's version of it (eeef68e, SINTER_VK_CHAIN) was reverted.
constexpr const char *kFlagKernel = R"(
       %main = OpFunction %void None %fn
      %entry = OpLabel
       %gid3 = OpLoad %v3uint %gid
          %i = OpCompositeExtract %uint %gid3 0
        %lid = OpLoad %uint %lidx
       %nwg3 = OpLoad %v3uint %nwg
         %ng = OpCompositeExtract %uint %nwg3 0
         %pn = OpAccessChain %p_pu %pc %c0
          %n = OpLoad %uint %pn
         %ps = OpAccessChain %p_pu %pc %c1
       %step = OpLoad %uint %ps
      %first = OpIEqual %bool %lid %c0
      %later = OpUGreaterThan %bool %step %c0
      %waits = OpLogicalAnd %bool %first %later
       %prev = OpISub %uint %step %c1
      %pprev = OpAccessChain %p_su %cnt %c0 %prev
      %pself = OpAccessChain %p_su %cnt %c0 %step
               OpSelectionMerge %waited None
               OpBranchConditional %waits %wait %waited
       %wait = OpLabel
               OpBranch %spin
       %spin = OpLabel
               OpLoopMerge %spun %spincont None
               OpBranch %spinbody
   %spinbody = OpLabel
        %now = OpAtomicLoad %uint %pprev %sc_dev %c0
       %done = OpUGreaterThanEqual %bool %now %ng
               OpBranchConditional %done %spun %spincont
   %spincont = OpLabel
               OpBranch %spin
       %spun = OpLabel
               OpMemoryBarrier %sc_dev %sem_ar
               OpBranch %waited
     %waited = OpLabel
               OpControlBarrier %sc_wg %sc_wg %sem_ar
         %i7 = OpIMul %uint %i %c7
        %i71 = OpIAdd %uint %i7 %c1
          %j = OpUMod %uint %i71 %n
         %pj = OpAccessChain %p_su %a %c0 %j
          %v = OpLoad %uint %pj
         %v1 = OpIAdd %uint %v %c1
         %pi = OpAccessChain %p_su %b %c0 %i
               OpStore %pi %v1
               OpControlBarrier %sc_wg %sc_wg %sem_ar
               OpSelectionMerge %end None
               OpBranchConditional %first %arrive %end
     %arrive = OpLabel
               OpMemoryBarrier %sc_dev %sem_ar
        %old = OpAtomicIAdd %uint %pself %sc_dev %c0 %c1
        %ng1 = OpISub %uint %ng %c1
       %last = OpIEqual %bool %old %ng1
      %reset = OpLogicalAnd %bool %last %later
               OpSelectionMerge %arrived None
               OpBranchConditional %reset %doreset %arrived
    %doreset = OpLabel
               OpAtomicStore %pprev %sc_dev %c0 %c0
               OpBranch %arrived
    %arrived = OpLabel
               OpBranch %end
        %end = OpLabel
               OpReturn
               OpFunctionEnd
)";

// Per step microseconds of `run(steps)` (which returns the wall seconds of one submit-and-wait
// and checks the result), from the slope between 64 and 512 steps; 0 after SkipWithError.
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

// Records `body` into a one-time command buffer after a fill of `zero` (when given) and its
// barrier, submits it and waits; the wall seconds of the submission.
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

// Every u32 of `ref` equals `want`.
absl::Status expectAll(runtime::vulkan::VulkanDevice &device, const runtime::vulkan::BufferRef &ref,
                       uint64_t offset, uint32_t count, uint32_t want) {
  std::vector<uint32_t> got(count);
  SINTER_RETURN_IF_ERROR(device.read(
      ref, absl::Span<uint8_t>(reinterpret_cast<uint8_t *>(got.data()), count * 4), offset));
  for (uint32_t i = 0; i < count; ++i)
    if (got[i] != want)
      return absl::InternalError(
          absl::StrCat("element ", i, " is ", got[i], " after ", want, " steps"));
  return absl::OkStatus();
}

// The pipeline of a step kernel: kStepCommon followed by `body` (push words n and N).
absl::StatusOr<const runtime::vulkan::Pipeline *>
stepPipeline(runtime::vulkan::VulkanDevice &device, const char *body, const char *name) {
  SINTER_ASSIGN_OR_RETURN(runtime::vulkan::KernelBinary k,
                          assembledKernel(std::string(kStepCommon) + body, name, 8, 256));
  return device.pipelines().get(k);
}

// BM_VulkanLaunchChain (`flags` false: a barrier between launches) and BM_VulkanFlagChain (true:
// no barrier, each launch waiting on the counter of the one before, kFlagKernel).
void launchChain(benchmark::State &state, bool flags) {
  const uint32_t groups = uint32_t(state.range(0)), n = groups * 256;
  auto device = runtime::vulkan::VulkanDevice::create();
  if (!device.ok()) {
    state.SkipWithError(std::string(device.status().message()).c_str());
    return;
  }
  runtime::vulkan::VulkanDevice &d = **device;
  absl::StatusOr<const runtime::vulkan::Pipeline *> p = absl::InternalError("not built");
  if (!flags) {
    p = stepPipeline(d, kStepKernel, "launch_chain_step");
  } else {
    // kStepCommon with a third binding, the counters.
    const std::string common =
        absl::StrReplaceAll(kStepCommon, {{"               OpDecorate %b Coherent\n",
                                           "               OpDecorate %b Coherent\n"
                                           "               OpDecorate %cnt DescriptorSet 0\n"
                                           "               OpDecorate %cnt Binding 2\n"
                                           "               OpDecorate %cnt Coherent\n"},
                                          {"          %b = OpVariable %p_Buf StorageBuffer\n",
                                           "          %b = OpVariable %p_Buf StorageBuffer\n"
                                           "        %cnt = OpVariable %p_Buf StorageBuffer\n"}});
    if (auto k = assembledKernel(common + kFlagKernel, "flag_chain_step", 8, 256, 3); k.ok())
      p = d.pipelines().get(*k);
    else
      p = k.status();
  }
  constexpr uint32_t kMaxSteps = 512;
  auto a = d.createBuffer(n * 4), b = d.createBuffer(n * 4),
       counters = d.createBuffer(flags ? kMaxSteps * 4 : 4);
  if (!p.ok() || !a.ok() || !b.ok() || !counters.ok()) {
    state.SkipWithError(p.ok() ? "cannot allocate the buffers"
                               : std::string(p.status().message()).c_str());
    return;
  }
  runtime::vulkan::BufferRef ab[3] = {*a, *b, *counters}, ba[3] = {*b, *a, *counters};
  const size_t bound = flags ? 3 : 2;
  auto setAB = d.descriptors().get(**p, absl::MakeConstSpan(ab, bound)),
       setBA = d.descriptors().get(**p, absl::MakeConstSpan(ba, bound));
  if (!setAB.ok() || !setBA.ok()) {
    state.SkipWithError(std::string(setAB.status().message()).c_str());
    return;
  }
  auto run = [&](uint32_t steps) -> absl::StatusOr<double> {
    // a is zeroed first (and the counters); the first launch writes all of b.
    SINTER_ASSIGN_OR_RETURN(
        double seconds, timedCommands(d, &*a, [&](VkCommandBuffer cmd) {
          if (flags) {
            vkCmdFillBuffer(cmd, counters->buffer, counters->offset, counters->size, 0);
            runtime::vulkan::recordMemoryBarrier(
                cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
          }
          vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, (*p)->pipeline);
          for (uint32_t i = 0; i < steps; ++i) {
            if (i > 0 && !flags)
              runtime::vulkan::recordMemoryBarrier(
                  cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                  VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                  VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
            // Push word 1: kFlagKernel's launch index (pushed once, 0, for kStepKernel).
            const uint32_t push[2] = {n, flags ? i : 0};
            if (flags || i == 0)
              vkCmdPushConstants(cmd, (*p)->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 8, push);
            VkDescriptorSet set = i % 2 ? *setBA : *setAB;
            vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, (*p)->layout, 0, 1, &set,
                                    0, nullptr);
            vkCmdDispatch(cmd, groups, 1, 1);
          }
        }));
    SINTER_RETURN_IF_ERROR(expectAll(d, steps % 2 ? *b : *a, 0, n, steps));
    if (flags) {
      // Every counter was reset by the launch after it but the last one's.
      absl::Status reset = expectAll(d, *counters, 0, steps - 1, 0);
      if (reset.ok())
        reset = expectAll(d, *counters, uint64_t(steps - 1) * 4, 1, groups);
      if (!reset.ok())
        return absl::InternalError(absl::StrCat("the counters: ", reset.message()));
    }
    return seconds;
  };
  state.counters["us_per_step"] = perStepMicros(state, run);
  d.freeBuffer(*a);
  d.freeBuffer(*b);
  d.freeBuffer(*counters);
}

void BM_VulkanLaunchChain(benchmark::State &state) { launchChain(state, /*flags=*/false); }
void BM_VulkanFlagChain(benchmark::State &state) { launchChain(state, /*flags=*/true); }

void BM_VulkanGridSync(benchmark::State &state) {
  const uint32_t groups = uint32_t(state.range(0)), n = groups * 256;
  auto device = runtime::vulkan::VulkanDevice::create();
  if (!device.ok()) {
    state.SkipWithError(std::string(device.status().message()).c_str());
    return;
  }
  runtime::vulkan::VulkanDevice &d = **device;
  if (groups > 1 &&
      (d.caps().deviceKind == VK_PHYSICAL_DEVICE_TYPE_CPU || groups > 2 * d.caps().smCount)) {
    // A CPU device (lavapipe) runs workgroups a few at a time: the spinning ones would wait for
    // workgroups that never start (one workgroup waits only for itself).
    state.SkipWithError("the grid barrier needs a GPU with every workgroup resident (at most two "
                        "a compute unit)");
    return;
  }
  auto p = stepPipeline(d, kGridKernel, "grid_sync_steps");
  auto buf = d.createBuffer(2 * n * 4), counter = d.createBuffer(16);
  if (!p.ok() || !buf.ok() || !counter.ok()) {
    state.SkipWithError(p.ok() ? "cannot allocate the buffers"
                               : std::string(p.status().message()).c_str());
    return;
  }
  runtime::vulkan::BufferRef refs[2] = {*buf, *counter};
  auto set = d.descriptors().get(**p, refs);
  if (!set.ok()) {
    state.SkipWithError(std::string(set.status().message()).c_str());
    return;
  }
  auto run = [&](uint32_t steps) -> absl::StatusOr<double> {
    const uint32_t push[2] = {n, steps};
    SINTER_RETURN_IF_ERROR(d.write(*buf, std::vector<uint8_t>(2 * n * 4, 0)));
    SINTER_ASSIGN_OR_RETURN(
        double seconds, timedCommands(d, &*counter, [&](VkCommandBuffer cmd) {
          vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, (*p)->pipeline);
          vkCmdPushConstants(cmd, (*p)->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 8, push);
          vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, (*p)->layout, 0, 1, &*set, 0,
                                  nullptr);
          vkCmdDispatch(cmd, groups, 1, 1);
        }));
    SINTER_RETURN_IF_ERROR(expectAll(d, *buf, uint64_t(steps % 2) * n * 4, n, steps));
    return seconds;
  };
  state.counters["us_per_step"] = perStepMicros(state, run);
  d.freeBuffer(*buf);
  d.freeBuffer(*counter);
}

void BM_VulkanQMatmulLayout(benchmark::State &state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const bool tiled = state.range(2) != 0;
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
  spec.tiledWeights = tiled;
  absl::StatusOr<runtime::vulkan::VulkanKernel> kernel = build(spec);
  if (!kernel.ok()) {
    state.SkipWithError(std::string(kernel.status().message()).c_str());
    return;
  }
  absl::StatusOr<const runtime::vulkan::Pipeline *> p = d.pipelines().get(kernel->binary);
  if (!p.ok()) {
    state.SkipWithError(std::string(p.status().message()).c_str());
    return;
  }
  const uint64_t wBytes = uint64_t(rows) * cols / 32 * 18;
  const int buffers = static_cast<int>(std::max<uint64_t>(2, (256ull << 20) / wBytes + 1));
  uint64_t seed = 7;
  std::vector<uint8_t> gguf = randomQ4_0(rows, cols, seed);
  if (tiled) {
    absl::StatusOr<std::vector<uint8_t>> t = codegen::tileQ4_0(gguf, rows, cols);
    if (!t.ok()) {
      state.SkipWithError(std::string(t.status().message()).c_str());
      return;
    }
    gguf = std::move(*t);
  }
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
  // The generated kernel dispatched directly, on GGUF weights and on tiled ones, side by side.
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096},
                                                                    {11008, 4096},
                                                                    {4096, 11008},
                                                                    {32000, 4096},
                                                                    {2048, 2048},
                                                                    {5632, 2048},
                                                                    {2048, 5632}})
    for (int64_t tiled : {0, 1})
      benchmark::RegisterBenchmark("BM_VulkanQMatmulLayout", BM_VulkanQMatmulLayout)
          ->Args({rows, cols, tiled})
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
  // A dependency's cost: a launch and a barrier against a barrier across a resident grid.
  for (int64_t groups : {1, 66, 132, 264, 528})
    for (auto [name, fn] : {std::pair{"BM_VulkanLaunchChain", BM_VulkanLaunchChain},
                            std::pair{"BM_VulkanGridSync", BM_VulkanGridSync},
                            std::pair{"BM_VulkanFlagChain", BM_VulkanFlagChain}})
      benchmark::RegisterBenchmark(name, fn)
          ->Arg(groups)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->Iterations(5);
  // Four waves of workgroups on a Hopper: a launch's later workgroups start only as earlier ones
  // finish, so the chain runs only if the next launch's workgroups start after all of them.
  for (auto [name, fn] : {std::pair{"BM_VulkanLaunchChain", BM_VulkanLaunchChain},
                          std::pair{"BM_VulkanFlagChain", BM_VulkanFlagChain}})
    benchmark::RegisterBenchmark(name, fn)
        ->Arg(4224)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(3);
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
