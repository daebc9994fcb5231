// CopyProbe.cpp - measureCopyBandwidth (CopyProbe.h): a hand-written SPIR-V copy, timed by the
// slope between two sizes.
#include "bench/vulkan/CopyProbe.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/vulkan/VulkanBenchUtil.h"
#include "sinter/Status.h"

namespace sinter::bench {
namespace {

// Bindings: 0 the source, 1 the destination (arrays of uvec4). Push constant: the element count
// n, a multiple of the grid's invocations times 4. Invocation g copies elements g + u * stride
// for u < 4 (stride: the grid's invocations), then moves on by 4 strides.
constexpr const char *kCopyKernel = R"(
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %main "main" %gid %nwg
               OpExecutionMode %main LocalSize 256 1 1
               OpDecorate %gid BuiltIn GlobalInvocationId
               OpDecorate %nwg BuiltIn NumWorkgroups
               OpDecorate %rt ArrayStride 16
               OpMemberDecorate %Buf 0 Offset 0
               OpDecorate %Buf Block
               OpDecorate %src DescriptorSet 0
               OpDecorate %src Binding 0
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
         %rt = OpTypeRuntimeArray %v4uint
        %Buf = OpTypeStruct %rt
         %PC = OpTypeStruct %uint
      %p_Buf = OpTypePointer StorageBuffer %Buf
       %p_PC = OpTypePointer PushConstant %PC
      %p_in3 = OpTypePointer Input %v3uint
       %p_v4 = OpTypePointer StorageBuffer %v4uint
       %p_pu = OpTypePointer PushConstant %uint
        %src = OpVariable %p_Buf StorageBuffer
        %dst = OpVariable %p_Buf StorageBuffer
         %pc = OpVariable %p_PC PushConstant
        %gid = OpVariable %p_in3 Input
        %nwg = OpVariable %p_in3 Input
         %c0 = OpConstant %uint 0
         %c2 = OpConstant %uint 2
         %c3 = OpConstant %uint 3
         %c4 = OpConstant %uint 4
       %c256 = OpConstant %uint 256
       %main = OpFunction %void None %fn
      %entry = OpLabel
       %gid3 = OpLoad %v3uint %gid
         %g0 = OpCompositeExtract %uint %gid3 0
       %nwg3 = OpLoad %v3uint %nwg
       %nwgx = OpCompositeExtract %uint %nwg3 0
     %stride = OpIMul %uint %nwgx %c256
       %step = OpIMul %uint %stride %c4
    %stride2 = OpIMul %uint %stride %c2
    %stride3 = OpIMul %uint %stride %c3
         %pn = OpAccessChain %p_pu %pc %c0
          %n = OpLoad %uint %pn
               OpBranch %header
     %header = OpLabel
          %i = OpPhi %uint %g0 %entry %inext %cont
       %more = OpULessThan %bool %i %n
               OpLoopMerge %merge %cont None
               OpBranchConditional %more %body %merge
       %body = OpLabel
         %a1 = OpIAdd %uint %i %stride
         %a2 = OpIAdd %uint %i %stride2
         %a3 = OpIAdd %uint %i %stride3
         %s0 = OpAccessChain %p_v4 %src %c0 %i
         %s1 = OpAccessChain %p_v4 %src %c0 %a1
         %s2 = OpAccessChain %p_v4 %src %c0 %a2
         %s3 = OpAccessChain %p_v4 %src %c0 %a3
         %v0 = OpLoad %v4uint %s0
         %v1 = OpLoad %v4uint %s1
         %v2 = OpLoad %v4uint %s2
         %v3 = OpLoad %v4uint %s3
         %d0 = OpAccessChain %p_v4 %dst %c0 %i
         %d1 = OpAccessChain %p_v4 %dst %c0 %a1
         %d2 = OpAccessChain %p_v4 %dst %c0 %a2
         %d3 = OpAccessChain %p_v4 %dst %c0 %a3
               OpStore %d0 %v0
               OpStore %d1 %v1
               OpStore %d2 %v2
               OpStore %d3 %v3
               OpBranch %cont
       %cont = OpLabel
      %inext = OpIAdd %uint %i %step
               OpBranch %header
      %merge = OpLabel
               OpReturn
               OpFunctionEnd
)";

constexpr uint32_t kLowWord = 0x5a5a5a5a, kHighWord = 0xc3c3c3c3;

} // namespace

