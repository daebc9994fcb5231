// FuseSwiglu.cpp - silu(gate) * up in the epilogue of the gate/up kernel.
//
// The feed-forward block's gate and up projections (one kernel after `horizontal`) are followed
// by silu of the gate and the product with up; both are element-wise on the kernel's rows.
#include "passes/KernelUtils.h"
#include "passes/Passes.h"

namespace sinter::passes {
#define GEN_PASS_DEF_FUSESWIGLU
#include "passes/Passes.h.inc"

namespace {

constexpr llvm::StringLiteral kPattern = "swiglu";

struct FuseSwigluPass : impl::FuseSwigluBase<FuseSwigluPass> {
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    hoistConstants(func);
    llvm::SmallVector<SiluOp> silus;
    for (mlir::Operation &op : func.getBody().front())
      if (auto silu = mlir::dyn_cast<SiluOp>(op))
        silus.push_back(silu);
    for (SiluOp silu : silus) {
      mlir::Operation *producer = prevOp(silu);
      if (!producer || !hasContraction(producer) || !producedBy(producer, silu.getIn())) {
        noteRejection(kPattern, silu, "the gate does not come from the contraction kernel before");
        continue;
      }
      auto mul = mlir::dyn_cast_or_null<ElementMulOp>(nextOp(silu));
      if (!mul) {
        noteRejection(kPattern, silu, "not followed by element_mul");
        continue;
      }
      mlir::Value up = mul.getA() == silu.getResult()   ? mul.getB()
                       : mul.getB() == silu.getResult() ? mul.getA()
                                                        : nullptr;
      if (!up || !producedBy(producer, up)) {
        noteRejection(kPattern, mul, "does not multiply silu(gate) by an output of the kernel");
        continue;
      }
      formKernel({producer, silu, mul}, {kPattern});
    }
  }
};

} // namespace
} // namespace sinter::passes
