// ExtractProgram.h - a pipeline's output module as a KernelProgram (MLIR-typed; passes/ only).
#ifndef SINTER_PASSES_EXTRACTPROGRAM_H
#define SINTER_PASSES_EXTRACTPROGRAM_H

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "support/KernelProgram.h"

namespace sinter::passes {

/// Walks `@trace` in program order: each sinter.kernel becomes a Kernel of its member ops, each
/// top-level graph op a Kernel of one op, each upload a host copy. Operands become trace slots
/// (versions live in their buffer's slot), integers constants or Plan parameters. `trace` gives
/// the payload indices and sizes; `params` the IntSlot order of the parameters. Unimplemented for
/// ops the executors cannot run yet (insert/extract).
absl::StatusOr<KernelProgram> extractProgram(mlir::ModuleOp module, const Trace &trace,
                                             const std::vector<IntSlot> &params);

} // namespace sinter::passes

#endif // SINTER_PASSES_EXTRACTPROGRAM_H
