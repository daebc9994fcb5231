// FuzzCompare.h - comparing what a fuzz graph read back against the reference backend's bytes.
//
// Compiled kernels round differently from the reference's double accumulation, so every buffer
// read back (each kFuzzDim vector, then the cache) must agree within SEMANTICS.md's f32 NMSE; an
// element the reference leaves non-finite must be the same kind of non-finite.
#ifndef SINTER_TESTS_SUPPORT_FUZZCOMPARE_H
#define SINTER_TESTS_SUPPORT_FUZZCOMPARE_H

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "tests/support/FuzzGraph.h"
#include "tests/support/Nmse.h"

namespace sinter::test {

inline std::vector<float> fuzzFloats(const std::vector<uint8_t> &bytes, size_t at, size_t count) {
  std::vector<float> out(count);
  std::memcpy(out.data(), bytes.data() + at * 4, count * 4);
  return out;
}

// "" when `got` agrees with `want` buffer by buffer.
inline std::string compareFuzzBytes(const std::vector<uint8_t> &got,
                                    const std::vector<uint8_t> &want) {
  if (got.size() != want.size())
    return absl::StrFormat("read back %d bytes, the reference %d", got.size(), want.size());
  const size_t floats = got.size() / 4;
  const size_t cacheFloats = kFuzzCacheRows * kFuzzDim;
  for (size_t at = 0; at < floats;) {
    const size_t n = floats - at == cacheFloats ? cacheFloats : kFuzzDim;
    std::vector<float> g = fuzzFloats(got, at, n), w = fuzzFloats(want, at, n);
    std::vector<float> gFinite, wFinite;
    for (size_t i = 0; i < n; ++i) {
      if (std::isfinite(w[i])) {
        gFinite.push_back(g[i]);
        wFinite.push_back(w[i]);
      } else if (std::isnan(w[i]) != std::isnan(g[i]) || (std::isinf(w[i]) && g[i] != w[i])) {
        return absl::StrFormat("float %d: %g where the reference has %g", at + i, g[i], w[i]);
      }
    }
    ::testing::AssertionResult close = nmseWithin<float>(gFinite, wFinite, kF32Tolerance);
    if (!close)
      return absl::StrFormat("%s at floats %d..%d: %s", n == cacheFloats ? "cache" : "vector", at,
                             at + n - 1, close.message());
    at += n;
  }
  return "";
}

} // namespace sinter::test

#endif // SINTER_TESTS_SUPPORT_FUZZCOMPARE_H
