// ContractionKernels.cpp - CPU kernels of matmul, quantized_matmul, attn_score and attn_value.
//
// quantized_matmul is the hot one (a decode step is almost all weight reads): each output row is
// one pass over its blocks, decoding every group with Dequant.h straight into registers (never a
// dequantized copy), multiplying by x and folding the group's scale in with one fused
// multiply-add per vector. Two f32 vector accumulators break the add chain; with thousands of
// columns each lane sums a few dozen terms, well inside SEMANTICS.md's 1e-7 NMSE.
#include <algorithm>

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
namespace LLVM = mlir::LLVM;

namespace {

// if (cond) then() else otherwise(), both without results.
void emitIfElse(Emitter &e, Value cond, llvm::function_ref<void()> then,
                llvm::function_ref<void()> otherwise) {
  auto ifOp = e.b.create<mlir::scf::IfOp>(e.loc, cond, /*withElseRegion=*/true);
  mlir::OpBuilder::InsertionGuard guard(e.b);
  e.b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  then();
  e.b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  otherwise();
}

Value cmpSle(Emitter &e, Value a, Value c) {
  return e.b.create<arith::CmpIOp>(e.loc, arith::CmpIPredicate::sle, a, c);
}

// Σ_{d < n} a[aIndex + d] * c[cIndex + d] in f32. With a static n the vector part is unrolled
// with up to four accumulators; the remainder is scalar.
Value emitDot(Emitter &e, Value a, Value aIndex, Value c, Value cIndex, const OpShape &op,
              int nIndex) {
  Value n = e.intArg(op, nIndex);
  if (op.isStatic(nIndex)) {
    int64_t vectors = op.ints[nIndex] / kLanes;
    int64_t numAccs = std::min<int64_t>(4, std::max<int64_t>(vectors, 1));
    llvm::SmallVector<Value, 4> accs(numAccs, e.zeros(kLanes));
    for (int64_t v = 0; v < vectors; ++v) {
      Value off = e.c64(v * kLanes);
      Value x = e.loadF32(a, e.add(aIndex, off), kLanes);
      Value y = e.loadF32(c, e.add(cIndex, off), kLanes);
      accs[v % numAccs] = e.fma(x, y, accs[v % numAccs]);
    }
    Value acc = accs[0];
    for (int64_t i = 1; i < numAccs; ++i)
      acc = e.fadd(acc, accs[i]);
    Value sum = e.reduceAdd(acc);
    for (int64_t d = vectors * kLanes; d < op.ints[nIndex]; ++d) {
      Value off = e.c64(d);
      sum = e.fma(e.loadF32(a, e.add(aIndex, off)), e.loadF32(c, e.add(cIndex, off)), sum);
    }
    return sum;
  }
  Value vectorEnd = e.roundDown(n, kLanes);
  Value acc = e.forLoop(e.c64(0), vectorEnd, kLanes, ValueRange{e.zeros(kLanes)},
                        [&](Value d, ValueRange iters) {
                          Value x = e.loadF32(a, e.add(aIndex, d), kLanes);
                          Value y = e.loadF32(c, e.add(cIndex, d), kLanes);
                          return llvm::SmallVector<Value>{e.fma(x, y, iters[0])};
                        })[0];
  return e.forLoop(vectorEnd, n, 1, ValueRange{e.reduceAdd(acc)}, [&](Value d, ValueRange iters) {
    Value x = e.loadF32(a, e.add(aIndex, d)), y = e.loadF32(c, e.add(cIndex, d));
    return llvm::SmallVector<Value>{e.fma(x, y, iters[0])};
  })[0];
}

// quantized_matmul(W, x, out, n_rows, n_cols, dtype): out[r] for r in [begin, end).
void emitQMatmulKernel(Emitter &e, const OpShape &op, Value begin, Value end) {
  Value w = e.buffer(0), x = e.buffer(1), out = e.buffer(2);
  Value nCols = e.intArg(op, 1);
  QuantLayout layout = quantLayout(op.dtype);
  bool scalar = isScalarFormat(op.dtype);
  int64_t elementBytes = dtypeInfo(op.dtype).bytesPerBlock; // scalar formats only
  Value nBlocks = e.divui(nCols, e.c64(layout.blockWeights));
  Value bytesPerRow =
      scalar ? e.mul(nCols, e.c64(elementBytes)) : e.mul(nBlocks, e.c64(layout.blockBytes));
  // Two blocks per iteration when there is one group per block and the count is known even.
  int64_t unroll = 1;
  if (layout.groupsPerBlock() == 1 && op.isStatic(1) && (op.ints[1] / layout.blockWeights) % 2 == 0)
    unroll = 2;
  int64_t lanes = layout.groupWeights;
  PtrByteReader reader;
  e.forLoop(begin, end, 1, [&](Value r) {
    Value row = e.gepBytes(w, e.mul(r, bytesPerRow));
    auto accs =
        e.forLoop(e.c64(0), nBlocks, unroll, ValueRange{e.zeros(lanes), e.zeros(lanes)},
                  [&](Value blk, ValueRange iters) {
                    llvm::SmallVector<Value> acc(iters.begin(), iters.end());
                    int64_t next = 0;
                    for (int64_t u = 0; u < unroll; ++u) {
                      Value index = e.add(blk, e.c64(u));
                      Value block = e.gepBytes(row, e.mul(index, e.c64(layout.blockBytes)));
                      Value firstColumn = e.mul(index, e.c64(layout.blockWeights));
                      for (int64_t g = 0; g < layout.groupsPerBlock(); ++g) {
                        WeightGroup group = emitWeightGroup(e.b, e.loc, reader, op.dtype, block, g);
                        Value xv = e.loadF32(x, e.add(firstColumn, e.c64(g * lanes)), lanes);
                        int64_t a = next++ % 2;
                        if (!group.scale) {
                          acc[a] = e.fma(group.q, xv, acc[a]);
                          continue;
                        }
                        Value product = e.fmul(group.q, xv);
                        acc[a] = e.fma(product, splat(e.b, e.loc, group.scale, lanes), acc[a]);
                        if (group.bias)
                          acc[1 - a] = e.fma(xv, splat(e.b, e.loc, group.bias, lanes), acc[1 - a]);
                      }
                    }
                    return acc;
                  });
    Value sum = e.reduceAdd(e.fadd(accs[0], accs[1]));
    if (scalar) { // columns past the last whole pseudo-block
      Value tailBegin = e.mul(nBlocks, e.c64(layout.blockWeights));
      sum = e.forLoop(tailBegin, nCols, 1, ValueRange{sum}, [&](Value c, ValueRange iters) {
        Value element = e.gepBytes(row, e.mul(c, e.c64(elementBytes)));
        Value weight = emitScalarWeight(e.b, e.loc, reader, op.dtype, element);
        return llvm::SmallVector<Value>{e.fma(weight, e.loadF32(x, c), iters[0])};
      })[0];
    }
    e.storeF32(out, r, sum);
  });
}

// The largest n_cols the int8 path quantizes x for on the stack (x's bytes, 4 floats a block).
constexpr int64_t kInt8MaxCols = 1 << 16;

// Fewer rows keep x in f32: their cost is not the weights' bandwidth, and SEMANTICS.md's NMSE
// over a handful of outputs is dominated by any one near-cancelling dot product, which
// quantizing x perturbs by about 0.4% of the row's |w||x| (with 64 rows NMSE is about 1e-5).
constexpr int64_t kInt8MinRows = 64;

bool useInt8Dot(const Emitter &e, const OpShape &op) {
  return e.int8Dot && (op.dtype == DType::Q4_0 || op.dtype == DType::Q8_0) && op.isStatic(1) &&
         op.ints[1] > 0 && op.ints[1] % 64 == 0 && op.ints[1] <= kInt8MaxCols;
}

// quantized_matmul for Q4_0 and Q8_0 with int8 dot products (AVX-512 VNNI vpdpbusd, 64 byte
// products per instruction, four weight blocks per iteration). The kernel first quantizes x as
// Q8_0 does, per block of 32: dx = max|x| / 127, qx = round(x / dx), into stack buffers, with
// sx = dx * Σ qx per block. vpdpbusd multiplies unsigned by signed bytes, so the weights enter
// offset to unsigned (Q4_0's nibbles as stored, 0..15; Q8_0's bytes with the sign bit flipped,
// w + 128) and the offset comes back out per block: Σ (w + K) qx = Σ w qx + K Σ qx. A row is
//   Σ_b dw_b (dx_b Σ_i u_bi qx_bi) - K Σ_b dw_b sx_b,   K = 8 (Q4_0) or 128 (Q8_0),
// the first term in two 16-lane float accumulators, the second in a 4-lane one. qx is stored in
// the order the weights unpack to, so a pair of blocks is one 64-byte vector with no shuffles:
// for Q4_0, [lo nibbles of b0, lo of b1, hi of b0, hi of b1] = x of [b0 0..15, b1 0..15, b0
// 16..31, b1 16..31]; for Q8_0 the natural order. The four blocks' f16 scales are converted and
// multiplied by dx as one vector. This quantizes activations: SEMANTICS.md's 5e-4 NMSE bound
// applies (about 1e-5 is typical).
void emitQMatmulInt8Kernel(Emitter &e, const OpShape &op, Value begin, Value end) {
  mlir::OpBuilder &b = e.b;
  mlir::Location loc = e.loc;
  Value w = e.buffer(0), x = e.buffer(1), out = e.buffer(2);
  const int64_t nCols = op.ints[1], nBlocks = nCols / 32;
  const bool q4 = op.dtype == DType::Q4_0;
  const int64_t blockBytes = q4 ? 18 : 34;
  const double offset = q4 ? 8.0 : 128.0;
  auto i8 = b.getI8Type(), i16 = b.getI16Type(), i32 = b.getI32Type();
  auto vec = [](int64_t n, mlir::Type t) { return mlir::VectorType::get({n}, t); };
  auto ci = [&](mlir::Type t, int64_t v) { return intConstant(b, loc, t, v); };
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto iota = [](int64_t n, int64_t from = 0) {
    llvm::SmallVector<int64_t> v(n);
    for (int64_t i = 0; i < n; ++i)
      v[i] = from + i;
    return v;
  };

  // Stack buffers: qx (nCols bytes, 64-byte aligned), dx and sx (one float per block each).
  Value qx = b.create<LLVM::AllocaOp>(loc, ptr, i8, e.c64(nCols), 64);
  Value dx = b.create<LLVM::AllocaOp>(loc, ptr, e.f32(), e.c64(nBlocks), 64);
  Value sx = b.create<LLVM::AllocaOp>(loc, ptr, e.f32(), e.c64(nBlocks), 64);
  e.forLoop(e.c64(0), e.c64(nBlocks), 1, [&](Value blk) {
    Value first = e.mul(blk, e.c64(32));
    Value v = e.loadF32(x, first, 32);
    Value amax = e.reduceMax(b.create<mlir::math::AbsFOp>(loc, v));
    Value d = b.create<arith::DivFOp>(loc, amax, e.cf32(127.0));
    Value zero = e.cf32(0.0);
    Value isZero = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OEQ, d, zero);
    Value inv =
        b.create<arith::SelectOp>(loc, isZero, zero, b.create<arith::DivFOp>(loc, e.cf32(1.0), d));
    // Round to nearest even by the 1.5 * 2^23 shift (|v * inv| <= 127), then exact conversion.
    Value magic = splat(b, loc, e.cf32(12582912.0), 32);
    Value scaled = e.fmul(v, splat(b, loc, inv, 32));
    Value rounded = b.create<arith::SubFOp>(loc, e.fadd(scaled, magic), magic);
    Value q32 = b.create<arith::FPToSIOp>(loc, vec(32, i32), rounded);
    Value q8 = b.create<arith::TruncIOp>(loc, vec(32, i8), q32);
    if (q4) {
      // Block b's halves go to bytes 16 (b % 2) and 32 + 16 (b % 2) of its pair's 64.
      Value pairBase = e.mul(e.divui(blk, e.c64(2)), e.c64(64));
      Value half = e.mul(e.remui(blk, e.c64(2)), e.c64(16));
      Value lo = b.create<mlir::vector::ShuffleOp>(loc, q8, q8, iota(16));
      Value hi = b.create<mlir::vector::ShuffleOp>(loc, q8, q8, iota(16, 16));
      Value at = e.add(pairBase, half);
      b.create<LLVM::StoreOp>(loc, lo, e.gepBytes(qx, at), /*alignment=*/16);
      b.create<LLVM::StoreOp>(loc, hi, e.gepBytes(qx, e.add(at, e.c64(32))), /*alignment=*/16);
    } else {
      b.create<LLVM::StoreOp>(loc, q8, e.gepBytes(qx, first), /*alignment=*/32);
    }
    Value sum = b.create<mlir::vector::ReductionOp>(loc, mlir::vector::CombiningKind::ADD, q32);
    Value sumF = b.create<arith::SIToFPOp>(loc, e.f32(), sum);
    e.storeF32(dx, blk, d);
    e.storeF32(sx, blk, e.fmul(d, sumF));
  });

