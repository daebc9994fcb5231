// TiledWeightsTest.cpp - GGUF Q4_0 to the tiled layout and back (codegen/TiledWeights.h): where
// each block's scale and quants land, the round trip, and the shapes that have no tiled layout.
#include "codegen/TiledWeights.h"

#include <cstring>
#include <random>

#include <gtest/gtest.h>

namespace sinter::codegen {
namespace {

std::vector<uint8_t> randomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (uint8_t &v : b)
    v = static_cast<uint8_t>(rng());
  return b;
}

TEST(TiledWeightsTest, BlocksLandWhereTheLayoutSays) {
  const int64_t rows = 64, cols = 96, blocks = cols / 32;
  std::vector<uint8_t> gguf = randomBytes(rows * blocks * 18, 3);
  absl::StatusOr<std::vector<uint8_t>> tiled = tileQ4_0(gguf, rows, cols);
  ASSERT_TRUE(tiled.ok()) << tiled.status();
  ASSERT_EQ(tiled->size(), gguf.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t *block = gguf.data() + (r * blocks + b) * 18;
      const int64_t q = ((r / 32) * blocks + b) * 32 + r % 32;
      const int64_t scales = 16 * rows * blocks;
      EXPECT_EQ(0, std::memcmp(tiled->data() + 16 * q, block + 2, 16)) << r << " " << b;
      EXPECT_EQ(0, std::memcmp(tiled->data() + scales + 2 * q, block, 2)) << r << " " << b;
    }
}

TEST(TiledWeightsTest, RoundTrips) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{32, 32}, {96, 3104}, {128, 4096}}) {
    std::vector<uint8_t> gguf = randomBytes(rows * cols / 32 * 18, 5);
    absl::StatusOr<std::vector<uint8_t>> tiled = tileQ4_0(gguf, rows, cols);
    ASSERT_TRUE(tiled.ok()) << tiled.status();
    EXPECT_NE(*tiled, gguf) << rows << "x" << cols;
    absl::StatusOr<std::vector<uint8_t>> back = untileQ4_0(*tiled, rows, cols);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, gguf) << rows << "x" << cols;
  }
}

TEST(TiledWeightsTest, ShapesWithoutALayoutAreRefused) {
  EXPECT_TRUE(canTileQ4_0(4096, 11008));
  EXPECT_FALSE(canTileQ4_0(70, 256)); // rows not a multiple of 32
  EXPECT_FALSE(canTileQ4_0(64, 48));  // columns not whole blocks
  EXPECT_FALSE(canTileQ4_0(0, 256));
  std::vector<uint8_t> bytes(70 * 8 * 18);
  absl::StatusOr<std::vector<uint8_t>> t = tileQ4_0(bytes, 70, 256);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("70 x 256"), std::string::npos) << t.status();
  absl::StatusOr<std::vector<uint8_t>> few = untileQ4_0(std::vector<uint8_t>(9215), 64, 256);
  ASSERT_FALSE(few.ok()) << "64 x 256 needs 9216 bytes";
  EXPECT_NE(few.status().message().find("need 9216"), std::string::npos) << few.status();
}

} // namespace
} // namespace sinter::codegen
