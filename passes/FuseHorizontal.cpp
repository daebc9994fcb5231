// FuseHorizontal.cpp - sibling contractions reading the same vector become one kernel.
//
// Q, K and V (or gate and up) read one input; in one kernel that input is loaded once and one
// launch replaces three. A kernel that already ends in such a contraction grows.
#include "passes/KernelUtils.h"
#include "passes/Passes.h"

namespace sinter::passes {
#define GEN_PASS_DEF_FUSEHORIZONTAL
#include "passes/Passes.h.inc"

namespace {

constexpr llvm::StringLiteral kPattern = "horizontal";

// The input of the last contraction of a top-level op (a contraction or a kernel).
mlir::Value lastContractionInput(mlir::Operation *op) {
  auto members = membersOf(op);
  mlir::Value x = contractionInput(members.back());
  if (!x || !mlir::isa<KernelOp>(op))
    return x;
  // Inside a kernel the input is a block argument or a member's result: map it to the value
  // outside that siblings would read.
  if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(x))
    return mlir::cast<KernelOp>(op).getInputs()[arg.getArgNumber()];
  for (auto [i, y] : llvm::enumerate(op->getRegion(0).front().getTerminator()->getOperands()))
    if (y == x)
      return op->getResult(i);
  return nullptr;
}

struct FuseHorizontalPass : impl::FuseHorizontalBase<FuseHorizontalPass> {
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    hoistConstants(func);
    mlir::Block &body = func.getBody().front();
    for (mlir::Operation *op = &body.front(); op; op = op->getNextNode()) {
      mlir::Value x = lastContractionInput(op);
      if (!x)
        continue;
      mlir::Operation *next = nextOp(op);
      while (next && contractionInput(next) == x) {
        op = fuseAdjacent(op, next, kPattern);
        next = nextOp(op);
      }
      if (next && contractionInput(next))
        noteRejection(kPattern, next, "reads another vector than the contraction before it");
    }
  }
};

} // namespace
} // namespace sinter::passes
