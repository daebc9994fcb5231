// FusionCompiler.h - trace -> sinter IR -> pass pipeline -> KernelProgram, as a PlanCompiler.
//
// Plain C++: the runtime and the factory include it without seeing MLIR. On a plan-cache miss the
// lazy backend calls compile(); the resulting program runs on the plan interpreter, or on the
// executor a code generator supplies (makePlan).
#ifndef SINTER_PASSES_FUSIONCOMPILER_H
#define SINTER_PASSES_FUSIONCOMPILER_H

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "support/KernelProgram.h"
#include "support/Plan.h"

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace sinter::passes {

/// The kill-switch names of the fusion patterns, in pipeline order.
const std::vector<std::string> &fusionPatternNames();

/// Which patterns run. "all" in `disabled` switches every pattern off (cleanup still runs).
struct FusionOptions {
  std::vector<std::string> disabled;
  bool enabled(const std::string &pattern) const;
};

/// The IR of one compilation, for sinter-dump and SINTER_DUMP.
struct CompileDump {
  std::string before;   ///< the trace's module as built
  size_t opsBefore = 0; ///< graph ops and uploads in the module as built (the recorded calls)
  std::string after;    ///< after the pipeline
  std::vector<std::pair<std::string, std::string>> afterEachPass; ///< (pass name, IR)
};

/// Turns `trace` into a kernel program with the default pipeline. `dump`, when given, receives
/// the IR before and after (and after each pass when `dumpEachPass`).
absl::StatusOr<KernelProgram> compileProgram(mlir::MLIRContext &context, const Trace &trace,
                                             const std::vector<IntSlot> &params,
                                             const FusionOptions &options,
                                             CompileDump *dump = nullptr,
                                             bool dumpEachPass = false);

/// compileProgram in a context of its own (for tools: a context per call is slow for a runtime).
absl::StatusOr<KernelProgram> compileTraceOnce(const Trace &trace,
                                               const std::vector<IntSlot> &params,
                                               const FusionOptions &options,
                                               CompileDump *dump = nullptr);

/// Parses a trace module (as traceToMlirText or SINTER_DUMP wrote it), runs the pipeline and
/// extracts the program. Parameters come from the `sinter.param` argument attributes, in
/// argument order. InvalidArgument with the parser's diagnostics for bad text.
absl::StatusOr<KernelProgram> compileMlirText(const std::string &text, const FusionOptions &options,
                                              CompileDump *dump = nullptr);

/// Makes the Plan that runs a compiled program (the plan interpreter by default).
using PlanMaker = std::function<absl::StatusOr<std::unique_ptr<Plan>>(KernelProgram program)>;

/// The PlanCompiler of the lazy backends with fusion on.
class FusionCompiler : public PlanCompiler {
public:
  explicit FusionCompiler(FusionOptions options = {}, PlanMaker makePlan = nullptr,
                          std::string name = "fusion+interpreter");
  ~FusionCompiler() override;
  std::string name() const override { return name_; }
  absl::StatusOr<std::unique_ptr<Plan>> compile(const Trace &trace,
                                                const std::vector<IntSlot> &params) override;

  /// Compilations in one MLIR context before the next gets a fresh one: a context keeps every
  /// attribute it ever saw (each distinct eps, freq_base and fixed integer of every trace), so
  /// one context for the life of the compiler would grow with every distinct value.
  static constexpr int kCompilesPerContext = 256;

private:
  FusionOptions options_;
  PlanMaker makePlan_;
  std::string name_;
  std::unique_ptr<mlir::MLIRContext> context_;
  int contextCompiles_ = 0; ///< compilations in context_ (kCompilesPerContext)
  std::string dumpDir_;     ///< SINTER_DUMP
  int compiles_ = 0;
};

} // namespace sinter::passes

#endif // SINTER_PASSES_FUSIONCOMPILER_H