  PtrByteReader reader;
  // Two blocks' weights as 64 unsigned bytes in qx's order.
  auto unsignedPair = [&](Value b0) -> Value {
    Value b1 = e.gepBytes(b0, e.c64(blockBytes));
    if (q4) {
      Value n0 = reader.loadBytes(b, loc, b0, 2, 16), n1 = reader.loadBytes(b, loc, b1, 2, 16);
      Value both = b.create<mlir::vector::ShuffleOp>(loc, n0, n1, iota(32));
      // >> 4 on 16-bit words (one vpsrlw), then one mask for both halves.
      Value words = b.create<mlir::vector::BitCastOp>(loc, vec(16, i16), both);
      Value shifted = b.create<arith::ShRUIOp>(loc, words, splat(b, loc, ci(i16, 4), 16));
      Value high = b.create<mlir::vector::BitCastOp>(loc, vec(32, i8), shifted);
      Value all = b.create<mlir::vector::ShuffleOp>(loc, both, high, iota(64));
      return b.create<arith::AndIOp>(loc, all, splat(b, loc, ci(i8, 15), 64));
    }
    Value q0 = reader.loadBytes(b, loc, b0, 2, 32), q1 = reader.loadBytes(b, loc, b1, 2, 32);
    Value both = b.create<mlir::vector::ShuffleOp>(loc, q0, q1, iota(64));
    return b.create<arith::XOrIOp>(loc, both, splat(b, loc, ci(i8, -128), 64));
  };
  // The 16 int32 lanes of a pair's dot product: which of the two blocks each lane sums.
  llvm::SmallVector<int64_t> lanesOf[2];
  for (int p = 0; p < 2; ++p)
    for (int64_t l = 0; l < 16; ++l)
      lanesOf[p].push_back(2 * p + (q4 ? (l / 4) % 2 : l / 8));
  auto dotPair = [&](Value b0, Value blk) {
    Value uWords = b.create<mlir::vector::BitCastOp>(loc, vec(16, i32), unsignedPair(b0));
    Value xWords =
        b.create<LLVM::LoadOp>(loc, vec(16, i32), e.gepBytes(qx, e.mul(blk, e.c64(32))), 64);
    Value dot =
        b.create<LLVM::CallIntrinsicOp>(loc, vec(16, i32), "llvm.x86.avx512.vpdpbusd.512",
                                        ValueRange{splat(b, loc, ci(i32, 0), 16), uWords, xWords})
            .getResult(0);
    return b.create<arith::SIToFPOp>(loc, vec(16, e.f32()), dot).getResult();
  };
  // Blocks blk .. blk + count - 1 (count 2 or 4): their f16 scales as floats.
  auto scalesOf = [&](Value block0, int64_t count) {
    llvm::SmallVector<Value, 4> bits;
    for (int64_t i = 0; i < 4; ++i)
      bits.push_back(reader.loadU16(b, loc, block0, (i < count ? i : 0) * blockBytes, 1));
    Value v = b.create<mlir::vector::FromElementsOp>(loc, vec(4, i16), bits);
    Value h = b.create<arith::BitcastOp>(loc, vec(4, b.getF16Type()), v);
    return extendFloat(b, loc, vec(4, e.f32()), h);
  };
  // Four f32 of a stack array from block blk (the last `4 - count` lanes zero).
  auto blockFloats = [&](Value base, Value blk, int64_t count) -> Value {
    if (count == 4)
      return e.loadF32(base, blk, 4);
    Value two = e.loadF32(base, blk, 2);
    return b.create<mlir::vector::ShuffleOp>(loc, two, e.zeros(2),
                                             llvm::ArrayRef<int64_t>{0, 1, 2, 3});
  };
  const int64_t quads = nBlocks / 4, pairTail = (nBlocks % 4) / 2;

