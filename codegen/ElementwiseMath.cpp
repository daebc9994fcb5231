// ElementwiseMath.cpp - exp, silu, the binary element-wise ops and rms_norm's range rescue, emitted
// with arith.
//
// exp follows the classic Cody-Waite scheme: n = round(x / ln 2) (the 1.5 * 2^23 trick on the CPU,
// math.roundeven on GPUs, see MathTarget), r = x - n ln 2 in two parts, e^r
// by Cephes' degree-6 minimax polynomial, and 2^n built in the exponent bits. NaN and the ends of
// the range are handled by selects so no poison (fptosi of NaN) reaches the result.
#include "codegen/ElementwiseMath.h"

#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"

namespace sinter::codegen {

using mlir::Type;
using mlir::Value;
namespace arith = mlir::arith;

namespace {

// The type with `type`'s shape and `element` as element type.
Type withElement(Type type, Type element) {
  if (auto v = mlir::dyn_cast<mlir::VectorType>(type))
    return mlir::VectorType::get(v.getShape(), element);
  return element;
}

// x rounded to the nearest integer (ties to even), as a float; |x| < 2^22.
Value roundToInteger(mlir::OpBuilder &b, mlir::Location loc, Value x, MathTarget target) {
  if (target == MathTarget::Gpu)
    return b.create<mlir::math::RoundEvenOp>(loc, x);
  Value magic = floatConstant(b, loc, x.getType(), 12582912.0); // 1.5 * 2^23
  return b.create<arith::SubFOp>(loc, b.create<arith::AddFOp>(loc, x, magic), magic);
}

} // namespace

Value floatConstant(mlir::OpBuilder &b, mlir::Location loc, Type type, double value) {
  Type element = mlir::getElementTypeOrSelf(type);
  auto attr = b.getFloatAttr(element, value);
  if (auto v = mlir::dyn_cast<mlir::VectorType>(type))
    return b.create<arith::ConstantOp>(loc, mlir::DenseElementsAttr::get(v, attr));
  return b.create<arith::ConstantOp>(loc, attr);
}

Value intConstant(mlir::OpBuilder &b, mlir::Location loc, Type type, int64_t value) {
  Type element = mlir::getElementTypeOrSelf(type);
  auto attr = b.getIntegerAttr(element, value);
  if (auto v = mlir::dyn_cast<mlir::VectorType>(type))
    return b.create<arith::ConstantOp>(loc, mlir::DenseElementsAttr::get(v, attr));
  return b.create<arith::ConstantOp>(loc, attr);
}

Value splat(mlir::OpBuilder &b, mlir::Location loc, Value scalar, int64_t lanes) {
  if (lanes == 0)
    return scalar;
  auto type = mlir::VectorType::get({lanes}, scalar.getType());
  return b.create<mlir::vector::BroadcastOp>(loc, type, scalar);
}

Value extendFloat(mlir::OpBuilder &b, mlir::Location loc, Type type, Value value) {
  return b.create<arith::ExtFOp>(loc, type, value, arith::FastMathFlagsAttr{});
}

Value emitFma(mlir::OpBuilder &b, mlir::Location loc, Value a, Value x, Value c) {
  auto contract = arith::FastMathFlags::contract;
  Value product = b.create<arith::MulFOp>(loc, a, x, contract);
  return b.create<arith::AddFOp>(loc, product, c, contract);
}

Value emitExp(mlir::OpBuilder &b, mlir::Location loc, Value x, MathTarget target) {
  Type type = x.getType();
  auto f = [&](double v) { return floatConstant(b, loc, type, v); };
  // Above kHigh the result overflows; below kLow it would be subnormal (flushed to 0: a relative
  // error of at most 2^-126 of the largest input of a softmax row, far inside the tolerance).
  constexpr double kHigh = 88.3762626647949, kLow = -87.3365447505531;
  Value lo = f(kLow), hi = f(kHigh);
  Value inRange =
      b.create<arith::AndIOp>(loc, b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGE, x, lo),
                              b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLE, x, hi));
  Value xs = b.create<arith::SelectOp>(loc, inRange, x, f(0.0));
  // n = round-to-nearest(xs * log2(e)): adding and subtracting 1.5 * 2^23 rounds to an integer.
  Value t = b.create<arith::MulFOp>(loc, xs, f(1.44269504088896341));
  Value n = roundToInteger(b, loc, t, target);
  // r = xs - n * ln2, with ln2 split so that n * kLn2Hi is exact.
  Value r = b.create<arith::SubFOp>(loc, xs, b.create<arith::MulFOp>(loc, n, f(0.693359375)));
  r = b.create<arith::SubFOp>(loc, r, b.create<arith::MulFOp>(loc, n, f(-2.12194440e-4)));
  Value p = f(1.9875691500e-4);
  for (double c :
       {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
    p = emitFma(b, loc, p, r, f(c));
  Value r2 = b.create<arith::MulFOp>(loc, r, r);
  Value y = emitFma(b, loc, p, r2, b.create<arith::AddFOp>(loc, r, f(1.0)));
  // 2^n from its exponent bits; n is in [-126, 127] here.
  Type i32 = withElement(type, b.getI32Type());
  Value ni = b.create<arith::FPToSIOp>(loc, i32, n);
  Value bits =
      b.create<arith::ShLIOp>(loc, b.create<arith::AddIOp>(loc, ni, intConstant(b, loc, i32, 127)),
                              intConstant(b, loc, i32, 23));
  Value scale = b.create<arith::BitcastOp>(loc, type, bits);
  Value result = b.create<arith::MulFOp>(loc, y, scale);
  Value over = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, x, hi);
  Value under = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, x, lo);
  Value isNan = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO, x, x);
  result = b.create<arith::SelectOp>(loc, over, f(std::numeric_limits<double>::infinity()), result);
  result = b.create<arith::SelectOp>(loc, under, f(0.0), result);
  return b.create<arith::SelectOp>(loc, isNan, x, result);
}

