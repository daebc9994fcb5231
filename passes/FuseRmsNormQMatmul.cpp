// FuseRmsNormQMatmul.cpp - rms_norm folds into the contractions that read its result.
//
// W (x*g/r) = (W (x*g))/r: the kernel reads x once for the sum of squares and the dot products,
// and nothing is written between the norm and the products (the normalized vector is still
// stored when the host or a later op reads it).
#include "passes/KernelUtils.h"
#include "passes/Passes.h"

namespace sinter::passes {
#define GEN_PASS_DEF_FUSERMSNORMQMATMUL
#include "passes/Passes.h.inc"

namespace {

constexpr llvm::StringLiteral kPattern = "rmsnorm-qmatmul";

struct FuseRmsNormQMatmulPass : impl::FuseRmsNormQMatmulBase<FuseRmsNormQMatmulPass> {
  using FuseRmsNormQMatmulBase::FuseRmsNormQMatmulBase;

  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    hoistConstants(func);
    llvm::SmallVector<RmsNormOp> norms;
    for (mlir::Operation &op : func.getBody().front())
      if (auto norm = mlir::dyn_cast<RmsNormOp>(op))
        norms.push_back(norm);
    for (RmsNormOp norm : norms) {
      llvm::SmallVector<mlir::Operation *> run{norm};
      for (mlir::Operation *next = nextOp(norm); next; next = nextOp(next)) {
        if (contractionInput(next) != norm.getResult()) {
          if (run.size() == 1)
            noteRejection(kPattern, norm, "the next op is not a contraction of the norm");
          break;
        }
        run.push_back(next);
        if (!horizontal)
          break;
      }
      if (run.size() < 2)
        continue;
      llvm::SmallVector<llvm::StringRef> patterns{kPattern};
      if (run.size() > 2)
        patterns.push_back("horizontal");
      formKernel(run, patterns);
    }
  }
};

} // namespace
} // namespace sinter::passes
