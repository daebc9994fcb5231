// FuseRopeEpilogue.cpp - rope on the Q/K projections becomes their kernel's epilogue.
//
// Rope rotates pairs of neighbouring output rows, so a kernel that computes those rows can rotate
// them before they are stored; q and k are then written once instead of twice.
#include "passes/KernelUtils.h"
#include "passes/Passes.h"

namespace sinter::passes {
#define GEN_PASS_DEF_FUSEROPEEPILOGUE
#include "passes/Passes.h.inc"

namespace {

constexpr llvm::StringLiteral kPattern = "rope-epilogue";

struct FuseRopeEpiloguePass : impl::FuseRopeEpilogueBase<FuseRopeEpiloguePass> {
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    hoistConstants(func);
    llvm::SmallVector<RopeOp> ropes;
    for (mlir::Operation &op : func.getBody().front())
      if (auto rope = mlir::dyn_cast<RopeOp>(op))
        ropes.push_back(rope);
    for (RopeOp rope : ropes) {
      mlir::Operation *producer = prevOp(rope);
      if (!producer || !hasContraction(producer)) {
        noteRejection(kPattern, rope, "the op before is not a contraction kernel");
        continue;
      }
      if (!producedBy(producer, rope.getQ()) && !producedBy(producer, rope.getK())) {
        noteRejection(kPattern, rope, "neither q nor k comes from the kernel before");
        continue;
      }
      fuseAdjacent(producer, rope, kPattern);
    }
  }
};

} // namespace
} // namespace sinter::passes
