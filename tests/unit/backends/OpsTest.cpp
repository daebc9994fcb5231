// OpsTest.cpp - the OpCall record of support/Ops: table, builders, accesses, validation, printing.
//
// Every backend validates with these functions, so their contract is tested directly, without a
// backend: a fake size lookup stands in for the buffers. This includes calls whose element counts
// overflow 64-bit byte sizes, which must be rejected before any kernel could run them.
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "support/Ops.h"
#include "tests/support/Messages.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

BufferHandle h(uint64_t id) { return BufferHandle{id}; }

// Buffer sizes by id; an id not in the map is NotFound like a backend's lookup.
struct FakeBuffers {
  absl::flat_hash_map<uint64_t, uint64_t> sizes;

  absl::Status validate(const OpCall &op) const {
    return validateOp(op, [this](BufferHandle b) -> absl::StatusOr<uint64_t> {
      auto it = sizes.find(b.id);
      if (it == sizes.end())
        return absl::NotFoundError(absl::StrCat("buffer ", b.id, " not found"));
      return it->second;
    });
  }
};

TEST(OpsTest, TableMatchesSemanticsSpelling) {
  const char *names[] = {"matmul",     "softmax",     "rms_norm",
                         "rope",       "silu",        "element_mul",
                         "add",        "copy_buffer", "copy_buffer_offset",
                         "attn_score", "attn_value",  "quantized_matmul"};
  for (int i = 0; i < kNumOpKinds; ++i) {
    const OpInfo &info = opInfo(OpKind(i));
    EXPECT_EQ(info.kind, OpKind(i));
    EXPECT_STREQ(info.name, names[i]);
    for (int b = 0; b < info.numBuffers; ++b)
      EXPECT_NE(info.bufferNames[b], nullptr) << info.name;
    for (int n = 0; n < info.numInts; ++n)
      EXPECT_NE(info.intNames[n], nullptr) << info.name;
  }
  EXPECT_STREQ(opInfo(OpKind::RmsNorm).scalarName, "eps");
  EXPECT_STREQ(opInfo(OpKind::Rope).scalarName, "freq_base");
  EXPECT_TRUE(opInfo(OpKind::QuantizedMatmul).hasDType);
  EXPECT_FALSE(opInfo(OpKind::Matmul).hasDType);
}

TEST(OpsTest, BuildersKeepTheMethodsArgumentOrder) {
  OpCall rope = ops::rope(h(1), h(2), 7, 64, 10000.0f, 8, 2);
  EXPECT_EQ(rope.kind, OpKind::Rope);
  EXPECT_EQ(rope.buffers[0], h(1));
  EXPECT_EQ(rope.buffers[1], h(2));
  EXPECT_EQ(rope.ints, (std::array<uint64_t, 5>{7, 64, 8, 2, 0}));
  EXPECT_EQ(rope.scalar, 10000.0f);
  OpCall value = ops::attnValue(h(1), h(2), h(3), 64, 9, 128, 256, 192);
  EXPECT_EQ(value.ints, (std::array<uint64_t, 5>{64, 9, 128, 256, 192}));
  OpCall score = ops::attnScore(h(1), h(2), h(3), 64, 9, 64, 128, 256);
  EXPECT_EQ(score.ints, (std::array<uint64_t, 5>{64, 9, 64, 128, 256}));
  OpCall copy = ops::copyBufferOffset(h(4), h(5), uint64_t(1) << 40, 3, 9);
  EXPECT_EQ(copy.ints, (std::array<uint64_t, 5>{uint64_t(1) << 40, 3, 9, 0, 0}));
  OpCall qmm = ops::quantizedMatmul(h(1), h(2), h(3), 11, 4096, DType::Q6_K);
  EXPECT_EQ(qmm.ints, (std::array<uint64_t, 5>{11, 4096, 0, 0, 0}));
  EXPECT_EQ(qmm.dtype, DType::Q6_K);
  EXPECT_EQ(ops::matmul(h(1), h(2), h(3), 2, 3, 4).ints, (std::array<uint64_t, 5>{2, 3, 4, 0, 0}));
}

