// FusionFuzzTest.cpp - random call sequences run fused and unfused must give the same bytes.
//
// Each graph (tests/support/FuzzGraph.h) is a random sequence of ComputeBackend calls over a few
// small buffers, shaped so that the fusion patterns find their chains often. It runs on the lazy
// backend with the fusion pipeline and with fusion off, both on the plan interpreter, and on the
// reference backend; every live buffer must match byte for byte (the interpreter runs the same
// reference kernels, so a difference is a pass that changed what the program computes). 500 graphs
// by default; SINTER_FUZZ_GRAPHS=N for more (the long mode runs 10000).
#include <cstdlib>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "sinter/Factory.h"
#include "tests/support/BackendKinds.h"
#include "tests/support/FuzzGraph.h"

namespace sinter {
namespace {

struct Backends {
  std::unique_ptr<ComputeBackend> fused, unfused, reference;
  std::vector<ComputeBackend *> all() { return {fused.get(), unfused.get(), reference.get()}; }
};

Backends makeBackends() {
  Backends b;
  BackendOptions o;
  o.kind = "lazy";
  // SINTER_DISABLE_FUSION applies to the fused backend, to bisect a failure to one pattern.
  b.fused = *createBackend(*optionsFromEnvironment(o));
  o.fusion = false;
  b.unfused = *createBackend(o);
  b.reference = *createBackend(sinter::test::backendOptions("reference"));
  return b;
}

// One random graph, issued identically on every backend. Returns a description on mismatch.
std::string runGraph(uint32_t seed) {
  Backends backends = makeBackends();
  std::vector<ComputeBackend *> all = backends.all();
  test::FuzzGraphResult result = test::runFuzzGraph(seed, all);
  if (!result.error.empty())
    return result.error;
  const std::vector<std::vector<uint8_t>> &bytes = result.bytes;
  for (size_t b = 1; b < all.size(); ++b)
    if (bytes[b] != bytes[(b + 1) % all.size()] || bytes[b] != bytes[0]) {
      if (bytes[b] == bytes[(b + 1) % all.size()])
        b = 0; // the first backend is the odd one out
      else if (bytes[0] == bytes[b])
        b = (b + 1) % all.size();
      size_t at = 0;
      size_t other = (b + 1) % all.size();
      while (bytes[b][at] == bytes[other][at])
        ++at;
      return all[b]->name() + " differs from the other two at byte " + std::to_string(at) +
             " of the buffers read back (vectors of " + std::to_string(test::kFuzzDim * 4) +
             " bytes, then the cache)";
    }
  return "";
}

TEST(FusionFuzzTest, FusedUnfusedAndReferenceAgreeByteForByte) {
  int n = test::fuzzGraphCount(500);
  int failures = 0;
  int first = 1;
  if (const char *s = std::getenv("SINTER_FUZZ_SEED"); s && absl::SimpleAtoi(s, &first))
    n = first; // reproduce one graph: SINTER_FUZZ_SEED=N (with SINTER_DUMP=dir to see it)
  for (int seed = first; seed <= n && failures < 5; ++seed) {
    std::string problem = runGraph(uint32_t(seed));
    if (!problem.empty()) {
      ++failures;
      ADD_FAILURE() << "graph seed " << seed << ": " << problem;
    }
  }
  RecordProperty("graphs", n);
}

} // namespace
} // namespace sinter
