// ContractionKernels.cpp - SPIR-V kernels of quantized_matmul, matmul, attn_score, attn_value.
//
// quantized_matmul and attn_score are dot products per output: one subgroup per output row, the
// lanes striding over the row (blocks of weights, or elements of a head) and a subgroup reduction
// at the end. Weights are decoded with Dequant.h group by group straight into registers and
// multiplied with x read 16 bytes at a time; the group's scale and bias are applied once per
// group. matmul and attn_value have one invocation per output element.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "codegen/ElementwiseMath.h"
#include "codegen/spirv/SpirvEmitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
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

// Σ_i q[i] * x[first + i] over a group, x read as vec4 (first is a multiple of 4).
Value groupDot(Emitter &e, Value q, Value x4, Value first, int64_t weights) {
  llvm::SmallVector<Value, 4> partial;
  for (int64_t v = 0; v < weights / 4; ++v) {
    Value xv = e.load(x4, e.add(e.divu(first, e.ci(4)), e.ci(v)));
    for (int64_t l = 0; l < 4; ++l) {
      Value term = e.fmul(extractLane(e, q, 4 * v + l), extractLane(e, xv, l));
      if (partial.size() < 4)
        partial.push_back(term);
      else
        partial[l] = e.fadd(partial[l], term);
    }
  }
  Value sum = e.fadd(e.fadd(partial[0], partial[1]), e.fadd(partial[2], partial[3]));
  return sum;
}

// Σ_i x[first + i] over a group (for the formats with a bias).
Value groupSum(Emitter &e, Value x4, Value first, int64_t weights) {
  Value sum = e.cf(0.0);
  for (int64_t v = 0; v < weights / 4; ++v) {
    Value xv = e.load(x4, e.add(e.divu(first, e.ci(4)), e.ci(v)));
    Value pair = e.fadd(e.fadd(extractLane(e, xv, 0), extractLane(e, xv, 1)),
                        e.fadd(extractLane(e, xv, 2), extractLane(e, xv, 3)));
    sum = e.fadd(sum, pair);
  }
  return sum;
}

// quantized_matmul(W, x, out, n_rows, n_cols, dtype): subgroup s of workgroup g computes row
// g * (workgroup / S) + s; lane l takes blocks l, l + S, ...
void emitQMatmulKernel(Emitter &e, const OpShape &op) {
  Value w = e.buffer(0), x4 = e.buffer(1), out = e.buffer(2);
  Value nRows = e.intArg(op, 0), nCols = e.intArg(op, 1);
  QuantLayout layout = quantLayout(op.dtype);
  bool scalar = isScalarFormat(op.dtype);
  int64_t elementBytes = dtypeInfo(op.dtype).bytesPerBlock; // scalar formats only
  uint32_t lanes = e.target.subgroupSize;
  int64_t alignment = alignmentOf(layout.blockBytes);
  if (scalar)
    alignment = op.isStatic(1) ? alignmentOf(op.ints[1] * elementBytes) : elementBytes;
  alignment = std::min<int64_t>(alignment, 4);
  Value nBlocks = e.divu(nCols, e.ci(layout.blockWeights));
  Value bytesPerRow =
      scalar ? e.mul(nCols, e.ci(elementBytes)) : e.mul(nBlocks, e.ci(layout.blockBytes));
  Value rowsPerGroup = e.ci(e.plan.workgroupSize / lanes);
  Value row = e.add(e.mul(e.groupId(), rowsPerGroup), e.subgroupId());
  Value lane = e.laneId();
  e.ifThen(e.ult(row, nRows), [&] {
    Value rowBase = e.mul(row, bytesPerRow);
    Value acc = e.forLoop(
        lane, nBlocks, e.ci(lanes), ValueRange{e.cf(0.0)}, [&](Value blk, ValueRange iters) {
          Value sum = iters[0];
          Value block = e.add(rowBase, e.mul(blk, e.ci(layout.blockBytes)));
          Value firstColumn = e.mul(blk, e.ci(layout.blockWeights));
          WordReader reader(e, w, alignment);
          for (int64_t g = 0; g < layout.groupsPerBlock(); ++g) {
            WeightGroup group = emitWeightGroup(e.b, e.loc, reader, op.dtype, block, g);
            Value first = e.add(firstColumn, e.ci(g * layout.groupWeights));
            Value dot = groupDot(e, group.q, x4, first, layout.groupWeights);
            sum = group.scale ? e.fma(dot, group.scale, sum) : e.fadd(sum, dot);
            if (group.bias)
              sum = e.fma(groupSum(e, x4, first, layout.groupWeights), group.bias, sum);
          }
          return llvm::SmallVector<Value>{sum};
        })[0];
    if (scalar) { // columns past the last whole pseudo-block
      Value tailBegin = e.add(e.mul(nBlocks, e.ci(layout.blockWeights)), lane);
      acc = e.forLoop(tailBegin, nCols, e.ci(lanes), ValueRange{acc}, [&](Value c, ValueRange it) {
        WordReader reader(e, w, alignment);
        Value element = e.add(rowBase, e.mul(c, e.ci(elementBytes)));
        Value weight = emitScalarWeight(e.b, e.loc, reader, op.dtype, element);
        Value x = e.b.create<mlir::vector::ExtractElementOp>(e.loc, e.load(x4, e.divu(c, e.ci(4))),
                                                             e.toI32(e.remu(c, e.ci(4))));
        return llvm::SmallVector<Value>{e.fma(weight, x, it[0])};
      })[0];
    }
    Value total = e.clusterSum(acc, lanes);
    e.ifThen(e.ult(lane, e.ci(1)), [&] { e.store(total, out, row); });
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

} // namespace

absl::Status emitContraction(Emitter &e, const OpShape &op) {
  switch (op.kind) {
  case OpKind::QuantizedMatmul:
    emitQMatmulKernel(e, op);
    return absl::OkStatus();
  case OpKind::Matmul:
    emitMatmulKernel(e, op);
    return absl::OkStatus();
  case OpKind::AttnScore:
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
