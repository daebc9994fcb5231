// SpirvCompiler.h - builds one kernel (a KernelSpec) as a validated, optimized SPIR-V compute
// shader.
//
// The Vulkan runtime includes this header only: no MLIR in it. A SpirvKernel carries everything a
// pipeline and a dispatch need: the words, the entry point, the workgroup size, how many storage
// buffers it binds, the push-constant block (the op's integer arguments) and the rule that turns
// those integers into a dispatch grid. README.md in this folder states the conventions.
#ifndef SINTER_CODEGEN_SPIRV_SPIRVCOMPILER_H
#define SINTER_CODEGEN_SPIRV_SPIRVCOMPILER_H

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/KernelSpec.h"

namespace sinter::codegen {

/// What the device offers (from VkPhysicalDevice*Properties/Features). Kernels are built for
/// SPIR-V 1.3 / Vulkan 1.1 and need subgroup arithmetic and shuffles in compute shaders.
struct SpirvTarget {
  /// Lanes of a subgroup; kernels assume subgroups of exactly this size (the runtime requests it
  /// with VK_EXT_subgroup_size_control where the device varies it). A power of two, 4..128.
  uint32_t subgroupSize = 32;
  bool storage8 = false;  ///< storageBuffer8BitAccess (not used yet: buffers are read as u32)
  bool storage16 = false; ///< storageBuffer16BitAccess (not used yet)
  bool float16 = false;   ///< shaderFloat16 (not used yet: halves are widened with integer ops)
  bool intDot = false;    ///< shaderIntegerDotProduct (quantized_matmul's int8 x, qmatmulIntDot)
  /// shaderDenormPreserveFloat32: kernels keep f32 subnormals (SPIR-V's DenormPreserve), so a
  /// device whose default flushes them computes what the reference does.
  bool denormPreserve = false;
  uint32_t maxWorkgroupInvocations = 1024;
  /// Run spirv-opt's performance passes on the serialized module (validated before and after).
  bool optimize = true;
  /// quantized_matmul schedule overrides for tuning (0: the built-in choice; the
  /// `SINTER_VK_QMATMUL` variable of the vulkan kind sets them): rows per cluster of lanes for
  /// the 32-weight formats (1, 2, 4 or 8), invocations per workgroup (a multiple of the subgroup
  /// size), and blocks a lane decodes per step (2 or 4, used only where the row's block count
  /// and alignment allow it).
  uint32_t qmatmulRows = 0;
  uint32_t qmatmulWorkgroup = 0;
  uint32_t qmatmulBlocksPerStep = 0;
  /// Q4_0/Q8_0: decode with Dequant.h's generic decoder instead of the fast pair decoder
  /// (`decode=generic` in `SINTER_VK_QMATMUL`), to compare the two.
  bool qmatmulGenericDecode = false;
  /// Q4_0/Q8_0: split each block over the lanes, one u32 of quants per lane, so that a load
  /// reads consecutive words of W and consecutive vec4s of x across the subgroup (`split=0`
  /// takes a pair of blocks per lane instead).
  bool qmatmulSplitBlocks = true;
  /// Split schedule: blocks a lane loads before computing them (1..4; 0: the built-in choice,
  /// `unroll=N`).
  uint32_t qmatmulUnroll = 0;
  /// int8-x quantized_matmul: the most blocks a lane loads before computing them (1..16; 0: 16).
  uint32_t qmatmulDotUnroll = 0;
  /// int8-x quantized_matmul: consecutive quant words of a block each lane takes (`words=N`:
  /// 1, 2 or 4 where it divides the block's words; 0: the built-in choice, 4). More words a
  /// lane means fewer loads and fewer scale and x-scale reads per byte of W.
  uint32_t qmatmulLaneWords = 0;
  /// int8-x quantized_matmul with a whole block a lane: read d from the words that hold the
  /// block's quants (one load fewer a block; `window=0` loads d's word apart).
  bool qmatmulBlockWindow = true;
  /// quantized_matmul: load the second inputs of the epilogue's adds and element_muls that
  /// KernelSpec::earlyInputs marks at the kernel's start (`early=0`: after the reduction).
  bool qmatmulEarlyInputs = true;
  /// Q4_0/Q8_0 on a device with integer dot products (intDot): quantize x to int8 per block of
  /// 32 in workgroup memory and multiply 4 quants at a time (SEMANTICS.md's 5e-4 bound for
  /// quantized activations). `dot=0` or SINTER_PRECISE=1 keeps x in f32.
  bool qmatmulIntDot = true;
  /// int8 x: load each lane's first batch of W before quantizing x. `prefetch=1` for every
  /// product; by default (qmatmulPrefetchSmallGrids) only for a grid of at most one workgroup a
  /// compute unit: it helps those and costs the occupancy that fuller grids need.
  bool qmatmulPrefetch = false;
  /// int8 x: prefetch where the product's grid (KernelSpec::rowsHint rows) has at most
  /// computeUnits workgroups. `prefetch=0` turns it off.
  bool qmatmulPrefetchSmallGrids = true;
  /// The device's compute units (NVIDIA's SM count); 0 when unknown (no grid-size choices).
  uint32_t computeUnits = 0;
  /// int8-x quantized_matmul: at most this many workgroups (`groups=N`, 4..65535; 0: one
  /// workgroup per tile of rows). Each quantizes x once and then loops over the tiles
  /// g, g + N, ..., so x's cost is paid N times rather than once per tile.
  uint32_t qmatmulGroups = 0;
  /// Q4_0/Q8_0 with static n_cols: every invocation of a workgroup on the same N rows
  /// (`wgrows=N`, 1..16; 0: off), each taking one quant word of the rows' blocks in turn, x
  /// quantized per block as it is loaded (int8 x from 64 rows where the device has integer dot
  /// products, as the default schedule). A workgroup per N rows: many more resident invocations.
  uint32_t qmatmulWorkgroupRows = 0;
  /// maxComputeSharedMemorySize: workgroup memory a kernel may declare (Vulkan's minimum).
  uint32_t maxSharedMemoryBytes = 16384;
  /// maxPerStageDescriptorStorageBuffers: the storage buffers a kernel may bind, the parameter
  /// buffer included (0: no limit). A fused kernel binds every member's buffers (stacked Q, K
  /// and V with their tails bind 20); one past the limit is refused as unimplemented, so the
  /// runtime plans its launches again smaller.
  uint32_t maxStorageBuffers = 0;
  /// Attention over heads: the most invocations per workgroup (0: 1024; `attnwg=N`).
  uint32_t attentionWorkgroup = 0;
  /// Attention over heads: workgroups per head (`attnsplit=N`, 1..64; 0: the default, 8; 1: one
  /// workgroup a head). Each takes a contiguous share of the positions; the last of a head to
  /// finish (an atomic counter in a scratch binding) merges the shares.
  uint32_t attentionSplits = 0;
  /// The integer words in a storage buffer bound after the kernel's other bindings
  /// (SpirvKernel::paramsInBuffer) instead of push constants: the Vulkan runtime then records a
  /// plan's command buffer once and replays it, writing only the words (SINTER_VK_REPLAY=0 turns
  /// both off).
  bool paramsInBuffer = false;
  /// Decorate quantized_matmul's W and x (or its norm prologue's in and weight) and attention's
  /// q, K and V NonWritable (`SINTER_VK_QMATMUL=nonwritable=0` leaves them undecorated).
  bool readOnlyBindings = true;
};

/// The element type a storage-buffer binding is declared with. Every binding is a runtime array
/// starting at byte 0 of the bound range; the runtime binds whole buffers (offset 0).
enum class SpirvBindingKind : uint8_t {
  F32,  ///< float[]: f32 activations
  Word, ///< uint[]: weights and raw bytes (byte-addressed through 32-bit words)
  Vec4, ///< vec4[]: f32 activations read 16 bytes at a time
};

/// Attention kernels (KernelSpec::attentionOverHeads; one workgroup per head): after the 11 words
/// of the members' integers (attn_score, softmax, attn_value of head 0) come these, in order.
inline constexpr uint32_t kAttentionMemberWords = 11;
/// SpirvKernel::bindingMembers of the attention scratch binding (no member's buffer).
inline constexpr uint8_t kScratchMember = 255;
enum AttentionWord : uint32_t {
  kAttnHeads,      ///< heads of the layer (the dispatch's workgroup count)
  kAttnHeadsPerKv, ///< query heads sharing one K/V head (grouped-query attention)
  kAttnQStep,      ///< attn_score head_offset of head h = head 0's + h * this
  kAttnKStep,      ///< attn_score kv_offset = head 0's + (h / heads per kv) * this
  kAttnVStep,      ///< attn_value kv_offset, likewise
  kAttnOutStep,    ///< attn_value out_offset = head 0's + h * this
  /// 1: the last head writes the scores buffer (what the members leave there); 0: it does not,
  /// because a later step overwrites those scores before anything reads them (the runtime's
  /// liveness check, VulkanPlan.cpp), so the kernel skips their stores and normalization.
  kAttnStoreScores,
  kAttnExtraWords
};

/// A compiled kernel.
struct SpirvKernel {
  std::string name;                ///< KernelSpec::name()
  std::vector<uint32_t> words;     ///< the SPIR-V module
  std::string entryPoint = "main"; ///< GLCompute entry point
  std::array<uint32_t, 3> localSize{1, 1, 1};
  /// Binding i of descriptor set 0 is buffer operand bindingOperands[i] (OpInfo order) of member
  /// bindingMembers[i]. Members count in spec order: prologue, anchor, epilogue; a single-op
  /// kernel has one member, and binding i is its operand i.
  std::vector<SpirvBindingKind> bindings;
  std::vector<uint8_t> bindingMembers;
  std::vector<uint8_t> bindingOperands;
  /// Push-constant word j (a u32 at byte 4 j) holds ints[pushConstantInts[j]] of member
  /// pushConstantMembers[j]. Every integer argument of every member is pushed, baked or not, so
  /// the runtime need not know which are.
  std::vector<uint8_t> pushConstantInts;
  std::vector<uint8_t> pushConstantMembers;
  /// Words after those (attention: kAttnExtraWords, filled by the runtime).
  uint32_t extraPushWords = 0;
  /// One workgroup per head (attention): the grid is {heads * attentionSplits, 1, 1}, not grid().
  bool perHead = false;
  /// Attention: workgroups per head. With more than one the last binding is scratch (i32) the
  /// runtime provides, scratchWordsPerHead words a head, zero at the first dispatch (the kernel
  /// leaves it zero again): a counter per head, then each workgroup's share of the softmax.
  uint32_t attentionSplits = 1;
  uint32_t scratchWordsPerHead = 0;
  /// The anchor's member index (the prologue's length) and kind.
  uint8_t anchorMember = 0;
  OpKind kind = OpKind::Matmul;
  /// Units of the parallel dimension one workgroup computes (see spirvUnits).
  uint32_t unitsPerGroup = 1;
  /// When nonzero, the most workgroups grid() dispatches: each then loops over its share of the
  /// units (quantized_matmul with SpirvTarget::qmatmulGroups).
  uint32_t maxGroups = 0;
  /// When nonzero, the workgroups grid() dispatches whatever the integers (stacked products:
  /// the sum of every product's, their row counts being static).
  uint32_t fixedGroups = 0;

