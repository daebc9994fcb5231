// SpirvEmitter.h - building blocks of the SPIR-V kernel builders (internal to codegen/spirv/).
//
// Kernels are gpu.func bodies written with scf, arith and memref on `index` addresses (32-bit in
// SPIR-V) over storage buffers declared as runtime arrays of f32, u32 or vec4 (SpirvBindingKind).
// Weights are byte-addressed through u32 words (WordReader), so no 8/16-bit storage is needed.
// The op's integers come from a push-constant block of u32 words, one per integer argument.
#ifndef SINTER_CODEGEN_SPIRV_SPIRVEMITTER_H
#define SINTER_CODEGEN_SPIRV_SPIRVEMITTER_H

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "codegen/Dequant.h"
#include "codegen/ElementwiseMath.h"
#include "codegen/KernelSpec.h"
#include "codegen/spirv/SpirvCompiler.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace sinter::codegen::spv {

/// How a kernel is laid out: its bindings, workgroup size and units per workgroup.
struct KernelPlan {
  std::vector<SpirvBindingKind> bindings;
  /// Per member (prologue, anchor, epilogue): its first binding and first push-constant word.
  std::vector<uint32_t> bindingBase{0};
  std::vector<uint32_t> wordBase{0};
  uint32_t workgroupSize = 64;
  uint32_t unitsPerGroup = 1;
  /// Row-parallel kernels (quantized_matmul, attn_score): lanes cooperating on one unit.
  uint32_t threadsPerUnit = 1;
  /// quantized_matmul: output rows per subgroup (x is loaded once for all of them), and blocks a
  /// lane decodes per step (2 when 2-byte-aligned blocks then come in 4-byte-aligned pairs).
  uint32_t rowsPerSubgroup = 1; ///< rows per cluster of lanesPerRow lanes (x reused)
  /// int8-x quantized_matmul: a lane's first batch of W loaded before x is quantized.
  bool prefetch = false;
  uint32_t blocksPerStep = 1;
  /// quantized_matmul: lanes that share one row (a power of two dividing the subgroup); fewer
  /// than S when a row has fewer steps than lanes, so a subgroup works on S / lanesPerRow row
  /// sets at once instead of idling.
  uint32_t lanesPerRow = 0;
  /// quantized_matmul Q4_0/Q8_0 with split blocks (SpirvTarget::qmatmulSplitBlocks): the quant
  /// words per block, each taken by its own lane; 0 for the block-per-lane schedule.
  uint32_t splitWords = 0;
  /// Split schedule: blocks a lane loads before it computes any of them.
  uint32_t splitUnroll = 1;
  /// Split schedule with x quantized to int8 in workgroup memory and integer dot products
  /// (SpirvTarget::qmatmulIntDot where the device has them).
  bool intDotX = false;
  /// int8-x schedule: blocks a lane loads before it computes any of them.
  uint32_t intDotUnroll = 1;
  /// int8-x schedule: consecutive quant words of a block a lane takes (1, 2 or 4, dividing
  /// splitWords): splitWords / laneWords lanes share a block.
  uint32_t laneWords = 1;
  /// int8-x schedule, a whole block a lane: d taken from the block's quant words
  /// (loadLaneWords' window) instead of a word of its own.
  bool blockWindow = true;
  /// Split blocks with every invocation of the workgroup on the same rowsPerSubgroup rows
  /// (SpirvTarget::qmatmulWorkgroupRows; lanesPerRow is then the workgroup size and
  /// intDotUnroll the blocks an invocation loads at once).
  bool workgroupRows = false;
  /// When nonzero, the most workgroups dispatched (SpirvKernel::maxGroups): each loops over the
  /// tiles of unitsPerGroup units g, g + maxGroups, ... (int8-x quantized_matmul).
  uint32_t maxGroups = 0;
  /// Attention over heads: workgroups per head, and the scratch binding (when more than one).
  uint32_t attentionSplits = 1;
  uint32_t scratchBinding = 0;
  /// u32 words of the push-constant block (the op's integer arguments).
  uint32_t pushConstantWords = 0;
};

