// QuantWords.cpp - the pieces of the SPIR-V quantized_matmul kernels (QuantWords.h).
#include "codegen/spirv/QuantWords.h"

#include <cmath>

#include "codegen/ElementwiseMath.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVAttributes.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace sinter::codegen::spv {

namespace arith = mlir::arith;

int64_t alignmentOf(int64_t bytes) {
  if (bytes % 4 == 0)
    return 4;
  return bytes % 2 == 0 ? 2 : 1;
}

Value extractLane(Emitter &e, Value v, int64_t lane) {
  return e.b.create<mlir::vector::ExtractOp>(e.loc, v, llvm::ArrayRef<int64_t>{lane});
}

Value vec4Element(Emitter &e, Value v4, Value i) {
  return e.b.create<mlir::vector::ExtractElementOp>(e.loc, e.load(v4, e.divu(i, e.ci(4))),
                                                    e.toI32(e.remu(i, e.ci(4))));
}

Value XSource::load(Emitter &e, Value index) const {
  Value v = e.load(x4, index);
  return exponent ? emitScaleByPowerOfTwo(e.b, e.loc, v, exponent) : v;
}

Value XSource::at(Emitter &e, Value i) const {
  Value v = vec4Element(e, x4, i);
  return exponent ? emitScaleByPowerOfTwo(e.b, e.loc, v, exponent) : v;
}

GroupInput loadGroupInput(Emitter &e, const XSource &xs, Value first, int64_t weights) {
  GroupInput gi;
  for (int64_t v = 0; v < weights / 4; ++v) {
    Value index = e.add(e.divu(first, e.ci(4)), e.ci(v));
    Value xv = xs.load(e, index);
    if (!xs.g4) {
      gi.x.push_back(xv);
      continue;
    }
    gi.in.push_back(xv);
    gi.x.push_back(e.b.create<arith::MulFOp>(e.loc, xv, e.load(xs.g4, index)));
  }
  return gi;
}

Value groupDot(Emitter &e, Value q, const GroupInput &gi) {
  llvm::SmallVector<Value, 4> partial;
  for (size_t v = 0; v < gi.x.size(); ++v)
    for (int64_t l = 0; l < 4; ++l) {
      Value term = e.fmul(extractLane(e, q, 4 * v + l), extractLane(e, gi.x[v], l));
      if (partial.size() < 4)
        partial.push_back(term);
      else
        partial[l] = e.fadd(partial[l], term);
    }
  return e.fadd(e.fadd(partial[0], partial[1]), e.fadd(partial[2], partial[3]));
}

Value groupSum(Emitter &e, llvm::ArrayRef<Value> vectors, bool squares) {
  Value sum = e.cf(0.0);
  for (Value xv : vectors) {
    Value v = squares ? e.b.create<arith::MulFOp>(e.loc, xv, xv).getResult() : xv;
    Value pair = e.fadd(e.fadd(extractLane(e, v, 0), extractLane(e, v, 1)),
                        e.fadd(extractLane(e, v, 2), extractLane(e, v, 3)));
    sum = e.fadd(sum, pair);
  }
  return sum;
}

Value halfBitsToF32(Emitter &e, Value bits16) {
  Value h16 = e.b.create<arith::TruncIOp>(e.loc, e.b.getI16Type(), bits16);
  Value h = e.b.create<arith::BitcastOp>(e.loc, e.b.getF16Type(), h16);
  return extendFloat(e.b, e.loc, e.f32(), h);
}

