// DevicesTest.cpp - listDevices, findDevice and BackendOptions::device.
//
// The list holds the Vulkan devices (lavapipe in CI), then the host CPU, which is always there.
// A device is chosen by index or name; with kind auto it decides the kind; a kind that cannot
// run on the device, or a device that names nothing, is an error listing the devices.
#include <cstdio>
#include <string>
#include <vector>

#include "backends/VulkanBackend.h"
#include "sinter/Devices.h"
#include "sinter/Factory.h"
#include "tests/support/ScopedEnv.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<Device> devices() {
  absl::StatusOr<std::vector<Device>> listed = listDevices();
  EXPECT_TRUE(listed.ok()) << listed.status();
  return listed.ok() ? *listed : std::vector<Device>{};
}

TEST(DevicesTest, VulkanDevicesComeFirstThenTheHostCpu) {
  std::vector<Device> all = devices();
  ASSERT_FALSE(all.empty());
  for (const Device &d : all)
    std::printf("%s\n", describeDevice(d).c_str());
  const Device &cpu = all.back();
  EXPECT_EQ(cpu.kind, BackendKind::Cpu);
  EXPECT_EQ(cpu.type, DeviceType::Cpu);
  EXPECT_GE(cpu.computeUnits, 1u);
  EXPECT_GT(cpu.memoryBytes, 0u);
  EXPECT_THAT(describeDevice(cpu), HasSubstr(": cpu, "));
  for (size_t i = 0; i + 1 < all.size(); ++i) {
    EXPECT_EQ(all[i].kind, BackendKind::Vulkan) << all[i].name;
    EXPECT_NE(all[i].type, DeviceType::Cpu) << all[i].name;
    EXPECT_LT(all[i].index, all[i + 1].index);
    EXPECT_THAT(describeDevice(all[i]), HasSubstr(": vulkan "));
  }
  EXPECT_EQ(deviceTypeName(DeviceType::Software), std::string("software"));
}

TEST(DevicesTest, FindDeviceTakesAnIndexCpuOrPartOfAName) {
  std::vector<Device> all = devices();
  ASSERT_FALSE(all.empty());
  const Device &cpu = all.back();
  for (const std::string &selector :
       {std::to_string(cpu.index), std::string("cpu"), std::string("CPU"), cpu.name}) {
    absl::StatusOr<Device> found = findDevice(all, selector);
    ASSERT_TRUE(found.ok()) << selector << ": " << found.status();
    EXPECT_EQ(found->index, cpu.index) << selector;
  }
  for (const Device &d : all) {
    if (d.name.find("llvmpipe") == std::string::npos)
      continue;
    absl::StatusOr<Device> lavapipe = findDevice(all, "LavaPipe");
    ASSERT_TRUE(lavapipe.ok()) << lavapipe.status();
    EXPECT_EQ(lavapipe->type, DeviceType::Software);
  }
  absl::StatusOr<Device> none = findDevice(all, "no-such-device-anywhere");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status().message()),
              AllOf(HasSubstr("'no-such-device-anywhere'"), HasSubstr(cpu.name)));
  EXPECT_EQ(findDevice(all, std::to_string(cpu.index + 1)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(DevicesTest, TheDeviceOptionChoosesTheKindUnderAuto) {
  std::vector<Device> all = devices();
  ASSERT_FALSE(all.empty());
  BackendOptions options;
  options.device = "cpu";
  absl::StatusOr<std::unique_ptr<ComputeBackend>> cpu = createBackend(options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)->name(), "sinter-cpu");
  absl::StatusOr<BackendChoice> choice = resolveBackend(options);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->kind, "cpu");
  EXPECT_EQ(choice->device.index, all.back().index);
  options.kind = "reference";
  EXPECT_EQ(createBackend(options).value()->name(), "reference");
  // An explicit Vulkan device runs vulkan, even a software one: it was asked for.
  if (all.size() > 1 && haveSpirvCodegen()) {
    options.kind = "auto";
    options.device = std::to_string(all[0].index);
    choice = resolveBackend(options);
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_EQ(choice->kind, "vulkan");
    EXPECT_EQ(choice->device.name, all[0].name);
  }
}

TEST(DevicesTest, AKindThatCannotRunOnTheDeviceIsInvalidArgument) {
  std::vector<Device> all = devices();
  ASSERT_FALSE(all.empty());
  BackendOptions options;
  options.kind = "vulkan";
  options.device = "cpu";
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(options);
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(backend.status().message()),
              AllOf(HasSubstr("host CPU"), HasSubstr("vulkan")));
  if (all.size() > 1) {
    options.kind = "cpu";
    options.device = std::to_string(all[0].index);
    backend = createBackend(options);
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(backend.status().message()), HasSubstr("a Vulkan device"));
  }
}

TEST(DevicesTest, AnUnknownDeviceIsNotFoundListingTheDevices) {
  std::vector<Device> all = devices();
  ASSERT_FALSE(all.empty());
  for (const char *kind : {"auto", "reference", "vulkan"}) {
    BackendOptions options;
    options.kind = kind;
    options.device = "quantum-accelerator";
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(options);
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kNotFound) << kind;
    EXPECT_THAT(std::string(backend.status().message()),
                AllOf(HasSubstr("quantum-accelerator"), HasSubstr(all.back().name)))
        << kind;
  }
}

// SINTER_VK_DEVICE keeps working for the vulkan kind, and auto still never takes lavapipe.
TEST(DevicesTest, SinterVkDeviceStillChoosesTheVulkanDevice) {
  std::vector<Device> all = devices();
  if (all.size() < 2 || !haveSpirvCodegen())
    GTEST_SKIP() << "no Vulkan device";
  test::ScopedEnv env("SINTER_VK_DEVICE", std::to_string(all[0].index).c_str());
  BackendOptions options;
  options.kind = "vulkan";
  absl::StatusOr<BackendChoice> choice = resolveBackend(options);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->device.name, all[0].name);
  options.kind = "auto";
  choice = resolveBackend(options);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->kind, all[0].type == DeviceType::Software ? "cpu" : "vulkan");
  test::ScopedEnv bad("SINTER_VK_DEVICE", "no-such-gpu");
  EXPECT_EQ(resolveBackend(options).status().code(), absl::StatusCode::kNotFound);
}

} // namespace
} // namespace sinter
