// TraceToModule.h - the Trace -> sinter dialect builder, MLIR-typed (for passes and tools).
//
// Same conversion as ir/TraceToIR.h, but hands back the module itself so that a pass pipeline can
// run on it without printing and reparsing. Includes MLIR headers: only for ir/, passes/, codegen/.
#ifndef SINTER_IR_TRACETOMODULE_H
#define SINTER_IR_TRACETOMODULE_H

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "support/Trace.h"

namespace sinter::ir {

/// Builds and verifies the module of `trace` in `context`, which must have the sinter, func and
/// arith dialects loaded (makeSinterContext). Versions: each slot's argument is its incoming
/// version; an op takes the version current at its position and replaces the versions of the
/// buffers it writes, so program order is the SSA order. Errors as for traceToMlirText.
absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildTraceModule(mlir::MLIRContext &context, const Trace &trace, absl::Span<const IntSlot> params);

} // namespace sinter::ir

#endif // SINTER_IR_TRACETOMODULE_H
