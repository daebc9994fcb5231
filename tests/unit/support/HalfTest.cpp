// HalfTest.cpp - tests of the IEEE half and bfloat16 conversions in support/Quant.cpp.
//
// Every half value is checked against its definition (sign, exponent, mantissa), every float to
// half result against round-to-nearest-even by looking at its neighbours, and the tie, overflow,
// subnormal and NaN cases one by one.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "QuantTestUtil.h"
#include "support/Quant.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using test::bitsOf;
using test::floatOf;

// The value of half `h` from the binary16 definition, in double.
double halfValue(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  if (exp == 0x1f)
    mag = mant ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  return sign ? -mag : mag;
}

TEST(HalfTest, EveryHalfConvertsToItsValueAndBack) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = halfToFloat(uint16_t(h));
    double expected = halfValue(uint16_t(h));
    bool isNan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
    if (isNan) {
      ASSERT_TRUE(std::isnan(f)) << "half " << h;
      ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << "half " << h;
      // A NaN comes back quiet with its payload: the quiet bit (0x200) set, nothing else changed.
      ASSERT_EQ(floatToHalf(f), uint16_t(h | 0x200)) << "half " << h;
      continue;
    }
    ASSERT_EQ(double(f), expected) << "half " << h;
    ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << "half " << h;
    ASSERT_EQ(floatToHalf(f), uint16_t(h)) << "half " << h;
  }
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0xc000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));    // smallest subnormal
  EXPECT_EQ(halfToFloat(0x03ff), std::ldexp(1023.0f, -24)); // largest subnormal
  EXPECT_EQ(halfToFloat(0x0400), std::ldexp(1.0f, -14));    // smallest normal
  EXPECT_EQ(halfToFloat(0x7c00), INFINITY);
  EXPECT_EQ(halfToFloat(0xfc00), -INFINITY);
  EXPECT_EQ(bitsOf(halfToFloat(0x8000)), 0x80000000u); // -0 keeps its sign
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(0.333251953125f), 0x3555);
}

TEST(HalfTest, TiesRoundToEven) {
  // 1 + 2^-11 is halfway between 1 (0x3c00, even) and 1 + 2^-10 (0x3c01).
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 0x3c01 and 0x3c02 (even).
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above a tie rounds up, just below rounds down.
  EXPECT_EQ(floatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  EXPECT_EQ(floatToHalf(std::nextafter(1.0f + 3 * std::ldexp(1.0f, -11), 0.0f)), 0x3c01);
  EXPECT_EQ(floatToHalf(-(1.0f + std::ldexp(1.0f, -11))), 0xbc00);
  // A carry out of the mantissa moves to the next binade: 2 - 2^-12 rounds to 2.
  EXPECT_EQ(floatToHalf(2.0f - std::ldexp(1.0f, -12)), 0x4000);
}

TEST(HalfTest, OverflowGoesToInfinity) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff); // below the tie
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00); // tie between 65504 and 2^16: even is 2^16 = inf
  EXPECT_EQ(floatToHalf(-65520.0f), 0xfc00);
  EXPECT_EQ(floatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(floatToHalf(INFINITY), 0x7c00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfc00);
}

TEST(HalfTest, SubnormalsRoundToNearestEven) {
  float unit = std::ldexp(1.0f, -24);
  EXPECT_EQ(floatToHalf(unit), 0x0001);
  EXPECT_EQ(floatToHalf(0.5f * unit), 0x0000); // tie between 0 and 1 unit: 0 is even
  EXPECT_EQ(floatToHalf(-0.5f * unit), 0x8000);
  EXPECT_EQ(floatToHalf(std::nextafter(0.5f * unit, 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(1.5f * unit), 0x0002);    // tie between 1 and 2 units
  EXPECT_EQ(floatToHalf(2.5f * unit), 0x0002);    // tie between 2 and 3 units
  EXPECT_EQ(floatToHalf(1023.5f * unit), 0x0400); // tie up into the smallest normal
  EXPECT_EQ(floatToHalf(0.25f * unit), 0x0000);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::denorm_min()), 0x8000);
}