absl::StatusOr<double> measureCopyBandwidth(runtime::vulkan::VulkanDevice &device, int rounds) {
  SINTER_ASSIGN_OR_RETURN(runtime::vulkan::KernelBinary kernel,
                          assembledKernel(kCopyKernel, "copy_probe", 4, 256));
  // 2048 invocations for each of 132 cores, fewer where the largest binding holds fewer than 8
  // passes of the grid's loop (lavapipe: 128 MiB); both sizes are whole passes.
  uint32_t groups = 132 * 2048 / 256;
  auto perPass = [&] { return uint64_t(groups) * 256 * 4 * 16; };
  while (groups > 1 && probeSizes(device, perPass()).small == 0)
    groups /= 2;
  const auto [small, big] = probeSizes(device, perPass());
  if (small == 0)
    return absl::FailedPreconditionError(absl::StrCat(
        "copy probe: the device's largest binding (", device.caps().maxStorageBufferRange,
        " bytes) is below eight passes of the grid (", perPass(), " bytes each)"));
  SINTER_ASSIGN_OR_RETURN(runtime::vulkan::BufferRef src, device.createBuffer(big));
  absl::StatusOr<runtime::vulkan::BufferRef> dst = device.createBuffer(big);
  if (!dst.ok()) {
    device.freeBuffer(src);
    return dst.status();
  }
  auto release = [&] {
    device.freeBuffer(src);
    device.freeBuffer(*dst);
  };
  // The source's halves hold different words, the destination zeros: a copy that skips or
  // repeats a stretch leaves a wrong word at one of the places checked below.
  absl::Status filled = [&]() -> absl::Status {
    SINTER_ASSIGN_OR_RETURN(VkCommandBuffer cmd, device.beginOneShot());
    vkCmdFillBuffer(cmd, src.buffer, src.offset, big / 2, kLowWord);
    vkCmdFillBuffer(cmd, src.buffer, src.offset + big / 2, big / 2, kHighWord);
    vkCmdFillBuffer(cmd, dst->buffer, dst->offset, big, 0);
    return device.endOneShot(cmd);
  }();
  if (!filled.ok()) {
    release();
    return filled;
  }
  const runtime::vulkan::BufferRef refs[2] = {src, *dst};
  auto pass = [&](uint64_t bytes) {
    return timedDispatch(device, kernel, refs, static_cast<uint32_t>(bytes / 16), groups);
  };
  std::vector<double> slopes;
  absl::Status status = absl::OkStatus();
  for (int r = 0; r <= rounds && status.ok(); ++r) { // round 0 warms up (the pipeline is made)
    absl::StatusOr<double> s = pass(small), b = pass(big);
    if (!s.ok() || !b.ok()) {
      status = (s.ok() ? b : s).status();
      break;
    }
    if (r > 0 && *b > *s)
      slopes.push_back((*b - *s) / double(big - small));
  }
  // The checks: the first and last words of each half of the destination.
  for (uint64_t at : {uint64_t(0), big / 2 - 16, big / 2, big - 16}) {
    if (!status.ok())
      break;
    uint32_t got[4] = {};
    status = device.read(*dst, absl::Span<uint8_t>(reinterpret_cast<uint8_t *>(got), 16), at);
    const uint32_t want = at < big / 2 ? kLowWord : kHighWord;
    if (status.ok() && (got[0] != want || got[3] != want))
      status = absl::InternalError(absl::StrCat("copy probe: the destination's word at byte ", at,
                                                " is ", got[0], ", not ", want));
  }
  release();
  SINTER_RETURN_IF_ERROR(status);
  if (slopes.empty())
    return absl::InternalError("copy probe: the 1 GiB pass was never slower than the small one");
  std::sort(slopes.begin(), slopes.end());
  return 2.0 / slopes[slopes.size() / 2]; // bytes read plus written a second
}

} // namespace sinter::bench
