// Pipeline.cpp - the default pipeline, in order, with why each pass sits where it does.
#include "passes/Pipeline.h"

#include <algorithm>

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"

namespace sinter::passes {

const std::vector<std::string> &fusionPatternNames() {
  static const std::vector<std::string> names = {
      "attention", "rmsnorm-qmatmul", "horizontal",   "rope-epilogue",
      "kv-write",  "swiglu",          "residual-add", "elementwise",
  };
  return names;
}

bool FusionOptions::enabled(const std::string &pattern) const {
  return std::none_of(disabled.begin(), disabled.end(),
                      [&](const std::string &d) { return d == "all" || d == pattern; });
}

void buildPipeline(mlir::OpPassManager &pm, const FusionOptions &options) {
  mlir::OpPassManager &fn = pm.nest<mlir::func::FuncOp>();
  // Cleanup first, on the flat op list: forwarding turns the residual copies' readers into
  // readers of the source, which leaves the copies dead for the next pass to erase.
  fn.addPass(createForwardCopies());
  fn.addPass(createEliminateDeadVersions());
  // Identical pure ops on identical versions compute the same version.
  fn.addPass(mlir::createCSEPass());
  // Fusion forms kernels from runs of adjacent ops; each pattern grows what the earlier ones
  // formed, so the order is the order of a decode layer's ops.
  if (options.enabled("attention"))
    fn.addPass(createFuseAttention());
  if (options.enabled("rmsnorm-qmatmul")) {
    FuseRmsNormQMatmulOptions o;
    o.horizontal = options.enabled("horizontal");
    fn.addPass(createFuseRmsNormQMatmul(o));
  }
  // After rmsnorm-qmatmul: siblings that the norm's kernel did not take (no norm before them).
  if (options.enabled("horizontal"))
    fn.addPass(createFuseHorizontal());
  // After horizontal: rope needs the Q and K projections in one kernel.
  if (options.enabled("rope-epilogue"))
    fn.addPass(createFuseRopeEpilogue());
  // After rope-epilogue: the cache copies read rope's results.
  if (options.enabled("kv-write"))
    fn.addPass(createFuseKvWrite());
  if (options.enabled("swiglu"))
    fn.addPass(createFuseSwiglu());
  if (options.enabled("residual-add"))
    fn.addPass(createFuseResidualAdd());
  // Last: whatever element-wise runs no named pattern claimed.
  if (options.enabled("elementwise"))
    fn.addPass(createFuseElementwise());
}

void registerSinterPasses() {
  registerSinterGeneratedPasses();
  mlir::PassPipelineRegistration<>("sinter-pipeline", "the default sinter fusion pipeline",
                                   [](mlir::OpPassManager &pm) { buildPipeline(pm, {}); });
}

} // namespace sinter::passes
