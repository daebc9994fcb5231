// ContractionKernels.cpp - SPIR-V kernels of quantized_matmul, matmul, attn_score, attn_value.
//
// quantized_matmul and attn_score are dot products per output: one subgroup per output row, the
// lanes striding over the row (blocks of weights, or elements of a head) and a subgroup reduction
// at the end. Weights are decoded with Dequant.h group by group straight into registers and
// multiplied with x read 16 bytes at a time; the group's scale and bias are applied once per
// group. matmul and attn_value have one invocation per output element.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/ElementwiseMath.h"
#include "codegen/spirv/SpirvEmitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVAttributes.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace sinter::codegen::spv {

using mlir::Value;
using mlir::ValueRange;
namespace arith = mlir::arith;

namespace {

// The largest of 4, 2, 1 dividing `bytes`.
int64_t alignmentOf(int64_t bytes) {
  if (bytes % 4 == 0)
    return 4;
  return bytes % 2 == 0 ? 2 : 1;
}

Value extractLane(Emitter &e, Value v, int64_t lane) {
  return e.b.create<mlir::vector::ExtractOp>(e.loc, v, llvm::ArrayRef<int64_t>{lane});
}

// The x of one group of a row, 4 floats per vector: x itself, and x * g when an rms_norm
// prologue with weight g feeds the product (the norm's 1 / rms is applied to the row's sum).
struct GroupInput {
  llvm::SmallVector<Value, 8> x;  ///< what multiplies the weights
  llvm::SmallVector<Value, 8> in; ///< the norm's input, for the sum of squares (norm only)
};

GroupInput loadGroupInput(Emitter &e, Value x4, Value g4, Value first, int64_t weights) {
  GroupInput gi;
  for (int64_t v = 0; v < weights / 4; ++v) {
    Value index = e.add(e.divu(first, e.ci(4)), e.ci(v));
    Value xv = e.load(x4, index);
    if (!g4) {
      gi.x.push_back(xv);
      continue;
    }
    gi.in.push_back(xv);
    gi.x.push_back(e.b.create<arith::MulFOp>(e.loc, xv, e.load(g4, index)));
  }
  return gi;
}

// Σ_i q[i] * x[i] over a group.
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

// Σ_i v[i]^2 (squares) or Σ_i v[i] over a group's vectors.
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

// The fast decoders of the legacy 2-byte-aligned formats (Q4_0, Q8_0) read a pair of blocks as
// aligned words (the pair starts at a multiple of 4 bytes) and turn each quant into a float
// without a conversion instruction: OR-ing a field at bit b (< 2^23 when set at b) into the
// exponent of 2^23 gives the float 2^23 + 2^b q exactly, and subtracting 2^23 + 2^b z leaves
// 2^b (q - z). A block's products are summed per b and rescaled by 2^-b once per block, so each
// weight costs an AND-OR, a subtract and an FMA (the generic decoder spends about 9 operations).

// An fp16 held in the low 16 bits of an i32 (the rest zero), widened to f32 exactly.
Value halfBitsToF32(Emitter &e, Value bits16) {
  Value h16 = e.b.create<arith::TruncIOp>(e.loc, e.b.getI16Type(), bits16);
  Value h = e.b.create<arith::BitcastOp>(e.loc, e.b.getF16Type(), h16);
  return extendFloat(e.b, e.loc, e.f32(), h);
}

struct PairBlock {
  Value scale;                       ///< d, as f32
  llvm::SmallVector<Value, 8> words; ///< the block's quants, 4 bytes per i32, in order
};

// Blocks 0 and 1 of the pair at word `wordBase`: {d f16, qs[Q bytes]} twice, the second block
// starting at byte B (B % 4 == 2).
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

// Adds Σ (q_i - z) x_i over one u32 of quants to `sums` (kept per bit position b, scaled by
// 2^b): a Q4_0 word holds bytes 4k..4k+3 of a block, whose low nibbles are weights 4k.. (x in
// `lo`) and high nibbles 16 + 4k.. (`hi`); a Q8_0 word holds weights 4k..4k+3 (`lo`).
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

// Σ_b 2^-b sums[b]: the dot product of the words accumulated, without the block's scale.
Value combineSums(Emitter &e, const std::map<int64_t, Value> &sums) {
  Value dot;
  for (auto &[bit, sum] : sums) // ascending b; 2^-b is exact
    dot = dot ? e.fma(sum, e.cf(std::ldexp(1.0, -int(bit))), dot) : sum;
  return dot;
}

// Σ_i (q_i - z) x_i over one Q4_0 or Q8_0 block (x as 8 vec4s), without its scale.
Value fastBlockDot(Emitter &e, DType dtype, llvm::ArrayRef<Value> words, llvm::ArrayRef<Value> x) {
  std::map<int64_t, Value> sums;
  for (size_t k = 0; k < words.size(); ++k)
    accumulateWord(e, dtype, words[k], x[k], dtype == DType::Q4_0 ? x[k + 4] : Value(), sums);
  return combineSums(e, sums);
}

// One block of the split schedule in each of a lane's rows: the u32 holding the block's f16 d
// (at bit dShift) and the two u32s its quant word is cut from (at bit shift).
struct SplitWords {
  llvm::SmallVector<Value, 8> dRaw, lo, hi, dShift, shift;
};

// Loads quant word `word` of block `blk` of each row (byte offsets rowBases, u32 offsets
// rowWords). When rows start at 4-byte boundaries (static n_cols, even block count) the shifts
// are the same for every row and a row adds only its base.
SplitWords loadSplitWords(Emitter &e, Value w, DType dtype, Value blk, Value word,
                          llvm::ArrayRef<Value> rowBases, llvm::ArrayRef<Value> rowWords,
                          bool alignedRows) {
  const int64_t blockBytes = quantLayout(dtype).blockBytes;
  SplitWords l;
  Value dRel = e.mul(blk, e.ci(blockBytes));
  Value qRel = e.add(dRel, e.add(e.ci(2), e.mul(word, e.ci(4))));
  Value dShiftRel = e.toI32(e.mul(e.remu(dRel, e.ci(4)), e.ci(8)));
  Value sRel = e.toI32(e.mul(e.remu(qRel, e.ci(4)), e.ci(8)));
  Value dWordRel = e.divu(dRel, e.ci(4)), qWordRel = e.divu(qRel, e.ci(4));
  for (size_t r = 0; r < rowBases.size(); ++r) {
    Value dIndex, qIndex;
    if (alignedRows) {
      dIndex = e.add(rowWords[r], dWordRel);
      qIndex = e.add(rowWords[r], qWordRel);
      l.dShift.push_back(dShiftRel);
      l.shift.push_back(sRel);
    } else {
      Value blockByte = e.add(rowBases[r], dRel);
      Value qByte = e.add(rowBases[r], qRel);
      dIndex = e.divu(blockByte, e.ci(4));
      l.dShift.push_back(e.toI32(e.mul(e.remu(blockByte, e.ci(4)), e.ci(8))));
      qIndex = e.divu(qByte, e.ci(4));
      l.shift.push_back(e.toI32(e.mul(e.remu(qByte, e.ci(4)), e.ci(8))));
    }
    l.dRaw.push_back(e.load(w, dIndex)); // d: the u16 at the block's start
    l.lo.push_back(e.load(w, qIndex));   // the quant word at byte 2 + 4 k
    l.hi.push_back(e.load(w, e.add(qIndex, e.ci(1))));
  }
  return l;
}

// Row r's block scale d, as f32.
Value splitScale(Emitter &e, const SplitWords &l, size_t r) {
  mlir::OpBuilder &b = e.b;
  return halfBitsToF32(
      e, b.create<arith::AndIOp>(e.loc, b.create<arith::ShRUIOp>(e.loc, l.dRaw[r], l.dShift[r]),
                                 e.c32(0xffff)));
}

// Row r's quant word: a funnel shift of its two words ((hi << 16) << (16 - s) is 0 when s == 0).
Value splitQuantWord(Emitter &e, const SplitWords &l, size_t r) {
  mlir::OpBuilder &b = e.b;
  return b.create<arith::OrIOp>(
      e.loc, b.create<arith::ShRUIOp>(e.loc, l.lo[r], l.shift[r]),
      b.create<arith::ShLIOp>(e.loc, b.create<arith::ShLIOp>(e.loc, l.hi[r], e.c32(16)),
                              b.create<arith::SubIOp>(e.loc, e.c32(16), l.shift[r])));
}

Value workgroupArray(Emitter &e, mlir::Type element, int64_t n) {
  auto type = mlir::MemRefType::get(
      {n}, element, mlir::AffineMap(),
      mlir::spirv::StorageClassAttr::get(e.b.getContext(), mlir::spirv::StorageClass::Workgroup));
  return e.b.create<mlir::memref::AllocOp>(e.loc, type).getResult();
}

// The rows' sums across the cluster, the norm's scale, the stores and epilogues of the rows from
// `firstRow` (the tile's); `squares` is the norm's sum of squares when the workgroup already has
// it.
using Finish = llvm::function_ref<void(llvm::SmallVector<Value>, Value, Value)>;
// The first row of tile `tile` and the byte offsets of its rows (clamped to the last row).
using TileRows = llvm::function_ref<std::pair<Value, llvm::SmallVector<Value, 4>>(Value)>;

// One block of 32 of x as int8 (SEMANTICS.md's quantized activations), from the vec4s of it this
// lane holds, the block spread over `lanes` aligned lanes of the subgroup: d_x = max |x| / 127,
// q = round(x / d_x) four to a u32 per vec4 and, with `sum`, Σ q over the block (Q4_0's zero
// point). Every lane of the block gets d_x and the sum.
struct Int8Block {
  llvm::SmallVector<Value, 2> words;
  Value dx, qsum;
};
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

// Σ q_w q_x over one quant word of W and the int8 x it covers: a Q4_0 word's low nibbles against
// `xa` and high nibbles against `xb` (unsigned 4x8 vectors, OpSUDot), a Q8_0 word against `xa`
// (OpSDot).
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

// Matrices of fewer rows keep x in f32 (a branch on n_rows in the kernel).
constexpr int64_t kIntDotMinRows = 64;

// quantized_matmul with integer dot products (Q4_0, Q8_0; KernelPlan::intDotX). The workgroup
// first quantizes x (x * g under an rms_norm prologue) into workgroup memory, per block of 32:
// q = round(x * 127 / max|x|), four to a u32, and d_x = max|x| / 127 (for Q4_0 also 8 d_x Σ q,
// the zero point's share). Then the lanes take W as the split schedule does, one u32 of quants
// each: a Q4_0 word's low and high nibbles are two unsigned 4x8 vectors against two words of
// q (SUDot), a Q8_0 word one signed vector (SDot), and a block adds d_w (d_x Σ q_w q_x - 8 d_x Σ
// q_x) over its lanes. Quantizing x costs accuracy (SEMANTICS.md's 5e-4 bound) for a quarter of
// the bytes of x and a quarter of the multiplies.
//
// With KernelPlan::maxGroups the grid is capped and workgroup g loops over the tiles g, g + G,
// ... (G the grid's size) after quantizing x once.
void emitIntDotQMatmul(Emitter &e, const OpShape &op, Value x4, Value g4, Value nBlocks,
                       Value nRows, TileRows tileRows, Value lane, uint32_t lanes, Finish finish) {
  mlir::OpBuilder &b = e.b;
  const QuantLayout layout = quantLayout(op.dtype);
  const bool q4 = op.dtype == DType::Q4_0;
  const int64_t rows = e.plan.rowsPerSubgroup, perBlock = e.plan.splitWords;
  const int64_t vectors = op.ints[1] / 4, blocks = op.ints[1] / 32;
  const uint32_t subgroupLanes = e.target.subgroupSize;
  const int64_t subgroups = e.plan.workgroupSize / subgroupLanes;
  Value w = e.buffer(0);
  Value partials = g4 ? workgroupArray(e, e.f32(), subgroups) : Value();
  Value word = e.remu(lane, e.ci(perBlock));
  Value firstWord = e.ult(word, e.ci(1));
  const bool alignedRows = (op.ints[1] / layout.blockWeights * layout.blockBytes) % 4 == 0;
  // The tile's row offsets in bytes and words (set per tile below).
  llvm::SmallVector<Value, 4> rowBases;
  llvm::SmallVector<Value, 8> rowWords;
  auto setTile = [&](Value tile) {
    auto [first, bases] = tileRows(tile);
    rowBases.assign(bases.begin(), bases.end());
    rowWords.clear();
    for (int64_t r = 0; r < rows; ++r)
      rowWords.push_back(e.divu(rowBases[r], e.ci(4)));
    return first;
  };
  Value group = e.groupId();
  Value firstRow = setTile(group);
  auto loadW = [&](Value blk) {
    return loadSplitWords(e, w, op.dtype, blk, word, rowBases, rowWords, alignedRows);
  };
  // Adds block blk's products (its words in `l`) to each row's sum.
  Value xq, xd, xz;
  auto addBlock = [&](Value blk, const SplitWords &l, llvm::SmallVector<Value> next) {
    Value xa = e.load(xq, e.add(e.mul(blk, e.ci(8)), word));
    Value xb = q4 ? e.load(xq, e.add(e.mul(blk, e.ci(8)), e.add(word, e.ci(4)))) : Value();
    Value dx = e.load(xd, blk);
    Value zero = q4 ? e.select(firstWord, e.load(xz, blk), e.cf(0.0)) : Value();
    for (int64_t r = 0; r < rows; ++r) {
      Value scale = splitScale(e, l, r);
      Value dot = int8WordDot(e, op.dtype, splitQuantWord(e, l, r), xa, xb);
      Value part = e.fmul(b.create<arith::SIToFPOp>(e.loc, e.f32(), dot), dx);
      if (q4)
        part = b.create<arith::SubFOp>(e.loc, part, zero);
      next[r] = e.fma(part, scale, next[r]);
    }
    return next;
  };
  // U blocks (KernelPlan::intDotUnroll) from blk0 on, stride apart: all their loads issued
  // before any of their products, so that a lane has U blocks of W in flight instead of one
  // memory latency per block. Blocks past the end read the last block and add nothing (the
  // first is past it only when `guardFirst`: the loop's condition covers it otherwise).
  const int64_t unroll = e.plan.intDotUnroll;
  Value stride = e.ci(lanes / perBlock), lastBlock = e.sub(nBlocks, e.ci(1));
  struct Batch {
    llvm::SmallVector<Value, 16> blks, lives;
    llvm::SmallVector<SplitWords, 16> loaded;
  };
  auto loadBatch = [&](Value blk0, bool guardFirst) {
    Batch batch;
    for (int64_t u = 0; u < unroll; ++u) {
      Value blk = blk0, live;
      if (u > 0 || guardFirst) {
        Value at = e.add(blk0, e.mul(stride, e.ci(u)));
        live = e.ult(at, nBlocks);
        blk = e.minu(at, lastBlock);
      }
      batch.blks.push_back(blk);
      batch.lives.push_back(live);
      batch.loaded.push_back(loadW(blk));
    }
    return batch;
  };
  auto addBatch = [&](const Batch &batch, llvm::SmallVector<Value> next) {
    for (int64_t u = 0; u < unroll; ++u) {
      llvm::SmallVector<Value> sum = addBlock(batch.blks[u], batch.loaded[u], next);
      for (int64_t r = 0; r < rows; ++r)
        next[r] = batch.lives[u] ? e.select(batch.lives[u], sum[r], next[r]) : sum[r];
    }
    return next;
  };
  // 0. With SpirvTarget::qmatmulPrefetch the lane's first U blocks of W are loaded before x is
  // quantized, so that their memory latency and the quantization's overlap.
  std::optional<Batch> prefetched;
  if (e.target.qmatmulPrefetch)
    prefetched = loadBatch(e.divu(lane, e.ci(perBlock)), /*guardFirst=*/true);
  xq = workgroupArray(e, e.i32(), vectors);
  xd = workgroupArray(e, e.f32(), blocks);
  xz = q4 ? workgroupArray(e, e.f32(), blocks) : Value();
  // 1. x: vector v by invocation v mod T, every invocation making the same number of passes
  // so that the 8 lanes of a block (aligned: T is a multiple of 8) all reach the shuffles.
  Value tid = e.threadId(), threads = e.ci(e.plan.workgroupSize);
  Value lastVector = e.ci(vectors - 1);
  Value squares =
      e.forLoop(e.ci(0), e.ci(vectors), threads, mlir::ValueRange{e.cf(0.0)},
                [&](Value v0, mlir::ValueRange it) {
                  Value at = e.add(v0, tid);
                  Value live = e.ult(at, e.ci(vectors));
                  Value v = e.minu(at, lastVector);
                  Value in = e.load(x4, v);
                  Value xv =
                      g4 ? b.create<arith::MulFOp>(e.loc, in, e.load(g4, v)).getResult() : in;
                  Value sq = it[0];
                  if (g4)
                    sq = e.select(live, e.fadd(sq, groupSum(e, {in}, true)), sq);
                  Int8Block q = quantizeBlockX(e, {xv}, 8, q4); // a block is 8 vec4s
                  e.ifThen(live, [&] {
                    e.store(q.words[0], xq, v);
                    e.ifThen(e.ult(e.remu(v, e.ci(8)), e.ci(1)), [&] {
                      Value blk = e.divu(v, e.ci(8));
                      e.store(q.dx, xd, blk);
                      if (q4)
                        e.store(e.fmul(e.fmul(q.dx, q.qsum), e.cf(8.0)), xz, blk);
                    });
                  });
                  return llvm::SmallVector<Value>{sq};
                })[0];
  if (g4) {
    Value part = e.clusterSum(squares, subgroupLanes);
    e.ifThen(e.ult(e.laneId(), e.ci(1)), [&] { e.store(part, partials, e.subgroupId()); });
  }
  e.barrier();
  if (g4)
    squares = e.forLoop(e.ci(0), e.ci(subgroups), e.ci(1), mlir::ValueRange{e.cf(0.0)},
                        [&](Value j, mlir::ValueRange it) {
                          return llvm::SmallVector<Value>{e.fadd(it[0], e.load(partials, j))};
                        })[0];
  // 2. W: the split schedule's words, lane l taking word l % W of blocks l / W, l / W + L / W...
  auto tileProducts = [&](Value tileFirst, const Batch *early) {
    llvm::SmallVector<Value> accs(rows, e.cf(0.0));
    Value firstBlock = e.divu(lane, e.ci(perBlock));
    if (early) {
      // The blocks loaded before quantizing x: their loads were in flight meanwhile.
      accs = addBatch(*early, accs);
      firstBlock = e.add(firstBlock, e.mul(stride, e.ci(unroll)));
    }
    accs = e.forLoop(firstBlock, nBlocks, e.mul(stride, e.ci(unroll)), accs,
                     [&](Value blk0, mlir::ValueRange iters) {
                       return addBatch(loadBatch(blk0, /*guardFirst=*/false),
                                       llvm::SmallVector<Value>(iters.begin(), iters.end()));
                     });
    finish(accs, g4 ? squares : Value(), tileFirst);
  };
  const Batch *early = prefetched ? &*prefetched : nullptr;
  if (!e.plan.maxGroups) {
    tileProducts(firstRow, early);
    return;
  }
  // A capped grid: this workgroup's tiles g, g + G, ... with the x quantized above (the first
  // tile's rows are the ones the prefetch, if any, loaded).
  Value units = e.ci(e.plan.unitsPerGroup);
  Value tiles = e.divu(e.add(nRows, e.sub(units, e.ci(1))), units);
  Value groups = e.minu(tiles, e.ci(e.plan.maxGroups));
  tileProducts(firstRow, early);
  e.forLoop(e.add(group, groups), tiles, groups,
            [&](Value tile) { tileProducts(setTile(tile), nullptr); });
}

// Stores a tile's rows: complete(totals, squares, first row, storer) (emitQMatmulKernel).
using Complete = llvm::function_ref<void(llvm::SmallVector<Value>, Value, Value,
                                         llvm::function_ref<Value(int64_t)>)>;

// quantized_matmul (Q4_0, Q8_0) with every invocation of the workgroup on the same R rows
// (KernelPlan::workgroupRows): invocation t takes quant word t % W of blocks t / W, t / W + T / W,
// ... (T invocations) of every row, so a row's words spread over the whole workgroup and the grid
// has a workgroup per R rows: many more resident invocations than one subgroup per row pair
// gives, hence more loads in flight. x needs no pass of its own: the W lanes of a block load its
// 32 values, and with `int8` quantize them on the spot (max |x| over the block's lanes, q =
// round(x 127 / max), SUDot/SDot against the quant words, as emitIntDotQMatmul). The lanes' sums
// meet in workgroup memory, one barrier, and invocation r stores row r.
void emitWorkgroupRowsQMatmul(Emitter &e, const OpShape &op, Value x4, Value g4, Value nBlocks,
                              llvm::ArrayRef<Value> rowBases, bool int8, Complete complete,
                              Value firstRow) {
  mlir::OpBuilder &b = e.b;
  const bool q4 = op.dtype == DType::Q4_0;
  const QuantLayout layout = quantLayout(op.dtype);
  const int64_t rows = e.plan.rowsPerSubgroup, perBlock = e.plan.splitWords;
  const int64_t threads = e.plan.workgroupSize, subgroups = threads / e.target.subgroupSize;
  const int64_t unroll = e.plan.intDotUnroll;
  Value w = e.buffer(0), tid = e.threadId();
  Value word = e.remu(tid, e.ci(perBlock));
  Value firstWord = e.ult(word, e.ci(1));
  const bool alignedRows =
      op.isStatic(1) && (op.ints[1] / layout.blockWeights * layout.blockBytes) % 4 == 0;
  llvm::SmallVector<Value, 8> rowWords;
  for (int64_t r = 0; r < rows; ++r)
    rowWords.push_back(e.divu(rowBases[r], e.ci(4)));
  Value stride = e.ci(threads / perBlock), lastBlock = e.sub(nBlocks, e.ci(1));
  // iters: the rows' sums, then the norm's sum of squares (this invocation's part).
  llvm::SmallVector<Value> inits(rows + 1, e.cf(0.0));
  llvm::SmallVector<Value> accs = e.forLoop(
      e.divu(tid, e.ci(perBlock)), nBlocks, e.mul(stride, e.ci(unroll)), inits,
      [&](Value blk0, mlir::ValueRange iters) {
        llvm::SmallVector<Value> next(iters.begin(), iters.end());
        struct Loaded {
          Value blk, live;
          llvm::SmallVector<Value, 2> xs, ins;
          SplitWords words;
        };
        llvm::SmallVector<Loaded, 16> blocks(unroll);
        for (int64_t u = 0; u < unroll; ++u) { // every load of the U blocks first
          Loaded &L = blocks[u];
          L.blk = blk0;
          if (u > 0) {
            Value at = e.add(blk0, e.mul(stride, e.ci(u)));
            L.live = e.ult(at, nBlocks);
            L.blk = e.minu(at, lastBlock);
          }
          // Q4_0 word k covers weights 4k.. (low nibbles) and 16 + 4k.. (high); Q8_0's 4k..
          Value first4 = e.add(e.mul(L.blk, e.ci(8)), word);
          for (int64_t h = 0; h < (q4 ? 2 : 1); ++h) {
            Value index = e.add(first4, e.ci(4 * h));
            Value xv = e.load(x4, index);
            L.ins.push_back(xv);
            L.xs.push_back(g4 ? b.create<arith::MulFOp>(e.loc, xv, e.load(g4, index)).getResult()
                              : xv);
          }
          L.words = loadSplitWords(e, w, op.dtype, L.blk, word, rowBases, rowWords, alignedRows);
        }
        for (int64_t u = 0; u < unroll; ++u) {
          Loaded &L = blocks[u];
          auto keep = [&](Value sum, Value old) {
            return L.live ? e.select(L.live, sum, old) : sum;
          };
          if (g4)
            next[rows] = keep(e.fadd(next[rows], groupSum(e, L.ins, true)), next[rows]);
          if (!int8) {
            for (int64_t r = 0; r < rows; ++r) {
              std::map<int64_t, Value> sums;
              accumulateWord(e, op.dtype, splitQuantWord(e, L.words, r), L.xs[0],
                             q4 ? L.xs[1] : Value(), sums);
              next[r] =
                  keep(e.fma(combineSums(e, sums), splitScale(e, L.words, r), next[r]), next[r]);
            }
            continue;
          }
          // The block's x as int8 (its W lanes share d_x and Σ q), then each row's word.
          Int8Block xq = quantizeBlockX(e, L.xs, static_cast<uint32_t>(perBlock), q4);
          Value dx = xq.dx;
          // Q4_0's zero point: 8 d_x Σ q over the block, taken once (by its first word's lane).
          Value zero;
          if (q4)
            zero = e.select(firstWord, e.fmul(e.fmul(dx, xq.qsum), e.cf(8.0)), e.cf(0.0));
          for (int64_t r = 0; r < rows; ++r) {
            Value dot = int8WordDot(e, op.dtype, splitQuantWord(e, L.words, r), xq.words[0],
                                    q4 ? xq.words[1] : Value());
            Value part = e.fmul(b.create<arith::SIToFPOp>(e.loc, e.f32(), dot), dx);
            if (q4)
              part = b.create<arith::SubFOp>(e.loc, part, zero);
            next[r] = keep(e.fma(part, splitScale(e, L.words, r), next[r]), next[r]);
          }
        }
        return next;
      });
  // Each subgroup's sums into workgroup memory (rows + 1 floats a subgroup), one barrier, then
  // invocation r adds row r's and every invocation the squares (all of them store the norm).
  const int64_t width = rows + 1;
  Value partials = workgroupArray(e, e.f32(), subgroups * width);
  llvm::SmallVector<Value> sums;
  for (int64_t r = 0; r < (g4 ? rows + 1 : rows); ++r)
    sums.push_back(e.clusterSum(accs[r], e.target.subgroupSize));
  e.ifThen(e.ult(e.laneId(), e.ci(1)), [&] {
    Value base = e.mul(e.subgroupId(), e.ci(width));
    for (size_t r = 0; r < sums.size(); ++r)
      e.store(sums[r], partials, e.add(base, e.ci(static_cast<int64_t>(r))));
  });
  e.barrier();
  auto total = [&](Value column) {
    return e.forLoop(e.ci(0), e.ci(subgroups), e.ci(1), mlir::ValueRange{e.cf(0.0)},
                     [&](Value s, mlir::ValueRange it) {
                       return llvm::SmallVector<Value>{
                           e.fadd(it[0], e.load(partials, e.add(e.mul(s, e.ci(width)), column)))};
                     })[0];
  };
  Value mine = total(e.minu(tid, e.ci(rows - 1)));
  Value squares = g4 ? total(e.ci(rows)) : Value();
  complete(llvm::SmallVector<Value>(rows, mine), squares, firstRow, [&](int64_t r) {
    return b.create<arith::CmpIOp>(e.loc, arith::CmpIPredicate::eq, tid, e.ci(r));
  });
}

// quantized_matmul(W, x, out, n_rows, n_cols, dtype): subgroup s of workgroup g computes rows
// R (g * (workgroup / S) + s) .. + R - 1 (R = plan.rowsPerSubgroup); lane l takes steps l, l + S,
// ... of P blocks each (P = plan.blocksPerStep), decoding the same blocks of its R rows against
// one load of x. With an rms_norm prologue x is the norm's input times its weight, and each row's
// sum is scaled by 1 / rms at the end; an epilogue of element-wise members is applied to each
// output as it is stored.
void emitQMatmulKernel(Emitter &e, const OpShape &op, const KernelSpec &spec) {
  Value w = e.buffer(0), out = e.buffer(2);
  Value nRows = e.intArg(op, 0), nCols = e.intArg(op, 1);
  const OpShape *norm = spec.prologue.empty() ? nullptr : &spec.prologue[0];
  Value x4 = norm ? e.memberBuffer(0, 0) : e.buffer(1);
  Value g4 = norm ? e.memberBuffer(0, 1) : Value();
  QuantLayout layout = quantLayout(op.dtype);
  bool scalar = isScalarFormat(op.dtype);
  int64_t elementBytes = dtypeInfo(op.dtype).bytesPerBlock; // scalar formats only
  uint32_t lanes = e.target.subgroupSize;
  const int64_t rows = e.plan.rowsPerSubgroup, step = e.plan.blocksPerStep;
  int64_t alignment = alignmentOf(layout.blockBytes * step);
  // Pairs at 4-byte boundaries of a format with a fast decoder (SINTER_VK_QMATMUL=decode=generic
  // keeps the generic one, for comparison).
  const bool fast = hasFastQuantDecoder(op.dtype) && step % 2 == 0 && alignment == 4 &&
                    !e.target.qmatmulGenericDecode;
  if (scalar)
    alignment = op.isStatic(1) ? alignmentOf(op.ints[1] * elementBytes) : elementBytes;
  alignment = std::min<int64_t>(alignment, 4);
  Value nBlocks = e.divu(nCols, e.ci(layout.blockWeights));
  Value bytesPerRow =
      scalar ? e.mul(nCols, e.ci(elementBytes)) : e.mul(nBlocks, e.ci(layout.blockBytes));
  // Clusters of lanesPerRow lanes; cluster c of subgroup s of workgroup g computes `rows` rows.
  uint32_t rowLanes = e.plan.lanesPerRow ? e.plan.lanesPerRow : lanes;
  Value clustersPerGroup = e.ci(e.plan.workgroupSize / rowLanes);
  Value group = e.groupId();
  Value cluster = e.divu(e.threadId(), e.ci(rowLanes));
  // The first row of this cluster in tile `tile` (the workgroup's own tile unless the grid is
  // capped, KernelPlan::maxGroups).
  auto firstRowOf = [&](Value tile) {
    return e.mul(e.add(e.mul(tile, clustersPerGroup), cluster), e.ci(rows));
  };
  Value firstRow = firstRowOf(group);
  Value lane = e.remu(e.laneId(), e.ci(rowLanes));
  lanes = rowLanes;
  // No branch around the reductions: rows past the end read the last row again and store
  // nothing, so every lane of a subgroup reaches every shuffle.
  e.ifThen(e.ult(e.ci(0), nRows), [&] {
    Value lastRow = e.sub(nRows, e.ci(1));
    auto rowBasesOf = [&](Value first) {
      llvm::SmallVector<Value, 4> bases;
      for (int64_t r = 0; r < rows; ++r)
        bases.push_back(e.mul(e.minu(e.add(first, e.ci(r)), lastRow), bytesPerRow));
      return bases;
    };
    llvm::SmallVector<Value, 4> rowBases = rowBasesOf(firstRow);
    // iters: one dot product per row, then the sum of squares of the norm's input.
    llvm::SmallVector<Value, 5> inits(rows + 1, e.cf(0.0));
    // The norm's scale and store, then each row's store and epilogue, by the invocation
    // storer(r) says, from the rows' whole sums `totals` and the norm's sum of squares.
    auto complete = [&](llvm::SmallVector<Value> totals, Value squares, Value tileFirst,
                        llvm::function_ref<Value(int64_t)> storer) {
      if (norm) {
        Value size = e.memberInt(0, *norm, 0);
        Value sizeF = e.b.create<arith::UIToFPOp>(e.loc, e.f32(), e.toI32(size));
        Value mean = e.b.create<arith::DivFOp>(e.loc, squares, sizeF);
        Value root = e.b.create<mlir::math::SqrtOp>(e.loc, e.fadd(mean, e.cf(norm->scalar())));
        Value scale = e.b.create<arith::DivFOp>(e.loc, e.cf(1.0), root);
        for (Value &t : totals)
          t = e.fmul(t, scale);
        // The normalized vector is still stored (the host or a later op may read it), unless
        // another launch stores it: every invocation knows 1 / rms, so the whole grid shares the
        // store, element i by invocation i mod (workgroups x workgroup size). (One subgroup
        // storing it all was a serial tail as long as the product of a 4096-column matrix.)
        if (!(spec.unstoredOutputs & 1)) {
          Value normOut = e.memberBuffer(0, 2);
          Value units = e.ci(e.plan.unitsPerGroup);
          Value groups = e.divu(e.add(nRows, e.sub(units, e.ci(1))), units);
          if (e.plan.maxGroups) // the grid's size (each tile a workgroup takes stores it again)
            groups = e.minu(groups, e.ci(e.plan.maxGroups));
          Value threads = e.ci(e.plan.workgroupSize);
          Value self = e.add(e.mul(group, threads), e.threadId());
          e.forLoop(self, size, e.mul(groups, threads), [&](Value i) {
            auto at = [&](Value v4) {
              return e.b.create<mlir::vector::ExtractElementOp>(
                  e.loc, e.load(v4, e.divu(i, e.ci(4))), e.toI32(e.remu(i, e.ci(4))));
            };
            e.store(e.fmul(e.fmul(at(x4), at(g4)), scale), normOut, i);
          });
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        Value row = e.add(tileFirst, e.ci(r));
        Value store = e.b.create<arith::AndIOp>(e.loc, storer(r), e.ult(row, nRows));
        e.ifThen(store, [&] {
          e.store(totals[r], out, row);
          Value v = totals[r];
          int first = static_cast<int>(spec.prologue.size()) + 1;
          for (size_t j = 0; j < spec.epilogue.size(); ++j) {
            int m = first + static_cast<int>(j);
            OpKind kind = spec.epilogue[j].kind;
            llvm::SmallVector<Value, 2> inputs{v};
            if (kind != OpKind::Silu)
              inputs.push_back(e.load(e.memberBuffer(m, 1), row));
            v = emitElementwise(e.b, e.loc, kind, inputs, MathTarget::Gpu);
            e.store(v, e.memberBuffer(m, kind == OpKind::Silu ? 1 : 2), row);
          }
        });
      }
    };
    // The rows' sums across the cluster, then complete(), lane 0 of the cluster storing.
    // `squares`: the norm's sum of squares when the workgroup already has it (else accs[rows]
    // holds the lane's part).
    auto finish = [&](llvm::SmallVector<Value> accs, Value squares, Value tileFirst) {
      llvm::SmallVector<Value> totals;
      for (int64_t r = 0; r < rows; ++r)
        totals.push_back(e.clusterSum(accs[r], lanes));
      if (norm && !squares)
        squares = e.clusterSum(accs[rows], lanes);
      complete(totals, squares, tileFirst, [&](int64_t) { return e.ult(lane, e.ci(1)); });
    };
    if (e.plan.workgroupRows) {
      // Every invocation of the workgroup on the same rows (KernelPlan::workgroupRows); int8 x
      // from 64 rows, as the split schedule below.
      auto wide = [&](bool int8) {
        emitWorkgroupRowsQMatmul(e, op, x4, g4, nBlocks, rowBases, int8, complete, firstRow);
      };
      if (e.plan.intDotX)
        e.ifElse(
            e.ult(e.ci(kIntDotMinRows - 1), nRows), [&] { wide(true); }, [&] { wide(false); });
      else
        wide(false);
      return;
    }
    if (e.plan.splitWords > 0) {
      auto split = [&] {
        // Split blocks: W lanes per block, lane l taking quant word l % W of blocks
        // l / W, l / W + lanes / W, ...; the lanes of one load then read consecutive words of
        // consecutive blocks, and consecutive vec4s of x.
        const int64_t perBlock = e.plan.splitWords;
        Value word = e.remu(lane, e.ci(perBlock));
        const bool alignedRows =
            op.isStatic(1) && (op.ints[1] / layout.blockWeights * layout.blockBytes) % 4 == 0;
        llvm::SmallVector<Value, 8> rowWords;
        for (int64_t r = 0; r < rows; ++r)
          rowWords.push_back(e.divu(rowBases[r], e.ci(4)));
        // U blocks per iteration, all their loads issued before any of their math (a lane's
        // loop is otherwise one memory latency per block); blocks past the end read the last
        // block and add nothing.
        const int64_t unroll = e.plan.splitUnroll;
        Value stride = e.ci(lanes / perBlock), lastBlock = e.sub(nBlocks, e.ci(1));
        auto accs = e.forLoop(
            e.divu(lane, e.ci(perBlock)), nBlocks, e.mul(stride, e.ci(unroll)), inits,
            [&](Value blk0, ValueRange iters) {
              llvm::SmallVector<Value> next(iters.begin(), iters.end());
              struct Loaded {
                Value live;
                llvm::SmallVector<Value, 2> xs, ins;
                SplitWords words;
              };
              llvm::SmallVector<Loaded, 4> blocks(unroll);
              for (int64_t u = 0; u < unroll; ++u) {
                Loaded &L = blocks[u];
                Value blk = blk0;
                if (u > 0) {
                  Value at = e.add(blk0, e.mul(stride, e.ci(u)));
                  L.live = e.ult(at, nBlocks);
                  blk = e.minu(at, lastBlock);
                }
                // x of this word: Q4_0 word k covers weights 4k.. (lo) and 16 + 4k.. (hi).
                Value first4 = e.add(e.mul(blk, e.ci(8)), word);
                for (int64_t h = 0; h < (op.dtype == DType::Q4_0 ? 2 : 1); ++h) {
                  Value index = e.add(first4, e.ci(4 * h));
                  Value xv = e.load(x4, index);
                  L.ins.push_back(xv);
                  L.xs.push_back(
                      g4 ? e.b.create<arith::MulFOp>(e.loc, xv, e.load(g4, index)).getResult()
                         : xv);
                }
                L.words =
                    loadSplitWords(e, w, op.dtype, blk, word, rowBases, rowWords, alignedRows);
              }
              for (int64_t u = 0; u < unroll; ++u) {
                Loaded &L = blocks[u];
                for (int64_t r = 0; r < rows; ++r) {
                  Value scale = splitScale(e, L.words, r), q = splitQuantWord(e, L.words, r);
                  std::map<int64_t, Value> sums;
                  accumulateWord(e, op.dtype, q, L.xs[0], L.xs.size() > 1 ? L.xs[1] : Value(),
                                 sums);
                  Value sum = e.fma(combineSums(e, sums), scale, next[r]);
                  next[r] = L.live ? e.select(L.live, sum, next[r]) : sum;
                }
                if (norm) {
                  Value sum = e.fadd(next[rows], groupSum(e, L.ins, true));
                  next[rows] = L.live ? e.select(L.live, sum, next[rows]) : sum;
                }
              }
              return next;
            });
        finish(accs, Value(), firstRow);
      };
      // Few rows keep x in f32: their time is not the weights' bandwidth, and over a handful of
      // outputs one near-cancelling dot product, which quantizing x perturbs by about 0.4% of
      // the row's |w||x|, can carry the NMSE past SEMANTICS.md's 5e-4.
      if (e.plan.intDotX)
        e.ifElse(
            e.ult(e.ci(kIntDotMinRows - 1), nRows),
            [&] {
              auto tileRows = [&](Value tile) {
                Value first = firstRowOf(tile);
                return std::make_pair(first, rowBasesOf(first));
              };
              emitIntDotQMatmul(e, op, x4, g4, nBlocks, nRows, tileRows, lane, lanes, finish);
            },
            split);
      else
        split();
      return;
    }
    auto accs = e.forLoop(
        lane, e.divu(nBlocks, e.ci(step)), e.ci(lanes), inits, [&](Value s, ValueRange iters) {
          llvm::SmallVector<Value> next(iters.begin(), iters.end());
          Value firstBlock = e.mul(s, e.ci(step));
          llvm::SmallVector<std::unique_ptr<WordReader>, 4> readers;
          llvm::SmallVector<Value, 4> bases;
          for (int64_t r = 0; r < rows; ++r) {
            readers.push_back(std::make_unique<WordReader>(e, w, alignment));
            bases.push_back(e.add(rowBases[r], e.mul(firstBlock, e.ci(layout.blockBytes))));
          }
          if (fast) {
            for (int64_t p = 0; p < step; p += 2) {
              Value firstColumn = e.mul(e.add(firstBlock, e.ci(p)), e.ci(layout.blockWeights));
              std::array<GroupInput, 2> gis;
              for (int64_t k = 0; k < 2; ++k)
                gis[k] = loadGroupInput(e, x4, g4, e.add(firstColumn, e.ci(32 * k)), 32);
              for (int64_t r = 0; r < rows; ++r) {
                Value wordBase = e.divu(e.add(bases[r], e.ci(p * layout.blockBytes)), e.ci(4));
                std::array<PairBlock, 2> pair = loadPair(e, w, wordBase, op.dtype);
                for (int64_t k = 0; k < 2; ++k)
                  next[r] = e.fma(fastBlockDot(e, op.dtype, pair[k].words, gis[k].x), pair[k].scale,
                                  next[r]);
              }
              if (norm)
                for (int64_t k = 0; k < 2; ++k)
                  next[rows] = e.fadd(next[rows], groupSum(e, gis[k].in, true));
            }
            return next;
          }
          for (int64_t p = 0; p < step; ++p) {
            Value firstColumn = e.mul(e.add(firstBlock, e.ci(p)), e.ci(layout.blockWeights));
            for (int64_t g = 0; g < layout.groupsPerBlock(); ++g) {
              Value first = e.add(firstColumn, e.ci(g * layout.groupWeights));
              GroupInput gi = loadGroupInput(e, x4, g4, first, layout.groupWeights);
              Value xSum;
              for (int64_t r = 0; r < rows; ++r) {
                readers[r]->setOffset(p * layout.blockBytes);
                WeightGroup wg = emitWeightGroup(e.b, e.loc, *readers[r], op.dtype, bases[r], g);
                Value dot = groupDot(e, wg.q, gi);
                next[r] = wg.scale ? e.fma(dot, wg.scale, next[r]) : e.fadd(next[r], dot);
                if (wg.bias) {
                  if (!xSum)
                    xSum = groupSum(e, gi.x, false);
                  next[r] = e.fma(xSum, wg.bias, next[r]);
                }
              }
              if (norm)
                next[rows] = e.fadd(next[rows], groupSum(e, gi.in, true));
            }
          }
          return next;
        });
    if (scalar) { // columns past the last whole pseudo-block (scalar formats have rows == 1)
      Value tailBegin = e.add(e.mul(nBlocks, e.ci(layout.blockWeights)), lane);
      accs = e.forLoop(tailBegin, nCols, e.ci(lanes), ValueRange{accs[0], accs[1]},
                       [&](Value c, ValueRange it) {
                         WordReader reader(e, w, alignment);
                         Value element = e.add(rowBases[0], e.mul(c, e.ci(elementBytes)));
                         Value weight = emitScalarWeight(e.b, e.loc, reader, op.dtype, element);
                         auto at = [&](Value v4) {
                           return e.b.create<mlir::vector::ExtractElementOp>(
                               e.loc, e.load(v4, e.divu(c, e.ci(4))), e.toI32(e.remu(c, e.ci(4))));
                         };
                         Value x = at(x4), squares = it[1];
                         if (norm) {
                           squares = e.fma(x, x, squares);
                           x = e.fmul(x, at(g4));
                         }
                         return llvm::SmallVector<Value>{e.fma(weight, x, it[0]), squares};
                       });
    }
    finish(accs, Value(), firstRow);
  });
}

// matmul(a, b, out, m, n, k): invocation o computes out[o] = row o / n, column o % n.
void emitMatmulKernel(Emitter &e, const OpShape &op) {
  Value a = e.buffer(0), bm = e.buffer(1), out = e.buffer(2);
  Value m = e.intArg(op, 0), n = e.intArg(op, 1), k = e.intArg(op, 2);
  Value o = e.add(e.mul(e.groupId(), e.ci(e.plan.workgroupSize)), e.threadId());
  e.ifThen(e.ult(o, e.mul(m, n)), [&] {
    Value i = e.divu(o, n), j = e.remu(o, n);
    Value aRow = e.mul(i, k);
    Value sum = e.forLoop(e.ci(0), k, e.ci(1), ValueRange{e.cf(0.0)}, [&](Value p, ValueRange it) {
      Value ap = e.load(a, e.add(aRow, p));
      Value bp = e.load(bm, e.add(e.mul(p, n), j));
      return llvm::SmallVector<Value>{e.fma(ap, bp, it[0])};
    })[0];
    e.store(sum, out, o);
  });
}

// attn_score(q, k_cache, scores, head_dim, seq_len, head_offset, kv_offset, kv_stride): one
// subgroup per position t, the lanes striding over d.
void emitAttnScoreKernel(Emitter &e, const OpShape &op) {
  Value q = e.buffer(0), kCache = e.buffer(1), scores = e.buffer(2);
  Value headDim = e.intArg(op, 0), seqLen = e.intArg(op, 1), headOffset = e.intArg(op, 2);
  Value kvOffset = e.intArg(op, 3), kvStride = e.intArg(op, 4);
  uint32_t lanes = e.target.subgroupSize;
  Value scale;
  if (op.isStatic(0)) {
    scale = e.cf(1.0 / std::sqrt(double(op.ints[0])));
  } else {
    Value headDimF = e.b.create<arith::UIToFPOp>(e.loc, e.f32(), e.toI32(headDim));
    scale = e.b.create<arith::DivFOp>(e.loc, e.cf(1.0),
                                      e.b.create<mlir::math::SqrtOp>(e.loc, headDimF));
  }
  Value t = e.add(e.mul(e.groupId(), e.ci(e.plan.workgroupSize / lanes)), e.subgroupId());
  Value lane = e.laneId();
  e.ifThen(e.ult(t, seqLen), [&] {
    Value row = e.add(e.mul(t, kvStride), kvOffset);
    Value partial =
        e.forLoop(lane, headDim, e.ci(lanes), ValueRange{e.cf(0.0)}, [&](Value d, ValueRange it) {
          Value qd = e.load(q, e.add(headOffset, d));
          Value kd = e.load(kCache, e.add(row, d));
          return llvm::SmallVector<Value>{e.fma(qd, kd, it[0])};
        })[0];
    Value dot = e.clusterSum(partial, lanes);
    e.ifThen(e.ult(lane, e.ci(1)), [&] { e.store(e.fmul(dot, scale), scores, t); });
  });
}

// attn_value(weights, v_cache, out, head_dim, seq_len, kv_offset, kv_stride, out_offset): one
// invocation per d.
void emitAttnValueKernel(Emitter &e, const OpShape &op) {
  Value weights = e.buffer(0), vCache = e.buffer(1), out = e.buffer(2);
  Value headDim = e.intArg(op, 0), seqLen = e.intArg(op, 1), kvOffset = e.intArg(op, 2);
  Value kvStride = e.intArg(op, 3), outOffset = e.intArg(op, 4);
  Value d = e.add(e.mul(e.groupId(), e.ci(e.plan.workgroupSize)), e.threadId());
  e.ifThen(e.ult(d, headDim), [&] {
    Value column = e.add(kvOffset, d);
    Value sum =
        e.forLoop(e.ci(0), seqLen, e.ci(1), ValueRange{e.cf(0.0)}, [&](Value t, ValueRange it) {
          Value v = e.load(vCache, e.add(e.mul(t, kvStride), column));
          return llvm::SmallVector<Value>{e.fma(e.load(weights, t), v, it[0])};
        })[0];
    e.store(sum, out, e.add(outOffset, d));
  });
}

// attention over heads: the spec's members are attn_score, softmax and attn_value of head 0
// (words 0..10), then six words the runtime adds: n_heads, heads per K/V head, and the strides
// per head of q's offset, k's kv_offset, v's kv_offset and out's offset. Workgroup h is head h:
// its subgroups take chunks of 4 positions, s, s + NS, ..., each lane holding q at d = lane + k S,
// and keep a running max m, sum l and weighted sum of V (an online softmax); the subgroups' states
// are merged through workgroup memory at the end. Only the last head's workgroup writes the scores
// buffer (the raw scores while scanning, then the normalized weights), which is what running the
// members head after head leaves there.
absl::Status emitAttentionKernel(Emitter &e, const OpShape &score, const KernelSpec &spec) {
  if (!score.isStatic(0) || score.ints[0] <= 0)
    return absl::UnimplementedError("attention: the SPIR-V kernel needs a compile-time head_dim");
  mlir::OpBuilder &b = e.b;
  const int64_t dim = score.ints[0];
  const OpShape &value = spec.epilogue[1];
  const uint32_t lanes = e.target.subgroupSize;
  const int64_t perLane = (dim + lanes - 1) / lanes;
  const int64_t subgroups = e.plan.workgroupSize / lanes;
  Value q = e.memberBuffer(0, 0), kCache = e.memberBuffer(0, 1), scores = e.memberBuffer(0, 2);
  Value vCache = e.memberBuffer(2, 1), out = e.memberBuffer(2, 2);
  Value seqLen = e.memberInt(0, score, 1), headOffset = e.memberInt(0, score, 2);
  Value kOffset = e.memberInt(0, score, 3), kStride = e.memberInt(0, score, 4);
  Value vOffset = e.memberInt(2, value, 2), vStride = e.memberInt(2, value, 3);
  Value outOffset = e.memberInt(2, value, 4);
  auto extra = [&](uint32_t i) { return e.pushWord(kAttentionMemberWords + i); };
  Value heads = extra(0), group = extra(1), qStep = extra(2), kStep = extra(3);
  Value vStep = extra(4), outStep = extra(5);
  // Split attention: workgroup g is share g % S of head g / S.
  const int64_t splits = e.plan.attentionSplits;
  Value head = e.groupId(), share = e.ci(0);
  if (splits > 1) {
    share = e.remu(head, e.ci(splits));
    head = e.divu(head, e.ci(splits));
  }
  Value kvHead = e.divu(head, group);
  Value qBase = e.add(headOffset, e.mul(head, qStep));
  Value kBase = e.add(kOffset, e.mul(kvHead, kStep));
  Value vBase = e.add(vOffset, e.mul(kvHead, vStep));
  Value oBase = e.add(outOffset, e.mul(head, outStep));
  Value isLast = e.ult(e.sub(heads, e.ci(1)), e.add(head, e.ci(1)));
  Value sg = e.subgroupId(), lane = e.laneId();
  Value scale = e.cf(1.0 / std::sqrt(double(dim)));
  // Lane l's elements d = l + k S; those past head_dim read element 0 and count as 0.
  llvm::SmallVector<Value, 8> ds, valid, qs;
  for (int64_t k = 0; k < perLane; ++k) {
    Value d = e.add(lane, e.ci(k * lanes));
    Value ok = e.ult(d, e.ci(dim));
    ds.push_back(e.select(ok, d, e.ci(0)));
    valid.push_back(ok);
    qs.push_back(e.select(ok, e.load(q, e.add(qBase, ds.back())), e.cf(0.0)));
  }
  const double lowest = -3.0e38; // finite: exp(lowest - lowest) is 1, not NaN
  llvm::SmallVector<Value, 10> inits{e.cf(lowest), e.cf(0.0)};
  for (int64_t k = 0; k < perLane; ++k)
    inits.push_back(e.cf(0.0));
  // Subgroup s takes chunks s, s + NS, ... of kChunk positions: the chunk's K and V loads are
  // all issued before the first reduction (V's first, ahead of the scores' store branch), and its
  // kChunk reductions are independent, so one position's latency no longer follows another's.
  constexpr int64_t kChunk = 4;
  Value chunks = e.divu(e.add(seqLen, e.ci(kChunk - 1)), e.ci(kChunk));
  Value lastT = e.sub(seqLen, e.ci(1)); // the loop runs only when seqLen > 0
  // A share is a contiguous run of ceil(chunks / S) chunks (empty past the end).
  Value firstChunk = sg, endChunk = chunks;
  if (splits > 1) {
    Value per = e.divu(e.add(chunks, e.ci(splits - 1)), e.ci(splits));
    Value begin = e.mul(share, per);
    firstChunk = e.add(begin, sg);
    endChunk = e.minu(chunks, e.add(begin, per));
  }
  auto state =
      e.forLoop(firstChunk, endChunk, e.ci(subgroups), inits, [&](Value c, mlir::ValueRange it) {
        llvm::SmallVector<Value, kChunk> ts, live;
        llvm::SmallVector<llvm::SmallVector<Value, 4>, kChunk> vs;
        for (int64_t i = 0; i < kChunk; ++i) {
          Value t = e.add(e.mul(c, e.ci(kChunk)), e.ci(i));
          live.push_back(e.ult(t, seqLen));
          ts.push_back(e.minu(t, lastT)); // positions past the end read the last one, weigh 0
          Value vRow = e.add(e.mul(ts.back(), vStride), vBase);
          vs.emplace_back();
          for (int64_t k = 0; k < perLane; ++k)
            vs.back().push_back(e.select(valid[k], e.load(vCache, e.add(vRow, ds[k])), e.cf(0.0)));
        }
        llvm::SmallVector<Value, kChunk> scoreOf;
        for (int64_t i = 0; i < kChunk; ++i) {
          Value kRow = e.add(e.mul(ts[i], kStride), kBase);
          Value partial = e.cf(0.0);
          for (int64_t k = 0; k < perLane; ++k)
            partial = e.fma(qs[k], e.load(kCache, e.add(kRow, ds[k])), partial);
          scoreOf.push_back(e.fmul(e.clusterSum(partial, lanes), scale));
        }
        e.ifThen(b.create<arith::AndIOp>(e.loc, isLast, e.ult(lane, e.ci(1))), [&] {
          for (int64_t i = 0; i < kChunk; ++i)
            e.ifThen(live[i], [&] { e.store(scoreOf[i], scores, ts[i]); });
        });
        Value m = it[0];
        for (int64_t i = 0; i < kChunk; ++i)
          m = e.select(live[i], b.create<arith::MaxNumFOp>(e.loc, m, scoreOf[i]), m);
        Value keep = emitExp(b, e.loc, b.create<arith::SubFOp>(e.loc, it[0], m), MathTarget::Gpu);
        llvm::SmallVector<Value, kChunk> ps;
        for (int64_t i = 0; i < kChunk; ++i)
          ps.push_back(e.select(
              live[i],
              emitExp(b, e.loc, b.create<arith::SubFOp>(e.loc, scoreOf[i], m), MathTarget::Gpu),
              e.cf(0.0)));
        Value sum = e.fmul(it[1], keep);
        for (int64_t i = 0; i < kChunk; ++i)
          sum = e.fadd(sum, ps[i]);
        llvm::SmallVector<Value> next{m, sum};
        for (int64_t k = 0; k < perLane; ++k) {
          Value acc = e.fmul(it[2 + k], keep);
          for (int64_t i = 0; i < kChunk; ++i)
            acc = e.fma(ps[i], vs[i][k], acc);
          next.push_back(acc);
        }
        return next;
      });
  // Merge the subgroups: every invocation reads all NS states (few), then owns some d.
  Value maxes = workgroupArray(e, e.f32(), subgroups), sums = workgroupArray(e, e.f32(), subgroups);
  Value accs = workgroupArray(e, e.f32(), subgroups * dim);
  e.ifThen(e.ult(lane, e.ci(1)), [&] {
    e.store(state[0], maxes, sg);
    e.store(state[1], sums, sg);
  });
  for (int64_t k = 0; k < perLane; ++k)
    e.ifThen(valid[k], [&] { e.store(state[2 + k], accs, e.add(e.mul(sg, e.ci(dim)), ds[k])); });
  e.barrier();
  Value maxAll = e.forLoop(e.ci(0), e.ci(subgroups), e.ci(1), mlir::ValueRange{e.cf(lowest)},
                           [&](Value j, mlir::ValueRange it) {
                             return llvm::SmallVector<Value>{
                                 b.create<arith::MaxNumFOp>(e.loc, it[0], e.load(maxes, j))};
                           })[0];
  auto weightOf = [&](Value j) {
    return emitExp(b, e.loc, b.create<arith::SubFOp>(e.loc, e.load(maxes, j), maxAll),
                   MathTarget::Gpu);
  };
  Value total =
      e.forLoop(e.ci(0), e.ci(subgroups), e.ci(1), mlir::ValueRange{e.cf(0.0)},
                [&](Value j, mlir::ValueRange it) {
                  return llvm::SmallVector<Value>{e.fma(e.load(sums, j), weightOf(j), it[0])};
                })[0];
  Value tid = e.threadId(), threads = e.ci(e.plan.workgroupSize);
  auto inverseOf = [&](Value sum) {
    Value nonEmpty = b.create<arith::CmpFOp>(e.loc, arith::CmpFPredicate::OGT, sum, e.cf(0.0));
    return e.select(nonEmpty, b.create<arith::DivFOp>(e.loc, e.cf(1.0), sum), e.cf(0.0));
  };
  // The scores buffer of the last head: the raw scores become the softmax's weights.
  auto normalizeScores = [&](Value max, Value inverse) {
    e.ifThen(isLast, [&] {
      e.forLoop(tid, seqLen, threads, [&](Value t) {
        Value x = b.create<arith::SubFOp>(e.loc, e.load(scores, t), max);
        e.store(e.fmul(emitExp(b, e.loc, x, MathTarget::Gpu), inverse), scores, t);
      });
    });
  };
  auto workgroupOutput = [&](Value d) {
    return e.forLoop(e.ci(0), e.ci(subgroups), e.ci(1), mlir::ValueRange{e.cf(0.0)},
                     [&](Value j, mlir::ValueRange it) {
                       Value a = e.load(accs, e.add(e.mul(j, e.ci(dim)), d));
                       return llvm::SmallVector<Value>{e.fma(a, weightOf(j), it[0])};
                     })[0];
  };
  if (splits == 1) {
    Value inverse = inverseOf(total);
    e.forLoop(tid, e.ci(dim), threads,
              [&](Value d) { e.store(e.fmul(workgroupOutput(d), inverse), out, e.add(oBase, d)); });
    normalizeScores(maxAll, inverse);
    return absl::OkStatus();
  }
  // Split: the share's state (max, sum, unnormalized output) goes to scratch, words
  // heads + (head * S + share) * (dim + 2)...; then a device-scope fence, and one invocation
  // counts the share done. The workgroup that counts the S-th merges the S states (the fence
  // after its count makes the others' writes visible) and sets the counter back to 0.
  Value scratch = e.binding(e.plan.scratchBinding);
  auto bits = [&](Value f) { return b.create<arith::BitcastOp>(e.loc, e.i32(), f).getResult(); };
  auto fromBits = [&](Value i) {
    return b.create<arith::BitcastOp>(e.loc, e.f32(), i).getResult();
  };
  const int64_t stateWords = dim + 2;
  auto stateBase = [&](Value s) {
    return e.add(heads, e.mul(e.add(e.mul(head, e.ci(splits)), s), e.ci(stateWords)));
  };
  Value mine = stateBase(share);
  e.ifThen(e.ult(tid, e.ci(1)), [&] {
    e.store(bits(maxAll), scratch, mine);
    e.store(bits(total), scratch, e.add(mine, e.ci(1)));
  });
  e.forLoop(tid, e.ci(dim), threads, [&](Value d) {
    e.store(bits(workgroupOutput(d)), scratch, e.add(mine, e.add(d, e.ci(2))));
  });
  auto deviceFence = [&] {
    b.create<mlir::spirv::MemoryBarrierOp>(e.loc, mlir::spirv::Scope::Device,
                                           mlir::spirv::MemorySemantics::AcquireRelease |
                                               mlir::spirv::MemorySemantics::UniformMemory);
  };
  deviceFence();
  Value lastFlag = workgroupArray(e, e.i32(), 1);
  e.barrier();
  e.ifThen(e.ult(tid, e.ci(1)), [&] {
    Value before = b.create<mlir::memref::AtomicRMWOp>(e.loc, mlir::arith::AtomicRMWKind::addi,
                                                       e.c32(1), scratch, mlir::ValueRange{head})
                       .getResult();
    e.store(before, lastFlag, e.ci(0));
  });
  e.barrier();
  Value counted = e.load(lastFlag, e.ci(0));
  Value merging =
      b.create<arith::CmpIOp>(e.loc, arith::CmpIPredicate::eq, counted, e.c32(splits - 1));
  e.ifThen(merging, [&] {
    deviceFence();
    auto loadState = [&](Value s, int64_t word) {
      return fromBits(e.load(scratch, e.add(stateBase(s), e.ci(word))));
    };
    Value max = e.forLoop(e.ci(0), e.ci(splits), e.ci(1), mlir::ValueRange{e.cf(lowest)},
                          [&](Value s, mlir::ValueRange it) {
                            return llvm::SmallVector<Value>{
                                b.create<arith::MaxNumFOp>(e.loc, it[0], loadState(s, 0))};
                          })[0];
    auto shareWeight = [&](Value s) {
      return emitExp(b, e.loc, b.create<arith::SubFOp>(e.loc, loadState(s, 0), max),
                     MathTarget::Gpu);
    };
    Value sum =
        e.forLoop(e.ci(0), e.ci(splits), e.ci(1), mlir::ValueRange{e.cf(0.0)},
                  [&](Value s, mlir::ValueRange it) {
                    return llvm::SmallVector<Value>{e.fma(loadState(s, 1), shareWeight(s), it[0])};
                  })[0];
    Value inverse = inverseOf(sum);
    e.forLoop(tid, e.ci(dim), threads, [&](Value d) {
      Value o = e.forLoop(e.ci(0), e.ci(splits), e.ci(1), mlir::ValueRange{e.cf(0.0)},
                          [&](Value s, mlir::ValueRange it) {
                            Value a =
                                fromBits(e.load(scratch, e.add(stateBase(s), e.add(d, e.ci(2)))));
                            return llvm::SmallVector<Value>{e.fma(a, shareWeight(s), it[0])};
                          })[0];
      e.store(e.fmul(o, inverse), out, e.add(oBase, d));
    });
    normalizeScores(max, inverse);
    e.ifThen(e.ult(tid, e.ci(1)), [&] { e.store(e.c32(0), scratch, head); });
  });
  return absl::OkStatus();
}

} // namespace

bool hasFastQuantDecoder(DType dtype) { return dtype == DType::Q4_0 || dtype == DType::Q8_0; }

absl::Status emitContraction(Emitter &e, const OpShape &op, const KernelSpec &spec) {
  switch (op.kind) {
  case OpKind::QuantizedMatmul:
    emitQMatmulKernel(e, op, spec);
    return absl::OkStatus();
  case OpKind::Matmul:
    emitMatmulKernel(e, op);
    return absl::OkStatus();
  case OpKind::AttnScore:
    if (spec.attentionOverHeads)
      return emitAttentionKernel(e, op, spec);
    emitAttnScoreKernel(e, op);
    return absl::OkStatus();
  case OpKind::AttnValue:
    emitAttnValueKernel(e, op);
    return absl::OkStatus();
  default:
    return absl::InternalError(
        absl::StrCat("emitContraction: ", opInfo(op.kind).name, " is not a contraction"));
  }
}

} // namespace sinter::codegen::spv
