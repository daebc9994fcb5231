// FactoryTest.cpp - createBackend's kinds and the SINTER_BACKEND / SINTER_DISABLE_FUSION variables.
//
// A kind that is not built must be an error naming it (never a silent substitute), an unknown
// kind or fusion name an error listing the valid ones. The environment tests set and restore the
// variables themselves.
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "backends/VulkanBackend.h"
#include "sinter/Factory.h"
#include "tests/support/BackendKinds.h"
#include "tests/support/ScopedEnv.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using test::ScopedEnv;

TEST(FactoryTest, ReferenceKindBuildsTheReferenceBackend) {
  BackendOptions options;
  options.kind = "reference";
  options.memoryLimitBytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "reference");
  EXPECT_EQ((*backend)->deviceInfo().memoryBytes, uint64_t(1) << 20);
}

// The machine's GPU: what `auto` must pick (a Vulkan device on the CPU, lavapipe, is no GPU).
bool machineHasGpu() {
  if (!haveSpirvCodegen())
    return false;
  absl::StatusOr<std::unique_ptr<runtime::vulkan::VulkanDevice>> device =
      runtime::vulkan::VulkanDevice::create();
  return device.ok() && (*device)->caps().deviceKind != VK_PHYSICAL_DEVICE_TYPE_CPU;
}

// One default everywhere: auto, which is never the reference (the scalar oracle is only for
// those who ask for it). In CI, without a GPU, that is the cpu kind.
TEST(FactoryTest, TheDefaultKindIsAutoNeverTheReference) {
  EXPECT_EQ(BackendOptions{}.kind, "auto");
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(BackendOptions{});
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), machineHasGpu() ? "sinter-vulkan" : "sinter-cpu");
  ScopedEnv unset("SINTER_BACKEND", nullptr);
  absl::StatusOr<std::unique_ptr<ComputeBackend>> fromEnv = createBackendFromEnvironment();
  ASSERT_TRUE(fromEnv.ok()) << fromEnv.status();
  EXPECT_EQ((*fromEnv)->name(), (*backend)->name());
  absl::StatusOr<BackendChoice> choice = resolveBackend(BackendOptions{});
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->kind, machineHasGpu() ? "vulkan" : "cpu");
  EXPECT_NE(choice->device.type, DeviceType::Software);
}

// vulkan needs the SPIR-V code generator in the build and a Vulkan device on the machine; without
// the first it is Unimplemented (named), without the second Unavailable, never another backend.
TEST(FactoryTest, VulkanKindIsBuiltWithTheSpirvGeneratorAndADevice) {
  for (bool fusion : {true, false}) {
    BackendOptions options;
    options.kind = "vulkan";
    options.fusion = fusion;
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(options);
    if (!haveSpirvCodegen()) {
      EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnimplemented);
      EXPECT_THAT(std::string(backend.status().message()),
                  HasSubstr("backend 'vulkan' is not built yet"));
      continue;
    }
    if (backend.status().code() == absl::StatusCode::kUnavailable)
      GTEST_SKIP() << "no Vulkan device: " << backend.status();
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->name(), fusion ? "sinter-vulkan" : "sinter-vulkan-unfused");
    EXPECT_EQ((*backend)->deviceInfo().kind, BackendKind::Vulkan);
  }
}

// auto is the fastest kind the machine has: vulkan on a GPU, the cpu kind otherwise (a CPU
// Vulkan implementation such as lavapipe does not count), fused as asked.
TEST(FactoryTest, AutoKindIsVulkanOnAGpuElseCpu) {
  const bool gpu = machineHasGpu();
  for (bool fusion : {true, false}) {
    BackendOptions options;
    options.kind = "auto";
    options.fusion = fusion;
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    std::string want =
        std::string(gpu ? "sinter-vulkan" : "sinter-cpu") + (fusion ? "" : "-unfused");
    EXPECT_EQ((*backend)->name(), want);
  }
}

