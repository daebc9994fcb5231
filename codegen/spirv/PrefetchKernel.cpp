// PrefetchKernel.cpp - the L2 prefetch kernel: reads one u32 of every 32-byte sector of a
// buffer's first n sectors and keeps nothing, so that a kernel after the next barrier finds those
// bytes in the device's L2 cache. Hand-written SPIR-V (no MLIR): a grid-stride loop whose
// `unroll` loads are all issued before their values are used.
#include "codegen/spirv/SpirvCompiler.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "sinter/Status.h"

namespace sinter::codegen {
namespace {

// Bindings: 0 the buffer read (NonWritable), 1 a sink of one u32, written only when the XOR of
// what a lane read equals push-constant word 1 and that word is not zero (the runtime passes
// zero: never; the compiler cannot know, so the loads stay). Push constant word 0: n, the
// sectors to read (at least one).
constexpr const char *kPrefetch = R"(
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %main "main" %gid %nwg
               OpExecutionMode %main LocalSize @WG@ 1 1
               OpDecorate %gid BuiltIn GlobalInvocationId
               OpDecorate %nwg BuiltIn NumWorkgroups
               OpDecorate %rt ArrayStride 4
               OpMemberDecorate %In 0 Offset 0
               OpMemberDecorate %In 0 NonWritable
               OpDecorate %In Block
               OpDecorate %src DescriptorSet 0
               OpDecorate %src Binding 0
               OpMemberDecorate %Out 0 Offset 0
               OpDecorate %Out Block
               OpDecorate %dst DescriptorSet 0
               OpDecorate %dst Binding 1
               OpMemberDecorate %PC 0 Offset 0
               OpMemberDecorate %PC 1 Offset 4
               OpDecorate %PC Block
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
       %uint = OpTypeInt 32 0
     %v3uint = OpTypeVector %uint 3
       %bool = OpTypeBool
         %rt = OpTypeRuntimeArray %uint
         %In = OpTypeStruct %rt
        %Out = OpTypeStruct %rt
         %PC = OpTypeStruct %uint %uint
       %p_In = OpTypePointer StorageBuffer %In
      %p_Out = OpTypePointer StorageBuffer %Out
       %p_PC = OpTypePointer PushConstant %PC
      %p_in3 = OpTypePointer Input %v3uint
       %p_su = OpTypePointer StorageBuffer %uint
       %p_pu = OpTypePointer PushConstant %uint
        %src = OpVariable %p_In StorageBuffer
        %dst = OpVariable %p_Out StorageBuffer
         %pc = OpVariable %p_PC PushConstant
        %gid = OpVariable %p_in3 Input
        %nwg = OpVariable %p_in3 Input
         %c0 = OpConstant %uint 0
         %c1 = OpConstant %uint 1
         %c8 = OpConstant %uint 8
        %cwg = OpConstant %uint @WG@
         %cu = OpConstant %uint @U@
@CONSTANTS@
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
         %pm = OpAccessChain %p_pu %pc %c1
      %magic = OpLoad %uint %pm
      %last = OpISub %uint %n %c1
               OpBranch %header
     %header = OpLabel
          %i = OpPhi %uint %g0 %entry %inext %cont
        %acc = OpPhi %uint %c0 %entry %acc_@U@ %cont
       %more = OpULessThan %bool %i %n
               OpLoopMerge %merge %cont None
               OpBranchConditional %more %body %merge
       %body = OpLabel
      %acc_0 = OpCopyObject %uint %acc
@BODY@
               OpBranch %cont
       %cont = OpLabel
      %inext = OpIAdd %uint %i %step
               OpBranch %header
      %merge = OpLabel
        %hit = OpIEqual %bool %acc %magic
        %set = OpINotEqual %bool %magic %c0
       %keep = OpLogicalAnd %bool %hit %set
               OpSelectionMerge %done None
               OpBranchConditional %keep %store %done
      %store = OpLabel
         %po = OpAccessChain %p_su %dst %c0 %c0
               OpStore %po %acc
               OpBranch %done
       %done = OpLabel
               OpReturn
               OpFunctionEnd
)";

} // namespace

absl::StatusOr<std::vector<uint32_t>> l2PrefetchSpirv(uint32_t workgroup, uint32_t unroll) {
  if (workgroup == 0 || unroll == 0 || unroll > 16)
    return absl::InvalidArgumentError(absl::StrCat("l2 prefetch kernel: workgroup ", workgroup,
                                                   " and unroll ", unroll, " (1..16)"));
  // Sector s = i + u * stride (clamped to the last: a repeated load costs nothing), its first
  // u32 at 8 * s; every load before the XORs.
  std::string constants, body;
  for (uint32_t u = 1; u < unroll; ++u)
    absl::StrAppend(&constants, "         %k", u, " = OpConstant %uint ", u, "\n");
  for (uint32_t u = 0; u < unroll; ++u) {
    if (u == 0) {
      absl::StrAppend(&body, "         %s0 = OpCopyObject %uint %i\n");
    } else {
      absl::StrAppend(&body, "         %o", u, " = OpIMul %uint %stride %k", u, "\n");
      absl::StrAppend(&body, "         %s", u, " = OpIAdd %uint %i %o", u, "\n");
    }
    absl::StrAppend(&body, "         %q", u, " = OpExtInst %uint %glsl UMin %s", u, " %last\n");
    absl::StrAppend(&body, "         %w", u, " = OpIMul %uint %q", u, " %c8\n");
    absl::StrAppend(&body, "         %p", u, " = OpAccessChain %p_su %src %c0 %w", u, "\n");
    absl::StrAppend(&body, "         %v", u, " = OpLoad %uint %p", u, "\n");
  }
  for (uint32_t u = 0; u < unroll; ++u)
    absl::StrAppend(&body, "      %acc_", u + 1, " = OpBitwiseXor %uint %acc_", u, " %v", u, "\n");
  std::string text = absl::StrReplaceAll(kPrefetch, {{"@WG@", absl::StrCat(workgroup)},
                                                     {"@U@", absl::StrCat(unroll)},
                                                     {"@CONSTANTS@", constants},
                                                     {"@BODY@", body}});
  text = absl::StrReplaceAll(
      text, {{"               OpMemoryModel",
              "      %glsl = OpExtInstImport \"GLSL.std.450\"\n               OpMemoryModel"}});
  return assembleSpirv(text);
}

} // namespace sinter::codegen
