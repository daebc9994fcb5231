// ErrorsTest.cpp - every row of SEMANTICS.md's error table, on every op that can hit it.
//
// Each op has one valid call with buffers of exactly the size it needs. From it the tests derive
// the bad calls: each buffer argument unknown or freed (NotFound), each one a byte too small
// (OutOfRange), and the argument errors (InvalidArgument, Unimplemented). Every rejection is
// checked for its code and message, and for changing nothing: all buffers keep their bytes and
// the backend still runs the valid call afterwards.
#include <cmath>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "backends/ReferenceBackend.h"
#include "tests/support/CallOp.h"
#include "tests/support/TestData.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// One valid call: op.buffers[i] is BufferHandle{j + 1} for buffer j of `sizes`.
struct ValidCall {
  OpCall op;
  std::vector<uint64_t> sizes;
};

BufferHandle slot(uint64_t j) { return BufferHandle{j + 1}; }

std::vector<ValidCall> validCalls() {
  BufferHandle b0 = slot(0), b1 = slot(1), b2 = slot(2);
  return {
      {ops::matmul(b0, b1, b2, 2, 3, 4), {32, 48, 24}},
      {ops::softmax(b0, b1, 5), {20, 20}},
      {ops::rmsNorm(b0, b1, b2, 6, 1e-5f), {24, 24, 24}},
      {ops::rope(b0, b1, 3, 4, 10000.0f, 2, 1), {32, 16}},
      {ops::silu(b0, b1, 5), {20, 20}},
      {ops::elementMul(b0, b1, b2, 5), {20, 20, 20}},
      {ops::add(b0, b1, b2, 5), {20, 20, 20}},
      {ops::copyBuffer(b0, b1, 10), {10, 10}},
      {ops::copyBufferOffset(b0, b1, 3, 5, 7), {10, 12}},
      // q head at element 4; cache rows of 8 floats, head at 4: needs (2*8 + 4 + 4) floats.
      {ops::attnScore(b0, b1, b2, 4, 3, 4, 4, 8), {32, 96, 12}},
      {ops::attnValue(b0, b1, b2, 4, 3, 4, 8, 2), {12, 96, 24}},
      {ops::quantizedMatmul(b0, b1, b2, 2, 64, DType::Q8_0), {136, 256, 8}},
  };
}

std::string callName(const ValidCall &call) { return opInfo(call.op.kind).name; }

// A backend holding the buffers of one call, filled with random bytes, and the means to check
// that nothing changed.
class Harness {
public:
  explicit Harness(const std::vector<uint64_t> &sizes) {
    std::mt19937 rng(5);
    for (uint64_t size : sizes) {
      std::vector<uint8_t> bytes(size);
      for (uint8_t &b : bytes)
        b = static_cast<uint8_t>(rng());
      if (!bytes.empty() && size % 4 == 0) // keep float buffers finite: small values only
        for (uint64_t i = 3; i < size; i += 4)
          bytes[i] = 0x3C;
      handles.push_back(test::uploadBytes(backend, bytes));
      contents.push_back(bytes);
    }
  }

  OpCall bind(OpCall op) const {
    for (int i = 0; i < opInfo(op.kind).numBuffers; ++i)
      op.buffers[i] = handles[op.buffers[i].id - 1];
    return op;
  }

  // The valid call writes its outputs: take the new contents as the state to compare with.
  void snapshot() {
    for (size_t j = 0; j < handles.size(); ++j)
      contents[j] = test::downloadBytes(backend, handles[j], contents[j].size());
  }

  void expectUnchanged() {
    for (size_t j = 0; j < handles.size(); ++j)
      EXPECT_EQ(test::downloadBytes(backend, handles[j], contents[j].size()), contents[j])
          << "buffer " << j << " changed";
  }

  ReferenceBackend backend;
  std::vector<BufferHandle> handles;
  std::vector<std::vector<uint8_t>> contents;
};

// Checks that `op` is rejected with `code` and a message containing every piece, that nothing
// changed, and that the valid call still runs.
void expectRejected(Harness &h, const OpCall &bad, const OpCall &valid, absl::StatusCode code,
                    const std::vector<std::string> &pieces) {
  absl::Status status = test::callOp(h.backend, bad);
  EXPECT_EQ(status.code(), code) << status;
  for (const std::string &piece : pieces)
    EXPECT_THAT(std::string(status.message()), HasSubstr(piece));
  h.expectUnchanged();
  EXPECT_EQ(test::callOp(h.backend, valid), absl::OkStatus()) << "backend unusable afterwards";
  h.snapshot();
}

