// CpuFuzzTest.cpp - the fusion fuzzer's random graphs on the cpu backend, fused and unfused.
//
// Each graph (tests/support/FuzzGraph.h) runs on the cpu backend with the fusion pipeline, on the
// cpu backend with fusion off, and on the reference backend. Compiled kernels round differently
// from the reference's double accumulation, so every buffer read back (each vector, the cache)
// must agree with the reference within SEMANTICS.md's f32 NMSE; an element the reference leaves
// non-finite must be the same kind of non-finite. Fused and unfused are also held to the same
// tolerance against each other. The backends of all graphs share one CpuCompiler (each kernel
// shape is compiled once). 300 graphs by default; SINTER_FUZZ_GRAPHS=N for more.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "backends/CpuBackend.h"
#include "sinter/Factory.h"
#include "tests/support/BackendKinds.h"
#include "tests/support/FuzzCompare.h"
#include "tests/support/FuzzGraph.h"

namespace sinter {
namespace {

std::shared_ptr<codegen::CpuCompiler> sharedCompiler() {
  static std::shared_ptr<codegen::CpuCompiler> *compiler = [] {
    auto created = codegen::CpuCompiler::create();
    EXPECT_TRUE(created.ok()) << created.status();
    return new std::shared_ptr<codegen::CpuCompiler>(
        created.ok() ? std::shared_ptr<codegen::CpuCompiler>(std::move(*created)) : nullptr);
  }();
  return *compiler;
}

std::string runGraph(uint32_t seed) {
  BackendOptions o;
  o.kind = "cpu";
  // SINTER_DISABLE_FUSION applies to the fused backend, to bisect a failure to one pattern.
  absl::StatusOr<BackendOptions> fusedOptions = optionsFromEnvironment(o);
  if (!fusedOptions.ok())
    return std::string(fusedOptions.status().message());
  o.fusion = false;
  std::unique_ptr<ComputeBackend> fused = *createCpuBackend(*fusedOptions, sharedCompiler());
  std::unique_ptr<ComputeBackend> unfused = *createCpuBackend(o, sharedCompiler());
  std::unique_ptr<ComputeBackend> reference =
      *createBackend(sinter::test::backendOptions("reference"));
  test::FuzzGraphResult result =
      test::runFuzzGraph(seed, {fused.get(), unfused.get(), reference.get()});
  if (!result.error.empty())
    return result.error;
  if (std::string p = test::compareFuzzBytes(result.bytes[0], result.bytes[2]); !p.empty())
    return "fused vs reference: " + p;
  if (std::string p = test::compareFuzzBytes(result.bytes[1], result.bytes[2]); !p.empty())
    return "unfused vs reference: " + p;
  if (std::string p = test::compareFuzzBytes(result.bytes[0], result.bytes[1]); !p.empty())
    return "fused vs unfused: " + p;
  return "";
}

TEST(CpuFuzzTest, FusedAndUnfusedAgreeWithTheReference) {
  ASSERT_TRUE(sharedCompiler());
  int n = test::fuzzGraphCount(300);
  int first = 1;
  if (const char *s = std::getenv("SINTER_FUZZ_SEED"); s && absl::SimpleAtoi(s, &first))
    n = first; // reproduce one graph: SINTER_FUZZ_SEED=N
  int failures = 0;
  for (int seed = first; seed <= n && failures < 5; ++seed) {
    std::string problem = runGraph(uint32_t(seed));
    if (!problem.empty()) {
      ++failures;
      ADD_FAILURE() << "graph seed " << seed << ": " << problem;
    }
  }
  codegen::CpuCompilerStats stats = sharedCompiler()->stats();
  std::printf("%d graphs: %llu kernels compiled, %llu fallbacks, %.1f s compiling\n", n - first + 1,
              static_cast<unsigned long long>(stats.kernelsCompiled),
              static_cast<unsigned long long>(stats.fallbacks), stats.compileSeconds);
  EXPECT_EQ(stats.fallbacks, 0u) << "every kernel shape of the fuzzer compiles";
  RecordProperty("graphs", n);
}

} // namespace
} // namespace sinter
