// Passes.h - declarations and registration of the sinter passes (MLIR-typed; passes/ only).
#ifndef SINTER_PASSES_PASSES_H
#define SINTER_PASSES_PASSES_H

#include <memory>

#include "ir/SinterDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace sinter::passes {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace sinter::passes

#endif // SINTER_PASSES_PASSES_H