std::array<PairBlock, 2> loadPair(Emitter &e, Value w, Value wordBase, DType dtype) {
  mlir::OpBuilder &b = e.b;
  const int64_t blockBytes = quantLayout(dtype).blockBytes, quantWords = (blockBytes - 2) / 4;
  llvm::SmallVector<Value, 17> raw;
  for (int64_t i = 0; i < blockBytes / 2; ++i)
    raw.push_back(e.load(w, e.add(wordBase, e.ci(i))));
  auto c = [&](int64_t v) { return e.c32(v); };
  auto half = [&](Value bits16) { return halfBitsToF32(e, bits16); };
  std::array<PairBlock, 2> blocks;
  blocks[0].scale = half(b.create<arith::AndIOp>(e.loc, raw[0], c(0xffff)));
  for (int64_t k = 0; k < quantWords; ++k) // bytes 2 + 4k .. 5 + 4k: a funnel shift
    blocks[0].words.push_back(
        b.create<arith::OrIOp>(e.loc, b.create<arith::ShRUIOp>(e.loc, raw[k], c(16)),
                               b.create<arith::ShLIOp>(e.loc, raw[k + 1], c(16))));
  blocks[1].scale = half(b.create<arith::ShRUIOp>(e.loc, raw[blockBytes / 4], c(16)));
  for (int64_t k = 0; k < quantWords; ++k)
    blocks[1].words.push_back(raw[blockBytes / 4 + 1 + k]);
  return blocks;
}

void accumulateWord(Emitter &e, DType dtype, Value word, Value lo, Value hi,
                    std::map<int64_t, Value> &sums) {
  mlir::OpBuilder &b = e.b;
  auto term = [&](Value src, int64_t bit, int64_t width, int64_t zero, Value xv, int64_t lane) {
    Value field = b.create<arith::AndIOp>(e.loc, src, e.c32(((int64_t(1) << width) - 1) << bit));
    Value biased = b.create<arith::OrIOp>(e.loc, field, e.c32(0x4b000000));
    Value f = b.create<arith::BitcastOp>(e.loc, e.f32(), biased);
    Value v = b.create<arith::SubFOp>(e.loc, f, e.cf(8388608.0 + double(zero << bit)));
    Value xl = extractLane(e, xv, lane);
    auto it = sums.find(bit);
    if (it == sums.end())
      sums[bit] = e.fmul(v, xl);
    else
      it->second = e.fma(v, xl, it->second);
  };
  if (dtype == DType::Q4_0) {
    Value q2 = b.create<arith::ShRUIOp>(e.loc, word, e.c32(12));
    term(word, 0, 4, 8, lo, 0);
    term(word, 4, 4, 8, hi, 0);
    term(word, 8, 4, 8, lo, 1);
    term(word, 12, 4, 8, hi, 1);
    term(word, 16, 4, 8, lo, 2);
    term(q2, 8, 4, 8, hi, 2);  // bits 20..23
    term(q2, 12, 4, 8, lo, 3); // bits 24..27
    term(q2, 16, 4, 8, hi, 3); // bits 28..31
    return;
  }
  // Q8_0: int8 quants; flipping the sign bits makes them q + 128, unsigned.
  Value q = b.create<arith::XOrIOp>(e.loc, word, e.c32(0x80808080));
  Value q2 = b.create<arith::ShRUIOp>(e.loc, q, e.c32(16));
  term(q, 0, 8, 128, lo, 0);
  term(q, 8, 8, 128, lo, 1);
  term(q2, 0, 8, 128, lo, 2);
  term(q2, 8, 8, 128, lo, 3);
}

Value combineSums(Emitter &e, const std::map<int64_t, Value> &sums) {
  Value dot;
  for (auto &[bit, sum] : sums) // ascending b; 2^-b is exact
    dot = dot ? e.fma(sum, e.cf(std::ldexp(1.0, -int(bit))), dot) : sum;
  return dot;
}

Value fastBlockDot(Emitter &e, DType dtype, llvm::ArrayRef<Value> words, llvm::ArrayRef<Value> x) {
  std::map<int64_t, Value> sums;
  for (size_t k = 0; k < words.size(); ++k)
    accumulateWord(e, dtype, words[k], x[k], dtype == DType::Q4_0 ? x[k + 4] : Value(), sums);
  return combineSums(e, sums);
}

SplitWords loadSplitWords(Emitter &e, Value w, DType dtype, Value blk, Value word,
                          llvm::ArrayRef<Value> rowBases, llvm::ArrayRef<Value> rowWords,
                          bool alignedRows) {
  llvm::SmallVector<Value, 8> rowW(rowBases.size(), w);
  return loadSplitWords(e, rowW, dtype, blk, word, rowBases, rowWords, alignedRows);
}

