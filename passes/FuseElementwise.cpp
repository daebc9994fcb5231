// FuseElementwise.cpp - any run of chained element-wise ops becomes one kernel.
//
// What the named patterns did not claim: adjacent element-wise ops (silu, element_mul, add, and
// rope, which works on pairs) where each reads a result of an op earlier in the run.
#include "passes/KernelUtils.h"
#include "passes/Passes.h"

namespace sinter::passes {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "passes/Passes.h.inc"

namespace {

constexpr llvm::StringLiteral kPattern = "elementwise";

bool isElementwise(mlir::Operation *op) {
  return op && !mlir::isa<KernelOp>(op) && op->hasTrait<ir::OpTrait::Elementwise>();
}

bool readsAnyOf(mlir::Operation *op, llvm::ArrayRef<mlir::Operation *> run) {
  for (mlir::Value v : op->getOperands())
    if (mlir::Operation *def = v.getDefiningOp(); def && llvm::is_contained(run, def))
      return true;
  return false;
}

struct FuseElementwisePass : impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    hoistConstants(func);
    mlir::Block &body = func.getBody().front();
    for (mlir::Operation *op = &body.front(); op; op = op->getNextNode()) {
      if (!isElementwise(op))
        continue;
      llvm::SmallVector<mlir::Operation *> run{op};
      for (mlir::Operation *next = nextOp(op); isElementwise(next) && readsAnyOf(next, run);
           next = nextOp(next))
        run.push_back(next);
      if (run.size() < 2)
        continue;
      op = formKernel(run, {kPattern});
    }
  }
};

} // namespace
} // namespace sinter::passes
