// EliminateDeadVersions.cpp - a write nobody reads is never materialized.
//
// Walking backwards, an op whose results are unused, or used only as the old version of ops that
// overwrite every byte, is erased and those ops take the older version instead; chains of dead
// writes (the residual copies of every layer but the last) collapse in one sweep.
#include "passes/KernelUtils.h"
#include "passes/Passes.h"

namespace sinter::passes {
#define GEN_PASS_DEF_ELIMINATEDEADVERSIONS
#include "passes/Passes.h.inc"

namespace {

bool isDead(mlir::Operation *op) {
  for (mlir::Value r : op->getResults())
    for (mlir::OpOperand &use : r.getUses())
      if (!isFullOverwriteDest(use))
        return false;
  return true;
}

struct EliminateDeadVersionsPass : impl::EliminateDeadVersionsBase<EliminateDeadVersionsPass> {
  void runOnOperation() override {
    mlir::Block &body = getOperation().getBody().front();
    llvm::SmallVector<mlir::Operation *> ops;
    for (mlir::Operation &op : body)
      if (graphOpKind(&op) || mlir::isa<UploadOp>(op))
        ops.push_back(&op);
    for (mlir::Operation *op : llvm::reverse(ops)) {
      if (!isDead(op))
        continue;
      llvm::SmallVector<unsigned> written = writtenOperands(op);
      for (auto [i, r] : llvm::enumerate(op->getResults()))
        r.replaceAllUsesWith(op->getOperand(written[i]));
      op->erase();
    }
  }
};

} // namespace
} // namespace sinter::passes
