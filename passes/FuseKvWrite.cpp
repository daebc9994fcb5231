// FuseKvWrite.cpp - K and V go straight from their kernel into the cache slot.
//
// The engine writes K and V to temporaries and then copy_buffer_offsets them into the cache at
// `pos`; with the copies in the producing kernel, the kernel stores into the cache directly.
#include "passes/KernelUtils.h"
#include "passes/Passes.h"

namespace sinter::passes {
#define GEN_PASS_DEF_FUSEKVWRITE
#include "passes/Passes.h.inc"

namespace {

constexpr llvm::StringLiteral kPattern = "kv-write";

struct FuseKvWritePass : impl::FuseKvWriteBase<FuseKvWritePass> {
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    hoistConstants(func);
    llvm::SmallVector<CopyBufferOffsetOp> copies;
    for (mlir::Operation &op : func.getBody().front())
      if (auto copy = mlir::dyn_cast<CopyBufferOffsetOp>(op))
        copies.push_back(copy);
    for (CopyBufferOffsetOp copy : copies) {
      mlir::Operation *producer = prevOp(copy);
      if (!producer || !hasContraction(producer)) {
        noteRejection(kPattern, copy, "the op before is not a contraction kernel");
        continue;
      }
      if (!producedBy(producer, copy.getSrc())) {
        noteRejection(kPattern, copy, "the copied version does not come from the kernel before");
        continue;
      }
      fuseAdjacent(producer, copy, kPattern);
    }
  }
};

} // namespace
} // namespace sinter::passes
