// ExtremeArgsTest.cpp - every op with extreme integers, on every backend kind.
//
// Each integer argument of each op takes 0, 1, 2^31 - 1, 2^31 and 2^32 - 1 (byte sizes and
// offsets, which are 64-bit, also 2^63 and 2^64 - 1), alone and in pairs, the other arguments
// keeping a small valid call's values; the float argument takes zeros, negatives, a subnormal,
// FLT_MAX, infinities and NaNs. Every such call must either be rejected with OutOfRange or
// InvalidArgument, as the reference rejects it, changing nothing, or compute what the reference
// computes. Sizes and offsets are where 64-bit and 32-bit products wrap, so this is the test of
// the validation's arithmetic and of every kind's address arithmetic behind it.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/ReferenceBackend.h"
#include "tests/support/BackendKinds.h"
#include "tests/support/CallOp.h"
#include "tests/support/Messages.h"
#include "tests/support/Nmse.h"
#include "tests/support/TestData.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

struct BaseCall {
  const char *name;
  OpCall op;
  std::vector<uint64_t> sizes; ///< bytes of buffer j, bound as BufferHandle{j + 1}
};

BufferHandle slot(uint64_t j) { return BufferHandle{j + 1}; }

// Small valid calls with buffers twice the size they need, so that a variant that moves an
// offset or grows a count a little is accepted and computed, not only rejected.
const std::vector<BaseCall> &baseCalls() {
  BufferHandle b0 = slot(0), b1 = slot(1), b2 = slot(2);
  static const auto *all = new std::vector<BaseCall>{
      {"matmul", ops::matmul(b0, b1, b2, 2, 3, 4), {64, 96, 48}},
      {"softmax", ops::softmax(b0, b1, 5), {40, 40}},
      {"rms_norm", ops::rmsNorm(b0, b1, b2, 6, 1e-5f), {48, 48, 48}},
      {"rope", ops::rope(b0, b1, 3, 4, 10000.0f, 2, 1), {64, 32}},
      {"silu", ops::silu(b0, b1, 5), {40, 40}},
      {"element_mul", ops::elementMul(b0, b1, b2, 5), {40, 40, 40}},
      {"add", ops::add(b0, b1, b2, 5), {40, 40, 40}},
      {"copy_buffer", ops::copyBuffer(b0, b1, 10), {20, 20}},
      {"copy_buffer_offset", ops::copyBufferOffset(b0, b1, 3, 5, 7), {20, 24}},
      {"attn_score", ops::attnScore(b0, b1, b2, 4, 3, 4, 4, 8), {64, 192, 24}},
      {"attn_value", ops::attnValue(b0, b1, b2, 4, 3, 4, 8, 2), {24, 192, 48}},
      {"quantized_matmul_q8_0",
       ops::quantizedMatmul(b0, b1, b2, 2, 64, DType::Q8_0),
       {272, 512, 16}},
      {"quantized_matmul_f32", ops::quantizedMatmul(b0, b1, b2, 2, 8, DType::F32), {128, 64, 16}},
  };
  return *all;
}

bool isByteCount(OpKind kind) {
  return kind == OpKind::CopyBuffer || kind == OpKind::CopyBufferOffset;
}

std::vector<uint64_t> extremes(OpKind kind) {
  std::vector<uint64_t> v = {0, 1, (1ull << 31) - 1, 1ull << 31, (1ull << 32) - 1};
  if (isByteCount(kind)) { // 64-bit byte sizes and offsets
    v.push_back(1ull << 63);
    v.push_back(~0ull);
  }
  return v;
}

// Every variant of `base`: each integer alone, then each pair, set to every extreme value.
std::vector<OpCall> variants(const OpCall &base) {
  const int n = opInfo(base.kind).numInts;
  const std::vector<uint64_t> values = extremes(base.kind);
  std::vector<OpCall> out;
  for (int i = 0; i < n; ++i)
    for (uint64_t a : values) {
      OpCall op = base;
      op.ints[i] = a;
      out.push_back(op);
    }
  // The float argument (rms_norm's eps, rope's freq_base) at its extremes, the integers valid.
  if (opInfo(base.kind).scalarName)
    for (float f : {0.0f, -0.0f, -1.0f, 1.0f, 1e-45f, FLT_MAX, INFINITY, -INFINITY, NAN, -NAN}) {
      OpCall op = base;
      op.scalar = f;
      out.push_back(op);
    }
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      for (uint64_t a : values)
        for (uint64_t b : values) {
          OpCall op = base;
          op.ints[i] = a;
          op.ints[j] = b;
          out.push_back(op);
        }
  return out;
}

// The initial bytes of buffer j: small finite floats (every fourth byte keeps the exponent low),
// the same on the backend under test and on the reference.
std::vector<uint8_t> initialBytes(uint64_t size, uint64_t j) {
  std::mt19937 rng(static_cast<uint32_t>(17 + j));
  std::vector<uint8_t> bytes(size);
  for (uint8_t &b : bytes)
    b = static_cast<uint8_t>(rng());
  for (uint64_t i = 3; i < size; i += 4)
    bytes[i] = 0x3C;
  return bytes;
}