LaneWords loadLaneWords(Emitter &e, llvm::ArrayRef<Value> rowW, DType dtype, Value blk, Value word,
                        int64_t count, llvm::ArrayRef<Value> rowBases,
                        llvm::ArrayRef<Value> rowWords, bool alignedRows, bool window) {
  const int64_t blockBytes = quantLayout(dtype).blockBytes;
  LaneWords l;
  Value dRel = e.mul(blk, e.ci(blockBytes));
  // Without the window: the quant words from byte 2 + 4 word of the block, cut at bit `shift`.
  Value qRel, sRel, qWordRel;
  if (!window) {
    qRel = e.add(dRel, e.add(e.ci(2), e.mul(word, e.ci(4))));
    sRel = e.toI32(e.mul(e.remu(qRel, e.ci(4)), e.ci(8)));
    qWordRel = e.divu(qRel, e.ci(4));
  }
  Value dShiftRel = e.toI32(e.mul(e.remu(dRel, e.ci(4)), e.ci(8)));
  Value dWordRel = e.divu(dRel, e.ci(4));
  for (size_t r = 0; r < rowBases.size(); ++r) {
    Value dIndex, qIndex;
    if (alignedRows) {
      dIndex = e.add(rowWords[r], dWordRel);
      l.dShift.push_back(dShiftRel);
      if (!window) {
        qIndex = e.add(rowWords[r], qWordRel);
        l.shift.push_back(sRel);
      }
    } else {
      Value blockByte = e.add(rowBases[r], dRel);
      dIndex = e.divu(blockByte, e.ci(4));
      l.dShift.push_back(e.toI32(e.mul(e.remu(blockByte, e.ci(4)), e.ci(8))));
      if (!window) {
        Value qByte = e.add(rowBases[r], qRel);
        qIndex = e.divu(qByte, e.ci(4));
        l.shift.push_back(e.toI32(e.mul(e.remu(qByte, e.ci(4)), e.ci(8))));
      }
    }
    Value w = rowW[r];
    // count + 1 aligned words: from d's word with the window (the block starts at byte 0 or 2
    // of it, so they hold d and the quants), else from the first quant word's.
    Value from = window ? dIndex : qIndex;
    if (!window)
      l.dRaw.push_back(e.load(w, dIndex)); // d: the u16 at the block's start
    l.raw.emplace_back();
    for (int64_t i = 0; i <= count; ++i)
      l.raw.back().push_back(e.load(w, i == 0 ? from : e.add(from, e.ci(i))));
    if (window) {
      l.dRaw.push_back(l.raw.back()[0]);
      l.odd.push_back(
          e.b.create<arith::CmpIOp>(e.loc, arith::CmpIPredicate::ne, l.dShift.back(), e.c32(0)));
    }
  }
  return l;
}

SplitWords loadSplitWords(Emitter &e, llvm::ArrayRef<Value> rowW, DType dtype, Value blk,
                          Value word, llvm::ArrayRef<Value> rowBases,
                          llvm::ArrayRef<Value> rowWords, bool alignedRows) {
  LaneWords lw = loadLaneWords(e, rowW, dtype, blk, word, 1, rowBases, rowWords, alignedRows);
  SplitWords l;
  l.dRaw = lw.dRaw;
  l.dShift = lw.dShift;
  l.shift = lw.shift;
  for (const auto &raw : lw.raw) {
    l.lo.push_back(raw[0]);
    l.hi.push_back(raw[1]);
  }
  return l;
}

Value scaleFromWord(Emitter &e, Value raw, Value shift) {
  mlir::OpBuilder &b = e.b;
  return halfBitsToF32(e, b.create<arith::AndIOp>(
                              e.loc, b.create<arith::ShRUIOp>(e.loc, raw, shift), e.c32(0xffff)));
}

Value funnelWord(Emitter &e, Value lo, Value hi, Value shift) {
  mlir::OpBuilder &b = e.b;
  return b.create<arith::OrIOp>(
      e.loc, b.create<arith::ShRUIOp>(e.loc, lo, shift),
      b.create<arith::ShLIOp>(e.loc, b.create<arith::ShLIOp>(e.loc, hi, e.c32(16)),
                              b.create<arith::SubIOp>(e.loc, e.c32(16), shift)));
}