/// The plan of the kernel of `op` on `target` (SpirvCompiler.cpp).
KernelPlan planKernel(const OpShape &op, const SpirvTarget &target);
/// True for the anchors emitContraction builds.
bool isContraction(OpKind kind);

/// An emitter positioned inside the kernel's gpu.func.
class Emitter {
public:
  Emitter(mlir::OpBuilder &b, mlir::Location loc, mlir::gpu::GPUFuncOp func,
          const SpirvTarget &target, const KernelPlan &plan)
      : b(b), loc(loc), target(target), plan(plan), func_(func) {}

  mlir::OpBuilder &b;
  mlir::Location loc;
  const SpirvTarget &target;
  const KernelPlan &plan;

  mlir::Type f32() { return b.getF32Type(); }
  mlir::Type i32() { return b.getI32Type(); }

  mlir::Value ci(int64_t v);  ///< index constant
  mlir::Value c32(int64_t v); ///< i32 constant
  mlir::Value cf(double v);   ///< f32 constant

  /// Buffer operand `i` of the current member (a memref of its binding kind).
  mlir::Value buffer(int i) { return memberBuffer(member_, i); }
  /// Integer argument `i` of `op`, the current member, as index: a constant when static, else
  /// its push-constant word.
  mlir::Value intArg(const OpShape &op, int i) { return memberInt(member_, op, i); }
  /// The same for member `m` of the spec.
  mlir::Value memberBuffer(int m, int i) {
    return func_.getArgument(plan.bindingBase[memberIndex(m)] + i);
  }
  /// The binding at index `binding` of the kernel (attention's scratch).
  mlir::Value binding(uint32_t binding) { return func_.getArgument(binding); }
  mlir::Value memberInt(int m, const OpShape &op, int i);
  /// Push-constant word `word` as index (words past the members' integers: attention's extras).
  mlir::Value pushWord(uint32_t word);
  /// An array of `n` elements of `element` in Function variables, declared at the function's
  /// start (where SPIR-V wants them) whatever the insertion point.
  mlir::Value functionArray(mlir::Type element, int64_t n);
  /// Makes member `m` the one buffer() and intArg() refer to.
  void setMember(int m) { member_ = m; }
  /// A stacked kernel's segment (codegen::stackedSegments) is emitted as a kernel of its own:
  /// member indices from `from` on are moved by `shift` (its product is then member `from`, its
  /// tail the members after it), groupId() counts from `base` (the segment's first workgroup;
  /// null for 0), and the workgroup arrays of the segments before it are handed out again
  /// (only one segment runs in a workgroup). endSegment() restores plain indices.
  void beginSegment(int from, int shift, mlir::Value base);
  void endSegment();
  /// A workgroup-memory array of `n` elements of `element`, declared at the function's start;
  /// within a segment, one an earlier segment declared with the same type when there is one.
  mlir::Value workgroupArray(mlir::Type element, int64_t n);
  /// Hands every workgroup array declared so far out again: for code that runs after all their
  /// uses are done, behind a barrier (rms_norm's rescue pass of a quantized_matmul).
  void reuseWorkgroupArrays() {
    for (SharedArray &a : sharedArrays_)
      a.taken = false;
  }

  // index arithmetic (unsigned where it matters).
  mlir::Value add(mlir::Value a, mlir::Value c);
  mlir::Value sub(mlir::Value a, mlir::Value c);
  mlir::Value mul(mlir::Value a, mlir::Value c);
  mlir::Value divu(mlir::Value a, mlir::Value c);
  mlir::Value remu(mlir::Value a, mlir::Value c);
  mlir::Value minu(mlir::Value a, mlir::Value c);
  mlir::Value ult(mlir::Value a, mlir::Value c); ///< a < c (i1)
  mlir::Value toIndex(mlir::Value i32Value);
  mlir::Value toI32(mlir::Value index);

