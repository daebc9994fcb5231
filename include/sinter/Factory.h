// Factory.h - builds a ComputeBackend from options or from the environment.
//
// An engine that calls createBackendFromEnvironment() can switch between the reference, cpu and
// vulkan backends (and turn fusion patterns off) without recompiling: SINTER_BACKEND and
// SINTER_DISABLE_FUSION decide. A backend that is not built yet is an error, never a silent
// substitute.
#ifndef SINTER_FACTORY_H
#define SINTER_FACTORY_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sinter/ComputeBackend.h"

namespace sinter {

/// How to build a backend.
struct BackendOptions {
  /// "reference", "cpu", "vulkan" (and "lazy": the lazy recorder on the plan interpreter), or
  /// "auto": vulkan where the machine has a GPU (a CPU Vulkan implementation does not count),
  /// else cpu.
  std::string kind = "reference";
  /// Fusion on or off for the lazy backends; off runs every op as its own kernel.
  bool fusion = true;
  /// Fusion patterns switched off by name ("all" switches every pattern off).
  std::vector<std::string> disabledFusions;
  /// Eager mode for the compiled backends: every call runs (and waits) on its own, as an eager
  /// per-op backend does. Used as the baseline of the benchmarks.
  bool eager = false;
  /// Memory the backend may hand out, in bytes; 0 means the device's (or host's) memory.
  uint64_t memoryLimitBytes = 0;
};

/// Builds the backend `options` describe. InvalidArgument for an unknown kind, Unimplemented for a
/// kind that this build does not have yet.
absl::StatusOr<std::unique_ptr<ComputeBackend>> createBackend(const BackendOptions &options);

/// `defaults` with SINTER_BACKEND (kind) and SINTER_DISABLE_FUSION ("all" or "name,name")
/// applied. InvalidArgument when a variable holds something unusable.
absl::StatusOr<BackendOptions> optionsFromEnvironment(BackendOptions defaults = {});

/// createBackend(optionsFromEnvironment(defaults)).
absl::StatusOr<std::unique_ptr<ComputeBackend>>
createBackendFromEnvironment(BackendOptions defaults = {});

} // namespace sinter

#endif // SINTER_FACTORY_H
