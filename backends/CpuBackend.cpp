// CpuBackend.cpp - wires LazyBackend, FusionCompiler and CpuCompiler into the `cpu` kind.
#include "backends/CpuBackend.h"

#include "backends/EagerBackend.h"
#include "passes/FusionCompiler.h"
#include "runtime/LazyBackend.h"
#include "sinter/Status.h"

namespace sinter {
namespace {

// The unfused PlanCompiler of a lazy backend over a CpuCompiler it shares with others.
class SharedCpuCompiler : public PlanCompiler {
public:
  explicit SharedCpuCompiler(std::shared_ptr<codegen::CpuCompiler> cpu) : cpu_(std::move(cpu)) {}
  std::string name() const override { return cpu_->name(); }
  absl::StatusOr<std::unique_ptr<Plan>> compile(const Trace &trace,
                                                const std::vector<IntSlot> &params) override {
    return cpu_->compile(trace, params);
  }

private:
  std::shared_ptr<codegen::CpuCompiler> cpu_;
};

} // namespace

absl::StatusOr<std::unique_ptr<ComputeBackend>>
createCpuBackend(const BackendOptions &options, codegen::CpuCompilerOptions compilerOptions) {
  SINTER_ASSIGN_OR_RETURN(std::unique_ptr<codegen::CpuCompiler> cpu,
                          codegen::CpuCompiler::create(std::move(compilerOptions)));
  return createCpuBackend(options, std::shared_ptr<codegen::CpuCompiler>(std::move(cpu)));
}

absl::StatusOr<std::unique_ptr<ComputeBackend>>
createCpuBackend(const BackendOptions &options, std::shared_ptr<codegen::CpuCompiler> cpu) {
  if (!cpu)
    return absl::InvalidArgumentError("createCpuBackend: no cpu compiler");
  runtime::LazyBackendOptions lazy;
  lazy.memoryLimitBytes = options.memoryLimitBytes;
  if (options.eager) {
    // One call per trace: nothing to fuse, every call on its single-op kernel.
    lazy.name = "sinter-cpu-eager";
    lazy.compiler = std::make_unique<SharedCpuCompiler>(std::move(cpu));
    return std::unique_ptr<ComputeBackend>(
        new EagerBackend(std::make_unique<runtime::LazyBackend>(std::move(lazy))));
  }
  if (!options.fusion) {
    lazy.name = "sinter-cpu-unfused";
    lazy.compiler = std::make_unique<SharedCpuCompiler>(std::move(cpu));
    return std::unique_ptr<ComputeBackend>(new runtime::LazyBackend(std::move(lazy)));
  }
  lazy.name = "sinter-cpu";
  lazy.compiler = std::make_unique<passes::FusionCompiler>(
      passes::FusionOptions{options.disabledFusions},
      [cpu](KernelProgram program) { return cpu->compileProgram(program); }, "fusion+cpu-jit");
  return std::unique_ptr<ComputeBackend>(new runtime::LazyBackend(std::move(lazy)));
}

} // namespace sinter
