// BackendKinds.h - every backend kind an engine can create, for tests that run on each.
//
// The Vulkan kinds run on the machine's device (lavapipe in CI) with the validation layer on,
// and the fixture expects it to have said nothing; without a Vulkan driver they skip, saying so.
#ifndef SINTER_TESTS_SUPPORT_BACKENDKINDS_H
#define SINTER_TESTS_SUPPORT_BACKENDKINDS_H

#include <memory>
#include <string>
#include <vector>

#include "backends/VulkanBackend.h"
#include "sinter/Factory.h"
#include "gtest/gtest.h"

namespace sinter::test {

struct BackendKind {
  const char *name; ///< letters, digits and '_' (part of a test's name)
  BackendOptions options;
};

inline BackendOptions backendOptions(const char *kind, bool fusion = true, bool eager = false) {
  BackendOptions o;
  o.kind = kind;
  o.fusion = fusion;
  o.eager = eager;
  return o;
}

/// reference, lazy, cpu and vulkan, the compiled ones fused, unfused and eager.
inline const std::vector<BackendKind> &backendKinds() {
  static const auto *all = new std::vector<BackendKind>{
      {"reference", backendOptions("reference")},
      {"lazy", backendOptions("lazy")},
      {"lazy_unfused", backendOptions("lazy", false)},
      {"cpu", backendOptions("cpu")},
      {"cpu_unfused", backendOptions("cpu", false)},
      {"cpu_eager", backendOptions("cpu", false, true)},
      {"vulkan", backendOptions("vulkan")},
      {"vulkan_unfused", backendOptions("vulkan", false)},
      {"vulkan_eager", backendOptions("vulkan", false, true)},
  };
  return *all;
}

/// Makes backends of a kind; checks the Vulkan validation log when the test ends.
class BackendKindFixture {
public:
  /// A backend of `kind` with `options`' fields other than kind/fusion/eager; null after a
  /// GTEST_SKIP (no Vulkan device) or a failed ASSERT.
  std::unique_ptr<ComputeBackend> make(const BackendKind &kind, BackendOptions options = {}) {
    options.kind = kind.options.kind;
    options.fusion = kind.options.fusion;
    options.eager = kind.options.eager;
    if (options.kind != "vulkan") {
      absl::StatusOr<std::unique_ptr<ComputeBackend>> b = createBackend(options);
      EXPECT_TRUE(b.ok()) << b.status();
      return b.ok() ? std::move(b).value() : nullptr;
    }
    if (!device_) {
      runtime::vulkan::VulkanDeviceOptions deviceOptions;
      deviceOptions.validation = true;
      absl::StatusOr<std::unique_ptr<runtime::vulkan::VulkanDevice>> device =
          runtime::vulkan::VulkanDevice::create(deviceOptions);
      if (!device.ok() && device.status().code() == absl::StatusCode::kUnavailable) {
        skipped_ = std::string(device.status().message());
        return nullptr;
      }
      EXPECT_TRUE(device.ok()) << device.status();
      if (!device.ok())
        return nullptr;
      device_ = std::move(device).value();
    }
    VulkanBackendOptions vulkan;
    vulkan.device = device_;
    vulkan.stats = vulkanStats_ = std::make_shared<runtime::vulkan::VulkanStatsSink>();
    absl::StatusOr<std::unique_ptr<ComputeBackend>> b = createVulkanBackend(options, vulkan);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? std::move(b).value() : nullptr;
  }

  /// The counters of the last Vulkan backend make() built (null before one).
  std::shared_ptr<runtime::vulkan::VulkanStatsSink> vulkanStats() const { return vulkanStats_; }
  /// The Vulkan device make() created (null before a Vulkan kind).
  const runtime::vulkan::VulkanDevice *device() const { return device_.get(); }

  /// Non-empty when make() found no Vulkan device: the reason to skip with.
  const std::string &skipped() const { return skipped_; }

  /// Expects the validation layer to have said nothing; call after the backends are gone.
  void expectNoValidationMessages() {
    if (!device_)
      return;
    runtime::vulkan::ValidationLog log = device_->validationLog();
    EXPECT_EQ(log.count, 0u);
    for (const std::string &m : log.messages)
      ADD_FAILURE() << "validation: " << m;
  }

private:
  std::shared_ptr<runtime::vulkan::VulkanDevice> device_;
  std::shared_ptr<runtime::vulkan::VulkanStatsSink> vulkanStats_;
  std::string skipped_;
};

} // namespace sinter::test

#endif // SINTER_TESTS_SUPPORT_BACKENDKINDS_H