TEST(FactoryTest, LazyKindRecordsOnThePlanInterpreter) {
  for (bool fusion : {true, false}) {
    BackendOptions options;
    options.kind = "lazy";
    options.fusion = fusion;
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->name(), fusion ? "sinter-lazy" : "sinter-lazy-unfused");
  }
}

TEST(FactoryTest, UnknownFusionNameInOptionsIsInvalidArgument) {
  BackendOptions options;
  options.kind = "lazy";
  options.disabledFusions = {"swiglu", "swigloo"};
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(options);
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(backend.status().message()), HasSubstr("'swigloo'"));
}

TEST(FactoryTest, UnknownKindIsInvalidArgumentListingTheValidOnes) {
  for (const char *kind : {"gpu", "", "Reference"}) {
    BackendOptions options;
    options.kind = kind;
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(options);
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument) << kind;
    EXPECT_THAT(std::string(backend.status().message()),
                AllOf(HasSubstr("'" + std::string(kind) + "'"), HasSubstr("reference"),
                      HasSubstr("cpu"), HasSubstr("vulkan"), HasSubstr("lazy"), HasSubstr("auto")));
  }
}

TEST(FactoryTest, EnvironmentUnsetKeepsTheDefaults) {
  ScopedEnv backend("SINTER_BACKEND", nullptr);
  ScopedEnv fusion("SINTER_DISABLE_FUSION", nullptr);
  BackendOptions defaults;
  defaults.kind = "vulkan";
  defaults.disabledFusions = {"attention"};
  absl::StatusOr<BackendOptions> options = optionsFromEnvironment(defaults);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->kind, "vulkan");
  EXPECT_THAT(options->disabledFusions, ElementsAre("attention"));
}

TEST(FactoryTest, EmptyVariablesCountAsUnset) {
  ScopedEnv backend("SINTER_BACKEND", "");
  ScopedEnv fusion("SINTER_DISABLE_FUSION", "");
  absl::StatusOr<BackendOptions> options = optionsFromEnvironment();
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->kind, "auto");
  EXPECT_TRUE(options->disabledFusions.empty());
}

TEST(FactoryTest, SinterBackendPicksTheKind) {
  ScopedEnv backend("SINTER_BACKEND", "cpu");
  absl::StatusOr<BackendOptions> options = optionsFromEnvironment();
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->kind, "cpu");
  absl::StatusOr<std::unique_ptr<ComputeBackend>> cpu = createBackendFromEnvironment();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)->name(), "sinter-cpu");
  ScopedEnv reference("SINTER_BACKEND", "reference");
  absl::StatusOr<std::unique_ptr<ComputeBackend>> built = createBackendFromEnvironment();
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ((*built)->name(), "reference");
}

TEST(FactoryTest, SinterBackendWithAnUnknownKindIsInvalidArgument) {
  ScopedEnv backend("SINTER_BACKEND", "cuda");
  absl::StatusOr<BackendOptions> options = optionsFromEnvironment();
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(options.status().message()),
              AllOf(HasSubstr("SINTER_BACKEND"), HasSubstr("'cuda'"), HasSubstr("reference")));
  EXPECT_EQ(createBackendFromEnvironment().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FactoryTest, DisableFusionAcceptsAllAndEveryPatternName) {
  {
    ScopedEnv fusion("SINTER_DISABLE_FUSION", "all");
    absl::StatusOr<BackendOptions> options = optionsFromEnvironment();
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_THAT(options->disabledFusions, ElementsAre("all"));
  }
  ScopedEnv fusion("SINTER_DISABLE_FUSION",
                   "rmsnorm-qmatmul,horizontal, rope-epilogue ,kv-write,attention,swiglu,"
                   "residual-add,elementwise,swiglu,");
  BackendOptions defaults;
  defaults.disabledFusions = {"horizontal"};
  absl::StatusOr<BackendOptions> options = optionsFromEnvironment(defaults);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_THAT(options->disabledFusions,
              ElementsAre("horizontal", "rmsnorm-qmatmul", "rope-epilogue", "kv-write", "attention",
                          "swiglu", "residual-add", "elementwise"))
      << "names are trimmed, kept once, and added to the defaults";
}

