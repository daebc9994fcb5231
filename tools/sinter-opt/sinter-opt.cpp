// sinter-opt.cpp - mlir-opt for the sinter dialect: parse, verify, run passes, print.
//
// Reads `.mlir` files (lit tests, modules written by sinter-dump or handed in with a bug report)
// with the sinter, func and arith dialects, and runs any registered pass on them; with
// --mlir-print-ir-after-all it shows each step of a pipeline.
#include "ir/Registration.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Pipeline.h"

int main(int argc, char **argv) {
  // MLIR's generic passes (canonicalize, cse, symbol-dce, ...): cheap, and useful on sinter IR.
  mlir::registerTransformsPasses();
  // Every sinter pass (--forward-copies, --fuse-attention, ...) and --sinter-pipeline.
  sinter::passes::registerSinterPasses();

  mlir::DialectRegistry registry;
  sinter::ir::registerSinterDialect(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Sinter optimizer driver\n", registry));
}
