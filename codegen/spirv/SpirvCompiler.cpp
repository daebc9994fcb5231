// SpirvCompiler.cpp - KernelSpec -> gpu.func -> spirv.module -> words, validated and optimized.
//
// Each kernel is built in its own single-threaded MLIRContext (a few milliseconds; compilation
// happens once per kernel shape): the plan (bindings, workgroup size, units per workgroup) is
// data, the body comes from ContractionKernels.cpp or PointwiseKernels.cpp, SpirvLegalize.cpp
// splits what SPIR-V cannot hold, and MLIR's GPU/SCF/arith/memref/vector/math -> SPIR-V patterns
// lower it for the target environment built from SpirvTarget. The push-constant block is one
// memref argument of u32 words; the ABI lowering gives it a binding like a buffer, which Vulkan
// forbids, so that decoration is dropped before serialization.
#include "codegen/spirv/SpirvCompiler.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "codegen/Dequant.h"
#include "codegen/ElementwiseMath.h"
#include "codegen/spirv/SpirvEmitter.h"
#include "codegen/spirv/SpirvTools.h"
#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Conversion/ArithToSPIRV/ArithToSPIRV.h"
#include "mlir/Conversion/FuncToSPIRV/FuncToSPIRV.h"
#include "mlir/Conversion/GPUToSPIRV/GPUToSPIRV.h"
#include "mlir/Conversion/MathToSPIRV/MathToSPIRV.h"
#include "mlir/Conversion/MemRefToSPIRV/MemRefToSPIRV.h"
#include "mlir/Conversion/SCFToSPIRV/SCFToSPIRV.h"
#include "mlir/Conversion/VectorToSPIRV/VectorToSPIRV.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/Dialect/SPIRV/Transforms/Passes.h"
#include "mlir/Dialect/SPIRV/Transforms/SPIRVConversion.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/SPIRV/Serialization.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/Passes.h"

