// GgufReaderTest.cpp - tests of tools/model/GgufReader.cpp and GgufWriter.cpp.
//
// Every error the parser can report has a test that provokes it with a hand-built file and checks
// the code and the message; valid files round-trip through the writer byte for byte.
#include "tools/model/GgufReader.h"

#include "tests/unit/tools/GgufBytes.h"
#include "tools/model/GgufWriter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter::model {
namespace {

using testing::GgufBytes;
using ::testing::HasSubstr;

void expectError(const std::vector<uint8_t> &bytes, absl::StatusCode code,
                 const std::string &message) {
  absl::StatusOr<GgufFile> f = parseGguf(bytes);
  ASSERT_FALSE(f.ok()) << "parsed a malformed file";
  EXPECT_EQ(f.status().code(), code) << f.status();
  EXPECT_THAT(std::string(f.status().message()), HasSubstr(message));
  EXPECT_THAT(std::string(f.status().message()), ::testing::StartsWith("gguf: "));
}

// A small valid file: two metadata entries and one F32 tensor of 8 floats.
GgufBytes validFile() {
  GgufBytes b;
  b.header(1, 2).kvStr("general.architecture", "llama").kvU32("general.alignment", 32);
  b.tensor("t", {8}, 0, 0).pad();
  for (int i = 0; i < 8; ++i)
    b.f32(float(i));
  return b;
}

TEST(GgufReader, ParsesAValidFile) {
  const GgufBytes b = validFile();
  absl::StatusOr<GgufFile> f = parseGguf(b.bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->version, 3u);
  ASSERT_EQ(f->metadata.size(), 2u);
  EXPECT_EQ(f->find("general.architecture")->str, "llama");
  ASSERT_EQ(f->tensors.size(), 1u);
  EXPECT_EQ(f->tensors[0].dims, std::vector<uint64_t>{8});
  EXPECT_EQ(f->dataOffset % 32, 0u);
  ASSERT_EQ(f->tensors[0].data.size(), 32u);
  float third;
  std::memcpy(&third, f->tensors[0].data.data() + 8, 4);
  EXPECT_EQ(third, 2.0f);
}

TEST(GgufReader, RejectsBadMagic) {
  GgufBytes b = validFile();
  b.bytes[0] = 'X';
  expectError(b.bytes, absl::StatusCode::kInvalidArgument, "bad magic 0x46554758");
}

TEST(GgufReader, RejectsUnsupportedVersion) {
  GgufBytes b;
  b.header(0, 0, 4);
  expectError(b.bytes, absl::StatusCode::kUnimplemented, "version 4 is not supported");
}

TEST(GgufReader, RejectsTruncatedHeader) {
  GgufBytes b;
  b.raw("GGUF", 4).u32(3).u32(0);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument,
              "truncated at offset 8: tensor count needs 8 bytes, 4 left");
}

TEST(GgufReader, RejectsEmptyFile) {
  expectError({}, absl::StatusCode::kInvalidArgument, "magic needs 4 bytes, 0 left");
}

TEST(GgufReader, RejectsStringLongerThanTheFile) {
  GgufBytes b;
  b.header(0, 1).u64(uint64_t(1) << 60).zeros(16);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument,
              "metadata key at offset 24 has length 1152921504606846976, only 16 bytes left");
}

TEST(GgufReader, RejectsMetadataCountLargerThanTheFile) {
  GgufBytes b;
  b.header(0, uint64_t(1) << 40);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument,
              "metadata count 1099511627776 cannot fit in the 0 bytes left");
}

TEST(GgufReader, RejectsTensorCountLargerThanTheFile) {
  GgufBytes b;
  b.header(1000, 0).zeros(64);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument,
              "tensor count 1000 cannot fit in the 64 bytes left");
}

TEST(GgufReader, RejectsArrayLongerThanTheFile) {
  GgufBytes b;
  b.header(0, 1).str("a").u32(9).u32(4).u64(1000).u32(7);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument,
              "array at offset 37 has 1000 uint32 elements, only 4 bytes left");
}

