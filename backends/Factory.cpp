// Factory.cpp - createBackend and the SINTER_BACKEND / SINTER_DISABLE_FUSION variables.
//
// The known kinds are one table; a kind whose backend is not built yet has no maker and is
// Unimplemented, never silently replaced by another backend. Registering a new backend is one
// line in kKinds. "auto" and BackendOptions::device are resolved to one of them (resolve) before
// anything is built, so resolveBackend reports exactly what createBackend builds.
#include "sinter/Factory.h"

#include <cstdlib>
#include <optional>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "backends/CpuBackend.h"
#include "backends/ReferenceBackend.h"
#include "backends/VulkanBackend.h"
#include "passes/FusionCompiler.h"
#include "runtime/LazyBackend.h"
#include "runtime/PlanInterpreter.h"
#include "runtime/vulkan/PhysicalDevices.h"
#include "sinter/Status.h"
#include "support/Env.h"

namespace sinter {
namespace {

using MakeFn = absl::StatusOr<std::unique_ptr<ComputeBackend>> (*)(const BackendOptions &);

absl::StatusOr<std::unique_ptr<ComputeBackend>> makeReference(const BackendOptions &options) {
  return std::unique_ptr<ComputeBackend>(new ReferenceBackend(options));
}

// The lazy recorder with plans run by the plan interpreter: fused by the pass pipeline, or one
// kernel per call with fusion off (the oracle for fused plans).
absl::StatusOr<std::unique_ptr<ComputeBackend>> makeLazy(const BackendOptions &options) {
  runtime::LazyBackendOptions lazy;
  lazy.name = options.fusion ? "sinter-lazy" : "sinter-lazy-unfused";
  lazy.memoryLimitBytes = options.memoryLimitBytes;
  if (options.fusion)
    lazy.compiler =
        std::make_unique<passes::FusionCompiler>(passes::FusionOptions{options.disabledFusions});
  else
    lazy.compiler = std::make_unique<runtime::InterpreterCompiler>();
  return std::unique_ptr<ComputeBackend>(new runtime::LazyBackend(std::move(lazy)));
}

// The lazy recorder with plans compiled for the host by the LLVM JIT (backends/CpuBackend.h).
absl::StatusOr<std::unique_ptr<ComputeBackend>> makeCpu(const BackendOptions &options) {
  return createCpuBackend(options);
}

// The lazy recorder over Vulkan device memory with SPIR-V kernels (backends/VulkanBackend.h):
// Unimplemented while the SPIR-V code generator is not in the build, Unavailable without a device.
absl::StatusOr<std::unique_ptr<ComputeBackend>> makeVulkan(const BackendOptions &options) {
  return createVulkanBackend(options);
}

struct KindEntry {
  const char *name;
  MakeFn make; ///< nullptr: a known kind that this build does not have yet
};

// "auto" is no entry: resolve() turns it into cpu or vulkan before anything is built.
constexpr KindEntry kKinds[] = {
    {"reference", makeReference},
    {"cpu", makeCpu},
    {"vulkan", makeVulkan},
    {"lazy", makeLazy},
};

const KindEntry *findKind(absl::string_view name) {
  for (const KindEntry &entry : kKinds)
    if (name == entry.name)
      return &entry;
  return nullptr;
}

bool isKnownKind(absl::string_view name) { return absl::c_linear_search(backendKinds(), name); }

std::string validKinds() { return absl::StrJoin(backendKinds(), ", "); }

std::string validFusionNames() { return absl::StrJoin(disabledFusionNames(), ", "); }

bool isFusionName(absl::string_view name) {
  return absl::c_linear_search(disabledFusionNames(), name);
}

// Empty and unset are the same: the default stays.
const char *getenvNonEmpty(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

// What createBackend builds: a kind of kKinds and, for vulkan, the Vulkan device's selector
// (empty: VulkanDevice's own choice, SINTER_VK_DEVICE or the best device).
struct Resolved {
  const KindEntry *entry = nullptr;
  std::string vulkanSelector;
  std::optional<Device> device; ///< set when BackendOptions::device named one
};

absl::StatusOr<Resolved> resolve(const BackendOptions &options) {
  if (!isKnownKind(options.kind))
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown backend kind '%s'; valid kinds: %s", options.kind, validKinds()));
  for (const std::string &name : options.disabledFusions)
    if (!isFusionName(name))
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown fusion pattern '%s' in disabledFusions; valid: %s", name, validFusionNames()));
  SINTER_RETURN_IF_ERROR(checkLibraryEnvironment());
  Resolved out;
  std::string kind = options.kind;
  if (!options.device.empty()) {
    SINTER_ASSIGN_OR_RETURN(std::vector<Device> devices, listDevices());
    SINTER_ASSIGN_OR_RETURN(Device device, findDevice(devices, options.device));
    const bool vulkanDevice = device.kind == BackendKind::Vulkan;
    if (kind == "auto")
      kind = vulkanDevice ? "vulkan" : "cpu";
    if ((kind == "vulkan") != vulkanDevice)
      return absl::InvalidArgumentError(
          absl::StrFormat("device %u (%s) is %s; the %s kind runs on %s", device.index, device.name,
                          vulkanDevice ? "a Vulkan device" : "the host CPU", kind,
                          kind == "vulkan" ? "a Vulkan device" : "the host CPU"));
    if (vulkanDevice)
      out.vulkanSelector = absl::StrCat(device.index);
    out.device = std::move(device);
  } else if (kind == "auto") {
    // The fastest kind this machine has: vulkan on a GPU, else cpu. A Vulkan device that is a
    // CPU implementation (Mesa's lavapipe) runs the same kernels far slower than the cpu kind's
    // JIT. The GPU is the one the vulkan kind would take (SINTER_VK_DEVICE, else the best).
    kind = "cpu";
    const absl::StatusOr<std::vector<runtime::vulkan::PhysicalDeviceInfo>> *physical =
        haveSpirvCodegen() ? &runtime::vulkan::listPhysicalDevices() : nullptr;
    if (physical && physical->ok()) {
      absl::StatusOr<size_t> chosen = runtime::vulkan::selectPhysicalDevice(
          **physical, runtime::vulkan::deviceSelectorOrEnvironment(""), "SINTER_VK_DEVICE");
      if (chosen.status().code() == absl::StatusCode::kNotFound)
        return chosen.status(); // SINTER_VK_DEVICE names nothing: an error, not a fallback
      if (chosen.ok() && (**physical)[*chosen].type != VK_PHYSICAL_DEVICE_TYPE_CPU) {
        kind = "vulkan";
        out.vulkanSelector = absl::StrCat((**physical)[*chosen].index);
      }
    }
  }
  out.entry = findKind(kind);
  return out;
}

} // namespace

const std::vector<std::string> &backendKinds() {
  static const std::vector<std::string> kinds = [] {
    std::vector<std::string> names = {"auto"};
    for (const KindEntry &entry : kKinds)
      names.push_back(entry.name);
    return names;
  }();
  return kinds;
}

const std::vector<std::string> &disabledFusionNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = {"all"};
    for (const std::string &name : passes::fusionPatternNames())
      all.push_back(name);
    return all;
  }();
  return names;
}

