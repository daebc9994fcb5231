// FuzzFactory.cpp - the backend factory of the C ABI fuzzer: reference and lazy kinds only.
//
// Replaces backends/Factory.cpp in the clang-built fuzzer so that it needs neither MLIR nor LLVM:
// "lazy" is the lazy recorder on the plan interpreter (no fusion: the fusion pipeline is MLIR),
// every other known kind is Unimplemented, and an unknown kind is InvalidArgument, as in the real
// factory. SINTER_BACKEND is read as the real factory reads it. The device list is the host alone.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/ReferenceBackend.h"
#include "runtime/LazyBackend.h"
#include "runtime/PlanInterpreter.h"
#include "sinter/Factory.h"

namespace sinter {

absl::StatusOr<std::unique_ptr<ComputeBackend>> createBackend(const BackendOptions &options) {
  if (options.kind == "reference")
    return std::unique_ptr<ComputeBackend>(new ReferenceBackend(options));
  if (options.kind == "lazy") {
    runtime::LazyBackendOptions lazy;
    lazy.name = "sinter-lazy-unfused";
    lazy.memoryLimitBytes = options.memoryLimitBytes;
    lazy.compiler = std::make_unique<runtime::InterpreterCompiler>();
    return std::unique_ptr<ComputeBackend>(new runtime::LazyBackend(std::move(lazy)));
  }
  if (options.kind == "cpu" || options.kind == "vulkan" || options.kind == "auto")
    return absl::UnimplementedError(
        absl::StrFormat("backend '%s' is not in the fuzz build", options.kind));
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown backend kind '%s'; valid kinds: reference, lazy", options.kind));
}

absl::StatusOr<std::vector<Device>> listDevices() {
  return std::vector<Device>{Device{0, "host CPU", BackendKind::Cpu, DeviceType::Cpu, 0, 1}};
}

absl::StatusOr<BackendOptions> optionsFromEnvironment(BackendOptions defaults) {
  if (const char *kind = std::getenv("SINTER_BACKEND"); kind && *kind)
    defaults.kind = kind;
  return defaults;
}

absl::StatusOr<std::unique_ptr<ComputeBackend>>
createBackendFromEnvironment(BackendOptions defaults) {
  absl::StatusOr<BackendOptions> options = optionsFromEnvironment(std::move(defaults));
  if (!options.ok())
    return options.status();
  return createBackend(*options);
}

} // namespace sinter
