// Pipeline.h - the default pass pipeline (MLIR-typed; passes/ and tools only).
#ifndef SINTER_PASSES_PIPELINE_H
#define SINTER_PASSES_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "passes/FusionCompiler.h"

namespace sinter::passes {

/// Adds the default pipeline, nested on func.func, to `pm`, leaving out disabled patterns.
void buildPipeline(mlir::OpPassManager &pm, const FusionOptions &options);

/// Registers every sinter pass and the pipeline `sinter-pipeline` (for sinter-opt).
void registerSinterPasses();

} // namespace sinter::passes

#endif // SINTER_PASSES_PIPELINE_H
