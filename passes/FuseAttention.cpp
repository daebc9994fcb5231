// FuseAttention.cpp - the per-head attention triples of a layer become one kernel.
//
// An engine issues, per head, attn_score -> softmax -> attn_value; each triple reads the one
// before through the scores buffer and writes its slice of the output. All heads of one run join
// one `attention` kernel; the code generator maps heads to KV heads (GQA) from the offsets.
#include "passes/KernelUtils.h"
#include "passes/Passes.h"

namespace sinter::passes {
#define GEN_PASS_DEF_FUSEATTENTION
#include "passes/Passes.h.inc"

namespace {

constexpr llvm::StringLiteral kPattern = "attention";
/// Heads per kernel at most (the size limit of the code generators' head loop).
constexpr size_t kMaxHeads = 1024;

// The triple starting at `score`, or an empty list with the reason noted.
llvm::SmallVector<mlir::Operation *, 3> matchTriple(AttnScoreOp score) {
  auto softmax = mlir::dyn_cast_or_null<SoftmaxOp>(nextOp(score));
  if (!softmax || softmax.getIn() != score.getResult())
    return (noteRejection(kPattern, score, "not followed by a softmax of its scores"),
            llvm::SmallVector<mlir::Operation *, 3>{});
  auto value = mlir::dyn_cast_or_null<AttnValueOp>(nextOp(softmax));
  if (!value || value.getWeights() != softmax.getResult())
    return (noteRejection(kPattern, softmax, "not followed by attn_value of its weights"),
            llvm::SmallVector<mlir::Operation *, 3>{});
  return {score, softmax, value};
}

struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    hoistConstants(func);
    mlir::Block &body = func.getBody().front();
    for (mlir::Operation *op = &body.front(); op;) {
      auto score = mlir::dyn_cast<AttnScoreOp>(op);
      if (!score) {
        op = op->getNextNode();
        continue;
      }
      llvm::SmallVector<mlir::Operation *> run;
      for (auto s = score; s && run.size() / 3 < kMaxHeads;
           s = mlir::dyn_cast_or_null<AttnScoreOp>(nextOp(run.back()))) {
        auto triple = matchTriple(s);
        if (triple.empty())
          break;
        run.append(triple.begin(), triple.end());
      }
      if (run.empty()) {
        op = op->getNextNode();
        continue;
      }
      KernelOp kernel = formKernel(run, {kPattern});
      op = kernel->getNextNode();
    }
  }
};

} // namespace
} // namespace sinter::passes