namespace sinter::codegen {

namespace spv {

bool isContraction(OpKind kind) {
  return kind == OpKind::Matmul || kind == OpKind::QuantizedMatmul || kind == OpKind::AttnScore ||
         kind == OpKind::AttnValue;
}

KernelPlan planKernel(const OpShape &op, const SpirvTarget &target) {
  KernelPlan plan;
  const OpInfo &info = opInfo(op.kind);
  plan.pushConstantWords = info.numInts;
  uint32_t lanes = target.subgroupSize;
  uint32_t maxGroup = std::max<uint32_t>(target.maxWorkgroupInvocations, lanes);
  for (int i = 0; i < info.numBuffers; ++i)
    plan.bindings.push_back(SpirvBindingKind::F32);
  // Split quantized_matmul: blocks a lane loads before computing them. On the H200, side by side
  // in one run, 1 beat 2 (llama-7b 130.7 vs 126.7 tokens/s, tinyllama 308.5 vs 298.6).
  constexpr uint32_t kDefaultSplitUnroll = 1;
  constexpr uint32_t kDefaultDotUnroll = 16;
  constexpr uint32_t kDefaultLaneWords = 4;
  switch (op.kind) {
  case OpKind::QuantizedMatmul: {
    plan.bindings[0] = SpirvBindingKind::Word;
    plan.bindings[1] = SpirvBindingKind::Vec4;
    plan.workgroupSize = std::min<uint32_t>(std::max<uint32_t>(128, lanes), maxGroup);
    plan.threadsPerUnit = lanes;
    QuantLayout layout = quantLayout(op.dtype);
    if (!isScalarFormat(op.dtype)) {
      // Two rows per subgroup halve the reads of x for the 32-weight formats (a K-quant block
      // already gives a lane 256 weights, and twice its decoder would double the code). Pairs of
      // 2-byte-aligned blocks (Q4_0, Q8_0, Q5_0, Q3_K, Q6_K) start at 4-byte boundaries when a row
      // has an even number of blocks, so every field is cut from aligned words with constant
      // shifts.
      if (layout.blockWeights == 32)
        plan.rowsPerSubgroup = 2;
      if (layout.blockBytes % 4 == 2 && op.isStatic(1) &&
          (op.ints[1] / layout.blockWeights) % 2 == 0)
        plan.blocksPerStep = 2;
      if (layout.blockWeights == 32 && (target.qmatmulRows == 1 || target.qmatmulRows == 2 ||
                                        target.qmatmulRows == 4 || target.qmatmulRows == 8))
        plan.rowsPerSubgroup = target.qmatmulRows;
      // A step of 4 blocks keeps the 4-byte alignment of a pair (4 x 2-byte-aligned blocks are
      // 2 aligned pairs) when the row holds a multiple of 4 blocks.
      if (target.qmatmulBlocksPerStep == 4 && plan.blocksPerStep == 2 &&
          (op.ints[1] / layout.blockWeights) % 4 == 0)
        plan.blocksPerStep = 4;
    }
    if (target.qmatmulSplitBlocks && hasFastQuantDecoder(op.dtype) &&
        (layout.blockBytes - 2) / 4 <= lanes) {
      plan.splitWords = static_cast<uint32_t>((layout.blockBytes - 2) / 4);
      plan.blocksPerStep = 1;
      plan.splitUnroll = target.qmatmulUnroll >= 1 && target.qmatmulUnroll <= 4
                             ? target.qmatmulUnroll
                             : kDefaultSplitUnroll;
    }
    // int8 x in workgroup memory: n_cols bytes of quants and 4 or 8 bytes a block of scales.
    if (plan.splitWords > 0 && target.intDot && target.qmatmulIntDot && op.isStatic(1) &&
        lanes >= 8) {
      uint64_t shared = op.ints[1] + op.ints[1] / 32 * 8 + 4 * (maxGroup / lanes);
      if (shared <= target.maxSharedMemoryBytes) {
        plan.intDotX = true;
        // Each workgroup quantizes all of x: 16 subgroups share that cost (H200, side by side in
        // one run: llama-7b 163.4 tokens/s with 16, 147.9 with 8, 115.4 with 4).
        plan.workgroupSize = std::min<uint32_t>(16 * lanes, maxGroup);
        // One row a cluster: x is in workgroup memory, so a second row saves no reads of it,
        // and the grid is twice as wide (a 4096-row product 256 workgroups instead of 128 on
        // the H200's 132 SMs). Side by side on the H200 (2026-12-05, `run-h200.sh sweep`,
        // three runs each): llama-7b 243.4 / 246.6 / 245.1 tokens/s against 228.8 / 226.4 /
        // 208.0 with two rows, tinyllama 620.6 / 614.1 / 612.0 against 601.7 / 610.8 / 605.9.
        // A rope epilogue still takes two (planSpec), gate and up one row of each.
        if (target.qmatmulRows == 0)
          plan.rowsPerSubgroup = 1;
      }
    }
    if (target.qmatmulWorkgroup >= lanes && target.qmatmulWorkgroup % lanes == 0)
      plan.workgroupSize = std::min(target.qmatmulWorkgroup, maxGroup);
    // A row of few steps (a 4096-column K-quant row has 16 blocks) leaves lanes idle: give it
    // the next power of two of its step count, and the subgroup several rows at once.
    plan.lanesPerRow = lanes;
    if (op.isStatic(1)) {
      int64_t steps = op.ints[1] / layout.blockWeights / plan.blocksPerStep;
      if (plan.splitWords > 0)
        steps *= plan.splitWords;
      uint32_t least = std::max<uint32_t>(plan.splitWords, 1);
      while (plan.lanesPerRow > least && plan.lanesPerRow / 2 >= steps)
        plan.lanesPerRow /= 2;
    }
    if (plan.intDotX) {
      // int8 x: a lane's blocks in as few iterations of at most U (dotunroll=N, default 16)
      // blocks each, spread evenly (a 4096-column Q4_0 row on 32 lanes: 16 blocks a lane, one
      // iteration; 11008 columns: 43, three of 15). On the H200, side by side in one run: U = 4
      // 158.7 tokens/s on llama-7b, 16 170.8, 1 149.0.
      uint32_t most = target.qmatmulDotUnroll >= 1 && target.qmatmulDotUnroll <= 16
                          ? target.qmatmulDotUnroll
                          : kDefaultDotUnroll;
      // Four consecutive quant words of a block a lane (a whole Q4_0 block, half a Q8_0 one)
      // instead of one: a lane loads the d word and 5 words for 16 bytes of quants instead of
      // 3 words for 4, and reads d, d_x and the zero point once per 16 bytes. On the H200, side
      // by side in one run (2026-12-05 18:02 UTC, `run-h200.sh kernels` and `sweep`): 32000x4096
      // 46.4 -> 30.7 µs a launch, 11008x4096 21.0 -> 14.6, 4096x4096 10.8 -> 8.5; the decode
      // llama-7b 246.6 -> 317.2 tokens/s, tinyllama 615.1 -> 686.8 (`words=2`: 282.1 / 637.9).
      // `words=1` / `words=2` keep the older schedules.
      const uint32_t words = target.qmatmulLaneWords ? target.qmatmulLaneWords : kDefaultLaneWords;
      if ((words == 2 || words == 4) && plan.splitWords % words == 0 &&
          plan.lanesPerRow >= plan.splitWords)
        plan.laneWords = words;
      plan.blockWindow = target.qmatmulBlockWindow;
      int64_t stride = plan.lanesPerRow / (plan.splitWords / plan.laneWords);
      int64_t trip = (op.ints[1] / layout.blockWeights + stride - 1) / stride;
      int64_t iterations = (trip + most - 1) / most;
      plan.intDotUnroll =
          static_cast<uint32_t>(std::max<int64_t>(1, (trip + iterations - 1) / iterations));
    }
    plan.unitsPerGroup =
        plan.workgroupSize / lanes * (lanes / plan.lanesPerRow) * plan.rowsPerSubgroup;
    const uint32_t wgRows = target.qmatmulWorkgroupRows;
    if (plan.splitWords > 0 && op.isStatic(1) && wgRows >= 1 && wgRows <= 16 &&
        lanes % plan.splitWords == 0) {
      // A workgroup of up to 512 invocations (fewer when a row has fewer quant words), all on
      // the same rows; intDotUnroll blocks loaded at once (dotunroll=N, default 2), spread
      // evenly over the row's steps.
      plan.workgroupRows = true;
      plan.laneWords = 1;
      plan.rowsPerSubgroup = wgRows;
      const int64_t words = op.ints[1] / layout.blockWeights * plan.splitWords;
      uint32_t size = lanes;
      while (size < 512 && size < words && size * 2 <= maxGroup)
        size *= 2;
      if (target.qmatmulWorkgroup >= lanes && target.qmatmulWorkgroup % lanes == 0)
        size = std::min(target.qmatmulWorkgroup, maxGroup);
      plan.workgroupSize = plan.lanesPerRow = size;
      uint32_t most = target.qmatmulDotUnroll >= 1 && target.qmatmulDotUnroll <= 16
                          ? target.qmatmulDotUnroll
                          : 2;
      int64_t stride = size / plan.splitWords;
      int64_t trip = (op.ints[1] / layout.blockWeights + stride - 1) / stride;
      int64_t iterations = (trip + most - 1) / most;
      plan.intDotUnroll =
          static_cast<uint32_t>(std::max<int64_t>(1, (trip + iterations - 1) / iterations));
      plan.unitsPerGroup = wgRows;
      plan.maxGroups = 0;
    }
    if (!plan.workgroupRows && plan.intDotX && target.qmatmulGroups >= 4 &&
        target.qmatmulGroups <= 65535)
      plan.maxGroups = target.qmatmulGroups;
    break;
  }
  case OpKind::AttnScore:
    // One subgroup per row; a few rows per workgroup keep the launch count low.
    plan.workgroupSize = std::min<uint32_t>(std::max<uint32_t>(128, lanes), maxGroup);
    plan.threadsPerUnit = lanes;
    plan.unitsPerGroup = plan.workgroupSize / lanes;
    break;
  case OpKind::Softmax:
  case OpKind::RmsNorm:
    plan.workgroupSize = lanes; // the row in one subgroup
    plan.unitsPerGroup = 1;
    break;
  case OpKind::CopyBuffer:
  case OpKind::CopyBufferOffset:
    plan.bindings = {SpirvBindingKind::Word, SpirvBindingKind::Word};
    plan.workgroupSize = std::min<uint32_t>(256, maxGroup); // one workgroup: a memmove
    plan.unitsPerGroup = 1;
    break;
  default:
    plan.workgroupSize = std::min<uint32_t>(std::max<uint32_t>(64, lanes), maxGroup);
    plan.unitsPerGroup = plan.workgroupSize;
    break;
  }
  return plan;
}

// The members of `spec` in order: prologue, anchor, epilogue.
std::vector<const OpShape *> membersOf(const KernelSpec &spec) {
  std::vector<const OpShape *> members;
  for (const OpShape &s : spec.prologue)
    members.push_back(&s);
  members.push_back(&spec.anchor);
  for (const OpShape &s : spec.epilogue)
    members.push_back(&s);
  return members;
}

absl::Status checkFusion(const KernelSpec &spec) {
  if (spec.prologue.empty() && spec.epilogue.empty())
    return absl::OkStatus();
  auto unsupported = [&](const std::string &why) {
    return absl::UnimplementedError(
        absl::StrCat("kernel ", spec.name(), ": no fused SPIR-V kernel for ", why));
  };
  if (spec.attentionOverHeads) {
    if (spec.anchor.kind != OpKind::AttnScore || !spec.prologue.empty() ||
        spec.epilogue.size() != 2 || spec.epilogue[0].kind != OpKind::Softmax ||
        spec.epilogue[1].kind != OpKind::AttnValue || spec.unstoredOutputs != 0)
      return unsupported("attention over heads other than attn_score -> softmax -> attn_value");
    if (!spec.anchor.isStatic(0))
      return unsupported("attention with a run-time head_dim");
    return absl::OkStatus();
  }
  if (spec.anchor.kind != OpKind::QuantizedMatmul)
    return unsupported(absl::StrCat("a ", opInfo(spec.anchor.kind).name, " anchor"));
  if (spec.stackedProducts) {
    // Q, K, V after one norm: each product with its tail is a spec this function accepts, of
    // the anchor's format and n_cols, with a static n_rows (the grid is fixed at build time).
    if (spec.prologue.size() != 1 || spec.prologue[0].kind != OpKind::RmsNorm)
      return unsupported("stacked products without one rms_norm prologue");
    if (spec.unstoredOutputs != 0 && spec.unstoredOutputs != 1)
      return unsupported("unstored outputs other than the rms_norm prologue's");
    std::vector<StackedSegment> segments = stackedSegments(spec);
    if (segments.size() < 2)
      return unsupported("stacked products with one product");
    for (const StackedSegment &seg : segments) {
      const OpShape &p = *seg.product;
      if (p.dtype != spec.anchor.dtype || !p.isStatic(1) || !spec.anchor.isStatic(1) ||
          p.ints[1] != spec.anchor.ints[1] || !p.isStatic(0) || p.ints[0] <= 0 ||
          p.ints[0] > INT32_MAX)
        return unsupported("stacked products of another format or shape, or a run-time n_rows");
      KernelSpec one = segmentSpec(spec, seg);
      if (!one.epilogue.empty() && one.epilogue[0].kind == OpKind::QuantizedMatmul)
        return unsupported("a sibling product among stacked products");
      if (absl::Status s = checkFusion(one); !s.ok())
        return s;
    }
    return absl::OkStatus();
  }
  if (hasSiblingProduct(spec)) {
    // Gate and up: the sibling decodes the anchor's rows of its own W (same format, same static
    // n_cols), then element-wise members take it as their second input.
    const OpShape &sib = spec.epilogue[0];
    if (sib.dtype != spec.anchor.dtype || !sib.isStatic(1) || !spec.anchor.isStatic(1) ||
        sib.ints[1] != spec.anchor.ints[1] || sib.isStatic(0) != spec.anchor.isStatic(0) ||
        (sib.isStatic(0) && sib.ints[0] != spec.anchor.ints[0]))
      return unsupported("a sibling product of another format or shape");
    if (spec.epilogue.size() < 2)
      return unsupported("a sibling product without an element-wise member after it");
    for (size_t j = 1; j < spec.epilogue.size(); ++j)
      if (!isElementwise(spec.epilogue[j].kind))
        return unsupported(
            absl::StrCat("a ", opInfo(spec.epilogue[j].kind).name, " after a sibling product"));
    if (spec.unstoredOutputs != 0)
      return unsupported("unstored outputs with a sibling product");
    return absl::OkStatus();
  }
  if (spec.unstoredOutputs != 0 && (spec.unstoredOutputs != 1 || spec.prologue.empty()))
    return unsupported("unstored outputs other than the rms_norm prologue's");
  if (spec.prologue.size() > 1 ||
      (spec.prologue.size() == 1 && spec.prologue[0].kind != OpKind::RmsNorm))
    return unsupported("a prologue other than one rms_norm");
  // Either element-wise members, or the tail of a projection that feeds the KV cache: an
  // optional rope of its rows, then an optional copy of the rows into the cache.
  size_t tail = 0;
  if (tail < spec.epilogue.size() && spec.epilogue[tail].kind == OpKind::Rope) {
    if (!spec.epilogue[tail].isStatic(1))
      return unsupported("a rope epilogue with a run-time head_dim");
    ++tail;
  }
  if (tail < spec.epilogue.size() && spec.epilogue[tail].kind == OpKind::CopyBufferOffset)
    ++tail;
  if (tail > 0 && tail != spec.epilogue.size())
    return unsupported("members after a rope or copy_buffer_offset epilogue");
  if (tail == 0)
    for (const OpShape &s : spec.epilogue)
      if (!isElementwise(s.kind))
        return unsupported(absl::StrCat("a ", opInfo(s.kind).name, " epilogue"));
  return absl::OkStatus();
}

constexpr uint32_t kDefaultAttentionSplits = 8;

// True when a product of `spec` has a rope right after it (the first epilogue member, or the
// first of a stacked segment's tail).
bool hasRopeTail(const KernelSpec &spec) {
  if (spec.attentionOverHeads)
    return false;
  for (const StackedSegment &seg : stackedSegments(spec))
    if (!seg.tail.empty() && seg.tail[0].kind == OpKind::Rope)
      return true;
  return false;
}

// The plan of a whole spec: the anchor's schedule, every member's bindings and words in order.
KernelPlan planSpec(const KernelSpec &spec, const SpirvTarget &target) {
  KernelPlan plan = planKernel(spec.anchor, target);
  if (hasSiblingProduct(spec) && plan.splitWords > 0 && !plan.workgroupRows) {
    // A cluster's two accumulators are one row of the anchor and of the sibling: a workgroup
    // covers half as many output rows (the split schedule only; emitSpec refuses the others).
    plan.rowsPerSubgroup = 2;
    plan.unitsPerGroup = plan.workgroupSize / target.subgroupSize *
                         (target.subgroupSize / std::max<uint32_t>(plan.lanesPerRow, 1));
  }
  if (plan.intDotX && !plan.workgroupRows) {
    // A lane's first batch of W loaded before x is quantized. On the H200 alone it took
    // 4096x4096 from 13.0 to 10.9 µs and 2048x5632 from 15.4 to 11.1, but 11008x4096 from 19.3
    // to 22.9 and 32000x4096 from 40 to 53 (holding the batch across the barrier costs the
    // occupancy that grids of several waves live on). In the decode, side by side (2026-12-04
    // 21:00 UTC), prefetching every grid of at most one workgroup an SM made tinyllama 1.14x
    // faster (its products are 8 or 64 workgroups) and llama-7b 0.87x (128 of 132 SMs, the
    // 11008-column down product slower). So grids of at most half the SMs, until the products
    // took one row a subgroup (a 4096-row grid is 256 workgroups): on an H100 (2026-12-06,
    // `cus=264` side by side, alternated twice) grids of up to one workgroup an SM made
    // tinyllama 877.6 / 878.7 tokens/s against 863.1 / 867.9 (its 2048-row down and output
    // products, 128 workgroups, take it) and left llama-7b alone (352.4 / 352.2 against 352.3 /
    // 351.3: no grid of its is that small). The default since: at most one workgroup an SM.
    uint64_t groups = (uint64_t(spec.rowsHint) + plan.unitsPerGroup - 1) / plan.unitsPerGroup;
    // Stacked products: one grid of every product's workgroups, resident together.
    if (spec.stackedProducts) {
      groups = 0;
      for (uint32_t g : stackedGroups(spec, plan))
        groups += g;
    }
    bool smallGrid = target.qmatmulPrefetchSmallGrids && target.computeUnits > 0 && groups > 0 &&
                     groups <= target.computeUnits && plan.maxGroups == 0;
    plan.prefetch = target.qmatmulPrefetch || smallGrid;
  }
  if (spec.prologue.empty() && spec.epilogue.empty())
    return plan;
  if (spec.attentionOverHeads) {
    // One workgroup per head (a layer has few heads, a device many cores: make each one wide):
    // up to 1024 invocations, fewer when the subgroups' partial sums of V (NS x head_dim floats
    // of workgroup memory) would pass 16 KB.
    uint32_t lanes = target.subgroupSize;
    // Split over the positions (attnsplit=N, default 8: H200, side by side in one run, llama-7b
    // 173.6 tokens/s with 8 shares of 256 invocations, 158.7 with one of 1024 a head) each
    // share is narrower.
    uint32_t shares = target.attentionSplits >= 1 && target.attentionSplits <= 64
                          ? target.attentionSplits
                          : kDefaultAttentionSplits;
    uint32_t widest = target.attentionWorkgroup >= lanes ? target.attentionWorkgroup
                      : shares > 1                       ? 256
                                                         : 1024;
    uint32_t subgroups = std::max<uint32_t>(
        1, std::min<uint32_t>(widest, std::max(target.maxWorkgroupInvocations, lanes)) / lanes);
    int64_t dim = std::max<int64_t>(spec.anchor.ints[0], 1);
    while (subgroups > 1 && int64_t(subgroups) * dim * 4 > 16384)
      subgroups /= 2;
    plan.workgroupSize = subgroups * lanes;
    plan.unitsPerGroup = 1;
    plan.attentionSplits = shares;
  }
  // A rope epilogue rotates pairs of rows in the invocation that stores them: a schedule of one
  // row a cluster (K-quants, F32/F16/BF16) takes two.
  if (spec.anchor.kind == OpKind::QuantizedMatmul && hasRopeTail(spec) && !plan.workgroupRows &&
      plan.rowsPerSubgroup == 1) {
    plan.rowsPerSubgroup = 2;
    plan.unitsPerGroup *= 2;
  }
  KernelPlan fused = plan;
  fused.bindings.clear();
  fused.bindingBase.clear();
  fused.wordBase.clear();
  fused.pushConstantWords = 0;
  for (const OpShape *member : membersOf(spec)) {
    fused.bindingBase.push_back(static_cast<uint32_t>(fused.bindings.size()));
    fused.wordBase.push_back(fused.pushConstantWords);
    const OpInfo &info = opInfo(member->kind);
    if (member == &spec.anchor || member->kind == OpKind::QuantizedMatmul) // and a sibling
      fused.bindings.insert(fused.bindings.end(), plan.bindings.begin(), plan.bindings.end());
    else if (member->kind == OpKind::RmsNorm) // in and weight feed the products 16 bytes at a time
      fused.bindings.insert(fused.bindings.end(), {SpirvBindingKind::Vec4, SpirvBindingKind::Vec4,
                                                   SpirvBindingKind::F32});
    else if (member->kind == OpKind::CopyBufferOffset) // the cache, written as u32 words
      fused.bindings.insert(fused.bindings.end(), {SpirvBindingKind::F32, SpirvBindingKind::Word});
    else
      fused.bindings.insert(fused.bindings.end(), info.numBuffers, SpirvBindingKind::F32);
    fused.pushConstantWords += info.numInts;
  }
  if (spec.attentionOverHeads)
    fused.pushConstantWords += kAttnExtraWords;
  if (fused.attentionSplits > 1) {
    fused.scratchBinding = static_cast<uint32_t>(fused.bindings.size());
    fused.bindings.push_back(SpirvBindingKind::Word);
  }
  return fused;
}

std::vector<uint32_t> stackedGroups(const KernelSpec &spec, const KernelPlan &plan) {
  std::vector<uint32_t> groups;
  const uint64_t units = std::max<uint32_t>(plan.unitsPerGroup, 1);
  for (const StackedSegment &seg : stackedSegments(spec)) {
    uint64_t g = (static_cast<uint64_t>(seg.product->ints[0]) + units - 1) / units;
    if (plan.maxGroups)
      g = std::min<uint64_t>(g, plan.maxGroups);
    groups.push_back(static_cast<uint32_t>(g));
  }
  return groups;
}

} // namespace spv

namespace {

using mlir::Value;

// Collects MLIR diagnostics while alive.
class DiagnosticCapture {
public:
  explicit DiagnosticCapture(mlir::MLIRContext &context)
      : handler_(&context, [this](mlir::Diagnostic &d) {
          absl::StrAppend(&text_, text_.empty() ? "" : "; ", d.str());
          return mlir::success();
        }) {}
  const std::string &text() const { return text_; }

private:
  std::string text_;
  mlir::ScopedDiagnosticHandler handler_;
};

std::string targetEnvText(const SpirvTarget &t) {
  // Integer dot products where the device has them (spirv-update-vce keeps only what a kernel
  // uses).
  const char *dot = t.intDot ? ", DotProduct, DotProductInput4x8BitPacked" : "";
  const char *dotExtension = t.intDot ? ", SPV_KHR_integer_dot_product" : "";
  return absl::StrCat(
      "#spirv.target_env<#spirv.vce<v1.3, [Shader, GroupNonUniform, GroupNonUniformArithmetic, "
      "GroupNonUniformShuffle, GroupNonUniformBallot",
      dot, "], [SPV_KHR_storage_buffer_storage_class", dotExtension,
      "]>, "
      "api=Vulkan, #spirv.resource_limits<max_compute_workgroup_invocations = ",
      t.maxWorkgroupInvocations, ", max_compute_workgroup_size = [", t.maxWorkgroupInvocations,
      ", 1, 1], subgroup_size = ", t.subgroupSize, ">>");
}

mlir::Type bindingType(mlir::MLIRContext *ctx, SpirvBindingKind kind) {
  mlir::Builder b(ctx);
  auto storage = mlir::spirv::StorageClassAttr::get(ctx, mlir::spirv::StorageClass::StorageBuffer);
  mlir::Type element = b.getF32Type();
  if (kind == SpirvBindingKind::Word)
    element = b.getI32Type();
  if (kind == SpirvBindingKind::Vec4)
    element = mlir::VectorType::get({4}, b.getF32Type());
  return mlir::MemRefType::get({mlir::ShapedType::kDynamic}, element, mlir::AffineMap(), storage);
}

// The gpu.module with the kernel's gpu.func; the body is left to the caller.
mlir::gpu::GPUFuncOp createKernelFunc(mlir::OpBuilder &b, mlir::ModuleOp module,
                                      const spv::KernelPlan &plan, bool paramsInBuffer) {
  mlir::MLIRContext *ctx = b.getContext();
  mlir::Location loc = module.getLoc();
  b.setInsertionPointToEnd(module.getBody());
  auto gpuModule = b.create<mlir::gpu::GPUModuleOp>(loc, "kernels");
  b.setInsertionPointToStart(gpuModule.getBody());
  llvm::SmallVector<mlir::Type> args;
  for (SpirvBindingKind kind : plan.bindings)
    args.push_back(bindingType(ctx, kind));
  // The integer words: push constants, or (SpirvTarget::paramsInBuffer) a storage buffer bound
  // after the others, so a recorded command buffer can be replayed with new integers.
  if (plan.pushConstantWords > 0)
    args.push_back(mlir::MemRefType::get(
        {plan.pushConstantWords}, b.getI32Type(), mlir::AffineMap(),
        mlir::spirv::StorageClassAttr::get(ctx, paramsInBuffer
                                                    ? mlir::spirv::StorageClass::StorageBuffer
                                                    : mlir::spirv::StorageClass::PushConstant)));
  auto func = b.create<mlir::gpu::GPUFuncOp>(loc, "main", b.getFunctionType(args, {}));
  func->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  int32_t size = static_cast<int32_t>(plan.workgroupSize);
  func->setAttr(mlir::spirv::getEntryPointABIAttrName(),
                mlir::spirv::getEntryPointABIAttr(ctx, {size, 1, 1}));
  // The storage class comes from each memref's memory space.
  for (unsigned i = 0; i < args.size(); ++i)
    func.setArgAttr(i, mlir::spirv::getInterfaceVarABIAttrName(),
                    mlir::spirv::getInterfaceVarABIAttr(0, i, std::nullopt, ctx));
  return func;
}

// Adds `OpDecorate %var Coherent` after the `OpDecorate %var Binding b` of each binding b in
// `bindings` (MLIR 19's serializer has no Coherent): what other workgroups of the same dispatch
// write and this one reads (split attention's scratch and scores).
void decorateCoherent(std::vector<uint32_t> &words, uint64_t bindings) {
  constexpr uint32_t kOpDecorate = 71, kBinding = 33, kCoherent = 23, kHeaderWords = 5;
  if (!bindings)
    return;
  std::vector<uint32_t> out(words.begin(), words.begin() + kHeaderWords);
  for (size_t i = kHeaderWords; i < words.size();) {
    uint32_t count = words[i] >> 16, opcode = words[i] & 0xffff;
    if (count == 0 || i + count > words.size())
      return; // malformed: leave it to the validator
    out.insert(out.end(), words.begin() + i, words.begin() + i + count);
    if (opcode == kOpDecorate && count == 4 && words[i + 2] == kBinding && words[i + 3] < 64 &&
        ((bindings >> words[i + 3]) & 1))
      out.insert(out.end(), {(3u << 16) | kOpDecorate, words[i + 1], kCoherent});
    i += count;
  }
  words = std::move(out);
}

// Adds SPV_KHR_float_controls' DenormPreserve for 32-bit floats to every entry point: f32
// subnormals are kept as operands and results instead of the driver's default (NVIDIA's flushes
// them). MLIR 19 serializes no float-controls execution modes, so the words are added here: the
// capability after the last OpCapability, the extension after it (extensions follow the
// capabilities), the execution mode before the first OpExecutionMode.
void addDenormPreserve(std::vector<uint32_t> &words) {
  constexpr uint32_t kOpExtension = 10, kOpEntryPoint = 15, kOpExecutionMode = 16,
                     kOpCapability = 17, kHeaderWords = 5;
  constexpr uint32_t kDenormPreserveCapability = 4464, kDenormPreserveMode = 4459;
  std::vector<uint32_t> entries;
  size_t lastCapability = 0, firstMode = 0;
  for (size_t i = kHeaderWords; i < words.size();) {
    uint32_t count = words[i] >> 16, opcode = words[i] & 0xffff;
    if (count == 0 || i + count > words.size())
      return; // malformed: leave it to the validator
    if (opcode == kOpCapability)
      lastCapability = i + count;
    if (opcode == kOpEntryPoint && count > 2)
      entries.push_back(words[i + 2]);
    if (opcode == kOpExecutionMode && !firstMode)
      firstMode = i;
    i += count;
  }
  if (!lastCapability || !firstMode || entries.empty())
    return;
  std::vector<uint32_t> modes;
  for (uint32_t id : entries)
    modes.insert(modes.end(), {(4u << 16) | kOpExecutionMode, id, kDenormPreserveMode, 32});
  std::vector<uint32_t> head = {(2u << 16) | kOpCapability, kDenormPreserveCapability};
  const char name[] = "SPV_KHR_float_controls";
  std::vector<uint32_t> text((sizeof(name) + 3) / 4, 0);
  std::memcpy(text.data(), name, sizeof(name));
  head.push_back(static_cast<uint32_t>((1 + text.size()) << 16) | kOpExtension);
  head.insert(head.end(), text.begin(), text.end());
  words.insert(words.begin() + static_cast<std::ptrdiff_t>(firstMode), modes.begin(), modes.end());
  words.insert(words.begin() + static_cast<std::ptrdiff_t>(lastCapability), head.begin(),
               head.end());
}

// gpu.module -> spirv.module with every op of the body lowered.
mlir::LogicalResult lowerToSpirv(mlir::ModuleOp module, uint64_t readOnlyBindings) {
  mlir::MLIRContext *ctx = module.getContext();
  llvm::SmallVector<mlir::gpu::GPUModuleOp> gpuModules(module.getOps<mlir::gpu::GPUModuleOp>());
  for (mlir::gpu::GPUModuleOp gpuModule : gpuModules) {
    auto targetAttr = mlir::spirv::lookupTargetEnvOrDefault(gpuModule);
    std::unique_ptr<mlir::ConversionTarget> target = mlir::SPIRVConversionTarget::get(targetAttr);
    mlir::SPIRVConversionOptions options;
    options.use64bitIndex = false;
    mlir::SPIRVTypeConverter typeConverter(targetAttr, options);
    mlir::ScfToSPIRVContext scfContext;
    mlir::RewritePatternSet patterns(ctx);
    mlir::populateGPUToSPIRVPatterns(typeConverter, patterns);
    mlir::arith::populateArithToSPIRVPatterns(typeConverter, patterns);
    mlir::populateMemRefToSPIRVPatterns(typeConverter, patterns);
    mlir::populateFuncToSPIRVPatterns(typeConverter, patterns);
    mlir::populateSCFToSPIRVPatterns(typeConverter, scfContext, patterns);
    mlir::populateVectorToSPIRVPatterns(typeConverter, patterns);
    mlir::populateMathToSPIRVPatterns(typeConverter, patterns);
    if (mlir::failed(
            mlir::applyFullConversion(gpuModule.getOperation(), *target, std::move(patterns))))
      return mlir::failure();
  }
  mlir::PassManager pm(ctx);
  mlir::OpPassManager &spirvPm = pm.nest<mlir::spirv::ModuleOp>();
  spirvPm.addPass(mlir::spirv::createSPIRVLowerABIAttributesPass());
  spirvPm.addPass(mlir::spirv::createSPIRVUpdateVCEPass());
  if (mlir::failed(pm.run(module)))
    return mlir::failure();
  module.walk([&](mlir::spirv::GlobalVariableOp var) {
    auto pointer = mlir::cast<mlir::spirv::PointerType>(var.getType());
    if (pointer.getStorageClass() == mlir::spirv::StorageClass::PushConstant) {
      // Vulkan: push constants have no descriptor set or binding.
      var->removeAttr("descriptor_set");
      var->removeAttr("binding");
      return;
    }
    // NonWritable on the bindings the kernel only reads (the weights, x): the driver may then
    // read them through its read-only caches.
    auto binding = var->getAttrOfType<mlir::IntegerAttr>("binding");
    if (binding && binding.getInt() < 64 && (readOnlyBindings >> binding.getInt()) & 1)
      var->setAttr("non_writable", mlir::UnitAttr::get(ctx));
  });
  return mlir::success();
}

} // namespace

absl::StatusOr<SpirvKernel> buildSpirvKernel(const KernelSpec &spec, const SpirvTarget &target) {
  if (absl::Status s = spv::checkFusion(spec); !s.ok())
    return s;
  if (target.subgroupSize < 4 || target.subgroupSize > 128 ||
      (target.subgroupSize & (target.subgroupSize - 1)) != 0)
    return absl::InvalidArgumentError(absl::StrCat("spirv: subgroup size ", target.subgroupSize,
                                                   " is not a power of two 4..128"));
  const OpShape &op = spec.anchor;
  if (op.kind == OpKind::QuantizedMatmul && dtypeInfo(op.dtype).support != DTypeSupport::Supported)
    return absl::UnimplementedError(
        absl::StrCat("quantized_matmul: dtype ", dtypeName(op.dtype), " is not supported"));

  mlir::DialectRegistry registry;
  registry.insert<mlir::arith::ArithDialect, mlir::func::FuncDialect, mlir::gpu::GPUDialect,
                  mlir::math::MathDialect, mlir::memref::MemRefDialect, mlir::scf::SCFDialect,
                  mlir::spirv::SPIRVDialect, mlir::vector::VectorDialect>();
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  DiagnosticCapture diagnostics(context);
  std::string name = spec.name();
  auto fail = [&](const std::string &what) {
    return absl::InternalError(absl::StrCat(
        "kernel ", name, ": ", what, diagnostics.text().empty() ? "" : ": ", diagnostics.text()));
  };

  mlir::OpBuilder b(&context);
  mlir::Location loc = mlir::NameLoc::get(b.getStringAttr(name));
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);
  mlir::Attribute env = mlir::parseAttribute(targetEnvText(target), &context);
  if (!env)
    return fail("bad spirv.target_env");
  (*module)->setAttr(mlir::spirv::getTargetEnvAttrName(), env);

