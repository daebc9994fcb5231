// PlanInterpreter.h - the plan compiler that makes one reference-kernel launch per trace op.
//
// It is the `--fusion off` and debugging path and the oracle that fused plans are checked
// against; it is never the shipped CPU path.
#ifndef SINTER_RUNTIME_PLANINTERPRETER_H
#define SINTER_RUNTIME_PLANINTERPRETER_H

#include "support/KernelProgram.h"
#include "support/Plan.h"

namespace sinter::runtime {

/// Compiles traces into unfused programs run by the interpreter plan.
class InterpreterCompiler : public PlanCompiler {
public:
  explicit InterpreterCompiler(OpFaultHook faultHook = nullptr)
      : faultHook_(std::move(faultHook)) {}
  std::string name() const override { return "interpreter"; }
  absl::StatusOr<std::unique_ptr<Plan>> compile(const Trace &trace,
                                                const std::vector<IntSlot> &params) override {
    return makeInterpreterPlan(unfusedProgram(trace, params), faultHook_);
  }

private:
  OpFaultHook faultHook_;
};

} // namespace sinter::runtime

#endif // SINTER_RUNTIME_PLANINTERPRETER_H
