// SinterOpsTest.cpp - tests of ir/SinterOps.cpp: the OpKind table and the fusion-class traits.
//
// Passes find ops by trait and the builder finds them by OpKind; both must agree with
// support/Ops.h and ARCHITECTURE.md's classes for every op.
#include <memory>

#include "ir/Registration.h"
#include "ir/SinterDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "gtest/gtest.h"

namespace sinter::ir {
namespace {

enum class FusionClass { Elementwise, RowReduction, Contraction, DataMovement };

FusionClass expectedClass(OpKind kind) {
  switch (kind) {
  case OpKind::Softmax:
  case OpKind::RmsNorm:
    return FusionClass::RowReduction;
  case OpKind::Matmul:
  case OpKind::QuantizedMatmul:
  case OpKind::AttnScore:
  case OpKind::AttnValue:
    return FusionClass::Contraction;
  case OpKind::CopyBuffer:
  case OpKind::CopyBufferOffset:
    return FusionClass::DataMovement;
  case OpKind::Rope:
  case OpKind::Silu:
  case OpKind::ElementMul:
  case OpKind::Add:
    return FusionClass::Elementwise;
  }
  return FusionClass::DataMovement;
}

TEST(SinterOpsTest, EveryOpKindHasARegisteredOpWithItsFusionClass) {
  std::unique_ptr<mlir::MLIRContext> context = makeSinterContext();
  for (int i = 0; i < kNumOpKinds; ++i) {
    auto kind = static_cast<OpKind>(i);
    const GraphOpDesc &desc = graphOpDesc(kind);
    SCOPED_TRACE(opInfo(kind).name);
    std::optional<mlir::RegisteredOperationName> name =
        mlir::RegisteredOperationName::lookup(desc.name, context.get());
    ASSERT_TRUE(name.has_value()) << desc.name.str();
    EXPECT_EQ(desc.numWritten, kind == OpKind::Rope ? 2u : 1u);
    FusionClass want = expectedClass(kind);
    EXPECT_EQ(name->hasTrait<OpTrait::Elementwise>(), want == FusionClass::Elementwise);
    EXPECT_EQ(name->hasTrait<OpTrait::RowReduction>(), want == FusionClass::RowReduction);
    EXPECT_EQ(name->hasTrait<OpTrait::Contraction>(), want == FusionClass::Contraction);
    EXPECT_EQ(name->hasTrait<OpTrait::DataMovement>(), want == FusionClass::DataMovement);
  }
  EXPECT_EQ(graphOpDesc(OpKind::QuantizedMatmul).name, "sinter.qmatmul");
}

TEST(SinterOpsTest, StructuralOpsHaveNoOpKind) {
  std::unique_ptr<mlir::MLIRContext> context = makeSinterContext();
  mlir::OpBuilder b(context.get());
  mlir::OperationState state(b.getUnknownLoc(), YieldOp::getOperationName());
  mlir::Operation *yield = mlir::Operation::create(state);
  EXPECT_EQ(graphOpKind(yield), std::nullopt);
  yield->destroy();

  auto type = BufferType::get(context.get(), 64);
  EXPECT_EQ(type.getSizeBytes(), 64u);
  mlir::OperationState silu(b.getUnknownLoc(), graphOpDesc(OpKind::Silu).name);
  mlir::Operation *op = mlir::Operation::create(silu);
  EXPECT_EQ(graphOpKind(op), OpKind::Silu);
  op->destroy();
}

} // namespace
} // namespace sinter::ir
