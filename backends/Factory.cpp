// Factory.cpp - createBackend and the SINTER_BACKEND / SINTER_DISABLE_FUSION variables.
//
// The known kinds are one table; a kind whose backend is not built yet has no maker and is
// Unimplemented, never silently replaced by another backend. Registering a new backend is one
// line in kKinds.
#include "sinter/Factory.h"

#include <cstdlib>

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
#include "sinter/Status.h"

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

// The fastest kind this machine has: vulkan on a GPU, else cpu. A Vulkan device that is a CPU
// implementation (Mesa's lavapipe) runs the same kernels far slower than the cpu kind's JIT.
absl::StatusOr<std::unique_ptr<ComputeBackend>> makeAuto(const BackendOptions &options) {
  if (haveSpirvCodegen()) {
    absl::StatusOr<std::unique_ptr<runtime::vulkan::VulkanDevice>> device =
        runtime::vulkan::VulkanDevice::create();
    if (device.ok() && (*device)->caps().deviceKind != VK_PHYSICAL_DEVICE_TYPE_CPU) {
      VulkanBackendOptions vulkan;
      vulkan.device = std::move(device).value();
      return createVulkanBackend(options, std::move(vulkan));
    }
  }
  return makeCpu(options);
}

struct KindEntry {
  const char *name;
  MakeFn make; ///< nullptr: a known kind that this build does not have yet
};

constexpr KindEntry kKinds[] = {
    {"reference", makeReference}, {"cpu", makeCpu},   {"vulkan", makeVulkan},
    {"lazy", makeLazy},           {"auto", makeAuto},
};

/// The fusion patterns SINTER_DISABLE_FUSION may name: the passes' kill-switch names.
const std::vector<std::string> &fusionNames() { return passes::fusionPatternNames(); }

const KindEntry *findKind(absl::string_view name) {
  for (const KindEntry &entry : kKinds)
    if (name == entry.name)
      return &entry;
  return nullptr;
}

std::string validKinds() {
  return absl::StrJoin(kKinds, ", ",
                       [](std::string *out, const KindEntry &entry) { out->append(entry.name); });
}

bool isFusionName(absl::string_view name) {
  return absl::c_any_of(fusionNames(), [&](const std::string &known) { return name == known; });
}

// Empty and unset are the same: the default stays.
const char *getenvNonEmpty(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

absl::Status applyDisableFusion(absl::string_view value, BackendOptions &options) {
  for (absl::string_view piece : absl::StrSplit(value, ',')) {
    absl::string_view name = absl::StripAsciiWhitespace(piece);
    if (name.empty())
      continue;
    if (name != "all" && !isFusionName(name))
      return absl::InvalidArgumentError(
          absl::StrFormat("SINTER_DISABLE_FUSION: unknown fusion pattern '%s'; valid: all, %s",
                          name, absl::StrJoin(fusionNames(), ", ")));
    if (!absl::c_linear_search(options.disabledFusions, name))
      options.disabledFusions.emplace_back(name);
  }
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<std::unique_ptr<ComputeBackend>> createBackend(const BackendOptions &options) {
  const KindEntry *entry = findKind(options.kind);
  if (!entry)
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown backend kind '%s'; valid kinds: %s", options.kind, validKinds()));
  if (!entry->make)
    return absl::UnimplementedError(absl::StrFormat("backend '%s' is not built yet", options.kind));
  for (const std::string &name : options.disabledFusions)
    if (name != "all" && !isFusionName(name))
      return absl::InvalidArgumentError(
          absl::StrFormat("unknown fusion pattern '%s' in disabledFusions; valid: all, %s", name,
                          absl::StrJoin(fusionNames(), ", ")));
  return entry->make(options);
}

absl::StatusOr<BackendOptions> optionsFromEnvironment(BackendOptions defaults) {
  BackendOptions options = std::move(defaults);
  if (const char *kind = getenvNonEmpty("SINTER_BACKEND")) {
    if (!findKind(kind))
      return absl::InvalidArgumentError(absl::StrFormat(
          "SINTER_BACKEND: unknown backend kind '%s'; valid kinds: %s", kind, validKinds()));
    options.kind = kind;
  }
  if (const char *fusion = getenvNonEmpty("SINTER_DISABLE_FUSION")) {
    SINTER_RETURN_IF_ERROR(applyDisableFusion(fusion, options));
  }
  return options;
}

absl::StatusOr<std::unique_ptr<ComputeBackend>>
createBackendFromEnvironment(BackendOptions defaults) {
  SINTER_ASSIGN_OR_RETURN(BackendOptions options, optionsFromEnvironment(std::move(defaults)));
  return createBackend(options);
}

} // namespace sinter
