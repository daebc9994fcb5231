// PointwiseKernels.cpp - CPU kernels of the element-wise ops, row reductions, rope and copies.
//
// Element-wise kernels take an element range [begin, end) and run a vector loop of kLanes with a
// scalar remainder. softmax and rms_norm are one row each and run whole in one call (their
// parallel dimension is 1): a decode step's rows are a few thousand floats, less than a thread
// hand-off costs. rope computes each pair's angle in f64 exactly as the reference does (pow, cos
// and sin of the C library) once per pair index and applies it to every head.
#include <limits>

#include "absl/strings/str_cat.h"
#include "codegen/ElementwiseMath.h"
#include "codegen/llvm/CpuEmitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace sinter::codegen::cpu {

using mlir::Value;
using mlir::ValueRange;
namespace arith = mlir::arith;
namespace math = mlir::math;

namespace {

// silu(in, out), element_mul(a, b, out), add(a, b, out) over elements [begin, end).
void emitElementwiseKernel(Emitter &e, const OpShape &op, Value begin, Value end) {
  int numInputs = op.kind == OpKind::Silu ? 1 : 2;
  llvm::SmallVector<Value, 2> inputs;
  for (int i = 0; i < numInputs; ++i)
    inputs.push_back(e.buffer(i));
  Value out = e.buffer(numInputs);
  auto body = [&](Value i, int64_t lanes) {
    llvm::SmallVector<Value, 2> values;
    for (Value in : inputs)
      values.push_back(e.loadF32(in, i, lanes));
    e.storeF32(out, i, emitElementwise(e.b, e.loc, op.kind, values));
  };
  Value vectorEnd = e.add(begin, e.roundDown(e.sub(end, begin), kLanes));
  e.forLoop(begin, vectorEnd, kLanes, [&](Value i) { body(i, kLanes); });
  e.forLoop(vectorEnd, end, 1, [&](Value i) { body(i, 0); });
}

// sum over [0, n) of f(x) for x = in[i] (vector accumulator, then the scalar remainder).
// `combine(acc, x)` folds one value (vector or scalar) into an accumulator of the same shape.
Value emitRowFold(Emitter &e, Value in, Value n, Value vectorInit, Value scalarInit,
                  llvm::function_ref<Value(Value acc, Value x, Value i)> combine,
                  llvm::function_ref<Value(Value vectorAcc)> reduce,
                  llvm::function_ref<Value(Value acc, Value x)> combineScalars) {
  Value vectorEnd = e.roundDown(n, kLanes);
  Value acc = e.forLoop(e.c64(0), vectorEnd, kLanes, ValueRange{vectorInit},
                        [&](Value i, ValueRange iters) {
                          Value x = e.loadF32(in, i, kLanes);
                          return llvm::SmallVector<Value>{combine(iters[0], x, i)};
                        })[0];
  Value total = combineScalars(reduce(acc), scalarInit);
  return e.forLoop(vectorEnd, n, 1, ValueRange{total}, [&](Value i, ValueRange iters) {
    return llvm::SmallVector<Value>{combine(iters[0], e.loadF32(in, i), i)};
  })[0];
}

// Writes out[i] = f(i) for i in [0, n), f given a vector or scalar index.
void emitRowMap(Emitter &e, Value n, llvm::function_ref<void(Value i, int64_t lanes)> body) {
  Value vectorEnd = e.roundDown(n, kLanes);
  e.forLoop(e.c64(0), vectorEnd, kLanes, [&](Value i) { body(i, kLanes); });
  e.forLoop(vectorEnd, n, 1, [&](Value i) { body(i, 0); });
}

Value maxnum(Emitter &e, Value a, Value c) { return e.b.create<arith::MaxNumFOp>(e.loc, a, c); }

// softmax(in, out, size): max, then out = e^(x - max) with the sum, then out *= 1 / sum. Each
// element of `in` is read before the same element of `out` is written (in == out is allowed).
void emitSoftmaxKernel(Emitter &e, const OpShape &op) {
  Value in = e.buffer(0), out = e.buffer(1), size = e.intArg(op, 0);
  double negInf = -std::numeric_limits<double>::infinity();
  Value lowest = e.cf32(negInf);
  Value maxValue = emitRowFold(
      e, in, size, splat(e.b, e.loc, lowest, kLanes), lowest,
      [&](Value acc, Value x, Value) { return maxnum(e, acc, x); },
      [&](Value v) { return e.reduceMax(v); }, [&](Value a, Value c) { return maxnum(e, a, c); });
  Value sum = emitRowFold(
      e, in, size, e.zeros(kLanes), e.cf32(0.0),
      [&](Value acc, Value x, Value i) {
        int64_t lanes = mlir::isa<mlir::VectorType>(x.getType()) ? kLanes : 0;
        Value ex = emitExp(e.b, e.loc,
                           e.b.create<arith::SubFOp>(e.loc, x, splat(e.b, e.loc, maxValue, lanes)));
        e.storeF32(out, i, ex);
        return e.fadd(acc, ex);
      },
      [&](Value v) { return e.reduceAdd(v); }, [&](Value a, Value c) { return e.fadd(a, c); });
  Value inverse = e.b.create<arith::DivFOp>(e.loc, e.cf32(1.0), sum);
  emitRowMap(e, size, [&](Value i, int64_t lanes) {
    e.storeF32(out, i, e.fmul(e.loadF32(out, i, lanes), splat(e.b, e.loc, inverse, lanes)));
  });
}

// The rescue of an rms_norm row whose f32 sum of squares cannot be trusted (ElementwiseMath.h):
// j from the largest biased exponent of the row, then Σ (x 2^j)^2 and
// out = ((x 2^j) w inverse) post.
void emitRescuedRmsNormRow(Emitter &e, const OpShape &op, Value in, Value weight, Value size,
                           Value out) {
  mlir::OpBuilder &b = e.b;
  mlir::Type i32 = b.getI32Type();
  auto maxui = [&](Value acc, Value x, Value) {
    return b.create<arith::MaxUIOp>(e.loc, acc, emitBiasedExponent(b, e.loc, x)).getResult();
  };
  Value zero = intConstant(b, e.loc, i32, 0);
  Value maxExponent = emitRowFold(
      e, in, size, splat(b, e.loc, zero, kLanes), zero, maxui,
      [&](Value v) {
        return b.create<mlir::vector::ReductionOp>(e.loc, mlir::vector::CombiningKind::MAXUI, v)
            .getResult();
      },
      [&](Value a, Value c) { return b.create<arith::MaxUIOp>(e.loc, a, c).getResult(); });
  Value j = emitRmsRescueExponent(b, e.loc, maxExponent);
  auto scaled = [&](Value x) { return emitScaleByPowerOfTwo(b, e.loc, x, j); };
  Value sumSquares = emitRowFold(
      e, in, size, e.zeros(kLanes), e.cf32(0.0),
      [&](Value acc, Value x, Value) {
        Value xs = scaled(x);
        return e.fma(xs, xs, acc);
      },
      [&](Value v) { return e.reduceAdd(v); }, [&](Value a, Value c) { return e.fadd(a, c); });
  Value sizeF = b.create<arith::SIToFPOp>(e.loc, e.f32(), size);
  RmsRescueScale scale = emitRmsRescueScale(b, e.loc, sumSquares, sizeF, double(op.scalar()), j);
  emitRowMap(e, size, [&](Value i, int64_t lanes) {
    Value v = e.fmul(scaled(e.loadF32(in, i, lanes)), e.loadF32(weight, i, lanes));
    v = e.fmul(e.fmul(v, splat(b, e.loc, scale.inverse, lanes)),
               splat(b, e.loc, scale.post, lanes));
    e.storeF32(out, i, v);
  });
}

} // namespace

