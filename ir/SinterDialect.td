// SinterDialect.td - the `sinter` dialect, its buffer type, fusion-class traits, op base classes.
//
// Kept apart from SinterOps.td so that the op records read as one list. The fusion classes are
// native C++ traits (ir/SinterTraits.h) so that passes ask `op->hasTrait<Contraction>()` instead
// of switching over op names.

#ifndef SINTER_DIALECT_TD
#define SINTER_DIALECT_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Sinter_Dialect : Dialect {
  let name = "sinter";
  let cppNamespace = "::sinter::ir";
  let summary = "the ComputeBackend operations as a value-semantics graph";
  let description = [{
    One op per ComputeBackend operation (SEMANTICS.md) plus structural ops. Buffers are values:
    every op that writes a buffer takes the old version of that buffer as an operand and returns
    the new version, in which the elements the op does not name keep their contents. Integer
    arguments are i64 SSA values (constants or Plan parameters), float arguments f32 attributes.
  }];
  let useDefaultTypePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def Sinter_BufferType : TypeDef<Sinter_Dialect, "Buffer"> {
  let mnemonic = "buffer";
  let summary = "one version of a buffer of N bytes";
  let description = [{
    `!sinter.buffer<N>` is the contents of an N-byte buffer at one point of the trace. Float
    operations read it as little-endian f32; sizes and byte offsets are checked against N.
  }];
  let parameters = (ins "uint64_t":$sizeBytes);
  let assemblyFormat = "`<` $sizeBytes `>`";
}

//===----------------------------------------------------------------------===//
// Fusion classes (ARCHITECTURE.md, "The graph IR")
//===----------------------------------------------------------------------===//

class Sinter_FusionClass<string name> : NativeOpTrait<name> {
  let cppNamespace = "::sinter::ir::OpTrait";
}

/// Output element i depends on input element i (or on one pair, for rope).
def Sinter_Elementwise : Sinter_FusionClass<"Elementwise">;
/// Each output element depends on a whole row of the input (softmax, rms_norm).
def Sinter_RowReduction : Sinter_FusionClass<"RowReduction">;
/// Dot products over a reduction dimension (matmul, qmatmul, attention score/value).
def Sinter_Contraction : Sinter_FusionClass<"Contraction">;
/// Moves bytes without arithmetic (copies, uploads, insert/extract).
def Sinter_DataMovement : Sinter_FusionClass<"DataMovement">;

//===----------------------------------------------------------------------===//
// Op base classes
//===----------------------------------------------------------------------===//

class Sinter_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sinter_Dialect, mnemonic, traits>;

// One ComputeBackend operation. `kind` names its sinter::OpKind. Operands are, in this order,
// the buffers and then the integers of the ComputeBackend method (the order of OpCall::buffers and
// OpCall::ints); the results are the new versions of the last buffers, one per written buffer.
// The shared verifier (verifyGraphOp in SinterOps.cpp) checks what constants allow.
class Sinter_GraphOp<string mnemonic, string kind, list<Trait> traits = []>
    : Sinter_Op<mnemonic, !listconcat([Pure], traits)> {
  string opKind = kind;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The OpCall kind this op records.
    static constexpr ::sinter::OpKind kOpKind = ::sinter::OpKind::}] # kind # [{;
  }];
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return ::sinter::ir::verifyGraphOp(getOperation(), kOpKind);
    }
  }];
}

#endif // SINTER_DIALECT_TD