TEST(OpsTest, EqualityComparesEveryFieldAndFloatsBitForBit) {
  OpCall a = ops::rmsNorm(h(1), h(2), h(3), 64, 1e-5f);
  EXPECT_EQ(a, ops::rmsNorm(h(1), h(2), h(3), 64, 1e-5f));
  EXPECT_FALSE(a == ops::rmsNorm(h(1), h(2), h(4), 64, 1e-5f));
  EXPECT_FALSE(a == ops::rmsNorm(h(1), h(2), h(3), 65, 1e-5f));
  EXPECT_FALSE(a == ops::rmsNorm(h(1), h(2), h(3), 64, 1e-6f));
  EXPECT_FALSE(ops::rmsNorm(h(1), h(2), h(3), 64, 0.0f) ==
               ops::rmsNorm(h(1), h(2), h(3), 64, -0.0f));
  OpCall nan = ops::rmsNorm(h(1), h(2), h(3), 64, std::nanf(""));
  EXPECT_EQ(nan, nan);
  EXPECT_FALSE(ops::quantizedMatmul(h(1), h(2), h(3), 1, 32, DType::Q4_0) ==
               ops::quantizedMatmul(h(1), h(2), h(3), 1, 32, DType::Q8_0));
  EXPECT_FALSE(ops::silu(h(1), h(2), 4) == ops::softmax(h(1), h(2), 4));
}

TEST(OpsTest, DescribeOpPrintsNamesAndValues) {
  EXPECT_EQ(describeOp(ops::rmsNorm(h(3), h(4), h(5), 64, 1e-5f)),
            "rms_norm(in=%3, weight=%4, out=%5, size=64, eps=1e-05)");
  EXPECT_EQ(describeOp(ops::quantizedMatmul(h(1), h(2), h(3), 8, 256, DType::Q4_K)),
            "quantized_matmul(weights=%1, x=%2, out=%3, n_rows=8, n_cols=256, dtype=Q4_K)");
  EXPECT_EQ(describeOp(ops::copyBuffer(h(1), h(2), 16)), "copy_buffer(src=%1, dst=%2, size=16)");
}

TEST(OpsTest, AccessesAreTheNamedByteRanges) {
  absl::StatusOr<AccessList> score = opAccesses(ops::attnScore(h(1), h(2), h(3), 4, 3, 8, 4, 16));
  ASSERT_TRUE(score.ok()) << score.status();
  ASSERT_EQ(score->size(), 3u);
  EXPECT_EQ((*score)[0].offset, 32u); // q from element 8
  EXPECT_EQ((*score)[0].size, 16u);
  EXPECT_EQ((*score)[1].size, ((3 - 1) * 16 + 4 + 4) * 4u); // last row's head end
  EXPECT_TRUE((*score)[2].write && !(*score)[2].read);
  EXPECT_EQ((*score)[2].size, 12u);

  absl::StatusOr<AccessList> value = opAccesses(ops::attnValue(h(1), h(2), h(3), 4, 3, 4, 16, 2));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ((*value)[2].offset, 8u);
  EXPECT_EQ((*value)[2].size, 16u);

  absl::StatusOr<AccessList> copy = opAccesses(ops::copyBufferOffset(h(1), h(1), 3, 5, 7));
  ASSERT_TRUE(copy.ok()) << copy.status() << " (overlapping copy_buffer_offset is memmove)";
  EXPECT_EQ((*copy)[0].offset, 3u);
  EXPECT_EQ((*copy)[1].offset, 5u);
  EXPECT_EQ((*copy)[1].size, 7u);

  absl::StatusOr<AccessList> qmm =
      opAccesses(ops::quantizedMatmul(h(1), h(2), h(3), 3, 512, DType::Q4_K));
  ASSERT_TRUE(qmm.ok()) << qmm.status();
  EXPECT_EQ((*qmm)[0].size, 3u * 2 * 144);
  EXPECT_EQ((*qmm)[1].size, 512u * 4);

  absl::StatusOr<AccessList> rope = opAccesses(ops::rope(h(1), h(2), 0, 8, 1e4f, 3, 1));
  ASSERT_TRUE(rope.ok()) << rope.status();
  EXPECT_TRUE((*rope)[0].read && (*rope)[0].write);
  EXPECT_EQ((*rope)[0].size, 3u * 8 * 4);
  EXPECT_EQ((*rope)[1].size, 8u * 4);
}