  // f32 arithmetic.
  mlir::Value fadd(mlir::Value a, mlir::Value c);
  mlir::Value fmul(mlir::Value a, mlir::Value c);
  mlir::Value fma(mlir::Value a, mlir::Value x, mlir::Value c);
  mlir::Value select(mlir::Value cond, mlir::Value a, mlir::Value c);

  /// Local invocation index (x) and the linear workgroup id (y * numWorkgroups.x + x).
  mlir::Value threadId();
  mlir::Value groupId();
  /// The subgroup of this invocation within its workgroup, and its lane within the subgroup.
  mlir::Value subgroupId();
  mlir::Value laneId();
  /// A workgroup barrier that also makes storage-buffer writes visible to the workgroup.
  void barrier();

  /// memref.load / memref.store at an element index.
  mlir::Value load(mlir::Value memref, mlir::Value index);
  void store(mlir::Value value, mlir::Value memref, mlir::Value index);

  /// for (iv = lb; iv < ub; iv += step) with loop-carried values; returns their final values.
  using LoopBody =
      llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value iv, mlir::ValueRange iters)>;
  llvm::SmallVector<mlir::Value> forLoop(mlir::Value lb, mlir::Value ub, mlir::Value step,
                                         mlir::ValueRange inits, LoopBody body);
  void forLoop(mlir::Value lb, mlir::Value ub, mlir::Value step,
               llvm::function_ref<void(mlir::Value iv)> body);
  /// if (cond) body().
  void ifThen(mlir::Value cond, llvm::function_ref<void()> body);
  /// if (cond) then() else otherwise().
  void ifElse(mlir::Value cond, llvm::function_ref<void()> then,
              llvm::function_ref<void()> otherwise);
  /// cond ? then() : otherwise(), for values that must only be computed when selected.
  mlir::Value ifValue(mlir::Value cond, mlir::Type type, llvm::function_ref<mlir::Value()> then,
                      llvm::function_ref<mlir::Value()> otherwise);

  /// Sum of `v` over aligned clusters of `lanes` lanes of a subgroup: the subgroup reduction when
  /// lanes is the subgroup size, a butterfly of xor shuffles otherwise. Every lane gets the sum.
  mlir::Value clusterSum(mlir::Value v, uint32_t lanes);
  mlir::Value clusterMax(mlir::Value v, uint32_t lanes);

private:
  int memberIndex(int m) const { return m >= shiftFrom_ ? m + shift_ : m; }

  mlir::gpu::GPUFuncOp func_;
  int member_ = 0;
  int shiftFrom_ = 0, shift_ = 0;
  mlir::Value groupBase_;
  struct SharedArray {
    mlir::Type type;
    mlir::Value value;
    bool taken = false;
  };
  std::vector<SharedArray> sharedArrays_;
};

/// Dequant.h's ByteReader over a Word binding: `block` is the block's byte address (index).
/// Bytes at any alignment are cut out of the block's 32-bit words; each block's words are loaded
/// once (cached until the next block) however many groups read them.
class WordReader : public ByteReader {
public:
  /// `alignment`: what the caller guarantees about every block address (4, 2 or 1 bytes).
  WordReader(Emitter &e, mlir::Value words, int64_t alignment)
      : e_(e), words_(words), alignment_(alignment) {}

  /// Reads block + offset + o for the offset o the dequantizer asks: lets a block at a static
  /// distance from an aligned base (the second block of a Q4_0 pair) be read with static shifts,
  /// sharing the base's cached words.
  void setOffset(int64_t offset) { offset_ = offset; }

  mlir::Value loadBytes(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block, int64_t offset,
                        int64_t count) override;
  mlir::Value loadU16(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block, int64_t offset,
                      int64_t count) override;
  mlir::Value loadU32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block,
                      int64_t offset) override;
  mlir::Value loadF32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block, int64_t offset,
                      int64_t count) override;

