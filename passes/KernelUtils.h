// KernelUtils.h - the mechanism every fusion pass shares: forming and growing sinter.kernel
// regions, and the questions passes ask about buffer versions (which slot, what an op writes).
//
// Policy (which ops to fuse) lives in the passes; this file only moves ops. Kernels are formed
// from runs of ops that are adjacent in program order, so forming one never reorders a write
// before a read of an older version.
#ifndef SINTER_PASSES_KERNELUTILS_H
#define SINTER_PASSES_KERNELUTILS_H

#include <optional>

#include "ir/SinterDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "support/Ops.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace sinter::passes {

// Passes work on sinter ops throughout; spelling ir:: on every one would drown the logic.
using namespace ::sinter::ir;

/// The next (previous) op of the same block that is not an arith.constant; nullptr at the end.
mlir::Operation *nextOp(mlir::Operation *op);
mlir::Operation *prevOp(mlir::Operation *op);

/// Moves every arith.constant of `func`'s body to the start of the entry block, so that any run
/// of adjacent ops can be outlined without breaking dominance.
void hoistConstants(mlir::func::FuncOp func);

/// The ops a top-level op stands for: a kernel's member ops (body order, constants and the
/// yield excluded), or the op itself.
llvm::SmallVector<mlir::Operation *> membersOf(mlir::Operation *op);

/// The op that computes `v`: for a kernel result, the member op inside the kernel; otherwise
/// v's defining op (nullptr for block arguments).
mlir::Operation *producerOf(mlir::Value v);

/// True when `op` is a sinter.kernel and `v` is produced by one of its members, or `v` is a
/// result of `op` itself.
bool producedBy(mlir::Operation *op, mlir::Value v);

/// Replaces the adjacent run `ops` (program order, same block, constants between them allowed)
/// by one sinter.kernel holding them. Values the run reads from outside become kernel inputs
/// (constants are cloned inside instead); values used after the run become kernel results. Ops
/// that are kernels themselves are inlined first, so kernels never nest. `patterns` is added to
/// the patterns of the kernels that were merged.
KernelOp formKernel(llvm::ArrayRef<mlir::Operation *> ops,
                    llvm::ArrayRef<llvm::StringRef> patterns);

/// formKernel({first, second}, {pattern}) for two adjacent top-level ops.
KernelOp fuseAdjacent(mlir::Operation *first, mlir::Operation *second, llvm::StringRef pattern);

/// Indices of the buffer operands `op` writes (its results are their new versions, in order).
/// Empty for ops that are not graph ops or uploads.
llvm::SmallVector<unsigned> writtenOperands(mlir::Operation *op);

/// Copies a graph op's float argument (eps, freq_base) and dtype into `call` (kind already set).
void readAttributes(mlir::Operation *op, OpCall &call);

/// The OpCall of a graph op whose integers are all constants (buffers numbered 1..n by operand
/// position); std::nullopt otherwise.
std::optional<OpCall> constantOpCall(mlir::Operation *op);

/// True when `use` is the "old version" operand of an op that overwrites every byte of that
/// buffer: the op's result does not depend on the old version at all.
bool isFullOverwriteDest(mlir::OpOperand &use);

/// The trace slot a buffer version lives in (its function argument's `sinter.slot`), following
/// written operands, kernel results and block arguments back; std::nullopt if unknown.
std::optional<int64_t> slotOf(mlir::Value v);

/// True when `op` (a graph op, upload or kernel) writes slot `slot`.
bool writesSlot(mlir::Operation *op, int64_t slot);

/// Bytes of a `!sinter.buffer<N>` value.
uint64_t bufferBytes(mlir::Value v);

/// The vector a contraction multiplies (qmatmul's x, matmul's a); null for other ops.
mlir::Value contractionInput(mlir::Operation *op);

/// True when `op` is a contraction or a kernel with a contraction among its members.
bool hasContraction(mlir::Operation *op);

/// Why `pattern` did not fuse at `op`; printed to stderr when SINTER_LOG=debug.
void noteRejection(llvm::StringRef pattern, mlir::Operation *op, const llvm::Twine &reason);

} // namespace sinter::passes

#endif // SINTER_PASSES_KERNELUTILS_H