// rms_norm(in, weight, out, size, eps): out = in * w / sqrt(mean(in^2) + eps), the squares summed
// in f32 and the scale in f64; a row whose f32 sum cannot be trusted (overflowed, or small enough
// that squares may have underflowed) takes the rescue instead (ElementwiseMath.h). A branch, not
// a wider accumulator: the common row runs exactly the f32 loop it always did.
void emitRmsNormRow(Emitter &e, const OpShape &op, Value out) {
  Value in = e.buffer(0), weight = e.buffer(1), size = e.intArg(op, 0);
  auto square = [&](Value acc, Value x, Value) { return e.fma(x, x, acc); };
  Value sumSquares = emitRowFold(
      e, in, size, e.zeros(kLanes), e.cf32(0.0), square, [&](Value v) { return e.reduceAdd(v); },
      [&](Value a, Value c) { return e.fadd(a, c); });
  auto rescue = e.b.create<mlir::scf::IfOp>(e.loc, emitRmsRescueNeeded(e.b, e.loc, sumSquares),
                                            /*withElseRegion=*/true);
  mlir::OpBuilder::InsertionGuard guard(e.b);
  e.b.setInsertionPoint(rescue.thenBlock()->getTerminator());
  emitRescuedRmsNormRow(e, op, in, weight, size, out);
  e.b.setInsertionPoint(rescue.elseBlock()->getTerminator());
  mlir::Type f64 = e.b.getF64Type();
  Value wide = extendFloat(e.b, e.loc, f64, sumSquares);
  Value mean =
      e.b.create<arith::DivFOp>(e.loc, wide, e.b.create<arith::SIToFPOp>(e.loc, f64, size));
  Value eps = floatConstant(e.b, e.loc, f64, double(op.scalar()));
  Value root = e.b.create<math::SqrtOp>(e.loc, e.b.create<arith::AddFOp>(e.loc, mean, eps));
  Value scale64 = e.b.create<arith::DivFOp>(e.loc, floatConstant(e.b, e.loc, f64, 1.0), root);
  Value scale = e.b.create<arith::TruncFOp>(e.loc, e.f32(), scale64);
  emitRowMap(e, size, [&](Value i, int64_t lanes) {
    Value v = e.fmul(e.loadF32(in, i, lanes), e.loadF32(weight, i, lanes));
    e.storeF32(out, i, e.fmul(v, splat(e.b, e.loc, scale, lanes)));
  });
}