TEST(GgufReader, RejectsUnknownValueType) {
  GgufBytes b;
  b.header(0, 1).str("k").u32(13).u32(0);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument,
              "metadata 'k' at offset 24 has unknown "
              "value type 13");
}

TEST(GgufReader, RejectsTruncatedValue) {
  GgufBytes b;
  b.header(0, 1).str("k").u32(10).u32(0); // u64 value with only 4 bytes
  expectError(b.bytes, absl::StatusCode::kInvalidArgument, "metadata value needs 8 bytes, 4 left");
}

TEST(GgufReader, RejectsArraysNestedTooDeep) {
  GgufBytes b;
  b.header(0, 1).str("deep").u32(9);
  for (int i = 0; i < 9; ++i)
    b.u32(9).u64(1);
  b.u32(4).u64(0).zeros(64);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument, "arrays nested deeper than 8");
}

TEST(GgufReader, AcceptsNestedArrays) {
  GgufBytes b;
  b.header(0, 1).str("nested").u32(9).u32(9).u64(2);
  b.u32(4).u64(1).u32(7);
  b.u32(8).u64(1).str("x");
  absl::StatusOr<GgufFile> f = parseGguf(b.bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufValue *v = f->find("nested");
  ASSERT_EQ(v->arrays.size(), 2u);
  EXPECT_EQ(v->arrays[1].strings, std::vector<std::string>{"x"});
}

TEST(GgufReader, RejectsDuplicateKey) {
  GgufBytes b;
  b.header(0, 2).kvU32("a", 1).kvU32("a", 2);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument, "duplicate metadata key 'a'");
}

TEST(GgufReader, RejectsAlignmentThatIsNotAPowerOfTwo) {
  GgufBytes b;
  b.header(0, 1).kvU32("general.alignment", 48);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument,
              "general.alignment must be a power of two up to 2^30, got 48");
  GgufBytes zero;
  zero.header(0, 1).kvU32("general.alignment", 0);
  expectError(zero.bytes, absl::StatusCode::kInvalidArgument, "got 0");
}

TEST(GgufReader, RejectsTooManyDims) {
  GgufBytes b;
  b.header(1, 0).tensor("t", {1, 1, 1, 1, 1}, 0, 0);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument, "tensor t at offset 24 has 5 dims");
}

TEST(GgufReader, RejectsUnknownTensorType) {
  GgufBytes b;
  b.header(1, 0).tensor("t", {32}, 99, 0).pad().zeros(64);
  expectError(b.bytes, absl::StatusCode::kUnimplemented,
              "tensor t at offset 24 has unsupported type id 99");
}

TEST(GgufReader, RejectsRowThatIsNotWholeBlocks) {
  GgufBytes b;
  b.header(1, 0).tensor("q", {33, 2}, 2, 0).pad().zeros(128);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument,
              "tensor q: row length 33 is not a multiple of the Q4_0 block size 32");
}

TEST(GgufReader, RejectsElementCountOverflow) {
  GgufBytes b;
  b.header(1, 0).tensor("big", {uint64_t(1) << 40, uint64_t(1) << 40}, 0, 0);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument,
              "tensor big at offset 24: element "
              "count overflows");
}

TEST(GgufReader, RejectsDuplicateTensorName) {
  GgufBytes b;
  b.header(2, 0).tensor("t", {8}, 0, 0).tensor("t", {8}, 0, 32).pad().zeros(64);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument, "duplicate tensor name t");
}

TEST(GgufReader, RejectsMisalignedTensorOffset) {
  GgufBytes b;
  b.header(1, 0).tensor("t", {8}, 0, 4).pad().zeros(64);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument,
              "tensor t: offset 4 is not a multiple of the alignment 32");
}

TEST(GgufReader, RejectsTensorPastTheEndOfTheFile) {
  GgufBytes b;
  b.header(1, 0).tensor("blk.0.attn_q.weight", {64, 16}, 0, 32).pad().zeros(100);
  // Data section at 96; 96 + 32 + 4096 > 196.
  expectError(b.bytes, absl::StatusCode::kInvalidArgument,
              "tensor blk.0.attn_q.weight at offset 32 + 4096 bytes exceeds file size 196 (data "
              "section at 96)");
}