TEST(ErrorsTest, EveryValidCallIsAccepted) {
  for (const ValidCall &call : validCalls()) {
    SCOPED_TRACE(callName(call));
    Harness h(call.sizes);
    EXPECT_EQ(test::callOp(h.backend, h.bind(call.op)), absl::OkStatus());
  }
}

TEST(ErrorsTest, UnknownOrFreedHandleIsNotFoundPerArgument) {
  for (const ValidCall &call : validCalls()) {
    const OpInfo &info = opInfo(call.op.kind);
    for (int i = 0; i < info.numBuffers; ++i) {
      SCOPED_TRACE(absl::StrCat(info.name, " ", info.bufferNames[i]));
      Harness h(call.sizes);
      OpCall valid = h.bind(call.op);
      absl::StatusOr<BufferHandle> freed = h.backend.allocate(call.sizes[i]);
      ASSERT_TRUE(freed.ok());
      ASSERT_EQ(h.backend.free(*freed), absl::OkStatus());
      for (BufferHandle bad : {*freed, BufferHandle{uint64_t(1) << 60}}) {
        OpCall op = valid;
        op.buffers[i] = bad;
        expectRejected(h, op, valid, absl::StatusCode::kNotFound,
                       {absl::StrCat(info.name, ": "),
                        absl::StrCat(info.bufferNames[i], " buffer ", bad.id), "not found"});
      }
    }
  }
}

TEST(ErrorsTest, BufferOneByteTooSmallIsOutOfRangePerArgument) {
  for (const ValidCall &call : validCalls()) {
    const OpInfo &info = opInfo(call.op.kind);
    for (int i = 0; i < info.numBuffers; ++i) {
      SCOPED_TRACE(absl::StrCat(info.name, " ", info.bufferNames[i]));
      Harness h(call.sizes);
      OpCall valid = h.bind(call.op);
      uint64_t need = call.sizes[i];
      BufferHandle small = test::uploadBytes(h.backend, std::vector<uint8_t>(need - 1, 7));
      OpCall op = valid;
      op.buffers[i] = small;
      expectRejected(h, op, valid, absl::StatusCode::kOutOfRange,
                     {absl::StrCat(info.name, ": "),
                      absl::StrCat(info.bufferNames[i], " buffer ", small.id),
                      absl::StrCat("holds ", need - 1, " bytes"), absl::StrCat(need)});
      EXPECT_EQ(test::downloadBytes(h.backend, small, need - 1), std::vector<uint8_t>(need - 1, 7))
          << "the too-small buffer changed";
    }
  }
}

TEST(ErrorsTest, NotFoundComesBeforeArgumentErrors) {
  ReferenceBackend backend;
  BufferHandle x = test::uploadFloats(backend, std::vector<float>(32, 1.0f));
  absl::Status status =
      backend.quantizedMatmul(BufferHandle{uint64_t(1) << 61}, x, x, 1, 33, DType::Q4_0);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
}

struct ArgumentCase {
  const char *label;
  size_t call; // index into validCalls()
  OpCall (*mutate)(OpCall);
  absl::StatusCode code;
  std::vector<std::string> pieces;
};

OpCall withInt(OpCall op, int index, uint64_t value) {
  op.ints[index] = value;
  return op;
}
OpCall withScalar(OpCall op, float value) {
  op.scalar = value;
  return op;
}
OpCall withDType(OpCall op, DType dtype) {
  op.dtype = dtype;
  return op;
}
OpCall withBuffer(OpCall op, int index, int from) {
  op.buffers[index] = op.buffers[from];
  return op;
}

constexpr size_t kMatmul = 0, kRmsNorm = 2, kRope = 3, kScore = 9, kValue = 10, kQmm = 11;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr auto kUnimplemented = absl::StatusCode::kUnimplemented;