namespace {

void emitRmsNormKernel(Emitter &e, const OpShape &op) { emitRmsNormRow(e, op, e.buffer(2)); }

// rope(q, k, pos, head_dim, freq_base, n_heads_q, n_heads_k), in place.
void emitRopeKernel(Emitter &e, const OpShape &op) {
  Value q = e.buffer(0), k = e.buffer(1);
  Value pos = e.intArg(op, 0), headDim = e.intArg(op, 1);
  Value headsQ = e.intArg(op, 2), headsK = e.intArg(op, 3);
  mlir::OpBuilder &b = e.b;
  mlir::Type f64 = b.getF64Type();
  auto toF64 = [&](Value v) { return b.create<arith::SIToFPOp>(e.loc, f64, v); };
  Value base = floatConstant(b, e.loc, f64, double(op.scalar()));
  Value posF = toF64(pos), headDimF = toF64(headDim);
  Value pairs = e.divui(headDim, e.c64(2));
  e.forLoop(e.c64(0), pairs, 1, [&](Value i) {
    // angle = pos * base^(-2i / head_dim), in the reference's order of operations.
    Value exponent = b.create<arith::DivFOp>(
        e.loc, b.create<arith::MulFOp>(e.loc, floatConstant(b, e.loc, f64, -2.0), toF64(i)),
        headDimF);
    Value angle =
        b.create<arith::MulFOp>(e.loc, posF, b.create<math::PowFOp>(e.loc, base, exponent));
    Value c = b.create<math::CosOp>(e.loc, angle), s = b.create<math::SinOp>(e.loc, angle);
    auto rotate = [&](Value x, Value heads) {
      e.forLoop(e.c64(0), heads, 1, [&](Value h) {
        Value first = e.add(e.mul(h, headDim), e.mul(i, e.c64(2)));
        Value second = e.add(first, e.c64(1));
        Value x0 = extendFloat(b, e.loc, f64, e.loadF32(x, first));
        Value x1 = extendFloat(b, e.loc, f64, e.loadF32(x, second));
        auto mulf = [&](Value a, Value c2) { return b.create<arith::MulFOp>(e.loc, a, c2); };
        Value y0 = b.create<arith::SubFOp>(e.loc, mulf(x0, c), mulf(x1, s));
        Value y1 = b.create<arith::AddFOp>(e.loc, mulf(x0, s), mulf(x1, c));
        e.storeF32(x, first, b.create<arith::TruncFOp>(e.loc, e.f32(), y0));
        e.storeF32(x, second, b.create<arith::TruncFOp>(e.loc, e.f32(), y1));
      });
    };
    rotate(q, headsQ);
    rotate(k, headsK);
  });
}

// copy_buffer(src, dst, size) and copy_buffer_offset(src, dst, src_offset, dst_offset, size):
// memmove, so overlapping ranges of one buffer behave as SEMANTICS.md says.
void emitCopyKernel(Emitter &e, const OpShape &op) {
  Value src = e.buffer(0), dst = e.buffer(1);
  Value size;
  if (op.kind == OpKind::CopyBuffer) {
    size = e.intArg(op, 0);
  } else {
    src = e.gepBytes(src, e.intArg(op, 0));
    dst = e.gepBytes(dst, e.intArg(op, 1));
    size = e.intArg(op, 2);
  }
  e.b.create<mlir::LLVM::MemmoveOp>(e.loc, dst, src, size, /*isVolatile=*/false);
}

} // namespace

absl::Status emitPointwiseKernel(Emitter &e, const OpShape &op, Value begin, Value end) {
  switch (op.kind) {
  case OpKind::Silu:
  case OpKind::ElementMul:
  case OpKind::Add:
    emitElementwiseKernel(e, op, begin, end);
    return absl::OkStatus();
  case OpKind::Softmax:
    emitSoftmaxKernel(e, op);
    return absl::OkStatus();
  case OpKind::RmsNorm:
    emitRmsNormKernel(e, op);
    return absl::OkStatus();
  case OpKind::Rope:
    emitRopeKernel(e, op);
    return absl::OkStatus();
  case OpKind::CopyBuffer:
  case OpKind::CopyBufferOffset:
    emitCopyKernel(e, op);
    return absl::OkStatus();
  default:
    return absl::InternalError(
        absl::StrCat("emitPointwiseKernel: ", opInfo(op.kind).name, " is a contraction"));
  }
}

} // namespace sinter::codegen::cpu
