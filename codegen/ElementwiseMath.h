// ElementwiseMath.h - the element-wise math of the graph ops as MLIR-emitting helpers.
//
// Written once with arith ops only (no libm calls, no target intrinsics), so the CPU and the
// SPIR-V code generators, and every fused epilogue, compute silu, add and element_mul the same
// way, and rms_norm's kernels share one rescue for rows at the ends of f32's range. Each helper
// works on f32 scalars and on vectors of f32 alike unless it says otherwise. Internal to codegen/.
#ifndef SINTER_CODEGEN_ELEMENTWISEMATH_H
#define SINTER_CODEGEN_ELEMENTWISEMATH_H

#include <cstdint>

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "mlir/IR/ValueRange.h"
#include "support/Ops.h"

namespace sinter::codegen {

/// A float constant of type `type` (f32, f64, or a vector of them: a splat).
mlir::Value floatConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type, double value);
/// An integer constant of type `type` (an integer or a vector of integers: a splat).
mlir::Value intConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type, int64_t value);
/// `scalar` broadcast to vector<lanes x type(scalar)>; `scalar` itself when lanes == 0.
mlir::Value splat(mlir::OpBuilder &b, mlir::Location loc, mlir::Value scalar, int64_t lanes);

/// `value` (a float or vector of floats) widened exactly to `type` (arith.extf).
mlir::Value extendFloat(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type, mlir::Value value);

/// a * b + c, allowed to become one fused multiply-add (LLVM's `contract`).
mlir::Value emitFma(mlir::OpBuilder &b, mlir::Location loc, mlir::Value a, mlir::Value x,
                    mlir::Value c);

/// How the range reductions round a float to an integer. Cpu adds and subtracts 1.5 * 2^23 (no
/// intrinsic, no libm call). Gpu uses math.roundeven: GPU compilers (Mesa's NIR, vendors') treat
/// SPIR-V float arithmetic as reassociable unless decorated and fold (x + c) - c back to x.
enum class MathTarget { Cpu, Gpu };

/// e^x in f32, within 2 ulp over the range where the result is a normal float; 0 below
/// -87.3, +inf above 88.7, NaN for NaN (range reduction by ln 2, then a degree-6 polynomial).
mlir::Value emitExp(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                    MathTarget target = MathTarget::Cpu);

/// sin and cos of one angle.
struct SinCos {
  mlir::Value sin;
  mlir::Value cos;
};

/// sin(x) and cos(x) in f32 for |x| <= pi (a few 1e-8 absolute): reduction by pi/2 in two parts,
/// then Cephes' minimax polynomials on [-pi/4, pi/4] and the quadrant's signs. Larger arguments
/// lose accuracy with their size; the caller reduces them first (rope works in turns).
SinCos emitSinCos(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                  MathTarget target = MathTarget::Cpu);

/// silu(x) = x / (1 + e^-x).
mlir::Value emitSilu(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                     MathTarget target = MathTarget::Cpu);

// rms_norm's range. The kernels sum x^2 in f32 (the fast path, unchanged), which overflows once
// the sum passes 3.4e38 (4096 values near 3e17) and loses squares below 2^-126 (|x| below 1e-19,
// subnormals). Where that sum cannot be trusted a rarely taken, row-uniform rescue re-reads the
// row with every x scaled exactly by the power of two 2^j that brings the largest |x| to [1, 4),
// sums those squares and forms the scale so that nothing on the way overflows or underflows when
// the result is finite. The reductions are per target; these pieces are shared.

/// True (i1) when `sumSquares`, an rms_norm row's f32 sum of squares, cannot be trusted: +inf
/// (a square or the sum overflowed) or below 2^-60 (squares may have underflowed). Above 2^-60,
/// squares under 2^-126, lost or not, change the sum by at most n 2^-126 / 2^-60 = n 2^-66
/// relative (below 2^-30 for any n < 2^36), every |x| is below 2^64, and the f32 scale and the
/// products of x and the weights are in range. NaN is trusted: it makes every output NaN, as the
/// reference's. An all-zero row (sum 0) takes the rescue too, which gives the reference's result.
/// Scalar f32 only.
mlir::Value emitRmsRescueNeeded(mlir::OpBuilder &b, mlir::Location loc, mlir::Value sumSquares);

/// The biased exponent field of `x` (f32 or a vector of f32) as i32 (of the same shape): 0 for
/// zeros and subnormals, 255 for infinities and NaN. Its maximum over a row gives the rescue's j.
mlir::Value emitBiasedExponent(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);

/// The rescue's power of two j (i32) from the largest biased exponent of the row (i32): 2^j |x|
/// is in [1, 4) for the largest |x| when it is normal, at least 2^-23 when it is subnormal, and
/// below 4 for every finite x; j is in [-126, 126], so 2^j and 2^-j are normal floats.
mlir::Value emitRmsRescueExponent(mlir::OpBuilder &b, mlir::Location loc,
                                  mlir::Value maxBiasedExponent);

/// x * 2^j (x f32 or a vector of f32, j an i32 scalar in [-126, 126]), exact whenever the result
/// is a normal float, for subnormal x too: their bits are scaled as an integer, so a device that
/// flushes subnormal operands still gets them. Results below 2^-126 may be rounded or flushed to
/// zero. Infinities and NaN stay.
mlir::Value emitScaleByPowerOfTwo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                                  mlir::Value j);

/// The factors of a rescued rms_norm row: y_i = ((x_i 2^j) w_i inverse) post.
struct RmsRescueScale {
  mlir::Value inverse;
  mlir::Value post;
};

/// From the sum of squares of the scaled row (Σ (x 2^j)^2, at most 16 n), n as f32, eps and j:
/// mean + eps = 2^-2j (S / n + eps 2^2j), so y = x 2^j w / sqrt(S / n + eps 2^2j) (post = 1).
/// Where eps 2^2j passes 2^100, S / n (at most 16) is below its rounding: eps alone rules, and
/// y = x 2^j w / sqrt(eps) 2^-j (inverse = 1 / sqrt(eps), post = 2^-j) keeps eps 2^2j from
/// overflowing and 2^-j / sqrt(eps) from underflowing on the way. A zero row with eps = 0 gets
/// an infinite inverse, hence 0 * inf = NaN as the reference's 1 / sqrt(0). f32 scalars.
RmsRescueScale emitRmsRescueScale(mlir::OpBuilder &b, mlir::Location loc,
                                  mlir::Value scaledSumSquares, mlir::Value size, double eps,
                                  mlir::Value j);

/// True for the ops emitElementwise handles: silu, element_mul, add.
bool isElementwise(OpKind kind);

/// The element-wise op `kind` applied to its inputs (one for silu, two otherwise).
mlir::Value emitElementwise(mlir::OpBuilder &b, mlir::Location loc, OpKind kind,
                            mlir::ValueRange inputs, MathTarget target = MathTarget::Cpu);

} // namespace sinter::codegen

#endif // SINTER_CODEGEN_ELEMENTWISEMATH_H