std::vector<ArgumentCase> argumentCases() {
  return {
      {"n_cols not a Q8_0 block multiple",
       kQmm,
       [](OpCall op) { return withInt(op, 1, 33); },
       kInvalid,
       {"quantized_matmul", "n_cols 33", "Q8_0", "32"}},
      {"n_cols not a Q4_K block multiple",
       kQmm,
       [](OpCall op) { return withInt(withDType(op, DType::Q4_K), 1, 64); },
       kInvalid,
       {"quantized_matmul", "n_cols 64", "Q4_K", "256"}},
      {"odd head_dim",
       kRope,
       [](OpCall op) { return withInt(op, 1, 3); },
       kInvalid,
       {"rope", "head_dim 3"}},
      {"zero head_dim for rope",
       kRope,
       [](OpCall op) { return withInt(op, 1, 0); },
       kInvalid,
       {"rope", "head_dim"}},
      {"zero size for rms_norm",
       kRmsNorm,
       [](OpCall op) { return withInt(op, 0, 0); },
       kInvalid,
       {"rms_norm", "size"}},
      {"rope freq_base zero",
       kRope,
       [](OpCall op) { return withScalar(op, 0.0f); },
       kInvalid,
       {"rope", "freq_base 0", "finite and at least 1"}},
      {"rope freq_base negative",
       kRope,
       [](OpCall op) { return withScalar(op, -10000.0f); },
       kInvalid,
       {"rope", "freq_base -10000"}},
      {"rope freq_base below 1",
       kRope,
       [](OpCall op) { return withScalar(op, 0.5f); },
       kInvalid,
       {"rope", "freq_base 0.5"}},
      {"rope freq_base NaN",
       kRope,
       [](OpCall op) { return withScalar(op, std::nanf("")); },
       kInvalid,
       {"rope", "freq_base nan"}},
      {"rope freq_base infinite",
       kRope,
       [](OpCall op) { return withScalar(op, INFINITY); },
       kInvalid,
       {"rope", "freq_base inf"}},
      {"rms_norm eps negative",
       kRmsNorm,
       [](OpCall op) { return withScalar(op, -1e-5f); },
       kInvalid,
       {"rms_norm", "eps -1e-05", "finite and not negative"}},
      {"rms_norm eps NaN",
       kRmsNorm,
       [](OpCall op) { return withScalar(op, -std::nanf("")); },
       kInvalid,
       {"rms_norm", "eps", "nan"}},
      {"rms_norm eps infinite",
       kRmsNorm,
       [](OpCall op) { return withScalar(op, INFINITY); },
       kInvalid,
       {"rms_norm", "eps inf"}},
      {"zero head_dim for attn_score",
       kScore,
       [](OpCall op) { return withInt(op, 0, 0); },
       kInvalid,
       {"attn_score", "head_dim"}},
      {"matmul out is a",
       kMatmul,
       [](OpCall op) { return withBuffer(op, 2, 0); },
       kInvalid,
       {"matmul", "overlap"}},
      {"matmul out is b",
       kMatmul,
       [](OpCall op) { return withBuffer(op, 2, 1); },
       kInvalid,
       {"matmul", "overlap"}},
      {"rope q is k",
       kRope,
       [](OpCall op) { return withBuffer(op, 1, 0); },
       kInvalid,
       {"rope", "overlap"}},
      // q's head moved to element 0 so that the scores [0, 12) land on it.
      {"attn_score scores over q",
       kScore,
       [](OpCall op) { return withInt(withBuffer(op, 2, 0), 2, 0); },
       kInvalid,
       {"attn_score", "overlap"}},
      {"attn_value out over v_cache",
       kValue,
       [](OpCall op) { return withBuffer(op, 2, 1); },
       kInvalid,
       {"attn_value", "overlap"}},
      {"quantized_matmul out is x",
       kQmm,
       [](OpCall op) { return withBuffer(op, 2, 1); },
       kInvalid,
       {"quantized_matmul", "overlap"}},
      {"Q8_K later",
       kQmm,
       [](OpCall op) { return withInt(withDType(op, DType::Q8_K), 1, 256); },
       kUnimplemented,
       {"quantized_matmul", "Q8_K"}},
      {"IQ2_XXS later",
       kQmm,
       [](OpCall op) { return withInt(withDType(op, DType::IQ2_XXS), 1, 256); },
       kUnimplemented,
       {"quantized_matmul", "IQ2_XXS"}},
      {"TQ1_0 later",
       kQmm,
       [](OpCall op) { return withInt(withDType(op, DType::TQ1_0), 1, 256); },
       kUnimplemented,
       {"quantized_matmul", "TQ1_0"}},
      {"I32 is not a weight",
       kQmm,
       [](OpCall op) { return withDType(op, DType::I32); },
       kInvalid,
       {"quantized_matmul", "I32"}},
      {"F64 is not a weight",
       kQmm,
       [](OpCall op) { return withDType(op, DType::F64); },
       kInvalid,
       {"quantized_matmul", "F64"}},
      {"id 4 names no format",
       kQmm,
       [](OpCall op) { return withDType(op, DType(4)); },
       kInvalid,
       {"quantized_matmul", "id 4"}},
  };
}

