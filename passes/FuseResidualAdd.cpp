// FuseResidualAdd.cpp - the residual add in the epilogue of the projection before it.
//
// `add(W x, residual)` right after the contraction joins its kernel, and so does a copy_buffer
// of the sum right after (the next layer's residual copy, kept when the host may observe it).
#include "passes/KernelUtils.h"
#include "passes/Passes.h"

namespace sinter::passes {
#define GEN_PASS_DEF_FUSERESIDUALADD
#include "passes/Passes.h.inc"

namespace {

constexpr llvm::StringLiteral kPattern = "residual-add";

struct FuseResidualAddPass : impl::FuseResidualAddBase<FuseResidualAddPass> {
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    hoistConstants(func);
    llvm::SmallVector<AddOp> adds;
    for (mlir::Operation &op : func.getBody().front())
      if (auto add = mlir::dyn_cast<AddOp>(op))
        adds.push_back(add);
    for (AddOp add : adds) {
      mlir::Operation *producer = prevOp(add);
      if (!producer || !hasContraction(producer)) {
        noteRejection(kPattern, add, "the op before is not a contraction kernel");
        continue;
      }
      if (!producedBy(producer, add.getA()) && !producedBy(producer, add.getB())) {
        noteRejection(kPattern, add, "neither operand comes from the kernel before");
        continue;
      }
      KernelOp kernel = fuseAdjacent(producer, add, kPattern);
      auto copy = mlir::dyn_cast_or_null<CopyBufferOp>(nextOp(kernel));
      if (copy && producedBy(kernel, copy.getSrc()))
        fuseAdjacent(kernel, copy, kPattern);
    }
  }
};

} // namespace
} // namespace sinter::passes
