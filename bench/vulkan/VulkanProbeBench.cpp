// VulkanProbeBench.cpp - hand-written kernels on the `vulkan` device, beside the generated ones
// of VulkanKernelBench.cpp (same executable): what a streaming read can reach on the device, and
// what a dependency between launches costs.
//
// BM_VulkanReadProbe/WG/U/V: a hand-written kernel (SPIR-V text below, assembled at start) reads
// a buffer once with workgroups of WG invocations, each loading U elements of V u32s (V = 4: 16
// bytes) per iteration of a grid-stride loop, all U loads issued before their use. It is the
// ceiling the generated kernels are compared with: the time of a 1 GiB pass minus that of a 128
// MiB pass (one submit-and-wait each, so the submission's cost cancels), in bytes read per second.
// BM_VulkanLaunchChain/G, BM_VulkanGridSync/G and BM_VulkanFlagChain/G: what a dependency
// between two steps costs, as a launch and a barrier, as a barrier across a resident grid inside
// one launch, or as launches that wait on counters (below).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/types/span.h"
#include "bench/vulkan/PerStepMicros.h"
#include "bench/vulkan/VulkanBenchUtil.h"
#include "runtime/vulkan/DescriptorCache.h"
#include "runtime/vulkan/PipelineCache.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "sinter/Status.h"

namespace sinter::bench {
namespace {

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
  const auto [small, big] = probeSizes(**device, perPass);
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
  const runtime::vulkan::BufferRef refs[2] = {*src, *dst};
  auto pass = [&](uint64_t bytes) {
    return timedDispatch(**device, *kernel, refs, static_cast<uint32_t>(bytes / (4 * vec)), groups);
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
// promise. On an H100 it was slower than a launch and a barrier from 66 workgroups on
// (docs/PERFORMANCE.md, "Tried and removed"); the runtime's version of it (eeef68e,
// SINTER_VK_CHAIN) was reverted.
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
absl::StatusOr<std::shared_ptr<const runtime::vulkan::Pipeline>>
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
  absl::StatusOr<std::shared_ptr<const runtime::vulkan::Pipeline>> p =
      absl::InternalError("not built");
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

} // namespace

void registerReadProbes() {
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
}

void registerChainProbes() {
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
}

} // namespace sinter::bench
