// ConformanceTest.cpp - every conformance case on every built backend kind, against the reference.
//
// kTargets names every backend the project plans; adding one is one line. Kinds this build can
// construct get one test per case. Each kind also gets a BackendIsBuilt test, which skips with
// the factory's message while the kind is not built (Unimplemented), so a missing backend is
// visible once in the output instead of silently absent or skipped once per case.
#include <string>
#include <vector>

#include "sinter/Factory.h"
#include "tests/conformance/ConformanceRunner.h"
#include "tests/conformance/ConformanceTable.h"
#include "gtest/gtest.h"

namespace sinter::conformance {
namespace {

struct ConformanceTarget {
  const char *name; ///< letters, digits and '_' (part of the test name)
  BackendOptions options;
};

BackendOptions kind(const char *name, bool fusion = true, bool eager = false) {
  BackendOptions options;
  options.kind = name;
  options.fusion = fusion;
  options.eager = eager;
  return options;
}

const std::vector<ConformanceTarget> &targets() {
  static const auto *all = new std::vector<ConformanceTarget>{
      {"reference", kind("reference")},
      {"lazy", kind("lazy")},
      {"lazy_unfused", kind("lazy", /*fusion=*/false)},
      {"cpu", kind("cpu")},
      {"cpu_unfused", kind("cpu", /*fusion=*/false)},
      {"cpu_eager", kind("cpu", /*fusion=*/false, /*eager=*/true)},
      {"vulkan", kind("vulkan")},
      {"vulkan_unfused", kind("vulkan", /*fusion=*/false)},
  };
  return *all;
}

// Indices of the targets createBackend can build in this build.
std::vector<int> builtTargets() {
  std::vector<int> built;
  for (int i = 0; i < static_cast<int>(targets().size()); ++i)
    if (createBackend(targets()[i].options).ok())
      built.push_back(i);
  return built;
}

class BackendAvailability : public ::testing::TestWithParam<int> {};

TEST_P(BackendAvailability, BackendIsBuilt) {
  const ConformanceTarget &target = targets()[GetParam()];
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(target.options);
  if (backend.status().code() == absl::StatusCode::kUnimplemented)
    GTEST_SKIP() << "no conformance run for '" << target.name
                 << "': " << backend.status().message();
  EXPECT_TRUE(backend.ok()) << target.name << ": " << backend.status();
}

INSTANTIATE_TEST_SUITE_P(Targets, BackendAvailability,
                         ::testing::Range(0, static_cast<int>(targets().size())),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(targets()[info.param].name);
                         });

class ConformanceTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ConformanceTest, MatchesReference) {
  const ConformanceTarget &target = targets()[std::get<0>(GetParam())];
  const ConformanceCase &c = conformanceCases()[std::get<1>(GetParam())];
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(target.options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  for (const std::string &problem : runConformanceCase(c, **backend))
    ADD_FAILURE() << c.name << " on " << target.name << ": " << problem;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConformanceTest,
    ::testing::Combine(::testing::ValuesIn(builtTargets()),
                       ::testing::Range(0, static_cast<int>(conformanceCases().size()))),
    [](const ::testing::TestParamInfo<std::tuple<int, int>> &info) {
      return std::string(targets()[std::get<0>(info.param)].name) + "_" +
             conformanceCases()[std::get<1>(info.param)].name;
    });

} // namespace
} // namespace sinter::conformance