  /// The words above are not push constants but a storage buffer (u32[]) at the last binding,
  /// after `bindings` (SpirvTarget::paramsInBuffer, and the kernel has words).
  bool paramsInBuffer = false;

  uint32_t numBindings() const {
    return static_cast<uint32_t>(bindings.size()) + (paramsInBuffer ? 1 : 0);
  }
  /// The integer words, wherever they live.
  uint32_t paramWords() const {
    return static_cast<uint32_t>(pushConstantInts.size()) + extraPushWords;
  }
  uint32_t pushConstantBytes() const { return paramsInBuffer ? 0 : 4 * paramWords(); }
  /// Workgroups to dispatch for the anchor's integer arguments (all of them): x up to 65535, the
  /// rest in y (kernels linearize y * numWorkgroups.x + x). {0, 0, 0} when there is no work.
  std::array<uint32_t, 3> grid(const int64_t *ints) const;
};

/// The size of the parallel dimension of a SPIR-V kernel of `kind`: rows of quantized_matmul,
/// outputs (m * n) of matmul, positions t of attn_score, elements d of attn_value, elements of
/// silu/element_mul/add, (head, pair) units ((n_heads_q + n_heads_k) * head_dim / 2) of rope,
/// 1 for softmax, rms_norm and the copies (one workgroup does the whole op).
uint64_t spirvUnits(OpKind kind, const int64_t *ints);
/// The integer arguments spirvUnits reads for `kind`, as a mask (bit i: ints[i]): a grid can
/// only change with these.
uint8_t spirvUnitsInts(OpKind kind);

/// Builds, lowers, serializes, validates and optimizes the kernel of `spec` for `target`.
/// Fused specs supported so far (anything else is Unimplemented, so the runtime can run the
/// members one by one), all on a quantized_matmul anchor:
///  - prologue [rms_norm]: rms_norm's out is the anchor's x, its size is n_cols, and its out does
///    not alias its in; the kernel still writes rms_norm's out (workgroup 0 does).
///  - an epilogue of silu / add / element_mul members, each reading the previous member's output
///    (the anchor's out for the first) as its first input (`in` or `a`: the runtime puts the
///    chained value first, both ops commute) and its other input at the same element; every
///    member's output is written.
///  - attention over heads (KernelSpec::attentionOverHeads): anchor attn_score with a static
///    head_dim, epilogue [softmax, attn_value]; the runtime checks the members are one head's
///    score -> softmax -> value on one scores buffer and passes the per-head strides.
///  - unstoredOutputs bit 0 with an rms_norm prologue: the normalized vector is not written.
/// Internal, with the validator's message, when the SPIR-V does not validate.
absl::StatusOr<SpirvKernel> buildSpirvKernel(const KernelSpec &spec, const SpirvTarget &target);

/// The SPIRV-Tools validator on `words` for Vulkan 1.1: OK or Internal with its messages.
absl::Status validateSpirv(const std::vector<uint32_t> &words);

/// spirv-as on `text` for Vulkan 1.1, then the validator (InvalidArgument or Internal with their
/// messages). For hand-written kernels: the bandwidth probes of bench/vulkan.
absl::StatusOr<std::vector<uint32_t>> assembleSpirv(const std::string &text);

/// spirv-dis's text of `words` (InvalidArgument when they do not disassemble).
absl::StatusOr<std::string> disassembleSpirv(const std::vector<uint32_t> &words);

} // namespace sinter::codegen

#endif // SINTER_CODEGEN_SPIRV_SPIRVCOMPILER_H