TEST(GgufReader, RejectsHugeTensorOffsetWithoutOverflow) {
  GgufBytes b;
  b.header(1, 0).tensor("t", {8}, 0, ~uint64_t(31)).pad().zeros(32);
  expectError(b.bytes, absl::StatusCode::kInvalidArgument, "exceeds file size");
}

// Every prefix of a valid file is rejected cleanly (no crash, no read past the end: ASan and the
// fuzzer check the latter more thoroughly).
TEST(GgufReader, RejectsEveryTruncation) {
  const GgufBytes b = validFile();
  for (size_t n = 0; n < b.bytes.size(); ++n) {
    const std::vector<uint8_t> prefix(b.bytes.begin(), b.bytes.begin() + n);
    EXPECT_FALSE(parseGguf(prefix).ok()) << "prefix of " << n << " bytes parsed";
  }
}

TEST(GgufWriter, RoundTripsEveryValueType) {
  GgufFile f;
  auto put = [&f](std::string k, GgufValue v) { f.metadata.push_back({std::move(k), v}); };
  for (uint32_t t = 0; t <= 12; ++t) {
    const GgufType type = GgufType(t);
    if (type == GgufType::String || type == GgufType::Array)
      continue;
    GgufValue v;
    v.type = type;
    v.bits = 0x8877665544332211ull &
             (ggufScalarSize(type) == 8 ? ~0ull : ((1ull << (8 * ggufScalarSize(type))) - 1));
    put(ggufTypeName(type), v);
  }
  put("string", GgufValue::string("h\xc3\xa9llo"));
  put("strings", GgufValue::stringArray({"a", "", "ccc"}));
  const float floats[] = {1.5f, -2.0f};
  put("floats", GgufValue::f32Array(floats));
  const int32_t ints[] = {-1, 7, 9};
  put("ints", GgufValue::i32Array(ints));
  GgufValue nested;
  nested.type = GgufType::Array;
  nested.elemType = GgufType::Array;
  nested.count = 2;
  nested.arrays = {GgufValue::stringArray({"x"}), GgufValue::i32Array(ints)};
  put("nested", nested);
  std::vector<uint8_t> data(64 * 4, 7);
  GgufTensor t;
  t.name = "w";
  t.dims = {64};
  t.data = data;
  f.tensors.push_back(t);

  absl::StatusOr<std::vector<uint8_t>> bytes = serializeGguf(f);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<GgufFile> back = parseGguf(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->metadata.size(), f.metadata.size());
  for (size_t i = 0; i < f.metadata.size(); ++i) {
    EXPECT_EQ(back->metadata[i].key, f.metadata[i].key);
    EXPECT_TRUE(back->metadata[i].value == f.metadata[i].value) << f.metadata[i].key;
  }
  EXPECT_EQ(std::vector<uint8_t>(back->tensors[0].data.begin(), back->tensors[0].data.end()), data);
  absl::StatusOr<std::vector<uint8_t>> again = serializeGguf(*back);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *bytes);
}

TEST(GgufWriter, RejectsTensorWhoseBytesDoNotMatchItsDims) {
  GgufFile f;
  std::vector<uint8_t> data(10);
  GgufTensor t;
  t.name = "w";
  t.dims = {64};
  t.data = data;
  f.tensors.push_back(t);
  absl::StatusOr<std::vector<uint8_t>> bytes = serializeGguf(f);
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(std::string(bytes.status().message()), HasSubstr("tensor w holds 10 bytes"));
}

TEST(GgufValue, ReadsIntegersAndFloats) {
  EXPECT_EQ(GgufValue::u32(7).asUnsigned(), 7u);
  EXPECT_EQ(GgufValue::i32(-1).asUnsigned(), std::nullopt);
  EXPECT_EQ(GgufValue::i32(-1).asDouble(), -1.0);
  EXPECT_EQ(GgufValue::f32(0.5f).asDouble(), 0.5);
  EXPECT_EQ(GgufValue::string("x").asUnsigned(), std::nullopt);
}

} // namespace
} // namespace sinter::model
