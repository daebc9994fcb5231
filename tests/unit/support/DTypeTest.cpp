// DTypeTest.cpp - tests of the GGUF weight-format table in support/DType.cpp.
//
// The ids, names and block geometry must be those of GGUF (SEMANTICS.md, "Weight formats"); the
// support column decides which error a quantized_matmul on that format gets.
#include <string>

#include "sinter/DType.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

struct Row {
  uint32_t id;
  const char *name;
  uint32_t blockSize, bytesPerBlock;
  DTypeSupport support;
};

using S = DTypeSupport;

// From GGUF's type table (ggml.h's ggml_type and ggml.c's type traits).
const Row kExpected[] = {
    {0, "F32", 1, 4, S::Supported},       {1, "F16", 1, 2, S::Supported},
    {2, "Q4_0", 32, 18, S::Supported},    {3, "Q4_1", 32, 20, S::Supported},
    {6, "Q5_0", 32, 22, S::Supported},    {7, "Q5_1", 32, 24, S::Supported},
    {8, "Q8_0", 32, 34, S::Supported},    {9, "Q8_1", 32, 36, S::Later},
    {10, "Q2_K", 256, 84, S::Supported},  {11, "Q3_K", 256, 110, S::Supported},
    {12, "Q4_K", 256, 144, S::Supported}, {13, "Q5_K", 256, 176, S::Supported},
    {14, "Q6_K", 256, 210, S::Supported}, {15, "Q8_K", 256, 292, S::Later},
    {16, "IQ2_XXS", 256, 66, S::Later},   {17, "IQ2_XS", 256, 74, S::Later},
    {18, "IQ3_XXS", 256, 98, S::Later},   {19, "IQ1_S", 256, 50, S::Later},
    {20, "IQ4_NL", 32, 18, S::Later},     {21, "IQ3_S", 256, 110, S::Later},
    {22, "IQ2_S", 256, 82, S::Later},     {23, "IQ4_XS", 256, 136, S::Later},
    {24, "I8", 1, 1, S::NotAWeight},      {25, "I16", 1, 2, S::NotAWeight},
    {26, "I32", 1, 4, S::NotAWeight},     {27, "I64", 1, 8, S::NotAWeight},
    {28, "F64", 1, 8, S::NotAWeight},     {29, "IQ1_M", 256, 56, S::Later},
    {30, "BF16", 1, 2, S::Supported},     {34, "TQ1_0", 256, 54, S::Later},
    {35, "TQ2_0", 256, 66, S::Later},
};

TEST(DTypeTest, TableMatchesGguf) {
  for (const Row &row : kExpected) {
    const DTypeInfo *info = lookupDType(row.id);
    ASSERT_NE(info, nullptr) << "id " << row.id;
    EXPECT_EQ(static_cast<uint32_t>(info->dtype), row.id);
    EXPECT_STREQ(info->name, row.name);
    EXPECT_EQ(info->blockSize, row.blockSize) << row.name;
    EXPECT_EQ(info->bytesPerBlock, row.bytesPerBlock) << row.name;
    EXPECT_EQ(info->support, row.support) << row.name;
    EXPECT_EQ(&dtypeInfo(info->dtype), info);
    EXPECT_EQ(dtypeName(info->dtype), row.name);
  }
}

TEST(DTypeTest, IdsThatNameNoFormat) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 1000u, 0xffffffffu}) {
    EXPECT_EQ(lookupDType(id), nullptr) << id;
    EXPECT_EQ(dtypeName(static_cast<DType>(id)), "unknown(" + std::to_string(id) + ")");
  }
  int known = 0;
  for (uint32_t id = 0; id < 64; ++id)
    known += lookupDType(id) != nullptr;
  EXPECT_EQ(known, int(sizeof(kExpected) / sizeof(kExpected[0])));
}

TEST(DTypeTest, ParseDType) {
  DType t = DType::F32;
  EXPECT_TRUE(parseDType("q4_k", &t));
  EXPECT_EQ(t, DType::Q4_K);
  EXPECT_TRUE(parseDType("Q4_0", &t));
  EXPECT_EQ(t, DType::Q4_0);
  EXPECT_TRUE(parseDType("bf16", &t));
  EXPECT_EQ(t, DType::BF16);
  EXPECT_TRUE(parseDType("iq2_XxS", &t));
  EXPECT_EQ(t, DType::IQ2_XXS);
  for (const Row &row : kExpected) {
    ASSERT_TRUE(parseDType(row.name, &t)) << row.name;
    EXPECT_EQ(static_cast<uint32_t>(t), row.id);
  }
  t = DType::Q6_K;
  for (const char *bad : {"", "q4", "Q4_0x", "Q4-0", "f32 ", "unknown(4)"})
    EXPECT_FALSE(parseDType(bad, &t)) << bad;
  EXPECT_EQ(t, DType::Q6_K) << "a failed parse leaves the output alone";
}

TEST(DTypeTest, CheckWeightDType) {
  for (const Row &row : kExpected) {
    absl::Status s = checkWeightDType(static_cast<DType>(row.id), "qmatmul");
    switch (row.support) {
    case S::Supported:
      EXPECT_TRUE(s.ok()) << row.name << ": " << s;
      break;
    case S::Later:
      EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << row.name;
      EXPECT_EQ(s.message(), std::string("qmatmul: dtype ") + row.name + " (id " +
                                 std::to_string(row.id) + ") is not supported yet");
      break;
    case S::NotAWeight:
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << row.name;
      EXPECT_EQ(s.message(), std::string("qmatmul: dtype ") + row.name + " (id " +
                                 std::to_string(row.id) + ") is not a weight format");
      break;
    }
  }
  absl::Status s = checkWeightDType(static_cast<DType>(4), "quantized_matmul");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "quantized_matmul: dtype id 4 is not a GGUF weight format");
  s = checkWeightDType(static_cast<DType>(36), "qmatmul");
  EXPECT_EQ(s.message(), "qmatmul: dtype id 36 is not a GGUF weight format");
}

TEST(DTypeTest, RowBytes) {
  EXPECT_EQ(rowBytes(dtypeInfo(DType::Q4_K), 512), 288u);
  EXPECT_EQ(rowBytes(dtypeInfo(DType::Q4_0), 64), 36u);
  EXPECT_EQ(rowBytes(dtypeInfo(DType::F16), 3), 6u);
  EXPECT_EQ(rowBytes(dtypeInfo(DType::Q6_K), 0), 0u);
  EXPECT_EQ(rowBytes(dtypeInfo(DType::Q8_0), uint64_t(1) << 36), (uint64_t(1) << 31) * 34);
}

} // namespace
} // namespace sinter