class ExtremeArgsTest : public ::testing::TestWithParam<std::tuple<int, int>> {
protected:
  void SetUp() override {
    backend_ = kinds_.make(test::backendKinds()[std::get<0>(GetParam())]);
    if (!kinds_.skipped().empty())
      GTEST_SKIP() << "no Vulkan device on this machine: " << kinds_.skipped();
    ASSERT_TRUE(backend_);
  }

  void TearDown() override {
    backend_.reset();
    kinds_.expectNoValidationMessages();
  }

  test::BackendKindFixture kinds_;
  std::unique_ptr<ComputeBackend> backend_;
};

std::vector<std::vector<uint8_t>> download(ComputeBackend &b, const std::vector<BufferHandle> &h,
                                           const std::vector<uint64_t> &sizes) {
  std::vector<std::vector<uint8_t>> out;
  for (size_t j = 0; j < h.size(); ++j)
    out.push_back(test::downloadBytes(b, h[j], sizes[j]));
  return out;
}

TEST_P(ExtremeArgsTest, RejectedOrComputedAsTheReferenceDoes) {
  const BaseCall &base = baseCalls()[std::get<1>(GetParam())];
  ComputeBackend &backend = *backend_;
  ReferenceBackend reference;
  const int numBuffers = opInfo(base.op.kind).numBuffers;
  std::vector<BufferHandle> mine, theirs;
  for (int j = 0; j < numBuffers; ++j) {
    std::vector<uint8_t> bytes = initialBytes(base.sizes[j], j);
    mine.push_back(test::uploadBytes(backend, bytes));
    theirs.push_back(test::uploadBytes(reference, bytes));
  }
  // Quantized products may quantize x to int8 (SEMANTICS.md's second tolerance).
  const double tolerance = base.op.kind == OpKind::QuantizedMatmul && base.op.dtype != DType::F32
                               ? test::kQuantizedActivationTolerance
                               : test::kF32Tolerance;
  int accepted = 0, rejected = 0;
  for (const OpCall &variant : variants(base.op)) {
    std::string what = describeOp(variant);
    // Every variant starts from the same bytes on both sides.
    for (int j = 0; j < numBuffers; ++j) {
      std::vector<uint8_t> bytes = initialBytes(base.sizes[j], j);
      ASSERT_TRUE(backend.copyToDevice(bytes, mine[j]).ok()) << what;
      ASSERT_TRUE(reference.copyToDevice(bytes, theirs[j]).ok()) << what;
    }
    absl::Status want = test::callOp(reference, test::bindSlots(variant, theirs));
    absl::Status got = test::callOp(backend, test::bindSlots(variant, mine));
    ASSERT_EQ(got.code(), want.code()) << what << ": " << got << " (reference: " << want << ")";
    if (!want.ok()) {
      ++rejected;
      EXPECT_TRUE(want.code() == absl::StatusCode::kOutOfRange ||
                  want.code() == absl::StatusCode::kInvalidArgument)
          << what << ": " << want;
      EXPECT_TRUE(test::printsNoWrappedRange(got.message())) << got;
    } else {
      ++accepted;
    }
    absl::Status synced = backend.synchronize();
    ASSERT_TRUE(synced.ok()) << what << ": " << synced;
    std::vector<std::vector<uint8_t>> out = download(backend, mine, base.sizes);
    std::vector<std::vector<uint8_t>> ref = download(reference, theirs, base.sizes);
    for (int j = 0; j < numBuffers; ++j) {
      std::string buffer = absl::StrCat(what, ", buffer ", opInfo(variant.kind).bufferNames[j]);
      if (!want.ok() || isByteCount(variant.kind) || out[j] == ref[j]) {
        EXPECT_EQ(out[j], ref[j]) << buffer;
        continue;
      }
      std::vector<float> o = test::bytesFloats(out[j]), r = test::bytesFloats(ref[j]);
      EXPECT_TRUE(test::nmseWithin<float>(o, r, tolerance)) << buffer;
    }
    if (::testing::Test::HasFailure())
      return; // one variant's failure is enough to read
  }
  RecordProperty("accepted", accepted);
  RecordProperty("rejected", rejected);
  EXPECT_GT(accepted, 0) << "no variant of " << base.name << " was accepted: the test tests little";
  EXPECT_GT(rejected, 0);
}

INSTANTIATE_TEST_SUITE_P(
    EveryOp, ExtremeArgsTest,
    ::testing::Combine(::testing::Range(0, static_cast<int>(test::backendKinds().size())),
                       ::testing::Range(0, static_cast<int>(baseCalls().size()))),
    [](const ::testing::TestParamInfo<std::tuple<int, int>> &info) {
      return absl::StrCat(test::backendKinds()[std::get<0>(info.param)].name, "_",
                          baseCalls()[std::get<1>(info.param)].name);
    });

} // namespace
} // namespace sinter