  e.forLoop(begin, end, 1, [&](Value r) {
    Value row = e.gepBytes(w, e.mul(r, e.c64(nBlocks * blockBytes)));
    // acc[0], acc[1]: Σ dot * dw dx per lane; acc[2]: Σ dw sx per block lane (of 4).
    auto step = [&](Value blk, ValueRange iters, int64_t count) {
      Value b0 = e.gepBytes(row, e.mul(blk, e.c64(blockBytes)));
      Value dw = scalesOf(b0, count);
      Value scale = e.fmul(dw, blockFloats(dx, blk, count));
      llvm::SmallVector<Value> acc(iters.begin(), iters.end());
      acc[2] = e.fma(dw, blockFloats(sx, blk, count), acc[2]);
      for (int64_t p = 0; p < count / 2; ++p) {
        Value pairBlk = e.add(blk, e.c64(2 * p));
        Value dot = dotPair(e.gepBytes(b0, e.c64(2 * p * blockBytes)), pairBlk);
        Value lanes = b.create<mlir::vector::ShuffleOp>(loc, scale, scale, lanesOf[p]);
        acc[p] = e.fma(dot, lanes, acc[p]);
      }
      return acc;
    };
    auto accs =
        e.forLoop(e.c64(0), e.c64(quads * 4), 4, ValueRange{e.zeros(16), e.zeros(16), e.zeros(4)},
                  [&](Value blk, ValueRange iters) { return step(blk, iters, 4); });
    if (pairTail)
      accs = step(e.c64(quads * 4), accs, 2);
    Value sum = e.reduceAdd(e.fadd(accs[0], accs[1]));
    sum = b.create<arith::SubFOp>(loc, sum, e.fmul(e.reduceAdd(accs[2]), e.cf32(offset)));
    e.storeF32(out, r, sum);
  });
}