private:
  /// The 4 bytes at block + 4 i, as one i32, whatever the block's alignment.
  mlir::Value alignedWord(mlir::Value block, int64_t i);
  /// Bits [8 * byte, 8 * byte + bits) of the block, bits <= 32 and not crossing a word when
  /// bits == 32 is asked at a multiple of 4.
  mlir::Value field(mlir::Value block, int64_t byte, int64_t bits);

  Emitter &e_;
  mlir::Value words_;
  int64_t alignment_;
  int64_t offset_ = 0;
  mlir::Value block_;
  mlir::Value wordIndex_, shift_; ///< block / 4 and 8 * (block % 4) when not word-aligned
  std::map<int64_t, mlir::Value> raw_, aligned_;
};

/// A workgroup-memory array of `n` elements of `element` (a memref in the Workgroup class):
/// Emitter::workgroupArray.
inline mlir::Value workgroupArray(Emitter &e, mlir::Type element, int64_t n) {
  return e.workgroupArray(element, n);
}

/// rope's angles (PointwiseKernels.cpp): the table of pair i's turns per position (a 64-bit
/// fixed-point fraction of f_i / 2 pi in two i32 words, f_i = freq_base^(-2i / head_dim)) for a
/// rope shape with a static head_dim, as Function variables; the sine and cosine of pair
/// `pair` (index) at `pos` (i32) from it; and the rotation of (x0, x1) by them.
mlir::Value ropeTable(Emitter &e, const OpShape &op);
SinCos ropeSinCos(Emitter &e, mlir::Value table, mlir::Value pos, mlir::Value pair);
std::pair<mlir::Value, mlir::Value> ropeRotate(Emitter &e, const SinCos &sc, mlir::Value x0,
                                               mlir::Value x1);

/// The power of two j of rms_norm's rescue (ElementwiseMath.h, emitRmsRescueExponent) for the
/// row of `n` floats element(i), from the largest biased exponent that the subgroup's lanes find
/// striding over the row (PointwiseKernels.cpp). Every lane of the subgroup gets the same j, and
/// so does every subgroup that looks at the same row (a maximum does not depend on the order).
mlir::Value rmsRescueExponent(Emitter &e, mlir::Value n,
                              llvm::function_ref<mlir::Value(mlir::Value i)> element);

/// quantized_matmul's kernel body (QMatmulKernels.cpp), with the fused members of `spec`.
void emitQMatmulKernel(Emitter &e, const OpShape &op, const KernelSpec &spec);
/// A stacked spec's kernel (KernelSpec::stackedProducts): each product's rows and tail by its
/// own workgroups (stackedGroups), one after the other.
void emitStackedQMatmul(Emitter &e, const KernelSpec &spec);
/// The workgroups of each segment of a stacked spec under `plan` (codegen::stackedSegments
/// order): a tile of plan.unitsPerGroup rows a workgroup, at most plan.maxGroups when set.
std::vector<uint32_t> stackedGroups(const KernelSpec &spec, const KernelPlan &plan);

/// True for the formats with the fast quant decoder (Q4_0, Q8_0: 2-byte scale, then u32 words
/// of quants), which the pair and split schedules of quantized_matmul need.
bool hasFastQuantDecoder(DType dtype);

/// Emits the kernel body of a contraction (quantized_matmul, matmul, attn_score, attn_value);
/// `spec` gives the fused members around it (quantized_matmul only).
absl::Status emitContraction(Emitter &e, const OpShape &op, const KernelSpec &spec);
/// Emits the kernel body of an element-wise op, softmax, rms_norm, rope or a copy.
absl::Status emitPointwise(Emitter &e, const OpShape &op);

/// Rewrites the vectors wider than 4 lanes, and the i8/i16/f16 values, that Dequant.h emits into
/// scalar i32/f32 code SPIR-V's Shader capability accepts (narrow integers held zero-extended in
/// i32, halves widened to f32 with integer ops).
absl::Status legalizeForSpirv(mlir::Operation *root);

} // namespace sinter::codegen::spv

#endif // SINTER_CODEGEN_SPIRV_SPIRVEMITTER_H
