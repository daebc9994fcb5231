// ConformanceRunnerTest.cpp - the conformance table is well formed and the runner catches faults.
//
// A runner that passes everything would make every backend "conform", so it is run against a
// backend with deliberate faults in `add`: skipping the write, writing one element too many, and
// values off by 1% must all be reported; an error far inside the tolerance must not.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "backends/ReferenceBackend.h"
#include "tests/conformance/ConformanceRunner.h"
#include "tests/conformance/ConformanceTable.h"
#include "tests/support/TestData.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter::conformance {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

const ConformanceCase &findCase(const std::string &name) {
  for (const ConformanceCase &c : conformanceCases())
    if (c.name == name)
      return c;
  ADD_FAILURE() << "no case " << name;
  return conformanceCases().front();
}

TEST(ConformanceTableTest, NamesAreUniqueTestNames) {
  std::set<std::string> seen;
  for (const ConformanceCase &c : conformanceCases()) {
    EXPECT_TRUE(seen.insert(c.name).second) << "duplicate " << c.name;
    EXPECT_TRUE(std::all_of(c.name.begin(), c.name.end(), [](unsigned char ch) {
      return std::isalnum(ch) || ch == '_';
    })) << c.name;
    EXPECT_FALSE(c.ops.empty()) << c.name;
  }
}

TEST(ConformanceTableTest, EveryOpIsValidForItsBuffers) {
  for (const ConformanceCase &c : conformanceCases()) {
    for (const OpCall &op : c.ops) {
      absl::Status status = validateOp(op, [&](BufferHandle h) -> absl::StatusOr<uint64_t> {
        if (h.id == 0 || h.id > c.buffers.size())
          return absl::NotFoundError("buffer not in the case");
        return c.buffers[h.id - 1].sizeBytes;
      });
      EXPECT_TRUE(status.ok()) << c.name << ": " << describeOp(op) << ": " << status;
    }
  }
}

TEST(ConformanceTableTest, CoversEveryOpKindAndEverySupportedDType) {
  std::set<int> kinds;
  std::set<uint32_t> dtypes;
  for (const ConformanceCase &c : conformanceCases())
    for (const OpCall &op : c.ops) {
      kinds.insert(static_cast<int>(op.kind));
      if (op.kind == OpKind::QuantizedMatmul)
        dtypes.insert(static_cast<uint32_t>(op.dtype));
    }
  EXPECT_EQ(kinds.size(), size_t(kNumOpKinds));
  for (uint32_t id = 0; id < 64; ++id) {
    const DTypeInfo *info = lookupDType(id);
    if (info && info->support == DTypeSupport::Supported) {
      EXPECT_TRUE(dtypes.count(id)) << "no quantized_matmul case for " << info->name;
    }
  }
}

TEST(ConformanceTableTest, BlockQuantizedCasesUseTheActivationTolerance) {
  EXPECT_EQ(findCase("quantized_matmul_Q4_K_19x512").tolerance, 5e-4);
  EXPECT_EQ(findCase("quantized_matmul_F32_19x512").tolerance, 1e-7);
  EXPECT_EQ(findCase("add_37").tolerance, 1e-7);
  EXPECT_EQ(findCase("copy_buffer_1001_bytes").tolerance, 0.0);
}

enum class Fault {
  None,
  SkipAdd,
  AddWritesOneMore,
  AddOffByOnePercent,
  AddOffByTiny,
  RmsNormNaNToZero,
  SkipRmsNorm
};

// The reference backend with one deliberately wrong operation.
class FaultyBackend : public ComputeBackend {
public:
  explicit FaultyBackend(Fault fault) : fault_(fault) {}

  std::string name() const override { return "faulty"; }
  DeviceInfo deviceInfo() const override { return inner_.deviceInfo(); }
  absl::StatusOr<BufferHandle> allocate(uint64_t size) override {
    absl::StatusOr<BufferHandle> h = inner_.allocate(size);
    if (h.ok())
      sizes_[h->id] = size;
    return h;
  }
  absl::Status free(BufferHandle h) override { return inner_.free(h); }
  absl::Status matmul(BufferHandle a, BufferHandle b, BufferHandle o, uint32_t m, uint32_t n,
                      uint32_t k) override {
    return inner_.matmul(a, b, o, m, n, k);
  }
  absl::Status softmax(BufferHandle i, BufferHandle o, uint32_t s) override {
    return inner_.softmax(i, o, s);
  }
  absl::Status rmsNorm(BufferHandle i, BufferHandle w, BufferHandle o, uint32_t s,
                       float e) override;
  absl::Status rope(BufferHandle q, BufferHandle k, uint32_t p, uint32_t d, float f, uint32_t nq,
                    uint32_t nk) override {
    return inner_.rope(q, k, p, d, f, nq, nk);
  }
  absl::Status silu(BufferHandle i, BufferHandle o, uint32_t s) override {
    return inner_.silu(i, o, s);
  }
  absl::Status elementMul(BufferHandle a, BufferHandle b, BufferHandle o, uint32_t s) override {
    return inner_.elementMul(a, b, o, s);
  }
  absl::Status add(BufferHandle a, BufferHandle b, BufferHandle o, uint32_t size) override;
  absl::Status copyToDevice(absl::Span<const uint8_t> d, BufferHandle h) override {
    return inner_.copyToDevice(d, h);
  }
  absl::Status copyFromDevice(BufferHandle h, absl::Span<uint8_t> d) override {
    return inner_.copyFromDevice(h, d);
  }
  absl::Status copyBuffer(BufferHandle s, BufferHandle d, uint64_t n) override {
    return inner_.copyBuffer(s, d, n);
  }
  absl::Status copyBufferOffset(BufferHandle s, BufferHandle d, uint64_t so, uint64_t dof,
                                uint64_t n) override {
    return inner_.copyBufferOffset(s, d, so, dof, n);
  }
  absl::Status synchronize() override { return inner_.synchronize(); }
  absl::Status attnScore(BufferHandle q, BufferHandle k, BufferHandle s, uint32_t hd, uint32_t n,
                         uint32_t ho, uint32_t ko, uint32_t st) override {
    return inner_.attnScore(q, k, s, hd, n, ho, ko, st);
  }
  absl::Status attnValue(BufferHandle w, BufferHandle v, BufferHandle o, uint32_t hd, uint32_t n,
                         uint32_t ko, uint32_t st, uint32_t oo) override {
    return inner_.attnValue(w, v, o, hd, n, ko, st, oo);
  }
  absl::Status quantizedMatmul(BufferHandle w, BufferHandle x, BufferHandle o, uint32_t r,
                               uint32_t c, DType d) override {
    return inner_.quantizedMatmul(w, x, o, r, c, d);
  }

private:
  Fault fault_;
  ReferenceBackend inner_;
  absl::flat_hash_map<uint64_t, uint64_t> sizes_;
};