absl::Status addDisabledFusions(absl::string_view list, absl::string_view source,
                                std::vector<std::string> &names) {
  for (absl::string_view piece : absl::StrSplit(list, ',')) {
    absl::string_view name = absl::StripAsciiWhitespace(piece);
    if (name.empty())
      continue;
    if (!isFusionName(name))
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: unknown fusion pattern '%s'; valid: %s", source, name, validFusionNames()));
    if (!absl::c_linear_search(names, name))
      names.emplace_back(name);
  }
  return absl::OkStatus();
}

absl::StatusOr<BackendChoice> resolveBackend(const BackendOptions &options) {
  SINTER_ASSIGN_OR_RETURN(Resolved resolved, resolve(options));
  BackendChoice choice;
  choice.kind = resolved.entry->name;
  if (resolved.device) {
    choice.device = *resolved.device;
    return choice;
  }
  SINTER_ASSIGN_OR_RETURN(std::vector<Device> devices, listDevices());
  if (choice.kind != "vulkan") {
    choice.device = devices.back(); // the host CPU
    return choice;
  }
  // The device VulkanDevice will pick: the selector resolve() chose, else SINTER_VK_DEVICE, else
  // the best one.
  const absl::StatusOr<std::vector<runtime::vulkan::PhysicalDeviceInfo>> &listed =
      runtime::vulkan::listPhysicalDevices();
  SINTER_RETURN_IF_ERROR(listed.status());
  const std::vector<runtime::vulkan::PhysicalDeviceInfo> &physical = *listed;
  SINTER_ASSIGN_OR_RETURN(size_t chosen,
                          runtime::vulkan::selectPhysicalDevice(
                              physical,
                              runtime::vulkan::deviceSelectorOrEnvironment(resolved.vulkanSelector),
                              "SINTER_VK_DEVICE"));
  SINTER_ASSIGN_OR_RETURN(choice.device, findDevice(devices, absl::StrCat(physical[chosen].index)));
  return choice;
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> createBackend(const BackendOptions &options) {
  SINTER_ASSIGN_OR_RETURN(Resolved resolved, resolve(options));
  if (!resolved.entry->make)
    return absl::UnimplementedError(
        absl::StrFormat("backend '%s' is not built yet", resolved.entry->name));
  if (resolved.entry->make == makeVulkan) {
    VulkanBackendOptions vulkan;
    vulkan.deviceOptions.deviceSelector = resolved.vulkanSelector;
    return createVulkanBackend(options, std::move(vulkan));
  }
  return resolved.entry->make(options);
}

absl::StatusOr<BackendOptions> optionsFromEnvironment(BackendOptions defaults) {
  BackendOptions options = std::move(defaults);
  if (const char *kind = getenvNonEmpty("SINTER_BACKEND")) {
    if (!isKnownKind(kind))
      return absl::InvalidArgumentError(absl::StrFormat(
          "SINTER_BACKEND: unknown backend kind '%s'; valid kinds: %s", kind, validKinds()));
    options.kind = kind;
  }
  if (const char *fusion = getenvNonEmpty("SINTER_DISABLE_FUSION"))
    SINTER_RETURN_IF_ERROR(
        addDisabledFusions(fusion, "SINTER_DISABLE_FUSION", options.disabledFusions));
  return options;
}

absl::StatusOr<std::unique_ptr<ComputeBackend>>
createBackendFromEnvironment(BackendOptions defaults) {
  SINTER_ASSIGN_OR_RETURN(BackendOptions options, optionsFromEnvironment(std::move(defaults)));
  return createBackend(options);
}

} // namespace sinter
