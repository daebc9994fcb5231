// ElementwiseMath.h - the element-wise math of the graph ops as MLIR-emitting helpers.
//
// Written once with arith ops only (no libm calls, no target intrinsics), so the CPU and the
// SPIR-V code generators, and every fused epilogue, compute silu, add and element_mul the same
// way. Each helper works on f32 scalars and on vectors of f32 alike. Internal to codegen/.
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

/// True for the ops emitElementwise handles: silu, element_mul, add.
bool isElementwise(OpKind kind);

/// The element-wise op `kind` applied to its inputs (one for silu, two otherwise).
mlir::Value emitElementwise(mlir::OpBuilder &b, mlir::Location loc, OpKind kind,
                            mlir::ValueRange inputs, MathTarget target = MathTarget::Cpu);

} // namespace sinter::codegen

#endif // SINTER_CODEGEN_ELEMENTWISEMATH_H