SinCos emitSinCos(mlir::OpBuilder &b, mlir::Location loc, Value x, MathTarget target) {
  Type type = x.getType();
  auto f = [&](double v) { return floatConstant(b, loc, type, v); };
  Type i32 = withElement(type, b.getI32Type());
  // j = round(x * 2 / pi); y = x - j * pi / 2 with pi / 2 in two parts.
  Value t = b.create<arith::MulFOp>(loc, x, f(0.636619772367581343));
  Value j = roundToInteger(b, loc, t, target);
  Value y = b.create<arith::SubFOp>(loc, x, b.create<arith::MulFOp>(loc, j, f(1.5707963705062866)));
  y = b.create<arith::SubFOp>(loc, y, b.create<arith::MulFOp>(loc, j, f(-4.3711388286737929e-8)));
  Value z = b.create<arith::MulFOp>(loc, y, y);
  Value sp = f(-1.9515295891e-4);
  sp = emitFma(b, loc, sp, z, f(8.3321608736e-3));
  sp = emitFma(b, loc, sp, z, f(-1.6666654611e-1));
  Value sinY = emitFma(b, loc, b.create<arith::MulFOp>(loc, sp, z), y, y);
  Value cp = f(2.443315711809948e-5);
  cp = emitFma(b, loc, cp, z, f(-1.388731625493765e-3));
  cp = emitFma(b, loc, cp, z, f(4.166664568298827e-2));
  Value cosY =
      emitFma(b, loc, b.create<arith::MulFOp>(loc, cp, z), z, emitFma(b, loc, z, f(-0.5), f(1.0)));
  // Quadrant q = j mod 4: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s).
  Value q = b.create<arith::AndIOp>(loc, b.create<arith::FPToSIOp>(loc, i32, j),
                                    intConstant(b, loc, i32, 3));
  auto bit = [&](int64_t m) {
    Value masked = b.create<arith::AndIOp>(loc, q, intConstant(b, loc, i32, m));
    return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, masked,
                                   intConstant(b, loc, i32, 0));
  };
  Value odd = bit(1), high = bit(2);
  Value sinBase = b.create<arith::SelectOp>(loc, odd, cosY, sinY);
  Value cosBase = b.create<arith::SelectOp>(loc, odd, sinY, cosY);
  // sin is negated in quadrants 2 and 3, cos in quadrants 1 and 2.
  Value cosNegated = b.create<arith::XOrIOp>(loc, odd, high);
  Value sinOut =
      b.create<arith::SelectOp>(loc, high, b.create<arith::NegFOp>(loc, sinBase), sinBase);
  Value cosOut =
      b.create<arith::SelectOp>(loc, cosNegated, b.create<arith::NegFOp>(loc, cosBase), cosBase);
  return {sinOut, cosOut};
}