  spv::KernelPlan plan = spv::planSpec(spec, target);
  // A rope epilogue rotates pairs of rows: both must end in the invocation that stores them.
  bool ropeEpilogue = spv::hasRopeTail(spec);
  if (ropeEpilogue && (plan.workgroupRows || plan.rowsPerSubgroup % 2 != 0))
    return absl::UnimplementedError(absl::StrCat(
        "no fused SPIR-V kernel for a rope epilogue on a schedule of ", plan.rowsPerSubgroup,
        plan.workgroupRows ? " rows a workgroup" : " row(s) a cluster",
        " (it needs pairs of rows in one invocation)"));
  if (hasSiblingProduct(spec) && (plan.workgroupRows || plan.splitWords == 0))
    return absl::UnimplementedError(absl::StrCat(
        "no fused SPIR-V kernel for a sibling product on the ",
        plan.workgroupRows ? "workgroup-rows schedule" : "schedule of whole blocks a lane",
        " (only the split schedule decodes two matrices' rows against one x)"));
  const bool paramsBinding = target.paramsInBuffer && plan.pushConstantWords > 0;
  const size_t numBindings = plan.bindings.size() + (paramsBinding ? 1 : 0);
  if (target.maxStorageBuffers > 0 && numBindings > target.maxStorageBuffers)
    return absl::UnimplementedError(absl::StrCat("kernel ", name, " binds ", numBindings,
                                                 " storage buffers, the device at most ",
                                                 target.maxStorageBuffers));
  mlir::gpu::GPUFuncOp func = createKernelFunc(b, *module, plan, target.paramsInBuffer);
  b.setInsertionPointToStart(&func.getBody().front());
  spv::Emitter e(b, loc, func, target, plan);
  e.setMember(static_cast<int>(spec.prologue.size()));
  absl::Status status =
      spv::isContraction(op.kind) ? spv::emitContraction(e, op, spec) : spv::emitPointwise(e, op);
  if (!status.ok())
    return status;
  b.create<mlir::gpu::ReturnOp>(loc);
  if (spec.injectFailure) // test hook: an op the lowering cannot take
    b.create<mlir::func::CallOp>(loc, "missing", mlir::TypeRange{});
  if (mlir::failed(mlir::verify(*module)))
    return fail("emitted IR does not verify");
  if (absl::Status s = spv::legalizeForSpirv(func); !s.ok())
    return fail(std::string(s.message()));
  // Bindings no member writes and the kernel never sees written (SpirvTarget::readOnlyBindings).
  uint64_t readOnly = 0;
  if (target.readOnlyBindings) {
    auto operand = [&](size_t m, uint32_t i) {
      if (m < plan.bindingBase.size())
        readOnly |= uint64_t(1) << (plan.bindingBase[m] + i);
    };
    size_t anchorMember = spec.prologue.size();
    if (op.kind == OpKind::QuantizedMatmul) {
      for (const StackedSegment &seg : stackedSegments(spec))
        operand(static_cast<size_t>(seg.member), 0); // W (of each stacked product)
      if (hasSiblingProduct(spec))
        operand(anchorMember + 1, 0); // the sibling's W
      if (spec.prologue.empty())
        operand(anchorMember, 1); // x (with a norm prologue the norm's in and weight instead)
      else {
        operand(0, 0);
        operand(0, 1);
      }
    } else if (spec.attentionOverHeads) {
      operand(0, 0); // q
      operand(0, 1); // K
      operand(2, 1); // V
    }
  }
  if (paramsBinding && target.readOnlyBindings)
    readOnly |= uint64_t(1) << plan.bindings.size();
  uint64_t coherent = 0;
  if (plan.attentionSplits > 1)
    coherent = (uint64_t(1) << plan.scratchBinding) | (uint64_t(1) << (plan.bindingBase[0] + 2));
  if (mlir::failed(lowerToSpirv(*module, readOnly)))
    return fail("lowering to SPIR-V failed");