TEST(OpsTest, InPlaceFormsAreAllowedExactlyWhereSemanticsSaysSo) {
  EXPECT_TRUE(opAccesses(ops::softmax(h(1), h(1), 8)).ok());
  EXPECT_TRUE(opAccesses(ops::silu(h(1), h(1), 8)).ok());
  EXPECT_TRUE(opAccesses(ops::rmsNorm(h(1), h(2), h(1), 8, 1e-5f)).ok());
  EXPECT_TRUE(opAccesses(ops::elementMul(h(1), h(1), h(1), 8)).ok());
  EXPECT_TRUE(opAccesses(ops::add(h(1), h(2), h(2), 8)).ok());
  EXPECT_TRUE(opAccesses(ops::copyBuffer(h(1), h(1), 8)).ok());
  EXPECT_TRUE(opAccesses(ops::rope(h(1), h(1), 0, 8, 1e4f, 1, 0)).ok()) << "k range empty";
  // Disjoint parts of one buffer are fine for the strided ops.
  EXPECT_TRUE(opAccesses(ops::attnScore(h(1), h(2), h(1), 4, 2, 4, 0, 4)).ok());
  absl::Status matmul = opAccesses(ops::matmul(h(1), h(2), h(1), 2, 2, 2)).status();
  EXPECT_EQ(matmul.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(matmul.message()), AllOf(HasSubstr("matmul"), HasSubstr("overlap")));
  EXPECT_EQ(opAccesses(ops::attnValue(h(1), h(2), h(2), 4, 2, 0, 4, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(OpsTest, ValidateOpNamesOpArgumentAndNumbers) {
  FakeBuffers buffers{{{3, 8192}, {7, 256}, {9, 8192}}};
  absl::Status status = buffers.validate(ops::rmsNorm(h(3), h(7), h(9), 2048, 1e-5f));
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(status.message(), "rms_norm: weight buffer 7 holds 256 bytes, needs 8192");

  status = buffers.validate(ops::matmul(h(3), h(42), h(9), 1, 1, 1));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("matmul"), HasSubstr("b"), HasSubstr("buffer 42 not found")));

  status = buffers.validate(ops::attnValue(h(3), h(9), h(7), 4, 1, 0, 4, 62));
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("attn_value: out buffer 7"), HasSubstr("256"), HasSubstr("248"),
                    HasSubstr("264")));
  EXPECT_EQ(buffers.validate(ops::attnValue(h(3), h(9), h(7), 4, 1, 0, 4, 60)), absl::OkStatus());
}

TEST(OpsTest, ValidateOpChecksByteOffsetsWithoutWrapping) {
  FakeBuffers buffers{{{1, 10}, {2, 10}}};
  absl::Status status = buffers.validate(ops::copyBufferOffset(h(1), h(2), UINT64_MAX, 0, 1));
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(status.message()), HasSubstr(absl::StrCat(UINT64_MAX)));
  EXPECT_EQ(buffers.validate(ops::copyBufferOffset(h(1), h(2), 0, UINT64_MAX - 3, 8)).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(buffers.validate(ops::copyBufferOffset(h(1), h(2), 10, 10, 0)), absl::OkStatus());
}

// Element counts are 32-bit but their products are not: m*k*4 for m = k = 2^31 is 2^64, which
// wraps to 0 in uint64_t. Such calls must be rejected, not validated as touching nothing.
TEST(OpsTest, ValidateOpRejectsSizesThatOverflow) {
  FakeBuffers buffers{{{1, 64}, {2, 64}, {3, uint64_t(1) << 40}}};
  const uint32_t big = uint32_t(1) << 31;
  absl::Status matmul = buffers.validate(ops::matmul(h(1), h(2), h(3), big, big, big));
  EXPECT_FALSE(matmul.ok()) << "matmul " << big << "^3 on 64-byte buffers was accepted";
  absl::Status rope = buffers.validate(ops::rope(h(1), h(2), 0, big, 1e4f, big, 0));
  EXPECT_FALSE(rope.ok()) << "rope with 2^31 heads of 2^31 was accepted";
  absl::Status score = buffers.validate(ops::attnScore(h(1), h(2), h(3), 1, big + 1, 0, 0, big));
  EXPECT_FALSE(score.ok()) << "attn_score reaching element 2^62 was accepted";
}

