// KernelSpec.h - what one generated kernel computes, as a structural key (no MLIR).
//
// A kernel is an anchor op with optional prologue and epilogue ops (ARCHITECTURE.md, "Fusion").
// Each member is described by its OpShape: the op kind, dtype and float argument, and those of
// its integers that the code generator bakes in. Integers that are Plan parameters, or that a
// builder gains nothing from knowing (offsets, element counts), are read at run time, so one
// compiled function serves every head, layer and token with the same shape.
#ifndef SINTER_CODEGEN_KERNELSPEC_H
#define SINTER_CODEGEN_KERNELSPEC_H

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "support/Ops.h"

namespace sinter::codegen {

/// The C ABI of every CPU kernel. buffers[i] is the base address of the i-th buffer operand
/// (byte-addressed, no alignment assumed); ints[i] the i-th integer argument (all of them, baked
/// or not); [begin, end) the slice of the kernel's parallel dimension (parallelSize) to compute.
using KernelFn = void (*)(uint8_t *const *buffers, const int64_t *ints, int64_t begin, int64_t end);

/// One member op of a kernel, as the code generator sees it.
struct OpShape {
  OpKind kind = OpKind::Matmul;
  DType dtype = DType::F32;      ///< quantized_matmul's weights; F32 for every other op
  uint32_t scalarBits = 0;       ///< the float argument (eps, freq_base), bit for bit
  uint8_t staticMask = 0;        ///< bit i set: ints[i] is a compile-time constant
  std::array<int64_t, 5> ints{}; ///< the constant integers (0 where not static)

  bool isStatic(int i) const { return (staticMask >> i) & 1; }
  float scalar() const;
  friend bool operator==(const OpShape &a, const OpShape &b);
};

/// The integer slots of `kind` that builders specialise on when they are not parameters: loop
/// trip counts that let the code be unrolled and vectorized statically (n_cols of
/// quantized_matmul, n and k of matmul, head_dim of rope and attn_score).
uint8_t specializedInts(OpKind kind);

/// The shape of `op` when the integers whose bits are set in `paramMask` change between runs.
OpShape shapeOf(const OpCall &op, uint8_t paramMask);

/// A kernel: an anchor op and the ops fused before and after it. The first stage of the CPU code
/// generator builds single-op kernels only (prologue and epilogue empty).
struct KernelSpec {
  OpShape anchor;
  std::vector<OpShape> prologue;
  std::vector<OpShape> epilogue;
  /// Test hook: the builder emits IR that fails verification, to exercise the fallback path.
  bool injectFailure = false;
  /// An attention kernel: anchor attn_score, epilogue [softmax, attn_value], the group of three
  /// repeated over every head of a layer in one launch (the heads' offsets are affine in the
  /// head index; the runtime passes the head count and strides, see codegen/spirv/README.md).
  bool attentionOverHeads = false;
  /// Bit m set: member m (prologue, anchor, epilogue order) need not store its output, because
  /// another launch of the same fused kernel stores the same values (e.g. the rms_norm prologue
  /// that every projection of a horizontal group recomputes).
  uint32_t unstoredOutputs = 0;
  /// quantized_matmul: the n_rows the kernel will run with when the runtime knows it (0: not
  /// known), for schedules that depend on the grid's size (SpirvTarget::computeUnits). Stacked
  /// products' grid is known from their static row counts instead.
  uint32_t rowsHint = 0;
  /// Stacked products (Q, K and V after one rms_norm): the epilogue holds further
  /// quantized_matmul members, each followed by its own tail (an optional rope of its rows, an
  /// optional copy of them into a cache), as the anchor is by the members before the first of
  /// them. Every product reads the norm's output (the prologue's) with the anchor's dtype and
  /// n_cols, and has a static n_rows; one launch computes them all, the first workgroups taking
  /// the anchor's rows, the next the second product's, and so on (stackedSegments).
  bool stackedProducts = false;
  /// Bit m set: member m is an add or element_mul of the epilogue whose second input no member
  /// before it writes (the runtime checks the slots), so the kernel may load that input before
  /// it computes the product (the residual's load off the end of the critical path).
  uint32_t earlyInputs = 0;

  /// A byte string that is equal for two specs exactly when they compile to the same code.
  std::string key() const;
  /// A readable stem for the kernel's symbol and for logs, e.g. "quantized_matmul_q4_0_c2048".
  std::string name() const;
};

/// True when `spec`'s first epilogue member is a second quantized_matmul (the sibling) beside
/// its quantized_matmul anchor: the gate and up products of a SwiGLU after one rms_norm. The
/// sibling reads the same x (the norm's output) with the anchor's n_rows, n_cols and dtype from
/// its own W into its own out; a workgroup computes the same rows of both, and every binary
/// element-wise member after the sibling takes the sibling's output, row for row, as its second
/// input (silu(gate) * up with the members [silu, element_mul]).
inline bool hasSiblingProduct(const KernelSpec &spec) {
  return spec.anchor.kind == OpKind::QuantizedMatmul && !spec.stackedProducts &&
         !spec.epilogue.empty() && spec.epilogue[0].kind == OpKind::QuantizedMatmul;
}

/// One product of a stacked spec and its tail: `member` is the product's index in spec order
/// (prologue, anchor, epilogue), and the tail is the members after it up to the next product.
struct StackedSegment {
  int member = 0;
  const OpShape *product = nullptr;
  std::vector<OpShape> tail;
};
/// The segments of a stacked spec (KernelSpec::stackedProducts), in launch order; for any other
/// spec one segment, the anchor with the whole epilogue.
std::vector<StackedSegment> stackedSegments(const KernelSpec &spec);
/// The spec `seg` (one of stackedSegments(spec)) compiles as on its own: spec's prologue, the
/// product as anchor, its tail as epilogue, spec's rowsHint. Only the first segment stores the
/// prologue's output (spec's unstoredOutputs); the others leave it to the first.
KernelSpec segmentSpec(const KernelSpec &spec, const StackedSegment &seg);

/// The single-op kernel for `op` with the integers of `paramMask` as parameters.
KernelSpec singleOpSpec(const OpCall &op, uint8_t paramMask);

/// Output columns per unit of matmul's parallel dimension (one f32 vector).
inline constexpr int64_t kMatmulTile = 16;
/// Elements of d per unit of attn_value's parallel dimension.
inline constexpr int64_t kAttnValueTile = 16;

/// The size of `kind`'s parallel dimension for these integer arguments: output rows of
/// quantized_matmul; m * ceil(n / kMatmulTile) tiles of matmul; t of attn_score;
/// ceil(head_dim / kAttnValueTile) tiles of attn_value; elements of silu, element_mul and add;
/// 1 for softmax, rms_norm, rope and the copies (the whole op in one call).
uint64_t parallelSize(OpKind kind, const int64_t *ints);

/// Bytes an op of `kind` reads and writes, roughly: decides whether it is worth splitting.
uint64_t workBytes(OpKind kind, DType dtype, const int64_t *ints);

} // namespace sinter::codegen

#endif // SINTER_CODEGEN_KERNELSPEC_H