TEST(ErrorsTest, ArgumentErrorsHaveTheirCodeAndNumbers) {
  std::vector<ValidCall> calls = validCalls();
  for (const ArgumentCase &c : argumentCases()) {
    SCOPED_TRACE(c.label);
    Harness h(calls[c.call].sizes);
    OpCall valid = h.bind(calls[c.call].op);
    expectRejected(h, c.mutate(valid), valid, c.code, c.pieces);
  }
}

TEST(ErrorsTest, HostTransfersCheckHandleAndSize) {
  Harness h({16});
  BufferHandle buf = h.handles[0];
  std::vector<uint8_t> big(20, 1);
  absl::Status status = h.backend.copyToDevice(big, buf);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("copy_to_device"), HasSubstr("16"), HasSubstr("20")));
  status = h.backend.copyFromDevice(buf, absl::MakeSpan(big));
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("copy_from_device"), HasSubstr("16"), HasSubstr("20")));
  EXPECT_EQ(big, std::vector<uint8_t>(20, 1)) << "a rejected read wrote the host slice";
  h.expectUnchanged();

  BufferHandle unknown{uint64_t(1) << 59};
  status = h.backend.copyToDevice(big, unknown);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("copy_to_device"), HasSubstr(absl::StrCat(unknown.id))));
  status = h.backend.copyFromDevice(unknown, absl::MakeSpan(big));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("copy_from_device"));
}

TEST(ErrorsTest, FreeOfUnknownOrFreedHandleIsNotFound) {
  ReferenceBackend backend;
  absl::StatusOr<BufferHandle> h = backend.allocate(8);
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(backend.free(*h), absl::OkStatus());
  absl::Status twice = backend.free(*h);
  EXPECT_EQ(twice.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(twice.message()),
              AllOf(HasSubstr("free"), HasSubstr(absl::StrCat(h->id))));
  EXPECT_EQ(backend.free(BufferHandle{}).code(), absl::StatusCode::kNotFound);
  std::vector<uint8_t> bytes(8);
  EXPECT_EQ(backend.copyFromDevice(*h, absl::MakeSpan(bytes)).code(), absl::StatusCode::kNotFound);
}

TEST(ErrorsTest, HandleOfAnotherBackendIsNotFound) {
  ReferenceBackend a, b;
  BufferHandle h = test::uploadFloats(a, {1, 2});
  EXPECT_EQ(b.free(h).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a.free(h), absl::OkStatus());
}

TEST(ErrorsTest, AllocateOverTheLimitIsResourceExhaustedAndCreatesNothing) {
  BackendOptions options;
  options.memoryLimitBytes = 1000;
  ReferenceBackend backend(options);
  absl::StatusOr<BufferHandle> first = backend.allocate(600);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<BufferHandle> second = backend.allocate(500);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(second.status().message()),
              AllOf(HasSubstr("allocate"), HasSubstr("500"), HasSubstr("400")));
  ASSERT_EQ(backend.free(*first), absl::OkStatus());
  absl::StatusOr<BufferHandle> whole = backend.allocate(1000);
  EXPECT_TRUE(whole.ok()) << "a failed or freed allocation still counts: " << whole.status();
}

TEST(ErrorsTest, AllocateMoreThanTheHostHasIsResourceExhausted) {
  ReferenceBackend backend;
  absl::StatusOr<BufferHandle> huge = backend.allocate(UINT64_MAX);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr(absl::StrCat(UINT64_MAX)));
  EXPECT_TRUE(backend.allocate(16).ok());
}

} // namespace
} // namespace sinter
