// SinterDialect.cpp - the sinter dialect object, its buffer type, and registration helpers.
//
// The op definitions live in SinterOps.cpp (one translation unit for the large generated file);
// this file holds what is small: dialect initialization, the type's generated code, and the
// functions tools call to get a context that can parse and print sinter modules.
#include "ir/SinterDialect.h"
#include "ir/Registration.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/TypeSwitch.h"

#include "ir/SinterDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/SinterTypes.cpp.inc"

namespace sinter::ir {

void SinterDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "ir/SinterTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ir/SinterOps.cpp.inc"
      >();
}

void registerSinterDialect(mlir::DialectRegistry &registry) {
  registry.insert<SinterDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect>();
}

std::unique_ptr<mlir::MLIRContext> makeSinterContext(bool multithreaded) {
  mlir::DialectRegistry registry;
  registerSinterDialect(registry);
  auto context = std::make_unique<mlir::MLIRContext>(
      registry, multithreaded ? mlir::MLIRContext::Threading::ENABLED
                              : mlir::MLIRContext::Threading::DISABLED);
  context->loadAllAvailableDialects();
  return context;
}

} // namespace sinter::ir