TEST(FactoryTest, DisableFusionWithAnUnknownNameIsInvalidArgument) {
  ScopedEnv fusion("SINTER_DISABLE_FUSION", "attention,rms-fuse");
  absl::StatusOr<BackendOptions> options = optionsFromEnvironment();
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(options.status().message()),
              AllOf(HasSubstr("SINTER_DISABLE_FUSION"), HasSubstr("'rms-fuse'"),
                    HasSubstr("rmsnorm-qmatmul"), HasSubstr("elementwise"), HasSubstr("all")));
}

// Every numeric SINTER_* variable the library reads is checked when a backend is built: a bad
// value is InvalidArgument naming the variable and the value, for every kind (never ignored).
TEST(FactoryTest, BadNumbersInTheLibrarysVariablesAreInvalidArgument) {
  const std::pair<const char *, const char *> bad[] = {
      {"SINTER_THREADS", "abc"}, {"SINTER_THREADS", "0"},        {"SINTER_THREADS", "5000"},
      {"SINTER_MAX_TRACE", "0"}, {"SINTER_MAX_TRACE", "-5"},     {"SINTER_OVERLAP", "lots"},
      {"SINTER_OVERLAP", "1.5"}, {"SINTER_OVERLAP_GROWTH", "0"}, {"SINTER_OVERLAP_GROWTH", "+8"}};
  for (const auto &[name, value] : bad) {
    ScopedEnv env(name, value);
    for (const char *kind : {"reference", "lazy", "cpu", "auto"}) {
      BackendOptions options;
      options.kind = kind;
      absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(options);
      EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument)
          << name << "=" << value << " " << kind;
      EXPECT_THAT(std::string(backend.status().message()),
                  AllOf(HasSubstr(name), HasSubstr("'" + std::string(value) + "'")));
    }
  }
  const std::pair<const char *, const char *> good[] = {{"SINTER_THREADS", "3"},
                                                        {"SINTER_MAX_TRACE", "100"},
                                                        {"SINTER_OVERLAP", "0"},
                                                        {"SINTER_OVERLAP_GROWTH", "1"}};
  for (const auto &[name, value] : good) {
    ScopedEnv env(name, value);
    EXPECT_TRUE(createBackend(sinter::test::backendOptions("reference")).ok())
        << name << "=" << value;
  }
}

// SINTER_VK_QMATMUL's numeric items must be numbers (its other items are switches).
TEST(FactoryTest, BadNumbersInVkQmatmulAreInvalidArgument) {
  if (!haveSpirvCodegen())
    GTEST_SKIP() << "no SPIR-V code generator in this build";
  for (const char *value : {"rows=four", "wg=", "attnsplit=-2", "rows=4,cus=1e3"}) {
    ScopedEnv env("SINTER_VK_QMATMUL", value);
    BackendOptions options;
    options.kind = "vulkan";
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(options);
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument) << value;
    EXPECT_THAT(std::string(backend.status().message()), HasSubstr("SINTER_VK_QMATMUL")) << value;
  }
}

TEST(FactoryTest, AddDisabledFusionsNamesItsSourceForAnUnknownName) {
  std::vector<std::string> names = {"swiglu"};
  ASSERT_TRUE(addDisabledFusions(" attention,,swiglu ", "--disable-fusion", names).ok());
  EXPECT_THAT(names, ElementsAre("swiglu", "attention"));
  absl::Status bad = addDisabledFusions("attention,fuse-all", "--disable-fusion", names);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()),
              AllOf(HasSubstr("--disable-fusion"), HasSubstr("'fuse-all'"), HasSubstr("all, "),
                    HasSubstr("elementwise")));
  EXPECT_EQ(disabledFusionNames().front(), "all");
  EXPECT_THAT(backendKinds(), ElementsAre("auto", "reference", "cpu", "vulkan", "lazy"));
}

} // namespace
} // namespace sinter