// matmul(a, b, out, m, n, k): unit u is row u / tiles, columns [16 t, 16 t + 16) of t = u % tiles.
void emitMatmulKernel(Emitter &e, const OpShape &op, Value begin, Value end) {
  Value a = e.buffer(0), bm = e.buffer(1), out = e.buffer(2);
  Value n = e.intArg(op, 1), k = e.intArg(op, 2);
  Value tiles = e.divui(e.add(n, e.c64(kMatmulTile - 1)), e.c64(kMatmulTile));
  e.forLoop(begin, end, 1, [&](Value u) {
    Value i = e.divui(u, tiles);
    Value j0 = e.mul(e.remui(u, tiles), e.c64(kMatmulTile));
    Value aRow = e.mul(i, k), outRow = e.mul(i, n);
    emitIfElse(
        e, cmpSle(e, e.add(j0, e.c64(kMatmulTile)), n),
        [&] {
          Value acc = e.forLoop(
              e.c64(0), k, 1, ValueRange{e.zeros(kMatmulTile)}, [&](Value p, ValueRange iters) {
                Value ap = splat(e.b, e.loc, e.loadF32(a, e.add(aRow, p)), kMatmulTile);
                Value bp = e.loadF32(bm, e.add(e.mul(p, n), j0), kMatmulTile);
                return llvm::SmallVector<Value>{e.fma(ap, bp, iters[0])};
              })[0];
          e.storeF32(out, e.add(outRow, j0), acc);
        },
        [&] {
          e.forLoop(j0, n, 1, [&](Value j) {
            Value sum =
                e.forLoop(e.c64(0), k, 1, ValueRange{e.cf32(0.0)}, [&](Value p, ValueRange iters) {
                  Value ap = e.loadF32(a, e.add(aRow, p));
                  Value bp = e.loadF32(bm, e.add(e.mul(p, n), j));
                  return llvm::SmallVector<Value>{e.fma(ap, bp, iters[0])};
                })[0];
            e.storeF32(out, e.add(outRow, j), sum);
          });
        });
  });
}