Value emitSilu(mlir::OpBuilder &b, mlir::Location loc, Value x, MathTarget target) {
  Type type = x.getType();
  Value negX = b.create<arith::NegFOp>(loc, x);
  Value denom =
      b.create<arith::AddFOp>(loc, floatConstant(b, loc, type, 1.0), emitExp(b, loc, negX, target));
  return b.create<arith::DivFOp>(loc, x, denom);
}

Value emitRmsRescueNeeded(mlir::OpBuilder &b, mlir::Location loc, Value sumSquares) {
  Type type = sumSquares.getType();
  // Ordered compares: false for NaN, which the fast path passes on.
  Value below = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, sumSquares,
                                        floatConstant(b, loc, type, 0x1p-60));
  Value overflow = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OEQ, sumSquares,
                                           floatConstant(b, loc, type, INFINITY));
  return b.create<arith::OrIOp>(loc, below, overflow);
}

Value emitBiasedExponent(mlir::OpBuilder &b, mlir::Location loc, Value x) {
  Type i32 = withElement(x.getType(), b.getI32Type());
  Value bits = b.create<arith::BitcastOp>(loc, i32, x);
  Value shifted = b.create<arith::ShRUIOp>(loc, bits, intConstant(b, loc, i32, 23));
  return b.create<arith::AndIOp>(loc, shifted, intConstant(b, loc, i32, 0xff));
}

Value emitRmsRescueExponent(mlir::OpBuilder &b, mlir::Location loc, Value maxBiasedExponent) {
  Type i32 = maxBiasedExponent.getType();
  // The largest |x| is in [2^(e - 127), 2^(e - 126)) for a normal biased exponent e.
  Value j = b.create<arith::SubIOp>(loc, intConstant(b, loc, i32, 127), maxBiasedExponent);
  j = b.create<arith::MaxSIOp>(loc, j, intConstant(b, loc, i32, -126));
  return b.create<arith::MinSIOp>(loc, j, intConstant(b, loc, i32, 126));
}

namespace {

// 2^k as f32 from its exponent bits, for an i32 k (scalar or vector) in [-126, 127].
Value powerOfTwo(mlir::OpBuilder &b, mlir::Location loc, Type type, Value k) {
  Type i32 = withElement(type, b.getI32Type());
  Value biased = b.create<arith::AddIOp>(loc, k, intConstant(b, loc, i32, 127));
  Value bits = b.create<arith::ShLIOp>(loc, biased, intConstant(b, loc, i32, 23));
  return b.create<arith::BitcastOp>(loc, type, bits);
}

} // namespace