absl::Status FaultyBackend::add(BufferHandle a, BufferHandle b, BufferHandle o, uint32_t size) {
  if (fault_ == Fault::SkipAdd)
    return absl::OkStatus();
  absl::Status status = inner_.add(a, b, o, size);
  if (!status.ok() || fault_ == Fault::None)
    return status;
  std::vector<float> out = test::downloadFloats(inner_, o, sizes_[o.id] / 4);
  if (fault_ == Fault::AddWritesOneMore)
    out[size] = 0.0f;
  for (uint32_t i = 0; i < size && fault_ != Fault::AddWritesOneMore; ++i)
    out[i] *= fault_ == Fault::AddOffByOnePercent ? 1.01f : 1.0f + 1e-6f;
  return inner_.copyToDevice(test::floatBytes(out), o);
}

absl::Status FaultyBackend::rmsNorm(BufferHandle i, BufferHandle w, BufferHandle o, uint32_t s,
                                    float e) {
  if (fault_ == Fault::SkipRmsNorm)
    return absl::OkStatus();
  absl::Status status = inner_.rmsNorm(i, w, o, s, e);
  if (!status.ok() || fault_ != Fault::RmsNormNaNToZero)
    return status;
  std::vector<float> out = test::downloadFloats(inner_, o, sizes_[o.id] / 4);
  for (uint32_t k = 0; k < s; ++k)
    out[k] = std::isnan(out[k]) ? 0.0f : out[k];
  return inner_.copyToDevice(test::floatBytes(out), o);
}

std::vector<std::string> runWith(Fault fault, const std::string &caseName) {
  FaultyBackend backend(fault);
  return runConformanceCase(findCase(caseName), backend);
}

TEST(ConformanceRunnerTest, ACorrectBackendPasses) {
  EXPECT_THAT(runWith(Fault::None, "add_37"), IsEmpty());
  EXPECT_THAT(runWith(Fault::None, "elementwise_chain"), IsEmpty());
  EXPECT_THAT(runWith(Fault::AddOffByTiny, "add_37"), IsEmpty()) << "1e-6 relative is in tolerance";
}

TEST(ConformanceRunnerTest, UnwrittenOutputIsCaught) {
  std::vector<std::string> problems = runWith(Fault::SkipAdd, "add_37");
  ASSERT_THAT(problems, Not(IsEmpty()));
  EXPECT_THAT(problems[0], HasSubstr("not finite"));
}

TEST(ConformanceRunnerTest, WriteOutsideTheNamedElementsIsCaught) {
  std::vector<std::string> problems = runWith(Fault::AddWritesOneMore, "add_37");
  ASSERT_THAT(problems, Not(IsEmpty()));
  EXPECT_THAT(problems[0], HasSubstr("element 37 was written"));
}

TEST(ConformanceRunnerTest, WrongValuesAreCaughtThroughFusedChainsToo) {
  std::vector<std::string> problems = runWith(Fault::AddOffByOnePercent, "add_37");
  ASSERT_THAT(problems, Not(IsEmpty()));
  EXPECT_THAT(problems[0], HasSubstr("nmse"));
  EXPECT_THAT(runWith(Fault::AddOffByOnePercent, "elementwise_chain"), Not(IsEmpty()));
  EXPECT_THAT(runWith(Fault::AddOffByOnePercent, "decode_layer_F16"), Not(IsEmpty()));
  // With block-quantized weights the bound is 5e-4 (an RMS error of about 2%): 1% passes there.
  EXPECT_THAT(runWith(Fault::AddOffByOnePercent, "decode_layer_Q4_K"), IsEmpty());
}

// A NaN input makes the reference's rms_norm NaN: the NaN must come out, never a number.
TEST(ConformanceRunnerTest, ANumberWhereTheReferenceIsNaNIsCaught) {
  EXPECT_THAT(runWith(Fault::None, "rms_norm_range_nan_256"), IsEmpty());
  std::vector<std::string> problems = runWith(Fault::RmsNormNaNToZero, "rms_norm_range_nan_256");
  ASSERT_THAT(problems, Not(IsEmpty()));
  EXPECT_THAT(problems[0], HasSubstr("a non-finite reference asks for the same"));
  // The poison of an unwritten element is a NaN too, but not the one asked for.
  problems = runWith(Fault::SkipRmsNorm, "rms_norm_range_nan_256");
  ASSERT_THAT(problems, Not(IsEmpty()));
  EXPECT_THAT(problems[0], HasSubstr("(unwritten)"));
}

} // namespace
} // namespace sinter::conformance
