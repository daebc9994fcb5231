// CpuEmitter.h - building blocks of the CPU kernel builders (internal to codegen/llvm/).
//
// Kernels are written with scf loops, arith and vector ops on values, and LLVM-dialect pointers
// for memory: buffers are byte arrays with no alignment guarantee, so every load and store is an
// align-1 llvm.load/llvm.store through an i8 GEP. Integers are i64 throughout (scf.for accepts
// them), which keeps index casts out of the IR.
#ifndef SINTER_CODEGEN_LLVM_CPUEMITTER_H
#define SINTER_CODEGEN_LLVM_CPUEMITTER_H

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "codegen/Dequant.h"
#include "codegen/KernelSpec.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace sinter::codegen::cpu {

/// f32 lanes of the vectors the builders use (one AVX-512 register; LLVM splits it on AVX2).
inline constexpr int64_t kLanes = 16;

/// An emitter positioned inside one kernel function.
class Emitter {
public:
  Emitter(mlir::OpBuilder &b, mlir::Location loc, mlir::Value buffers, mlir::Value ints)
      : b(b), loc(loc), buffers_(buffers), ints_(ints) {}

  mlir::OpBuilder &b;
  mlir::Location loc;
  /// The host has AVX-512 VNNI (and BW) and activations may be quantized: Q4_0 and Q8_0
  /// contractions use int8 dot products (ContractionKernels.cpp).
  bool int8Dot = false;

  mlir::Type i64() { return b.getI64Type(); }
  mlir::Type f32() { return b.getF32Type(); }
  mlir::Type ptrType();
  mlir::VectorType vecF32(int64_t lanes) { return mlir::VectorType::get({lanes}, f32()); }

  mlir::Value c64(int64_t v);
  mlir::Value cf32(double v);
  mlir::Value zeros(int64_t lanes); ///< f32 0, or a zero vector of `lanes`

  /// Base address of buffer operand `i` of the current member (loaded at the point of the call),
  /// or the value overrideBuffer gave it.
  mlir::Value buffer(int i);
  /// Integer argument `i` of `shape` (the current member's): a constant when it is static, else
  /// loaded from ints.
  mlir::Value intArg(const OpShape &shape, int i);
  /// The member of a fused kernel (spec order: prologue, anchor, epilogue) whose operands
  /// buffer() and intArg() read: buffers[3 m + i], ints[5 m + i]. 0 for single-op kernels.
  void setMember(int m) { member_ = m; }
  /// From now on buffer(i) of the current member is `address` (e.g. a stack copy of x).
  void overrideBuffer(int i, mlir::Value address) {
    overrides_.push_back({3 * member_ + i, address});
  }

  // i64 arithmetic.
  mlir::Value add(mlir::Value a, mlir::Value c);
  mlir::Value sub(mlir::Value a, mlir::Value c);
  mlir::Value mul(mlir::Value a, mlir::Value c);
  mlir::Value divui(mlir::Value a, mlir::Value c);
  mlir::Value remui(mlir::Value a, mlir::Value c);
  mlir::Value minsi(mlir::Value a, mlir::Value c);
  /// a - a % m: the largest multiple of the constant m not above a (a >= 0).
  mlir::Value roundDown(mlir::Value a, int64_t m);

  // Floats (scalars or vectors).
  mlir::Value fadd(mlir::Value a, mlir::Value c);
  mlir::Value fmul(mlir::Value a, mlir::Value c);
  mlir::Value fma(mlir::Value a, mlir::Value x, mlir::Value c);
  /// Sum of a vector's lanes (reassociated: a tree, not a chain).
  mlir::Value reduceAdd(mlir::Value v);
  mlir::Value reduceMax(mlir::Value v);

  // Memory: element indices count f32 elements from `base`.
  mlir::Value gepBytes(mlir::Value base, mlir::Value bytes);
  mlir::Value gepF32(mlir::Value base, mlir::Value index);
  /// f32 at base[index], or vector<lanes x f32> at base[index..) when lanes > 0.
  mlir::Value loadF32(mlir::Value base, mlir::Value index, int64_t lanes = 0);
  void storeF32(mlir::Value base, mlir::Value index, mlir::Value value);

  /// for (iv = lb; iv < ub; iv += step) with loop-carried values; returns their final values.
  using LoopBody =
      llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value iv, mlir::ValueRange iters)>;
  llvm::SmallVector<mlir::Value> forLoop(mlir::Value lb, mlir::Value ub, int64_t step,
                                         mlir::ValueRange inits, LoopBody body);
  void forLoop(mlir::Value lb, mlir::Value ub, int64_t step,
               llvm::function_ref<void(mlir::Value iv)> body);

private:
  mlir::Value buffers_;
  mlir::Value ints_;
  int member_ = 0;
  llvm::SmallVector<std::pair<int, mlir::Value>, 2> overrides_;
};

/// Dequant.h's ByteReader over LLVM pointers (block = the block's address).
class PtrByteReader : public ByteReader {
public:
  mlir::Value loadBytes(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block, int64_t offset,
                        int64_t count) override;
  mlir::Value loadU16(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block, int64_t offset,
                      int64_t count) override;
  mlir::Value loadU32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block,
                      int64_t offset) override;
  mlir::Value loadF32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block, int64_t offset,
                      int64_t count) override;
};

/// Emits the body of a kernel whose anchor is an element-wise op, a row reduction, rope or a
/// copy, computing [begin, end) of its parallel dimension.
absl::Status emitPointwiseKernel(Emitter &e, const OpShape &op, mlir::Value begin, mlir::Value end);
/// Emits the body of a contraction kernel: matmul, quantized_matmul, attn_score, attn_value.
absl::Status emitContractionKernel(Emitter &e, const OpShape &op, mlir::Value begin,
                                   mlir::Value end);

/// rms_norm(in, weight, out, size, eps) of the current member, the row written to `out`.
void emitRmsNormRow(Emitter &e, const OpShape &op, mlir::Value out);

/// Adds `void @name(ptr buffers, ptr ints, i64 begin, i64 end)` computing `spec` to `module`.
/// Fused specs (CpuCompiler's row launches): a quantized_matmul anchor over [begin, end) of its
/// rows, with
/// - a prologue [rms_norm] whose out is the anchor's x: the call computes the normalized vector
///   into a stack buffer (with the rms_norm kernel's code, so bit for bit the same) and reads x
///   from there; the call with begin == 0 also stores it to the norm's out unless bit 0 of
///   unstoredOutputs is set (another launch of the group stores it);
/// - an epilogue of element-wise ops (silu, add, element_mul), each applied to elements
///   [begin, end) after the rows are stored, with the code of its own kernel.
/// Member m's buffer operand i is buffers[3 m + i] and its integer i is ints[5 m + i] (spec
/// order: prologue, anchor, epilogue). Unimplemented for any other fused spec.
absl::Status buildKernel(mlir::ModuleOp module, const KernelSpec &spec, llvm::StringRef name,
                         bool int8Dot = false);

} // namespace sinter::codegen::cpu

#endif // SINTER_CODEGEN_LLVM_CPUEMITTER_H
