// ForwardCopies.cpp - reads of a whole-buffer copy read its source instead.
//
// The residual copy of a decode layer (`copy_buffer x -> residual`, later `add(..., residual)`)
// is the case this exists for: after forwarding, the add reads x's version directly and the copy
// is dead unless the host can still observe the residual buffer.
#include "mlir/IR/Matchers.h"
#include "passes/KernelUtils.h"
#include "passes/Passes.h"

namespace sinter::passes {
#define GEN_PASS_DEF_FORWARDCOPIES
#include "passes/Passes.h.inc"

namespace {

constexpr llvm::StringLiteral kPattern = "forward-copies";

// A copy of every byte between buffers of one size, so dst's bytes equal src's bytes.
bool isWholeCopy(CopyBufferOp copy) {
  llvm::APInt size;
  if (!mlir::matchPattern(copy.getSize(), mlir::m_ConstantInt(&size)))
    return false;
  uint64_t bytes = bufferBytes(copy.getDst());
  return size.getZExtValue() == bytes && bufferBytes(copy.getSrc()) == bytes;
}

// The element-wise in-place ops that may read a slot they write, on the same range.
bool readsBeforeWritingSameRange(mlir::OpOperand &use) {
  mlir::Operation *op = use.getOwner();
  if (!mlir::isa<AddOp, ElementMulOp, SiluOp>(op))
    return false;
  std::optional<OpCall> call = constantOpCall(op);
  if (!call)
    return false;
  absl::StatusOr<AccessList> accesses = opAccesses(*call);
  if (!accesses.ok())
    return false;
  const BufferAccess *read = nullptr, *write = nullptr;
  for (const BufferAccess &a : *accesses) {
    if (a.bufferIndex == use.getOperandNumber())
      read = &a;
    if (a.write)
      write = &a;
  }
  return read && write && read->offset == write->offset && read->size == write->size;
}

// May the reader `use` of the copy's result read `source` (slot `srcSlot`) instead?
bool canForward(CopyBufferOp copy, mlir::OpOperand &use, int64_t srcSlot) {
  mlir::Operation *reader = use.getOwner();
  if (reader->getBlock() != copy->getBlock())
    return (noteRejection(kPattern, reader, "reader is inside a kernel"), false);
  if (!graphOpKind(reader))
    return (noteRejection(kPattern, reader, "reader is not a graph op"), false);
  if (llvm::is_contained(writtenOperands(reader), use.getOperandNumber()))
    return false; // a write into the copy's buffer: it needs that buffer's memory
  for (mlir::Operation *op = copy->getNextNode(); op != reader; op = op->getNextNode())
    if (writesSlot(op, srcSlot))
      return (noteRejection(kPattern, reader, "the source is overwritten before this read"), false);
  if (writesSlot(reader, srcSlot) && !readsBeforeWritingSameRange(use))
    return (noteRejection(kPattern, reader, "the reader overwrites the source"), false);
  return true;
}

struct ForwardCopiesPass : impl::ForwardCopiesBase<ForwardCopiesPass> {
  void runOnOperation() override {
    llvm::SmallVector<CopyBufferOp> copies;
    for (mlir::Operation &op : getOperation().getBody().front())
      if (auto copy = mlir::dyn_cast<CopyBufferOp>(op))
        copies.push_back(copy);
    for (CopyBufferOp copy : copies) {
      if (!isWholeCopy(copy)) {
        noteRejection(kPattern, copy, "not a copy of every byte between equal-size buffers");
        continue;
      }
      std::optional<int64_t> srcSlot = slotOf(copy.getSrc());
      if (!srcSlot || slotOf(copy.getDst()) == srcSlot)
        continue;
      for (mlir::OpOperand &use : llvm::make_early_inc_range(copy.getResult().getUses()))
        if (canForward(copy, use, *srcSlot))
          use.set(copy.getSrc());
    }
  }
};

} // namespace
} // namespace sinter::passes
