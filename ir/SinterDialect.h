// SinterDialect.h - the sinter dialect: its buffer type, fusion traits and ops (MLIR-typed).
//
// The one header passes and codegen include to work on sinter IR. Everything here is generated
// from ir/SinterDialect.td and ir/SinterOps.td, plus the few helpers that map ops to the OpKind of
// support/Ops.h. Code outside ir/, passes/ and codegen/ must not include it (ir/TraceToIR.h is
// the plain-C++ door).
#ifndef SINTER_IR_SINTERDIALECT_H
#define SINTER_IR_SINTERDIALECT_H

#include <optional>

#include "ir/SinterTraits.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "support/Ops.h"

#include "ir/SinterDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/SinterTypes.h.inc"

namespace sinter::ir {

/// The verifier shared by every graph op: operand layout, non-negative integer constants, the
/// checks that need only some constants (rope head_dim, qmatmul dtype and n_cols) and, when every
/// integer is a constant, support's opAccesses rules and every access inside its buffer's size.
mlir::LogicalResult verifyGraphOp(mlir::Operation *op, OpKind kind);

} // namespace sinter::ir

#define GET_OP_CLASSES
#include "ir/SinterOps.h.inc"

namespace sinter::ir {

/// Name of the dialect attribute holding a trace slot number: on function arguments (the slot
/// whose incoming version the argument is) and function results (the slot whose final version
/// the result is).
inline constexpr llvm::StringLiteral kSlotAttrName = "sinter.slot";
/// Name of the argument attribute that marks a Plan parameter: `array<i64: entry, index>`, the
/// IntSlot the parameter replaces.
inline constexpr llvm::StringLiteral kParamAttrName = "sinter.param";

/// The registered name of the graph op recording `kind` ("sinter.qmatmul" for QuantizedMatmul)
/// and how many buffers it writes (its results are the new versions of its last that many buffer
/// operands). Generated from the op list, so it cannot fall out of step with SinterOps.td.
struct GraphOpDesc {
  llvm::StringRef name;
  unsigned numWritten = 0;
};
const GraphOpDesc &graphOpDesc(OpKind kind);

/// The OpKind a graph op records; std::nullopt for structural ops and ops of other dialects.
std::optional<OpKind> graphOpKind(mlir::Operation *op);

} // namespace sinter::ir

#endif // SINTER_IR_SINTERDIALECT_H