// An exact byte range, in 128-bit arithmetic that cannot wrap for any 64-bit argument.
struct ExactRange {
  unsigned __int128 begin = 0, end = 0;
};
using Wide = unsigned __int128;

// The byte ranges SEMANTICS.md gives each buffer of `op`, written out again independently of
// support/Ops.cpp; `invalid` is set for the argument errors that need no buffer to decide.
std::vector<ExactRange> exactRanges(const OpCall &op, bool *invalid) {
  const auto &v = op.ints;
  auto f32 = [](Wide offset, Wide count) { return ExactRange{offset * 4, (offset + count) * 4}; };
  auto strided = [](Wide seq, Wide stride, Wide offset, Wide headDim) -> Wide {
    return seq == 0 || headDim == 0 ? 0 : (seq - 1) * stride + offset + headDim;
  };
  *invalid = false;
  switch (op.kind) {
  case OpKind::Matmul:
    return {f32(0, Wide(v[0]) * v[2]), f32(0, Wide(v[2]) * v[1]), f32(0, Wide(v[0]) * v[1])};
  case OpKind::Softmax:
  case OpKind::Silu:
    return {f32(0, v[0]), f32(0, v[0])};
  case OpKind::RmsNorm:
    *invalid = v[0] == 0;
    return {f32(0, v[0]), f32(0, v[0]), f32(0, v[0])};
  case OpKind::ElementMul:
  case OpKind::Add:
    return {f32(0, v[0]), f32(0, v[0]), f32(0, v[0])};
  case OpKind::Rope:
    *invalid = v[1] == 0 || v[1] % 2 != 0;
    return {f32(0, Wide(v[2]) * v[1]), f32(0, Wide(v[3]) * v[1])};
  case OpKind::CopyBuffer:
    return {ExactRange{0, v[0]}, ExactRange{0, v[0]}};
  case OpKind::CopyBufferOffset:
    return {ExactRange{v[0], Wide(v[0]) + v[2]}, ExactRange{v[1], Wide(v[1]) + v[2]}};
  case OpKind::AttnScore:
    *invalid = v[0] == 0;
    return {f32(v[2], v[0]), f32(0, strided(v[1], v[4], v[3], v[0])), f32(0, v[1])};
  case OpKind::AttnValue:
    return {f32(0, v[1]), f32(0, strided(v[1], v[3], v[2], v[0])), f32(v[4], v[0])};
  case OpKind::QuantizedMatmul: {
    const DTypeInfo &info = dtypeInfo(op.dtype);
    *invalid = v[1] % info.blockSize != 0;
    Wide rowBytes = Wide(v[1] / info.blockSize) * info.bytesPerBlock;
    return {ExactRange{0, Wide(v[0]) * rowBytes}, f32(0, v[1]), f32(0, v[0])};
  }
  }
  return {};
}

