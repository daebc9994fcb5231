// PointwiseKernels.cpp - SPIR-V kernels of the element-wise ops, row reductions, rope, copies.
//
// Element-wise ops run one invocation per element. softmax and rms_norm are one row in one
// subgroup (a decode step's rows are a few thousand floats): strided loops and subgroup
// reductions, no shared memory and no barriers, and each element is read by the invocation that
// writes it, so in == out is safe. rope runs one invocation per (head, pair) and gets its angle
// exactly: the pair's frequency / 2 pi is baked in as a 64-bit fixed-point fraction, pos times it
// modulo 1 is integer arithmetic, and the sine and cosine of the small remainder come from
// ElementwiseMath's polynomials (GPU sin/cos are only accurate to 2^-11 near zero). The copies are
// a memmove in one workgroup: chunks are read, then written, behind barriers, and walked from the
// end when the destination lies above the source.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "codegen/ElementwiseMath.h"
#include "codegen/spirv/SpirvEmitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

namespace sinter::codegen::spv {

using mlir::Value;
using mlir::ValueRange;
namespace arith = mlir::arith;

namespace {

// silu(in, out, size), element_mul(a, b, out, size), add(a, b, out, size).
void emitElementwiseKernel(Emitter &e, const OpShape &op) {
  int numInputs = op.kind == OpKind::Silu ? 1 : 2;
  Value out = e.buffer(numInputs), size = e.intArg(op, 0);
  Value i = e.add(e.mul(e.groupId(), e.ci(e.plan.workgroupSize)), e.threadId());
  e.ifThen(e.ult(i, size), [&] {
    llvm::SmallVector<Value, 2> values;
    for (int k = 0; k < numInputs; ++k)
      values.push_back(e.load(e.buffer(k), i));
    e.store(emitElementwise(e.b, e.loc, op.kind, values, MathTarget::Gpu), out, i);
  });
}

// fold(acc, in[i]) over i = lane, lane + S, ... < n, then reduced over the subgroup.
Value emitRowFold(Emitter &e, Value in, Value n, Value init,
                  llvm::function_ref<Value(Value acc, Value x, Value i)> fold, bool isMax) {
  uint32_t lanes = e.target.subgroupSize;
  Value acc =
      e.forLoop(e.laneId(), n, e.ci(lanes), ValueRange{init}, [&](Value i, ValueRange iters) {
        return llvm::SmallVector<Value>{fold(iters[0], e.load(in, i), i)};
      })[0];
  return isMax ? e.clusterMax(acc, lanes) : e.clusterSum(acc, lanes);
}

// softmax(in, out, size): max, then out = e^(x - max) with the sum, then out *= 1 / sum.
void emitSoftmaxKernel(Emitter &e, const OpShape &op) {
  Value in = e.buffer(0), out = e.buffer(1), size = e.intArg(op, 0);
  Value lowest = e.cf(-std::numeric_limits<double>::infinity());
  Value maxValue = emitRowFold(
      e, in, size, lowest,
      [&](Value acc, Value x, Value) { return e.b.create<arith::MaxNumFOp>(e.loc, acc, x); },
      /*isMax=*/true);
  Value sum = emitRowFold(
      e, in, size, e.cf(0.0),
      [&](Value acc, Value x, Value i) {
        Value ex =
            emitExp(e.b, e.loc, e.b.create<arith::SubFOp>(e.loc, x, maxValue), MathTarget::Gpu);
        e.store(ex, out, i);
        return e.fadd(acc, ex);
      },
      /*isMax=*/false);
  Value inverse = e.b.create<arith::DivFOp>(e.loc, e.cf(1.0), sum);
  e.forLoop(e.laneId(), size, e.ci(e.target.subgroupSize),
            [&](Value i) { e.store(e.fmul(e.load(out, i), inverse), out, i); });
}

// rms_norm(in, weight, out, size, eps): out = in * w / sqrt(mean(in^2) + eps), the squares
// summed in f32; a row whose sum cannot be trusted (overflowed, or small enough that squares may
// have underflowed) takes the rescue instead (ElementwiseMath.h): Σ (x 2^j)^2 and
// out = ((x 2^j) w inverse) post. The sum is the subgroup's, so the branch is uniform.
void emitRmsNormKernel(Emitter &e, const OpShape &op) {
  Value in = e.buffer(0), weight = e.buffer(1), out = e.buffer(2), size = e.intArg(op, 0);
  Value sumSquares = emitRowFold(
      e, in, size, e.cf(0.0), [&](Value acc, Value x, Value) { return e.fma(x, x, acc); },
      /*isMax=*/false);
  Value sizeF = e.b.create<arith::UIToFPOp>(e.loc, e.f32(), e.toI32(size));
  auto rescue = [&] {
    Value j = rmsRescueExponent(e, size, [&](Value i) { return e.load(in, i); });
    auto scaled = [&](Value x) { return emitScaleByPowerOfTwo(e.b, e.loc, x, j); };
    Value scaledSquares = emitRowFold(
        e, in, size, e.cf(0.0),
        [&](Value acc, Value x, Value) {
          Value xs = scaled(x);
          return e.fma(xs, xs, acc);
        },
        /*isMax=*/false);
    RmsRescueScale s = emitRmsRescueScale(e.b, e.loc, scaledSquares, sizeF, op.scalar(), j);
    e.forLoop(e.laneId(), size, e.ci(e.target.subgroupSize), [&](Value i) {
      Value v = e.fmul(scaled(e.load(in, i)), e.load(weight, i));
      e.store(e.fmul(e.fmul(v, s.inverse), s.post), out, i);
    });
  };
  e.ifElse(emitRmsRescueNeeded(e.b, e.loc, sumSquares), rescue, [&] {
    Value mean = e.b.create<arith::DivFOp>(e.loc, sumSquares, sizeF);
    Value root = e.b.create<mlir::math::SqrtOp>(e.loc, e.fadd(mean, e.cf(op.scalar())));
    Value scale = e.b.create<arith::DivFOp>(e.loc, e.cf(1.0), root);
    e.forLoop(e.laneId(), size, e.ci(e.target.subgroupSize), [&](Value i) {
      e.store(e.fmul(e.fmul(e.load(in, i), e.load(weight, i)), scale), out, i);
    });
  });
}

} // namespace

Value rmsRescueExponent(Emitter &e, Value n, llvm::function_ref<Value(Value i)> element) {
  // The biased exponents (0..255) are exact as floats, so the subgroup's float maximum serves.
  const uint32_t lanes = e.target.subgroupSize;
  Value mine =
      e.forLoop(e.laneId(), n, e.ci(lanes), ValueRange{e.cf(0.0)}, [&](Value i, ValueRange it) {
        Value biased = emitBiasedExponent(e.b, e.loc, element(i));
        Value asFloat = e.b.create<arith::UIToFPOp>(e.loc, e.f32(), biased);
        return llvm::SmallVector<Value>{e.b.create<arith::MaxNumFOp>(e.loc, it[0], asFloat)};
      })[0];
  Value biased = e.b.create<arith::FPToUIOp>(e.loc, e.i32(), e.clusterMax(mine, lanes));
  return emitRmsRescueExponent(e.b, e.loc, biased);
}

// Pair i of a head turns by pos * f_i / (2 pi) turns, f_i = base^(-2i / head_dim) as the
// reference computes it: the fraction as a 64-bit fixed-point number in two u32 words, in a
// table of Function variables.
Value ropeTable(Emitter &e, const OpShape &op) {
  mlir::OpBuilder &b = e.b;
  int64_t headDim = op.ints[1], pairs = headDim / 2;
  Value table = e.functionArray(b.getI32Type(), 2 * pairs);
  double base = double(op.scalar());
  for (int64_t i = 0; i < pairs; ++i) {
    double f = std::pow(base, -2.0 * double(i) / double(headDim));
    long double turns = static_cast<long double>(f) / (2.0L * 3.14159265358979323846264338328L);
    turns -= std::floor(turns);
    auto fixed = static_cast<uint64_t>(std::ldexp(turns, 64));
    e.store(e.c32(static_cast<int32_t>(fixed >> 32)), table, e.ci(2 * i));
    e.store(e.c32(static_cast<int32_t>(fixed & 0xffffffffu)), table, e.ci(2 * i + 1));
  }
  return table;
}

SinCos ropeSinCos(Emitter &e, Value table, Value pos, Value pair) {
  mlir::OpBuilder &b = e.b;
  Value high = e.load(table, e.mul(pair, e.ci(2)));
  Value low = e.load(table, e.add(e.mul(pair, e.ci(2)), e.ci(1)));
  // frac(pos * g) in 2^-32 units: the low word of pos * high plus the carry of pos * low.
  Value fromHigh = b.create<arith::MulIOp>(e.loc, pos, high);
  Value fromLow = b.create<arith::MulUIExtendedOp>(e.loc, pos, low).getHigh();
  Value fraction = b.create<arith::AddIOp>(e.loc, fromHigh, fromLow);
  // As a signed fraction the angle lies in [-pi, pi).
  Value angle = e.fmul(b.create<arith::SIToFPOp>(e.loc, e.f32(), fraction),
                       e.cf(2.0 * 3.14159265358979323846 / 4294967296.0));
  return emitSinCos(b, e.loc, angle, MathTarget::Gpu);
}

std::pair<Value, Value> ropeRotate(Emitter &e, const SinCos &sc, Value x0, Value x1) {
  Value y0 = e.b.create<arith::SubFOp>(e.loc, e.fmul(x0, sc.cos), e.fmul(x1, sc.sin));
  Value y1 = e.fadd(e.fmul(x0, sc.sin), e.fmul(x1, sc.cos));
  return {y0, y1};
}

namespace {

// rope(q, k, pos, head_dim, freq_base, n_heads_q, n_heads_k): unit u is pair u % (head_dim / 2)
// of head u / (head_dim / 2), counting q's heads first.
absl::Status emitRopeKernel(Emitter &e, const OpShape &op) {
  if (!op.isStatic(1))
    return absl::UnimplementedError("rope: the SPIR-V kernel needs a compile-time head_dim");
  int64_t headDim = op.ints[1], pairs = headDim / 2;
  if (pairs == 0)
    return absl::OkStatus();
  Value table = ropeTable(e, op);
  Value pos = e.toI32(e.intArg(op, 0));
  Value headsQ = e.intArg(op, 2), headsK = e.intArg(op, 3);
  Value u = e.add(e.mul(e.groupId(), e.ci(e.plan.workgroupSize)), e.threadId());
  Value units = e.mul(e.add(headsQ, headsK), e.ci(pairs));
  e.ifThen(e.ult(u, units), [&] {
    Value head = e.divu(u, e.ci(pairs)), pair = e.remu(u, e.ci(pairs));
    SinCos sc = ropeSinCos(e, table, pos, pair);
    auto rotate = [&](Value x, Value h) {
      Value first = e.add(e.mul(h, e.ci(headDim)), e.mul(pair, e.ci(2)));
      Value second = e.add(first, e.ci(1));
      auto [y0, y1] = ropeRotate(e, sc, e.load(x, first), e.load(x, second));
      e.store(y0, x, first);
      e.store(y1, x, second);
    };
    e.ifElse(
        e.ult(head, headsQ), [&] { rotate(e.buffer(0), head); },
        [&] { rotate(e.buffer(1), e.sub(head, headsQ)); });
  });
  return absl::OkStatus();
}

// copy_buffer(src, dst, size) and copy_buffer_offset(src, dst, src_offset, dst_offset, size), in
// bytes over u32 words: destination word w gets its bytes inside [dst_offset, dst_offset + size)
// from the source and keeps the others. One workgroup, so that src and dst may be one buffer
// (memmove): the words go in chunks, forward or backward, each chunk loaded whole (a few words an
// invocation) before a barrier and stored after it. When the offsets and the size are whole words
// a destination word is a source word; otherwise its bytes are assembled one by one.
constexpr int kCopyWordsPerInvocation = 8;

void emitCopyKernel(Emitter &e, const OpShape &op) {
  Value src = e.buffer(0), dst = e.buffer(1);
  Value srcOffset = e.ci(0), dstOffset = e.ci(0), size;
  if (op.kind == OpKind::CopyBuffer) {
    size = e.intArg(op, 0);
  } else {
    srcOffset = e.intArg(op, 0);
    dstOffset = e.intArg(op, 1);
    size = e.intArg(op, 2);
  }
  mlir::OpBuilder &b = e.b;
  Value end = e.add(dstOffset, size);
  Value firstWord = e.divu(dstOffset, e.ci(4));
  Value words = e.sub(e.divu(e.add(end, e.ci(3)), e.ci(4)), firstWord);
  words = e.select(e.ult(e.ci(0), size), words, e.ci(0));
  Value group = e.ci(e.plan.workgroupSize);
  Value chunkWords = e.ci(int64_t(e.plan.workgroupSize) * kCopyWordsPerInvocation);
  Value chunks = e.divu(e.add(words, e.sub(chunkWords, e.ci(1))), chunkWords);
  Value backward = e.ult(srcOffset, dstOffset);
  Value misaligned = b.create<arith::OrIOp>(
      e.loc, b.create<arith::OrIOp>(e.loc, e.remu(srcOffset, e.ci(4)), e.remu(dstOffset, e.ci(4))),
      e.remu(size, e.ci(4)));
  Value aligned = b.create<arith::CmpIOp>(e.loc, arith::CmpIPredicate::eq, misaligned, e.ci(0));
  // Whole words: destination word w is source word w + (src_offset - dst_offset) / 4.
  Value srcFirstWord = e.divu(srcOffset, e.ci(4));
  Value tid = e.threadId();
  auto byteOf = [&](Value word, Value byteInWord) {
    Value shift = e.toI32(e.mul(byteInWord, e.ci(8)));
    return b.create<arith::AndIOp>(e.loc, b.create<arith::ShRUIOp>(e.loc, word, shift),
                                   e.c32(0xff));
  };
  // The destination word's new value (bytes outside the range keep the old ones).
  auto assemble = [&](Value w) {
    Value old = e.load(dst, w);
    Value result = e.c32(0);
    for (int byte = 0; byte < 4; ++byte) {
      Value at = e.add(e.mul(w, e.ci(4)), e.ci(byte));
      Value inside = b.create<arith::AndIOp>(
          e.loc, e.ult(at, end),
          e.b.create<arith::CmpIOp>(e.loc, arith::CmpIPredicate::uge, at, dstOffset));
      Value from = e.add(srcOffset, e.sub(at, dstOffset));
      Value srcWord = e.ifValue(
          inside, e.i32(), [&] { return e.load(src, e.divu(from, e.ci(4))); },
          [&] { return e.c32(0); });
      Value v = e.select(inside, byteOf(srcWord, e.remu(from, e.ci(4))), byteOf(old, e.ci(byte)));
      result =
          b.create<arith::OrIOp>(e.loc, result, b.create<arith::ShLIOp>(e.loc, v, e.c32(8 * byte)));
    }
    return result;
  };
  e.forLoop(e.ci(0), chunks, e.ci(1), [&](Value c) {
    llvm::SmallVector<Value, kCopyWordsPerInvocation> at, valid, value;
    for (int i = 0; i < kCopyWordsPerInvocation; ++i) {
      Value j = e.add(e.mul(c, chunkWords), e.add(e.mul(e.ci(i), group), tid));
      Value ok = e.ult(j, words);
      Value k = e.select(backward, e.sub(e.sub(words, e.ci(1)), j), j);
      Value w = e.add(firstWord, k);
      Value v = e.ifValue(
          ok, e.i32(),
          [&] {
            return e.ifValue(
                aligned, e.i32(),
                [&] { return e.load(src, e.add(srcFirstWord, e.sub(w, firstWord))); },
                [&] { return assemble(w); });
          },
          [&] { return e.c32(0); });
      at.push_back(w);
      valid.push_back(ok);
      value.push_back(v);
    }
    e.barrier();
    for (int i = 0; i < kCopyWordsPerInvocation; ++i)
      e.ifThen(valid[i], [&] { e.store(value[i], dst, at[i]); });
    e.barrier();
  });
}

} // namespace

absl::Status emitPointwise(Emitter &e, const OpShape &op) {
  switch (op.kind) {
  case OpKind::Silu:
  case OpKind::ElementMul:
  case OpKind::Add:
    emitElementwiseKernel(e, op);
    return absl::OkStatus();
  case OpKind::Softmax:
    emitSoftmaxKernel(e, op);
    return absl::OkStatus();
  case OpKind::RmsNorm:
    emitRmsNormKernel(e, op);
    return absl::OkStatus();
  case OpKind::Rope:
    return emitRopeKernel(e, op);
  case OpKind::CopyBuffer:
  case OpKind::CopyBufferOffset:
    emitCopyKernel(e, op);
    return absl::OkStatus();
  default:
    return absl::InternalError(
        absl::StrCat("emitPointwise: ", opInfo(op.kind).name, " is a contraction"));
  }
}

} // namespace sinter::codegen::spv
