// MemoryLimitTest.cpp - what memory_limit_bytes lets a caller allocate, on every backend kind.
//
// A lazy kind keeps a freed buffer's bytes while recorded work still reads it; that must not
// change what a caller can allocate. allocate -> record a read -> free -> allocate the same size
// succeeds on the reference, so it succeeds everywhere, and the recorded work still computes.
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/ReferenceBackend.h"
#include "tests/support/BackendKinds.h"
#include "tests/support/Nmse.h"
#include "tests/support/TestData.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

class MemoryLimitTest : public ::testing::TestWithParam<int> {
protected:
  void TearDown() override { kinds_.expectNoValidationMessages(); }

  std::unique_ptr<ComputeBackend> make(uint64_t limit) {
    BackendOptions options;
    options.memoryLimitBytes = limit;
    std::unique_ptr<ComputeBackend> b = kinds_.make(test::backendKinds()[GetParam()], options);
    return b;
  }

  test::BackendKindFixture kinds_;
};

TEST_P(MemoryLimitTest, FreeingABufferPendingWorkReadsMakesRoomAsOnTheReference) {
  const uint64_t limit = 1 << 20, half = limit / 2, n = half / 4;
  std::unique_ptr<ComputeBackend> b = make(limit);
  if (!kinds_.skipped().empty())
    GTEST_SKIP() << "no Vulkan device on this machine: " << kinds_.skipped();
  ASSERT_TRUE(b);
  std::mt19937 rng(3);
  std::vector<float> x = test::randomFloats(n, rng);
  BufferHandle in = test::uploadFloats(*b, x);
  absl::StatusOr<BufferHandle> out = b->allocate(half / 4);
  ASSERT_TRUE(out.ok()) << out.status();
  // out = silu(in[0, n / 4)) reads in; then in is freed before that work ran.
  ASSERT_TRUE(b->silu(in, *out, n / 4).ok());
  ASSERT_TRUE(b->free(in).ok());
  absl::StatusOr<BufferHandle> again = b->allocate(half);
  ASSERT_TRUE(again.ok()) << "the freed half is not reusable: " << again.status();
  // Over the limit stays ResourceExhausted, creating nothing.
  absl::StatusOr<BufferHandle> over = b->allocate(half);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  // The recorded work ran on the freed buffer's bytes before they were reused.
  ReferenceBackend reference;
  BufferHandle rin = test::uploadFloats(reference, x);
  BufferHandle rout = *reference.allocate(half / 4);
  ASSERT_TRUE(reference.silu(rin, rout, n / 4).ok());
  std::vector<float> want = test::downloadFloats(reference, rout, n / 4);
  test::expectNmse(test::downloadFloats(*b, *out, n / 4),
                   std::vector<double>(want.begin(), want.end()));
  EXPECT_TRUE(b->synchronize().ok());
}

INSTANTIATE_TEST_SUITE_P(EveryKind, MemoryLimitTest,
                         ::testing::Range(0, static_cast<int>(test::backendKinds().size())),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(test::backendKinds()[info.param].name);
                         });

} // namespace
} // namespace sinter