Value emitScaleByPowerOfTwo(mlir::OpBuilder &b, mlir::Location loc, Value x, Value j) {
  Type type = x.getType();
  Type i32 = withElement(type, b.getI32Type());
  int64_t lanes = 0;
  if (auto v = mlir::dyn_cast<mlir::VectorType>(type))
    lanes = v.getNumElements();
  Value jv = splat(b, loc, j, lanes);
  auto ci = [&](int64_t v) { return intConstant(b, loc, i32, v); };
  // A normal x (or inf, NaN): one multiply by 2^j, exact unless the result is subnormal.
  Value normal = b.create<arith::MulFOp>(loc, x, powerOfTwo(b, loc, type, jv));
  // A subnormal x is m 2^-149 (m < 2^23 its mantissa bits): m converted exactly, times
  // 2^(j - 149), a normal float when j >= 23; below that the result is under 2^-103 and taken
  // as zero (the rescue's largest |x 2^j| is at least 2^-23, so such terms are far below its
  // rounding).
  Value bits = b.create<arith::BitcastOp>(loc, i32, x);
  Value mantissa = b.create<arith::AndIOp>(loc, bits, ci(0x7fffff));
  Value magnitude = b.create<arith::UIToFPOp>(loc, type, mantissa);
  Value step = powerOfTwo(b, loc, type, b.create<arith::SubIOp>(loc, jv, ci(149)));
  Value inRange = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, jv, ci(23));
  step = b.create<arith::SelectOp>(loc, inRange, step, floatConstant(b, loc, type, 0.0));
  Value scaled = b.create<arith::BitcastOp>(
      loc, i32, b.create<arith::MulFOp>(loc, magnitude, step).getResult());
  Value sign = b.create<arith::AndIOp>(loc, bits, ci(INT32_MIN));
  Value subnormal =
      b.create<arith::BitcastOp>(loc, type, b.create<arith::OrIOp>(loc, scaled, sign).getResult());
  Value isSubnormal =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, emitBiasedExponent(b, loc, x), ci(0));
  return b.create<arith::SelectOp>(loc, isSubnormal, subnormal, normal);
}

RmsRescueScale emitRmsRescueScale(mlir::OpBuilder &b, mlir::Location loc, Value scaledSumSquares,
                                  Value size, double eps, Value j) {
  Type f32 = scaledSumSquares.getType();
  auto f = [&](double v) { return floatConstant(b, loc, f32, v); };
  Value p = powerOfTwo(b, loc, f32, j);
  // eps 2^2j in two exact steps (2^2j itself need not be a float); 0 when eps is.
  Value epsScaled =
      b.create<arith::MulFOp>(loc, b.create<arith::MulFOp>(loc, f(eps), p).getResult(), p);
  Value mean = b.create<arith::DivFOp>(loc, scaledSumSquares, size);
  Value root =
      b.create<mlir::math::SqrtOp>(loc, b.create<arith::AddFOp>(loc, mean, epsScaled).getResult());
  Value inverse = b.create<arith::DivFOp>(loc, f(1.0), root);
  Value epsRules = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, epsScaled, f(0x1p100));
  // Only where eps > 0 (eps 2^2j > 2^100): 1 / sqrt(eps) is then at most 2^74.5.
  Value epsInverse =
      b.create<arith::DivFOp>(loc, f(1.0), b.create<mlir::math::SqrtOp>(loc, f(eps)).getResult());
  Value back =
      powerOfTwo(b, loc, f32, b.create<arith::SubIOp>(loc, intConstant(b, loc, j.getType(), 0), j));
  RmsRescueScale scale;
  scale.inverse = b.create<arith::SelectOp>(loc, epsRules, epsInverse, inverse);
  scale.post = b.create<arith::SelectOp>(loc, epsRules, back, f(1.0));
  return scale;
}

bool isElementwise(OpKind kind) {
  return kind == OpKind::Silu || kind == OpKind::ElementMul || kind == OpKind::Add;
}

Value emitElementwise(mlir::OpBuilder &b, mlir::Location loc, OpKind kind, mlir::ValueRange inputs,
                      MathTarget target) {
  switch (kind) {
  case OpKind::Silu:
    assert(inputs.size() == 1 && "silu takes one input");
    return emitSilu(b, loc, inputs[0], target);
  case OpKind::ElementMul:
    assert(inputs.size() == 2 && "element_mul takes two inputs");
    return b.create<arith::MulFOp>(loc, inputs[0], inputs[1]);
  case OpKind::Add:
    assert(inputs.size() == 2 && "add takes two inputs");
    return b.create<arith::AddFOp>(loc, inputs[0], inputs[1]);
  default:
    assert(false && "emitElementwise: not an element-wise op");
    return inputs[0];
  }
}

} // namespace sinter::codegen
