// Factory.h - builds a ComputeBackend from options or from the environment.
//
// The default kind is "auto": vulkan on a GPU, else cpu; the reference (the scalar oracle) only
// when asked for. An engine that calls createBackendFromEnvironment() can switch between the
// kinds (and turn fusion patterns off) without recompiling: SINTER_BACKEND and
// SINTER_DISABLE_FUSION decide. A backend that is not built yet is an error, never a silent
// substitute.
#ifndef SINTER_FACTORY_H
#define SINTER_FACTORY_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sinter/ComputeBackend.h"
#include "sinter/Devices.h"

namespace sinter {

/// How to build a backend.
struct BackendOptions {
  /// "auto" (the default): vulkan where the machine has a GPU (a Vulkan implementation on the
  /// CPU, such as lavapipe, does not count), else cpu. Or "reference" (the scalar oracle),
  /// "cpu", "vulkan", "lazy" (the lazy recorder on the plan interpreter).
  std::string kind = "auto";
  /// Fusion on or off for the lazy backends; off runs every op as its own kernel.
  bool fusion = true;
  /// Fusion patterns switched off by name ("all" switches every pattern off).
  std::vector<std::string> disabledFusions;
  /// Eager mode for the compiled backends: every call runs (and waits) on its own, as an eager
  /// per-op backend does. Used as the baseline of the benchmarks.
  bool eager = false;
  /// Memory the backend may hand out, in bytes; 0 means the device's (or host's) memory.
  uint64_t memoryLimitBytes = 0;
  /// The device to run on (findDevice: an index from listDevices(), "cpu", or part of a name);
  /// empty: the kind's own choice (vulkan: SINTER_VK_DEVICE, else the best device). With kind
  /// "auto" a Vulkan device means vulkan (a software one too: it was asked for) and the CPU
  /// means cpu; any other kind must match the device (vulkan a Vulkan device, the rest the CPU).
  std::string device;
};

/// The kinds createBackend knows, in the order error messages list them.
const std::vector<std::string> &backendKinds();

/// The names BackendOptions::disabledFusions and SINTER_DISABLE_FUSION take: "all", then every
/// fusion pattern.
const std::vector<std::string> &disabledFusionNames();

/// Adds the names in `list` ("all" or comma-separated pattern names; spaces around names and
/// empty items are ignored) to `names`, each once. InvalidArgument, naming `source` (e.g.
/// "SINTER_DISABLE_FUSION" or "--disable-fusion") and listing the valid names, for an unknown one.
absl::Status addDisabledFusions(absl::string_view list, absl::string_view source,
                                std::vector<std::string> &names);

/// What createBackend(options) would build, without building it.
struct BackendChoice {
  std::string kind; ///< "auto" resolved to "vulkan" or "cpu"
  Device device;    ///< the device it runs on
};

/// The kind and device of createBackend(options): the same errors for an unknown kind, fusion
/// pattern or device, or a device the kind cannot run on.
absl::StatusOr<BackendChoice> resolveBackend(const BackendOptions &options);

/// Builds the backend `options` describe. InvalidArgument for an unknown kind or fusion pattern,
/// a device the kind cannot run on, or a SINTER_* number the library reads (SINTER_THREADS,
/// SINTER_MAX_TRACE, ...) that is not one; NotFound (listing the devices) for an unknown device;
/// Unimplemented for a kind that this build does not have yet.
absl::StatusOr<std::unique_ptr<ComputeBackend>> createBackend(const BackendOptions &options);

/// `defaults` with SINTER_BACKEND (kind) and SINTER_DISABLE_FUSION ("all" or "name,name")
/// applied. InvalidArgument when a variable holds something unusable.
absl::StatusOr<BackendOptions> optionsFromEnvironment(BackendOptions defaults = {});

/// createBackend(optionsFromEnvironment(defaults)).
absl::StatusOr<std::unique_ptr<ComputeBackend>>
createBackendFromEnvironment(BackendOptions defaults = {});

} // namespace sinter

#endif // SINTER_FACTORY_H
