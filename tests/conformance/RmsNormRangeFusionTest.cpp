// RmsNormRangeFusionTest.cpp - the range cases' rms_norm -> quantized_matmul chains, fused.
//
// The conformance table's rms_norm_range_*_then_quantized_matmul_* cases pass on every kind only
// if the fused kernels keep rms_norm's range; this checks that those kernels are what ran: one
// launch on the lazy interpreter, on the cpu kind with the norm folded into the product
// (CpuCompilerOptions::fusePrologue) and on Vulkan (with the validation layer, which fails a flush
// that it reports on), no fallback to member or reference kernels, and the reference's results.
#include <memory>
#include <string>

#include "backends/CpuBackend.h"
#include "backends/VulkanBackend.h"
#include "runtime/LazyBackend.h"
#include "sinter/Factory.h"
#include "tests/conformance/ConformanceRunner.h"
#include "tests/conformance/ConformanceTable.h"
#include "tests/support/RangeRows.h"
#include "gtest/gtest.h"

namespace sinter::conformance {
namespace {

BackendOptions fusedKind(const char *kind) {
  BackendOptions options;
  options.kind = kind;
  return options;
}

// The range cases whose ops are rms_norm then quantized_matmul.
std::vector<const ConformanceCase *> fusedRangeCases() {
  std::vector<const ConformanceCase *> cases;
  for (const ConformanceCase &c : conformanceCases())
    if (c.name.rfind("rms_norm_range_", 0) == 0 &&
        c.name.find("_then_quantized_matmul_") != std::string::npos)
      cases.push_back(&c);
  return cases;
}

// Runs `c` on `backend` and expects the reference's results in `launches` kernel launches.
void expectConformsIn(const ConformanceCase &c, ComputeBackend &backend, uint64_t launches,
                      const std::string &who) {
  for (const std::string &problem : runConformanceCase(c, backend))
    ADD_FAILURE() << c.name << " on " << who << ": " << problem;
  auto *lazy = dynamic_cast<runtime::LazyBackend *>(&backend);
  ASSERT_NE(lazy, nullptr) << who;
  EXPECT_EQ(lazy->stats().kernelsLaunched, launches)
      << c.name << " on " << who << ": " << lazy->lastPlanDescription();
}

TEST(RmsNormRangeFusionTest, TheCasesExist) {
  // Every row of tests/support/RangeRows.h with F32 weights, five also with Q4_0 and Q8_0.
  EXPECT_EQ(fusedRangeCases().size(), test::rangeRows().size() + 2 * 5);
}

TEST(RmsNormRangeFusionTest, LazyInterpreterRunsOneKernel) {
  for (const ConformanceCase *c : fusedRangeCases()) {
    std::unique_ptr<ComputeBackend> lazy = *createBackend(fusedKind("lazy"));
    expectConformsIn(*c, *lazy, 1, "lazy");
  }
}

TEST(RmsNormRangeFusionTest, CpuRunsTheNormInsideTheProduct) {
  codegen::CpuCompilerOptions co;
  co.fusePrologue = true;
  absl::StatusOr<std::unique_ptr<codegen::CpuCompiler>> compiler = codegen::CpuCompiler::create(co);
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  std::shared_ptr<codegen::CpuCompiler> shared(std::move(*compiler));
  for (const ConformanceCase *c : fusedRangeCases()) {
    uint64_t fusedBefore = shared->stats().fusedKernels;
    std::unique_ptr<ComputeBackend> cpu = *createCpuBackend(fusedKind("cpu"), shared);
    expectConformsIn(*c, *cpu, 1, "cpu with the norm prologue");
    EXPECT_GT(shared->stats().fusedKernels, fusedBefore) << c->name << ": not fused";
  }
  EXPECT_EQ(shared->stats().fallbacks, 0u);
}

TEST(RmsNormRangeFusionTest, VulkanRunsOneFusedKernel) {
  if (!haveSpirvCodegen())
    GTEST_SKIP() << "no SPIR-V code generator in this build";
  VulkanBackendOptions vulkan;
  vulkan.deviceOptions.validation = true;
  vulkan.stats = std::make_shared<runtime::vulkan::VulkanStatsSink>();
  absl::StatusOr<std::unique_ptr<ComputeBackend>> probe =
      createVulkanBackend(fusedKind("vulkan"), vulkan);
  if (probe.status().code() == absl::StatusCode::kUnavailable ||
      probe.status().code() == absl::StatusCode::kFailedPrecondition)
    GTEST_SKIP() << "no Vulkan device with the validation layer: " << probe.status();
  ASSERT_TRUE(probe.ok()) << probe.status();
  probe->reset();
  for (const ConformanceCase *c : fusedRangeCases()) {
    uint64_t fusedBefore = vulkan.stats->get().fusedDispatches;
    std::unique_ptr<ComputeBackend> backend = *createVulkanBackend(fusedKind("vulkan"), vulkan);
    expectConformsIn(*c, *backend, 1, "vulkan");
    EXPECT_GT(vulkan.stats->get().fusedDispatches, fusedBefore) << c->name << ": not fused";
  }
  EXPECT_EQ(vulkan.stats->get().fusedFallbacks, 0u);
}

} // namespace
} // namespace sinter::conformance