TEST(HalfTest, NanStaysNan) {
  uint16_t h = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h & 0x7c00, 0x7c00);
  EXPECT_NE(h & 0x3ff, 0);
  // A signalling NaN whose payload sits only in the low float bits must not become infinity.
  uint16_t s = floatToHalf(floatOf(0xff800001u));
  EXPECT_EQ(s & 0xfc00, 0xfc00);
  EXPECT_NE(s & 0x3ff, 0);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7c01)));
}

// For random finite floats in the half range, the result is a nearest half, and an even one on a
// tie. The neighbours of a positive half h are h - 1 and h + 1 (0x7c00 standing for 2^16).
TEST(HalfTest, RandomFloatsRoundToANearestHalf) {
  std::mt19937 rng(1234);
  auto value = [](uint32_t h) { return h == 0x7c00 ? 65536.0 : halfValue(uint16_t(h)); };
  for (int i = 0; i < 200000; ++i) {
    float f = floatOf(rng() & 0x7fffffffu);
    if (!(f < 65520.0f))
      continue;
    uint16_t h = floatToHalf(f);
    ASSERT_LT(h, 0x7c00) << f;
    double err = std::fabs(value(h) - f);
    double below = h > 0 ? std::fabs(value(h - 1u) - f) : INFINITY;
    double above = std::fabs(value(h + 1u) - f);
    ASSERT_LE(err, below) << f;
    ASSERT_LE(err, above) << f;
    if (err == below || err == above) {
      ASSERT_EQ(h & 1, 0) << "tie not to even at " << f;
    }
    ASSERT_EQ(floatToHalf(-f), uint16_t(h | 0x8000)) << f;
  }
}

TEST(Bf16Test, EveryBf16ConvertsAndBack) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = bf16ToFloat(uint16_t(b));
    ASSERT_EQ(bitsOf(f), b << 16);
    if (std::isnan(f))
      ASSERT_EQ(floatToBf16(f), uint16_t(b | 0x40)) << b; // quieted, payload kept
    else
      ASSERT_EQ(floatToBf16(f), uint16_t(b)) << b;
  }
}

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(bf16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(floatToBf16(floatOf(0x3f808000u)), 0x3f80); // tie: 0x3f80 is even
  EXPECT_EQ(floatToBf16(floatOf(0x3f818000u)), 0x3f82); // tie: 0x3f82 is even
  EXPECT_EQ(floatToBf16(floatOf(0x3f808001u)), 0x3f81); // above the tie
  EXPECT_EQ(floatToBf16(floatOf(0x3f807fffu)), 0x3f80); // below the tie
  EXPECT_EQ(floatToBf16(floatOf(0xbf808000u)), 0xbf80);
  EXPECT_EQ(floatToBf16(floatOf(0x3fffffffu)), 0x4000); // carry into the exponent
  EXPECT_EQ(floatToBf16(floatOf(0x00008000u)), 0x0000); // subnormal tie
  EXPECT_EQ(floatToBf16(floatOf(0x00018000u)), 0x0002);
}

TEST(Bf16Test, InfinityAndNan) {
  EXPECT_EQ(floatToBf16(INFINITY), 0x7f80);
  EXPECT_EQ(floatToBf16(-INFINITY), 0xff80);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80); // rounds up to infinity
  EXPECT_EQ(floatToBf16(floatOf(0x7f800001u)), 0x7fc0); // signalling NaN becomes quiet, not inf
  EXPECT_EQ(floatToBf16(floatOf(0xff800001u)), 0xffc0);
  EXPECT_EQ(floatToBf16(floatOf(0x7fc12345u)), 0x7fc1);
  EXPECT_TRUE(std::isnan(bf16ToFloat(0x7fc0)));
  EXPECT_EQ(bf16ToFloat(0x7f80), INFINITY);
}

} // namespace
} // namespace sinter
