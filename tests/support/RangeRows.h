// RangeRows.h - rms_norm inputs at the ends of f32's range, shared by the tests that check them.
//
// An f32 sum of squares overflows for rows near 1e18 and underflows for rows near 1e-25 or of
// subnormals; rms_norm must still give the reference's result wherever that result is finite
// (issue 40, part 6), and NaN where the reference gives NaN. The conformance table, the SPIR-V
// kernel tests and the CPU compiler tests all play these rows, on the standalone kernels and on
// every fused rms_norm -> quantized_matmul form.
#ifndef SINTER_TESTS_SUPPORT_RANGEROWS_H
#define SINTER_TESTS_SUPPORT_RANGEROWS_H

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace sinter::test {

/// One kind of row, with the eps it is normalized with.
struct RangeRow {
  enum class Kind : uint8_t {
    Huge,            ///< magnitudes in [1e18, 2e18), random signs (Σx² overflows f32)
    Tiny,            ///< magnitudes in [1e-25, 2e-25), random signs (every x² underflows)
    OneHugeManyTiny, ///< one 1e30 among magnitudes in [1e-30, 2e-30)
    Subnormal,       ///< subnormal magnitudes in [1e-41, 1e-39), random signs
    WithNaN,         ///< floats in [-1, 1) and one NaN: every output is NaN
    WithInf,         ///< floats in [-1, 1) and one +inf: NaN there, 0 elsewhere (as the reference)
  };
  Kind kind;
  const char *name; ///< letters, digits and '_'
  float eps;
};

/// The rows, in a fixed order. Tiny and subnormal rows come with eps = 0 (the result is then the
/// row over its own tiny rms) and with eps = 1e-5 (eps dominates: x w / sqrt(eps)).
inline const std::vector<RangeRow> &rangeRows() {
  static const auto *rows = new std::vector<RangeRow>{
      {RangeRow::Kind::Huge, "huge", 1e-5f},
      {RangeRow::Kind::Tiny, "tiny_eps0", 0.0f},
      {RangeRow::Kind::Tiny, "tiny", 1e-5f},
      {RangeRow::Kind::OneHugeManyTiny, "one_huge_many_tiny", 1e-5f},
      {RangeRow::Kind::Subnormal, "subnormal_eps0", 0.0f},
      {RangeRow::Kind::Subnormal, "subnormal", 1e-5f},
      {RangeRow::Kind::WithNaN, "nan", 1e-5f},
      {RangeRow::Kind::WithInf, "inf", 1e-5f},
  };
  return *rows;
}

/// `n` values of a row of `kind`, the same for the same seed on every platform (the magnitudes
/// and signs come from the raw generator, not a distribution).
inline std::vector<float> rangeRowValues(RangeRow::Kind kind, size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  auto unit = [&] { return float(rng() >> 8) / float(1u << 24); }; // [0, 1)
  auto signed1 = [&](double magnitude) {
    float m = float(magnitude * (1.0 + unit()));
    return (rng() & 1) ? -m : m;
  };
  std::vector<float> x(n);
  for (float &v : x) {
    switch (kind) {
    case RangeRow::Kind::Huge:
      v = signed1(1e18);
      break;
    case RangeRow::Kind::Tiny:
      v = signed1(1e-25);
      break;
    case RangeRow::Kind::OneHugeManyTiny:
      v = signed1(1e-30);
      break;
    case RangeRow::Kind::Subnormal: {
      // 1e-41 .. 1e-39: every one subnormal (below 2^-126 = 1.18e-38).
      float m = 1e-41f + float(unit() * 0.99e-39);
      v = (rng() & 1) ? -m : m;
      break;
    }
    case RangeRow::Kind::WithNaN:
    case RangeRow::Kind::WithInf:
      v = 2.0f * unit() - 1.0f;
      break;
    }
  }
  if (n == 0)
    return x;
  if (kind == RangeRow::Kind::OneHugeManyTiny)
    x[n / 3] = 1e30f;
  if (kind == RangeRow::Kind::WithNaN)
    x[n / 2] = std::numeric_limits<float>::quiet_NaN();
  if (kind == RangeRow::Kind::WithInf)
    x[n / 2] = std::numeric_limits<float>::infinity();
  return x;
}

} // namespace sinter::test

#endif // SINTER_TESTS_SUPPORT_RANGEROWS_H
