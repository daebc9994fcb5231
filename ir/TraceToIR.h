// TraceToIR.h - a recorded Trace as sinter dialect text, for code that must not see MLIR.
//
// The runtime, sinter-dump and tests outside ir/ call this to print a trace as a `.mlir` module
// that sinter-opt reads back (how a user hands in a bug). Passes use the MLIR-typed twin in
// ir/TraceToModule.h instead.
#ifndef SINTER_IR_TRACETOIR_H
#define SINTER_IR_TRACETOIR_H

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "support/Trace.h"

namespace sinter::ir {

/// The trace as a verified module holding `func.func @trace`, printed in MLIR's textual form.
/// Buffers become `!sinter.buffer<N>` arguments tagged `{sinter.slot = s}`; each IntSlot in
/// `params` becomes an i64 argument (in that order, after the buffers) tagged
/// `{sinter.param = array<i64: entry, index>}`; every other integer becomes an arith.constant.
/// The results are the final versions of the observable buffers the trace writes, tagged with
/// their slot. InvalidArgument for a malformed trace or an IntSlot that names no integer;
/// Internal when the built module does not verify (the diagnostics are in the message).
absl::StatusOr<std::string> traceToMlirText(const Trace &trace, absl::Span<const IntSlot> params);

} // namespace sinter::ir

#endif // SINTER_IR_TRACETOIR_H