// The class of bug behind issue #40's first finding: a byte range computed in 64 bits wrapped
// (quantized_matmul's n_rows * row bytes), so a call reading far past its buffers was accepted.
// Here every op takes every combination of extreme integers against buffers of extreme sizes,
// and validation must accept exactly the calls whose exact ranges fit.
TEST(OpsTest, ValidationAcceptsExactlyTheCallsWhoseExactRangesFit) {
  const std::vector<uint64_t> ints32 = {
      0, 1, 2, 64, (1ull << 31) - 1, 1ull << 31, (1ull << 32) - 1};
  std::vector<uint64_t> ints64 = ints32;
  for (uint64_t x : {1ull << 32, 1ull << 62, 1ull << 63, ~0ull - 3, ~0ull})
    ints64.push_back(x);
  // Up to 2^63: allocate never hands out a buffer whose size a saturated range could equal.
  const std::vector<uint64_t> sizes = {0, 64, 1ull << 32, 1ull << 34, 1ull << 62, 1ull << 63};
  std::vector<OpCall> shapes = {
      ops::matmul(h(1), h(2), h(3), 0, 0, 0),
      ops::softmax(h(1), h(2), 0),
      ops::rmsNorm(h(1), h(2), h(3), 0, 1e-5f),
      ops::rope(h(1), h(2), 0, 0, 1e4f, 0, 0),
      ops::silu(h(1), h(2), 0),
      ops::elementMul(h(1), h(2), h(3), 0),
      ops::add(h(1), h(2), h(3), 0),
      ops::copyBuffer(h(1), h(2), 0),
      ops::copyBufferOffset(h(1), h(2), 0, 0, 0),
      ops::attnScore(h(1), h(2), h(3), 0, 0, 0, 0, 0),
      ops::attnValue(h(1), h(2), h(3), 0, 0, 0, 0, 0),
      ops::quantizedMatmul(h(1), h(2), h(3), 0, 0, DType::F32),
      ops::quantizedMatmul(h(1), h(2), h(3), 0, 0, DType::Q4_K),
  };
  int64_t accepted = 0, checked = 0;
  for (const OpCall &shape : shapes) {
    const OpInfo &info = opInfo(shape.kind);
    const bool bytes = shape.kind == OpKind::CopyBuffer || shape.kind == OpKind::CopyBufferOffset;
    const std::vector<uint64_t> &values = bytes ? ints64 : ints32;
    // Every combination of values over the op's integers (rope's pos is not a size: 0 only).
    std::vector<size_t> pick(info.numInts, 0);
    for (;;) {
      OpCall op = shape;
      for (int i = 0; i < info.numInts; ++i)
        op.ints[i] = values[pick[i]];
      bool invalid = false;
      std::vector<ExactRange> ranges = exactRanges(op, &invalid);
      // Buffer sizes: every combination for the op's buffers.
      std::vector<size_t> sizePick(info.numBuffers, 0);
      for (;;) {
        uint64_t have[3] = {0, 0, 0};
        bool fits = true;
        for (int b = 0; b < info.numBuffers; ++b) {
          have[b] = sizes[sizePick[b]];
          const ExactRange &r = ranges[b];
          fits &= r.end <= r.begin || r.end <= have[b];
        }
        absl::Status s = validateOpSizes(op, have);
        ++checked;
        if (s.ok()) {
          ++accepted;
          ASSERT_TRUE(fits && !invalid) << describeOp(op) << " accepted on buffers of " << have[0]
                                        << ", " << have[1] << ", " << have[2] << " bytes";
        } else if (fits && !invalid) {
          FAIL() << describeOp(op) << " rejected although it fits: " << s;
        } else {
          ASSERT_TRUE(s.code() == absl::StatusCode::kOutOfRange ||
                      s.code() == absl::StatusCode::kInvalidArgument)
              << s;
          ASSERT_TRUE(test::printsNoWrappedRange(s.message())) << s;
        }
        int b = 0;
        while (b < info.numBuffers && ++sizePick[b] == sizes.size())
          sizePick[b++] = 0;
        if (b == info.numBuffers)
          break;
      }
      int i = shape.kind == OpKind::Rope ? 1 : 0;
      while (i < info.numInts && ++pick[i] == values.size())
        pick[i++] = 0;
      if (i == info.numInts)
        break;
    }
  }
  EXPECT_GT(accepted, 1000);
  RecordProperty("checked", checked);
}

TEST(OpsTest, DeferredMessagesNameTheCallersBuffers) {
  std::vector<BufferHandle> slots = {h(40), h(41), h(7)};
  std::string message = describeOp(ops::add(h(1), h(3), h(2), 4)) + ": failed at %9, 100%";
  EXPECT_EQ(withCallerBufferIds(message, slots),
            "add(a=buffer 40, b=buffer 7, out=buffer 41, size=4): failed at %9, 100%");
  // A slot outside the trace is left as printed.
  EXPECT_EQ(withCallerBufferIds("silu(in=%4, out=%0)", slots), "silu(in=%4, out=%0)");
}

TEST(OpsTest, ValidateHostTransferNamesTheDirection) {
  auto sizeOf = [](BufferHandle b) -> absl::StatusOr<uint64_t> {
    if (b.id != 5)
      return absl::NotFoundError(absl::StrCat("buffer ", b.id, " not found"));
    return 16;
  };
  EXPECT_EQ(validateHostTransfer("copy_to_device", h(5), 16, sizeOf), absl::OkStatus());
  absl::Status status = validateHostTransfer("copy_from_device", h(5), 17, sizeOf);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("copy_from_device"), HasSubstr("16"), HasSubstr("17")));
  status = validateHostTransfer("copy_to_device", h(6), 1, sizeOf);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "copy_to_device: buffer 6 not found");
}

} // namespace
} // namespace sinter
