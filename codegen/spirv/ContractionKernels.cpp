// ContractionKernels.cpp - SPIR-V kernels of matmul, attn_score, attn_value and attention over
// heads, and the dispatch of every contraction (quantized_matmul's is QMatmulKernels.cpp).
//
// attn_score is a dot product per output: one subgroup per position, the lanes striding over the
// head and a subgroup reduction at the end. matmul and attn_value have one invocation per output
// element; attention over heads is one workgroup (or several shares) per head.
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
// members head after head leaves there, unless word kAttnStoreScores is 0.
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
  // The scores buffer is written by the last head's workgroups, and not at all when the runtime
  // says a later step overwrites it first (kAttnStoreScores = 0: no raw scores stored while
  // scanning, no normalizing pass at the end of the merge).
  Value isLast = b.create<arith::AndIOp>(e.loc, e.ult(e.sub(heads, e.ci(1)), e.add(head, e.ci(1))),
                                         e.ult(e.ci(0), extra(kAttnStoreScores)));
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
  // Merge the subgroups: every invocation reads all NS states, then owns some d. NS is a
  // compile-time constant, so the loops below are unrolled: each state's loads are independent
  // and issued together, and each subgroup's weight exp(m_j - max) is computed once (a loop with
  // a load and an exp an iteration was a chain of NS dependent latencies, three times over).
  Value maxes = workgroupArray(e, e.f32(), subgroups), sums = workgroupArray(e, e.f32(), subgroups);
  Value accs = workgroupArray(e, e.f32(), subgroups * dim);
  e.ifThen(e.ult(lane, e.ci(1)), [&] {
    e.store(state[0], maxes, sg);
    e.store(state[1], sums, sg);
  });
  for (int64_t k = 0; k < perLane; ++k)
    e.ifThen(valid[k], [&] { e.store(state[2 + k], accs, e.add(e.mul(sg, e.ci(dim)), ds[k])); });
  e.barrier();
  // max, then exp(m_j - max) and the weighted sum of l_j, of n states whose m_j and l_j are given.
  struct Merged {
    Value max, total;
    llvm::SmallVector<Value> weights;
  };
  auto merge = [&](llvm::ArrayRef<Value> ms, llvm::ArrayRef<Value> ls) {
    Merged r;
    llvm::SmallVector<Value> level(ms.begin(), ms.end());
    while (level.size() > 1) { // a tree: log2(n) dependent steps
      llvm::SmallVector<Value> next;
      for (size_t i = 0; i + 1 < level.size(); i += 2)
        next.push_back(b.create<arith::MaxNumFOp>(e.loc, level[i], level[i + 1]));
      if (level.size() % 2)
        next.push_back(level.back());
      level = std::move(next);
    }
    r.max = level[0];
    r.total = e.cf(0.0);
    for (size_t j = 0; j < ms.size(); ++j) {
      r.weights.push_back(
          emitExp(b, e.loc, b.create<arith::SubFOp>(e.loc, ms[j], r.max), MathTarget::Gpu));
      r.total = e.fma(ls[j], r.weights.back(), r.total);
    }
    return r;
  };
  // Σ_j as[j] · weights[j], the products independent.
  auto weighted = [&](llvm::ArrayRef<Value> as, llvm::ArrayRef<Value> weights) {
    Value o = e.cf(0.0);
    for (size_t j = 0; j < as.size(); ++j)
      o = e.fma(as[j], weights[j], o);
    return o;
  };
  llvm::SmallVector<Value> sgMax, sgSum;
  for (int64_t j = 0; j < subgroups; ++j) {
    sgMax.push_back(e.load(maxes, e.ci(j)));
    sgSum.push_back(e.load(sums, e.ci(j)));
  }
  Merged wg = merge(sgMax, sgSum);
  Value maxAll = wg.max, total = wg.total;
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
    llvm::SmallVector<Value> as;
    for (int64_t j = 0; j < subgroups; ++j)
      as.push_back(e.load(accs, e.add(e.ci(j * dim), d)));
    return weighted(as, wg.weights);
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
    // Every share's max, sum and (for the invocation's first d) output, loaded at once: one
    // round trip to the L2 cache instead of three for each share in turn. splits is static.
    llvm::SmallVector<Value> shareMax, shareSum, firstOut;
    Value d0 = e.minu(tid, e.ci(dim - 1));
    for (int64_t s = 0; s < splits; ++s) {
      Value base = stateBase(e.ci(s));
      shareMax.push_back(fromBits(e.load(scratch, base)));
      shareSum.push_back(fromBits(e.load(scratch, e.add(base, e.ci(1)))));
      firstOut.push_back(fromBits(e.load(scratch, e.add(base, e.add(d0, e.ci(2))))));
    }
    Merged all = merge(shareMax, shareSum);
    Value inverse = inverseOf(all.total);
    auto outputOf = [&](llvm::ArrayRef<Value> as) {
      return e.fmul(weighted(as, all.weights), inverse);
    };
    e.ifThen(e.ult(tid, e.ci(dim)), [&] { e.store(outputOf(firstOut), out, e.add(oBase, d0)); });
    // Elements past the workgroup's width (head_dim > invocations): a loop, loads per share.
    if (e.plan.workgroupSize < dim)
      e.forLoop(e.add(tid, threads), e.ci(dim), threads, [&](Value d) {
        llvm::SmallVector<Value> as;
        for (int64_t s = 0; s < splits; ++s)
          as.push_back(fromBits(e.load(scratch, e.add(stateBase(e.ci(s)), e.add(d, e.ci(2))))));
        e.store(outputOf(as), out, e.add(oBase, d));
      });
    normalizeScores(all.max, inverse);
    e.ifThen(e.ult(tid, e.ci(1)), [&] { e.store(e.c32(0), scratch, head); });
  });
  return absl::OkStatus();
}

} // namespace

absl::Status emitContraction(Emitter &e, const OpShape &op, const KernelSpec &spec) {
  switch (op.kind) {
  case OpKind::QuantizedMatmul:
    if (spec.stackedProducts)
      emitStackedQMatmul(e, spec);
    else
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