Value laneQuantWord(Emitter &e, const LaneWords &l, size_t r, int64_t k) {
  if (l.odd.empty())
    return funnelWord(e, l.raw[r][k], l.raw[r][k + 1], l.shift[r]);
  // The window: an even block's quants start at bit 16 of word 0 (a funnel shift by the
  // constant 16, written out: funnelWord's general form leaves a shift by 0), an odd one's at
  // word 1.
  mlir::OpBuilder &b = e.b;
  Value even =
      b.create<arith::OrIOp>(e.loc, b.create<arith::ShRUIOp>(e.loc, l.raw[r][k], e.c32(16)),
                             b.create<arith::ShLIOp>(e.loc, l.raw[r][k + 1], e.c32(16)));
  return e.select(l.odd[r], l.raw[r][k + 1], even);
}

Value splitScale(Emitter &e, const SplitWords &l, size_t r) {
  return scaleFromWord(e, l.dRaw[r], l.dShift[r]);
}

Value splitQuantWord(Emitter &e, const SplitWords &l, size_t r) {
  return funnelWord(e, l.lo[r], l.hi[r], l.shift[r]);
}

Int8Block quantizeBlockX(Emitter &e, llvm::ArrayRef<Value> vec4s, uint32_t lanes, bool sum) {
  mlir::OpBuilder &b = e.b;
  Value amax = e.cf(0.0);
  for (Value v : vec4s)
    for (int64_t l = 0; l < 4; ++l)
      amax = b.create<arith::MaxNumFOp>(e.loc, amax,
                                        b.create<mlir::math::AbsFOp>(e.loc, extractLane(e, v, l)));
  amax = e.clusterMax(amax, lanes);
  Value positive = b.create<arith::CmpFOp>(e.loc, arith::CmpFPredicate::OGT, amax, e.cf(0.0));
  Value inverse = e.select(positive, b.create<arith::DivFOp>(e.loc, e.cf(127.0), amax), e.cf(0.0));
  Int8Block out;
  out.dx = b.create<arith::DivFOp>(e.loc, amax, e.cf(127.0));
  Value qsum = e.cf(0.0);
  for (Value v : vec4s) {
    Value packed = e.c32(0);
    for (int64_t l = 0; l < 4; ++l) {
      Value qf = b.create<mlir::math::RoundEvenOp>(e.loc, e.fmul(extractLane(e, v, l), inverse));
      qsum = e.fadd(qsum, qf);
      Value byte =
          b.create<arith::AndIOp>(e.loc, b.create<arith::FPToSIOp>(e.loc, e.i32(), qf), e.c32(255));
      packed =
          b.create<arith::OrIOp>(e.loc, packed, b.create<arith::ShLIOp>(e.loc, byte, e.c32(8 * l)));
    }
    out.words.push_back(packed);
  }
  if (sum)
    out.qsum = e.clusterSum(qsum, lanes);
  return out;
}

Value int8WordDot(Emitter &e, DType dtype, Value q, Value xa, Value xb) {
  mlir::OpBuilder &b = e.b;
  auto format = mlir::spirv::PackedVectorFormatAttr::get(
      b.getContext(), mlir::spirv::PackedVectorFormat::PackedVectorFormat4x8Bit);
  if (dtype != DType::Q4_0)
    return b.create<mlir::spirv::SDotOp>(e.loc, e.i32(), xa, q, format);
  Value qlo = b.create<arith::AndIOp>(e.loc, q, e.c32(0x0f0f0f0f));
  Value qhi = b.create<arith::AndIOp>(e.loc, b.create<arith::ShRUIOp>(e.loc, q, e.c32(4)),
                                      e.c32(0x0f0f0f0f));
  return b.create<arith::AddIOp>(e.loc,
                                 b.create<mlir::spirv::SUDotOp>(e.loc, e.i32(), xa, qlo, format),
                                 b.create<mlir::spirv::SUDotOp>(e.loc, e.i32(), xb, qhi, format));
}

} // namespace sinter::codegen::spv