// attn_score(q, k_cache, scores, head_dim, seq_len, head_offset, kv_offset, kv_stride):
// scores[t] for t in [begin, end).
void emitAttnScoreKernel(Emitter &e, const OpShape &op, Value begin, Value end) {
  Value q = e.buffer(0), kCache = e.buffer(1), scores = e.buffer(2);
  Value headDim = e.intArg(op, 0), headOffset = e.intArg(op, 2);
  Value kvOffset = e.intArg(op, 3), kvStride = e.intArg(op, 4);
  Value headDimF = e.b.create<arith::SIToFPOp>(e.loc, e.f32(), headDim);
  Value scale = e.b.create<arith::DivFOp>(e.loc, e.cf32(1.0),
                                          e.b.create<mlir::math::SqrtOp>(e.loc, headDimF));
  e.forLoop(begin, end, 1, [&](Value t) {
    Value row = e.add(e.mul(t, kvStride), kvOffset);
    Value dot = emitDot(e, q, headOffset, kCache, row, op, 0);
    e.storeF32(scores, t, e.fmul(dot, scale));
  });
}

// attn_value(weights, v_cache, out, head_dim, seq_len, kv_offset, kv_stride, out_offset): unit u
// is d in [16 u, 16 u + 16).
void emitAttnValueKernel(Emitter &e, const OpShape &op, Value begin, Value end) {
  Value weights = e.buffer(0), vCache = e.buffer(1), out = e.buffer(2);
  Value headDim = e.intArg(op, 0), seqLen = e.intArg(op, 1), kvOffset = e.intArg(op, 2);
  Value kvStride = e.intArg(op, 3), outOffset = e.intArg(op, 4);
  e.forLoop(begin, end, 1, [&](Value u) {
    Value d0 = e.mul(u, e.c64(kAttnValueTile));
    auto column = [&](Value t, Value d) { return e.add(e.add(e.mul(t, kvStride), kvOffset), d); };
    emitIfElse(
        e, cmpSle(e, e.add(d0, e.c64(kAttnValueTile)), headDim),
        [&] {
          // Four positions per iteration into four accumulators: one chain of dependent
          // multiply-adds would wait on the FMA latency at every position.
          auto term = [&](Value t, Value acc) {
            Value wt = splat(e.b, e.loc, e.loadF32(weights, t), kAttnValueTile);
            return e.fma(wt, e.loadF32(vCache, column(t, d0), kAttnValueTile), acc);
          };
          Value unrolledEnd = e.roundDown(seqLen, 4);
          Value zero = e.zeros(kAttnValueTile);
          auto accs = e.forLoop(e.c64(0), unrolledEnd, 4, ValueRange{zero, zero, zero, zero},
                                [&](Value t, ValueRange iters) {
                                  llvm::SmallVector<Value> next;
                                  for (int64_t i = 0; i < 4; ++i)
                                    next.push_back(term(e.add(t, e.c64(i)), iters[i]));
                                  return next;
                                });
          Value acc = e.fadd(e.fadd(accs[0], accs[1]), e.fadd(accs[2], accs[3]));
          acc = e.forLoop(unrolledEnd, seqLen, 1, ValueRange{acc}, [&](Value t, ValueRange iters) {
            return llvm::SmallVector<Value>{term(t, iters[0])};
          })[0];
          e.storeF32(out, e.add(outOffset, d0), acc);
        },
        [&] {
          e.forLoop(d0, headDim, 1, [&](Value d) {
            Value sum = e.forLoop(
                e.c64(0), seqLen, 1, ValueRange{e.cf32(0.0)}, [&](Value t, ValueRange iters) {
                  Value v = e.loadF32(vCache, column(t, d));
                  return llvm::SmallVector<Value>{e.fma(e.loadF32(weights, t), v, iters[0])};
                })[0];
            e.storeF32(out, e.add(outOffset, d), sum);
          });
        });
  });
}

} // namespace

absl::Status emitContractionKernel(Emitter &e, const OpShape &op, Value begin, Value end) {
  switch (op.kind) {
  case OpKind::QuantizedMatmul:
    if (useInt8Dot(e, op)) // matrices of a few rows keep f32 x (see kInt8MinRows)
      emitIfElse(
          e, cmpSle(e, e.c64(kInt8MinRows), e.intArg(op, 0)),
          [&] { emitQMatmulInt8Kernel(e, op, begin, end); },
          [&] { emitQMatmulKernel(e, op, begin, end); });
    else
      emitQMatmulKernel(e, op, begin, end);
    return absl::OkStatus();
  case OpKind::Matmul:
    emitMatmulKernel(e, op, begin, end);
    return absl::OkStatus();
  case OpKind::AttnScore:
    emitAttnScoreKernel(e, op, begin, end);
    return absl::OkStatus();
  case OpKind::AttnValue:
    emitAttnValueKernel(e, op, begin, end);
    return absl::OkStatus();
  default:
    return absl::InternalError(
        absl::StrCat("emitContractionKernel: ", opInfo(op.kind).name, " is not a contraction"));
  }
}

} // namespace sinter::codegen::cpu