  llvm::SmallVector<mlir::spirv::ModuleOp> spirvModules((*module).getOps<mlir::spirv::ModuleOp>());
  if (spirvModules.size() != 1)
    return fail("expected one spirv.module");
  llvm::SmallVector<uint32_t, 0> binary;
  if (mlir::failed(mlir::spirv::serialize(spirvModules[0], binary)))
    return fail("serialization failed");

  SpirvKernel kernel;
  kernel.name = name;
  kernel.words.assign(binary.begin(), binary.end());
  decorateCoherent(kernel.words, coherent);
  if (target.denormPreserve)
    addDenormPreserve(kernel.words);
  if (absl::Status s = validateSpirv(kernel.words); !s.ok())
    return fail(std::string(s.message()));
  if (target.optimize) {
    absl::StatusOr<std::vector<uint32_t>> optimized = optimizeSpirv(kernel.words);
    if (!optimized.ok())
      return fail(std::string(optimized.status().message()));
    if (absl::Status s = validateSpirv(*optimized); !s.ok())
      return fail(absl::StrCat("after spirv-opt: ", s.message()));
    kernel.words = std::move(*optimized);
  }
  kernel.entryPoint = "main";
  kernel.localSize = {plan.workgroupSize, 1, 1};
  kernel.bindings = plan.bindings;
  kernel.paramsInBuffer = paramsBinding;
  std::vector<const OpShape *> members = spv::membersOf(spec);
  for (size_t m = 0; m < members.size(); ++m) {
    const OpInfo &info = opInfo(members[m]->kind);
    for (uint8_t i = 0; i < info.numBuffers; ++i) {
      kernel.bindingMembers.push_back(static_cast<uint8_t>(m));
      kernel.bindingOperands.push_back(i);
    }
    for (uint8_t i = 0; i < info.numInts; ++i) {
      kernel.pushConstantMembers.push_back(static_cast<uint8_t>(m));
      kernel.pushConstantInts.push_back(i);
    }
  }
  if (spec.attentionOverHeads) {
    kernel.extraPushWords = kAttnExtraWords;
    kernel.perHead = true;
    kernel.attentionSplits = plan.attentionSplits;
    if (plan.attentionSplits > 1) {
      kernel.bindingMembers.push_back(kScratchMember);
      kernel.bindingOperands.push_back(0);
      kernel.scratchWordsPerHead =
          1 + plan.attentionSplits * static_cast<uint32_t>(spec.anchor.ints[0] + 2);
    }
  }
  kernel.anchorMember = static_cast<uint8_t>(spec.prologue.size());
  kernel.kind = op.kind;
  kernel.unitsPerGroup = plan.unitsPerGroup;
  kernel.maxGroups = plan.maxGroups;
  if (spec.stackedProducts) {
    uint64_t total = 0;
    for (uint32_t g : spv::stackedGroups(spec, plan))
      total += g;
    if (total > UINT32_MAX)
      return absl::UnimplementedError(
          absl::StrCat("kernel ", name, ": stacked products need ", total, " workgroups"));
    kernel.fixedGroups = static_cast<uint32_t>(total);
  }
  return kernel;
}

} // namespace sinter::codegen
