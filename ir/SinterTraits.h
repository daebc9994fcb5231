// SinterTraits.h - the fusion classes of sinter ops as native MLIR op traits.
//
// ARCHITECTURE.md sorts every graph op into one fusion class; passes ask
// `op->hasTrait<sinter::ir::OpTrait::Contraction>()` rather than listing op names. The traits carry
// no code: they are markers attached in ir/SinterDialect.td.
#ifndef SINTER_IR_SINTERTRAITS_H
#define SINTER_IR_SINTERTRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace sinter::ir::OpTrait {

/// Output element i depends only on input element i (rope: on one interleaved pair).
template <typename ConcreteType>
class Elementwise : public mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {};

/// Output elements depend on a whole row of the input (softmax, rms_norm).
template <typename ConcreteType>
class RowReduction : public mlir::OpTrait::TraitBase<ConcreteType, RowReduction> {};

/// Dot products over a reduction dimension (matmul, qmatmul, attn_score, attn_value).
template <typename ConcreteType>
class Contraction : public mlir::OpTrait::TraitBase<ConcreteType, Contraction> {};

/// Moves bytes without arithmetic (copies, upload, insert, extract).
template <typename ConcreteType>
class DataMovement : public mlir::OpTrait::TraitBase<ConcreteType, DataMovement> {};

} // namespace sinter::ir::OpTrait

#endif // SINTER_IR_SINTERTRAITS_H
