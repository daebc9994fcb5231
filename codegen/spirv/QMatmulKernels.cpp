// QMatmulKernels.cpp - the SPIR-V kernel of quantized_matmul and its schedules.
//
// One subgroup per pair of output rows by default, the lanes striding over the row's blocks
// (codegen/spirv/README.md, "Schedules"): the block-per-lane and pair schedules of every format,
// the split schedule of Q4_0/Q8_0 (a u32 of quants per lane) with f32 or int8 x, and the
// workgroup-rows schedule (wgrows=N). The rms_norm prologue and element-wise epilogues are applied
// here too; the pieces come from QuantWords.h.
#include <algorithm>
#include <array>
#include <cassert>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "codegen/ElementwiseMath.h"
#include "codegen/spirv/QuantWords.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace sinter::codegen::spv {

using mlir::ValueRange;
namespace arith = mlir::arith;

namespace {

// The rows' sums across the cluster, the norm's scale, the stores and epilogues of the rows from
// `firstRow` (the tile's); `squares` is the norm's sum of squares when the workgroup already has
// it.
using Finish = llvm::function_ref<void(llvm::SmallVector<Value>, Value, Value)>;
// The first row of tile `tile` and the byte offsets of its rows (clamped to the last row).
using TileRows = llvm::function_ref<std::pair<Value, llvm::SmallVector<Value, 4>>(Value)>;

// Matrices of fewer rows keep x in f32 (a branch on n_rows in the kernel).
constexpr int64_t kIntDotMinRows = 64;

// x (x * g under an rms_norm prologue) quantized to int8 into workgroup memory, per block of 32:
// q = round(x * 127 / max|x|), four to a u32 (xq), d_x = max|x| / 127 (xd) and for Q4_0 8 d_x Σ q
// (xz, the zero point's share); with a prologue the norm's sum of squares too, reduced through
// `partials` (a float a subgroup). Ends with a barrier, after which every invocation has it all.
struct WorkgroupX {
  Value xq, xd, xz, squares;
};
WorkgroupX quantizeXIntoWorkgroup(Emitter &e, const OpShape &op, const XSource &xs,
                                  Value partials) {
  mlir::OpBuilder &b = e.b;
  const bool q4 = op.dtype == DType::Q4_0;
  const int64_t vectors = op.ints[1] / 4, blocks = op.ints[1] / 32;
  const uint32_t subgroupLanes = e.target.subgroupSize;
  const int64_t subgroups = e.plan.workgroupSize / subgroupLanes;
  WorkgroupX wx;
  wx.xq = workgroupArray(e, e.i32(), vectors);
  wx.xd = workgroupArray(e, e.f32(), blocks);
  wx.xz = q4 ? workgroupArray(e, e.f32(), blocks) : Value();
  Value xq = wx.xq, xd = wx.xd, xz = wx.xz, g4 = xs.g4;
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
                  Value in = xs.load(e, v);
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
    wx.squares = e.forLoop(e.ci(0), e.ci(subgroups), e.ci(1), mlir::ValueRange{e.cf(0.0)},
                           [&](Value j, mlir::ValueRange it) {
                             return llvm::SmallVector<Value>{e.fadd(it[0], e.load(partials, j))};
                           })[0];
  return wx;
}

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
void emitIntDotQMatmul(Emitter &e, const OpShape &op, llvm::ArrayRef<Value> rowW, const XSource &xs,
                       Value nBlocks, Value nRows, TileRows tileRows, Value lane, uint32_t lanes,
                       Finish finish) {
  mlir::OpBuilder &b = e.b;
  Value g4 = xs.g4;
  const QuantLayout layout = quantLayout(op.dtype);
  const bool q4 = op.dtype == DType::Q4_0;
  const int64_t rows = e.plan.rowsPerSubgroup, perBlock = e.plan.splitWords;
  const int64_t subgroups = e.plan.workgroupSize / e.target.subgroupSize;
  Value partials = g4 ? workgroupArray(e, e.f32(), subgroups) : Value();
  // A lane's quant words of a block: laneWords from `word` on; lanesPerBlock lanes a block.
  const int64_t laneWords = e.plan.laneWords, lanesPerBlock = perBlock / laneWords;
  Value word = e.mul(e.remu(lane, e.ci(lanesPerBlock)), e.ci(laneWords));
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
    return loadLaneWords(e, rowW, op.dtype, blk, word, laneWords, rowBases, rowWords, alignedRows,
                         e.plan.blockWindow && laneWords == perBlock);
  };
  // Adds block blk's products (its words in `l`) to each row's sum.
  Value xq, xd, xz;
  auto addBlock = [&](Value blk, const LaneWords &l, llvm::SmallVector<Value> next) {
    // x of quant word k: int8 word k of the block (Q4_0: k for the low nibbles, k + 4 high).
    Value first = e.add(e.mul(blk, e.ci(8)), word);
    llvm::SmallVector<Value, 4> xa, xb;
    for (int64_t k = 0; k < laneWords; ++k) {
      xa.push_back(e.load(xq, k == 0 ? first : e.add(first, e.ci(k))));
      xb.push_back(q4 ? e.load(xq, e.add(first, e.ci(k + 4))) : Value());
    }
    Value dx = e.load(xd, blk);
    Value zero = q4 ? e.select(firstWord, e.load(xz, blk), e.cf(0.0)) : Value();
    for (int64_t r = 0; r < rows; ++r) {
      Value scale = scaleFromWord(e, l.dRaw[r], l.dShift[r]);
      Value dot;
      for (int64_t k = 0; k < laneWords; ++k) {
        Value q = laneQuantWord(e, l, r, k);
        Value d = int8WordDot(e, op.dtype, q, xa[k], xb[k]);
        dot = dot ? b.create<arith::AddIOp>(e.loc, dot, d).getResult() : d;
      }
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
  Value stride = e.ci(lanes / lanesPerBlock), lastBlock = e.sub(nBlocks, e.ci(1));
  struct Batch {
    llvm::SmallVector<Value, 16> blks, lives;
    llvm::SmallVector<LaneWords, 16> loaded;
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
  // 0. With KernelPlan::prefetch the lane's first U blocks of W are loaded before x is
  // quantized, so that their memory latency and the quantization's overlap.
  std::optional<Batch> prefetched;
  if (e.plan.prefetch)
    prefetched = loadBatch(e.divu(lane, e.ci(lanesPerBlock)), /*guardFirst=*/true);
  WorkgroupX wx = quantizeXIntoWorkgroup(e, op, xs, partials);
  xq = wx.xq;
  xd = wx.xd;
  xz = wx.xz;
  Value squares = wx.squares;
  // 2. W: the split schedule's words, lane l taking word l % W of blocks l / W, l / W + L / W...
  auto tileProducts = [&](Value tileFirst, const Batch *early) {
    llvm::SmallVector<Value> accs(rows, e.cf(0.0));
    Value firstBlock = e.divu(lane, e.ci(lanesPerBlock));
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
void emitWorkgroupRowsQMatmul(Emitter &e, const OpShape &op, const XSource &xs, Value nBlocks,
                              llvm::ArrayRef<Value> rowBases, bool int8, Complete complete,
                              Value firstRow) {
  mlir::OpBuilder &b = e.b;
  Value g4 = xs.g4;
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
            Value xv = xs.load(e, index);
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

// copy_buffer_offset(src = the anchor's out, dst, src_offset = 0, dst_offset, size = 4 n_rows)
// as an epilogue (the runtime checks the constants): row `row`'s value `v` goes to dst's bytes
// [dst_offset + 4 row, + 4) too. At an unaligned dst_offset the value straddles two words whose
// other bytes the neighbouring rows' invocations write: each side is cleared and set with
// atomics, which commute on disjoint bytes.
void storeCopy(Emitter &e, const OpShape &copy, int m, Value v, Value row) {
  mlir::OpBuilder &b = e.b;
  Value dst = e.memberBuffer(m, 1);
  Value offset = e.memberInt(m, copy, 1);
  Value bits = b.create<arith::BitcastOp>(e.loc, e.i32(), v);
  Value byte = e.remu(offset, e.ci(4));
  Value word = e.add(e.divu(offset, e.ci(4)), row);
  e.ifElse(
      e.ult(byte, e.ci(1)), [&] { e.store(bits, dst, word); },
      [&] {
        Value shift = e.toI32(e.mul(byte, e.ci(8)));
        Value ones = e.c32(-1);
        Value high = b.create<arith::ShLIOp>(e.loc, ones, shift); // the bytes from dst_offset on
        Value low = b.create<arith::XOrIOp>(e.loc, high, ones);
        auto rmw = [&](arith::AtomicRMWKind kind, Value value, Value at) {
          b.create<mlir::memref::AtomicRMWOp>(e.loc, kind, value, dst, ValueRange{at});
        };
        rmw(arith::AtomicRMWKind::andi, low, word);
        rmw(arith::AtomicRMWKind::ori, b.create<arith::ShLIOp>(e.loc, bits, shift), word);
        Value next = e.add(word, e.ci(1));
        Value back = b.create<arith::SubIOp>(e.loc, e.c32(32), shift);
        rmw(arith::AtomicRMWKind::andi, high, next);
        rmw(arith::AtomicRMWKind::ori, b.create<arith::ShRUIOp>(e.loc, bits, back), next);
      });
}

} // namespace

// quantized_matmul(W, x, out, n_rows, n_cols, dtype): subgroup s of workgroup g computes rows
// R (g * (workgroup / S) + s) .. + R - 1 (R = plan.rowsPerSubgroup); lane l takes steps l, l + S,
// ... of P blocks each (P = plan.blocksPerStep), decoding the same blocks of its R rows against
// one load of x. With an rms_norm prologue x is the norm's input times its weight, and each row's
// sum is scaled by 1 / rms at the end; an epilogue of element-wise members is applied to each
// output as it is stored.
//
// With a sibling product (codegen::hasSiblingProduct: gate and up of a SwiGLU) a cluster's two
// rows are the same row of the anchor's W and of the sibling's, decoded against the same x; both
// outputs are stored, and the element-wise members after the sibling take its row as their
// second input from the register.
void emitQMatmulKernel(Emitter &e, const OpShape &op, const KernelSpec &spec) {
  Value w = e.buffer(0), out = e.buffer(2);
  const bool sibling = hasSiblingProduct(spec);
  const int siblingMember = static_cast<int>(spec.prologue.size()) + 1;
  Value nRows = e.intArg(op, 0), nCols = e.intArg(op, 1);
  const OpShape *norm = spec.prologue.empty() ? nullptr : &spec.prologue[0];
  Value x4 = norm ? e.memberBuffer(0, 0) : e.buffer(1);
  Value g4 = norm ? e.memberBuffer(0, 1) : Value();
  QuantLayout layout = quantLayout(op.dtype);
  bool scalar = isScalarFormat(op.dtype);
  int64_t elementBytes = dtypeInfo(op.dtype).bytesPerBlock; // scalar formats only
  uint32_t lanes = e.target.subgroupSize;
  const int64_t rows = e.plan.rowsPerSubgroup, planStep = e.plan.blocksPerStep;
  // Output rows a cluster computes: its `rows` accumulators, or one row of two products.
  const int64_t outRows = sibling ? 1 : rows;
  // The matrix each accumulator reads.
  llvm::SmallVector<Value, 8> rowW(rows, w);
  if (sibling)
    rowW[1] = e.memberBuffer(siblingMember, 0);
  int64_t planAlignment = alignmentOf(layout.blockBytes * planStep);
  // Pairs at 4-byte boundaries of a format with a fast decoder (SINTER_VK_QMATMUL=decode=generic
  // keeps the generic one, for comparison).
  const bool planFast = hasFastQuantDecoder(op.dtype) && planStep % 2 == 0 && planAlignment == 4 &&
                        !e.target.qmatmulGenericDecode;
  if (scalar)
    planAlignment = op.isStatic(1) ? alignmentOf(op.ints[1] * elementBytes) : elementBytes;
  planAlignment = std::min<int64_t>(planAlignment, 4);
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
    return e.mul(e.add(e.mul(tile, clustersPerGroup), cluster), e.ci(outRows));
  };
  Value firstRow = firstRowOf(group);
  Value lane = e.remu(e.laneId(), e.ci(rowLanes));
  lanes = rowLanes;
  // With a norm, complete() sets rescue[0] where the f32 sum of squares cannot be trusted
  // (ElementwiseMath.h): the fast pass then stores nothing and the rows are computed again from
  // x 2^j. The flag is uniform over the workgroup (every cluster sums the same x in the same
  // order, or the workgroup shares one sum), so the second pass may have barriers.
  Value rescue = norm ? e.functionArray(e.i32(), 1) : Value();
  // The rows from x read through `xs` (its exponent set in the rescue pass).
  auto emitRows = [&](const XSource &xs) {
    // The rescue pass (xs.exponent set) is as rare as the rows that need it, so it takes the
    // plan's schedule with the least code: f32 x (no int8), one block at a time, no pairs.
    const bool rescuePass = static_cast<bool>(xs.exponent);
    const int64_t step = rescuePass ? 1 : planStep;
    const bool fast = planFast && !rescuePass;
    const int64_t alignment = rescuePass && !scalar
                                  ? std::min<int64_t>(alignmentOf(layout.blockBytes), 4)
                                  : planAlignment;
    Value lastRow = e.sub(nRows, e.ci(1));
    auto rowBasesOf = [&](Value first) {
      llvm::SmallVector<Value, 4> bases;
      for (int64_t r = 0; r < rows; ++r)
        bases.push_back(e.mul(e.minu(e.add(first, e.ci(sibling ? 0 : r)), lastRow), bytesPerRow));
      return bases;
    };
    llvm::SmallVector<Value, 4> rowBases = rowBasesOf(firstRow);
    // The second inputs of binary epilogue members that no earlier member writes
    // (KernelSpec::earlyInputs: the residual of wo and down), loaded now for the workgroup's own
    // rows so that their latency overlaps the product instead of following its reduction. Only
    // where every store is of the workgroup's own tile (no capped grid, no workgroup rows).
    const int firstMember = static_cast<int>(spec.prologue.size()) + 1;
    std::map<int, llvm::SmallVector<Value, 4>> early;
    if (spec.earlyInputs && e.target.qmatmulEarlyInputs && !sibling && !e.plan.maxGroups &&
        !e.plan.workgroupRows)
      for (size_t j = 0; j < spec.epilogue.size(); ++j) {
        int m = firstMember + static_cast<int>(j);
        OpKind kind = spec.epilogue[j].kind;
        if ((kind != OpKind::Add && kind != OpKind::ElementMul) || m >= 32 ||
            !((spec.earlyInputs >> m) & 1))
          continue;
        for (int64_t r = 0; r < outRows; ++r)
          early[m].push_back(
              e.load(e.memberBuffer(m, 1), e.minu(e.add(firstRow, e.ci(r)), lastRow)));
      }
    // iters: one dot product per row, then the sum of squares of the norm's input.
    llvm::SmallVector<Value, 5> inits(rows + 1, e.cf(0.0));
    // The norm's scale and store, then each row's store and epilogue, by the invocation
    // storer(r) says, from the rows' whole sums `totals` and the norm's sum of squares.
    auto complete = [&](llvm::SmallVector<Value> totals, Value squares, Value tileFirst,
                        llvm::function_ref<Value(int64_t)> storer) {
      // Fast pass: false where the f32 sum of squares cannot be trusted; nothing is stored then,
      // and the rescue pass computes the rows again.
      Value keep;
      if (norm) {
        Value size = e.memberInt(0, *norm, 0);
        Value sizeF = e.b.create<arith::UIToFPOp>(e.loc, e.f32(), e.toI32(size));
        std::function<Value(Value)> normalize;
        if (!xs.exponent) {
          Value mean = e.b.create<arith::DivFOp>(e.loc, squares, sizeF);
          Value root = e.b.create<mlir::math::SqrtOp>(e.loc, e.fadd(mean, e.cf(norm->scalar())));
          Value scale = e.b.create<arith::DivFOp>(e.loc, e.cf(1.0), root);
          normalize = [&e, scale](Value v) { return e.fmul(v, scale); };
          Value needed = emitRmsRescueNeeded(e.b, e.loc, squares);
          e.store(e.b.create<arith::ExtUIOp>(e.loc, e.i32(), needed), rescue, e.ci(0));
          keep = e.b.create<arith::XOrIOp>(e.loc, needed,
                                           e.b.create<arith::ConstantIntOp>(e.loc, 1, 1));
        } else {
          RmsRescueScale s =
              emitRmsRescueScale(e.b, e.loc, squares, sizeF, norm->scalar(), xs.exponent);
          normalize = [&e, s](Value v) { return e.fmul(e.fmul(v, s.inverse), s.post); };
        }
        for (Value &t : totals)
          t = normalize(t);
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
          auto storeNorm = [&] {
            e.forLoop(self, size, e.mul(groups, threads), [&](Value i) {
              e.store(normalize(e.fmul(xs.at(e, i), vec4Element(e, g4, i))), normOut, i);
            });
          };
          if (keep)
            e.ifThen(keep, storeNorm);
          else
            storeNorm();
        }
      }
      const int first = static_cast<int>(spec.prologue.size()) + 1;
      // The first epilogue member applied row by row below (a rope or a sibling product before
      // it is done here).
      size_t perRow = 0;
      if (!spec.epilogue.empty() && spec.epilogue[0].kind == OpKind::Rope) {
        // A rope epilogue (the runtime's rope(q = out, k = out, n_heads_k = 0)): rows 2i and
        // 2i + 1 are pair i % (head_dim / 2) of a head (a tile starts at an even row, the plan
        // gives a cluster an even number of rows, head_dim is even), rotated before they are
        // stored, so the anchor's out receives the rotated rows.
        const OpShape &rope = spec.epilogue[0];
        Value table = ropeTable(e, rope);
        Value pos = e.toI32(e.memberInt(first, rope, 0));
        for (int64_t r = 0; r + 1 < rows; r += 2) {
          Value row = e.add(tileFirst, e.ci(r));
          Value pair = e.divu(e.remu(row, e.ci(rope.ints[1])), e.ci(2));
          SinCos sc = ropeSinCos(e, table, pos, pair);
          std::tie(totals[r], totals[r + 1]) = ropeRotate(e, sc, totals[r], totals[r + 1]);
        }
        perRow = 1;
      }
      // A sibling product: one output row, the sibling's stored beside the anchor's and taken
      // as the second input of the members after it.
      if (sibling)
        perRow = 1;
      for (int64_t r = 0; r < outRows; ++r) {
        Value row = e.add(tileFirst, e.ci(r));
        Value store = e.b.create<arith::AndIOp>(e.loc, storer(r), e.ult(row, nRows));
        if (keep)
          store = e.b.create<arith::AndIOp>(e.loc, store, keep);
        e.ifThen(store, [&] {
          e.store(totals[r], out, row);
          if (sibling)
            e.store(totals[1], e.memberBuffer(siblingMember, 2), row);
          Value v = totals[r];
          for (size_t j = perRow; j < spec.epilogue.size(); ++j) {
            int m = first + static_cast<int>(j);
            OpKind kind = spec.epilogue[j].kind;
            if (kind == OpKind::CopyBufferOffset) {
              storeCopy(e, spec.epilogue[j], m, v, row);
              continue;
            }
            llvm::SmallVector<Value, 2> inputs{v};
            if (kind != OpKind::Silu) {
              auto pre = early.find(m);
              inputs.push_back(sibling              ? totals[1]
                               : pre != early.end() ? pre->second[r]
                                                    : e.load(e.memberBuffer(m, 1), row));
            }
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
    // The rescue pass computes every tile this workgroup has: its own and, with a capped grid
    // (KernelPlan::maxGroups), g + G, g + 2G, ... as the int8 schedule visits them.
    auto forEachTile = [&](llvm::function_ref<void(Value, llvm::ArrayRef<Value>)> tile) {
      tile(firstRow, rowBases);
      if (!e.plan.maxGroups)
        return;
      Value units = e.ci(e.plan.unitsPerGroup);
      Value tiles = e.divu(e.add(nRows, e.sub(units, e.ci(1))), units);
      Value groups = e.minu(tiles, e.ci(e.plan.maxGroups));
      e.forLoop(e.add(group, groups), tiles, groups, [&](Value t) {
        Value first = firstRowOf(t);
        tile(first, rowBasesOf(first));
      });
    };
    if (e.plan.workgroupRows) {
      // Every invocation of the workgroup on the same rows (KernelPlan::workgroupRows); int8 x
      // from 64 rows, as the split schedule below.
      auto wide = [&](bool int8) {
        emitWorkgroupRowsQMatmul(e, op, xs, nBlocks, rowBases, int8, complete, firstRow);
      };
      if (e.plan.intDotX && !rescuePass)
        e.ifElse(
            e.ult(e.ci(kIntDotMinRows - 1), nRows), [&] { wide(true); }, [&] { wide(false); });
      else
        wide(false);
      return;
    }
    if (e.plan.splitWords > 0) {
      auto split = [&](Value tileFirst, llvm::ArrayRef<Value> tileBases, int64_t unroll) {
        // Split blocks: W lanes per block, lane l taking quant word l % W of blocks
        // l / W, l / W + lanes / W, ...; the lanes of one load then read consecutive words of
        // consecutive blocks, and consecutive vec4s of x.
        const int64_t perBlock = e.plan.splitWords;
        Value word = e.remu(lane, e.ci(perBlock));
        const bool alignedRows =
            op.isStatic(1) && (op.ints[1] / layout.blockWeights * layout.blockBytes) % 4 == 0;
        llvm::SmallVector<Value, 8> rowWords;
        for (int64_t r = 0; r < rows; ++r)
          rowWords.push_back(e.divu(tileBases[r], e.ci(4)));
        // U blocks per iteration, all their loads issued before any of their math (a lane's
        // loop is otherwise one memory latency per block); blocks past the end read the last
        // block and add nothing.
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
                  Value xv = xs.load(e, index);
                  L.ins.push_back(xv);
                  L.xs.push_back(
                      g4 ? e.b.create<arith::MulFOp>(e.loc, xv, e.load(g4, index)).getResult()
                         : xv);
                }
                L.words =
                    loadSplitWords(e, rowW, op.dtype, blk, word, tileBases, rowWords, alignedRows);
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
        finish(accs, Value(), tileFirst);
      };
      if (rescuePass) { // f32 x, one block at a time
        forEachTile([&](Value first, llvm::ArrayRef<Value> bases) { split(first, bases, 1); });
        return;
      }
      auto planned = [&] { split(firstRow, rowBases, e.plan.splitUnroll); };
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
              emitIntDotQMatmul(e, op, rowW, xs, nBlocks, nRows, tileRows, lane, lanes, finish);
            },
            planned);
      else
        planned();
      return;
    }
    // The block-per-lane (and pair) schedule; not with a capped grid (int8 x only).
    assert(!e.plan.maxGroups && "a capped grid is an int8-x schedule");
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
                gis[k] = loadGroupInput(e, xs, e.add(firstColumn, e.ci(32 * k)), 32);
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
              GroupInput gi = loadGroupInput(e, xs, first, layout.groupWeights);
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
    if (scalar) { // columns past the last whole pseudo-block
      Value tailBegin = e.add(e.mul(nBlocks, e.ci(layout.blockWeights)), lane);
      accs = e.forLoop(tailBegin, nCols, e.ci(lanes), accs, [&](Value c, ValueRange it) {
        llvm::SmallVector<Value> next(it.begin(), it.end());
        Value x = xs.at(e, c);
        if (norm) {
          next[rows] = e.fma(x, x, next[rows]);
          x = e.fmul(x, vec4Element(e, g4, c));
        }
        for (int64_t r = 0; r < rows; ++r) {
          WordReader reader(e, w, alignment);
          Value element = e.add(rowBases[r], e.mul(c, e.ci(elementBytes)));
          Value weight = emitScalarWeight(e.b, e.loc, reader, op.dtype, element);
          next[r] = e.fma(weight, x, next[r]);
        }
        return next;
      });
    }
    finish(accs, Value(), firstRow);
  };
  // No branch around the reductions: rows past the end read the last row again and store
  // nothing, so every lane of a subgroup reaches every shuffle.
  e.ifThen(e.ult(e.ci(0), nRows), [&] {
    if (rescue)
      e.store(e.c32(0), rescue, e.ci(0));
    emitRows(XSource{x4, g4, Value()});
    if (!norm)
      return;
    Value again = e.b.create<arith::CmpIOp>(e.loc, arith::CmpIPredicate::ne,
                                            e.load(rescue, e.ci(0)), e.c32(0));
    e.ifThen(again, [&] {
      // The workgroup-rows schedule's rescue writes the partial sums' array again: after the
      // fast pass's last reads of it.
      if (e.plan.workgroupRows)
        e.barrier();
      e.reuseWorkgroupArrays();
      Value size = e.memberInt(0, *norm, 0);
      Value j = rmsRescueExponent(e, size, [&](Value i) { return vec4Element(e, x4, i); });
      emitRows(XSource{x4, g4, j});
    });
  });
}

// A stacked kernel (KernelSpec::stackedProducts): workgroups [0, G0) run the anchor's kernel
// with its tail, [G0, G0 + G1) the second product's, and so on, each segment emitted as the
// kernel of its segment spec (the norm prologue, the product, its tail) with its members'
// indices and its first workgroup moved (Emitter::beginSegment). Each segment sits under a range
// check of the workgroup id, uniform over a workgroup, so the barriers inside are too.
void emitStackedQMatmul(Emitter &e, const KernelSpec &spec) {
  std::vector<StackedSegment> segments = stackedSegments(spec);
  std::vector<uint32_t> groups = stackedGroups(spec, e.plan);
  const int from = static_cast<int>(spec.prologue.size());
  Value group = e.groupId();
  int64_t base = 0;
  for (size_t s = 0; s < segments.size(); ++s) {
    const int64_t end = base + groups[s];
    const KernelSpec one = segmentSpec(spec, segments[s]);
    // base <= group < end as one unsigned compare: below base, group - base wraps past end.
    Value inRange =
        base > 0 ? e.ult(e.sub(group, e.ci(base)), e.ci(groups[s])) : e.ult(group, e.ci(end));
    const Value first = base > 0 ? e.ci(base) : Value();
    e.ifThen(inRange, [&] {
      e.beginSegment(from, segments[s].member - from, first);
      e.setMember(from);
      emitQMatmulKernel(e, one.anchor, one);
      e.endSegment();
    });
    base = end;
  }
  e.setMember(from);
}

bool hasFastQuantDecoder(DType dtype) { return dtype == DType::Q4_0 || dtype == DType::Q8_0; }

} // namespace sinter::codegen::spv
