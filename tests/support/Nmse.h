// Nmse.h - SEMANTICS.md's numerical agreement check for tests.
//
// Normalized mean squared error sum((out-ref)^2) / sum(ref^2), with NaN and infinities never
// passing (unless the reference has the same there: nmseWithinMatchingNaN). Every backend test and
// the conformance runner use this one definition, so "agrees with the reference" means the same
// thing everywhere.
#ifndef SINTER_TESTS_SUPPORT_NMSE_H
#define SINTER_TESTS_SUPPORT_NMSE_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "tests/support/TestData.h"
#include "gtest/gtest.h"

namespace sinter::test {

/// Tolerance for f32 ops (SEMANTICS.md).
inline constexpr double kF32Tolerance = 1e-7;
/// Tolerance where a kernel quantizes activations (SEMANTICS.md).
inline constexpr double kQuantizedActivationTolerance = 5e-4;

/// Passes when out and ref have the same length, every value of both is finite, and the NMSE is
/// at most `tolerance`. An all-zero ref passes only an all-zero out. The failure message gives the
/// NMSE and the worst element.
template <typename Ref>
::testing::AssertionResult nmseWithin(absl::Span<const float> out, absl::Span<const Ref> ref,
                                      double tolerance) {
  if (out.size() != ref.size())
    return ::testing::AssertionFailure()
           << "length " << out.size() << " differs from the reference's " << ref.size();
  double err = 0.0, norm = 0.0, worst = -1.0;
  size_t worstIndex = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    double o = out[i], r = double(ref[i]);
    if (!std::isfinite(o) || !std::isfinite(r))
      return ::testing::AssertionFailure()
             << "element " << i << " is not finite: out " << o << ", ref " << r;
    double d = (o - r) * (o - r);
    err += d;
    norm += r * r;
    if (d > worst) {
      worst = d;
      worstIndex = i;
    }
  }
  double nmse = norm > 0.0 ? err / norm : (err > 0.0 ? INFINITY : 0.0);
  if (nmse <= tolerance)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << absl::StrFormat(
             "nmse %.3g exceeds %.3g over %d elements; worst element %d: out %.9g, ref %.9g", nmse,
             tolerance, out.size(), worstIndex, out[worstIndex], double(ref[worstIndex]));
}

/// nmseWithin, except where the reference is not finite: a NaN there asks for a NaN in `out` (any
/// NaN but the unwritten-element poison, kPoisonBits) and an infinity for the same infinity, and
/// those elements are left out of the NMSE. For inputs that make the reference NaN (a NaN in an
/// rms_norm row): a kernel must pass the NaN on, never turn it into a number. A non-finite `out`
/// where the reference is finite still fails.
template <typename Ref>
::testing::AssertionResult nmseWithinMatchingNaN(absl::Span<const float> out,
                                                 absl::Span<const Ref> ref, double tolerance) {
  if (out.size() != ref.size())
    return nmseWithin(out, ref, tolerance);
  std::vector<float> finiteOut;
  std::vector<Ref> finiteRef;
  for (size_t i = 0; i < out.size(); ++i) {
    double o = out[i], r = double(ref[i]);
    if (std::isfinite(r)) {
      finiteOut.push_back(out[i]);
      finiteRef.push_back(ref[i]);
      continue;
    }
    uint32_t bits;
    std::memcpy(&bits, &out[i], sizeof(bits));
    bool same = std::isnan(r) ? std::isnan(o) && bits != kPoisonBits : o == r;
    if (!same)
      return ::testing::AssertionFailure()
             << "element " << i << ": out " << o << (bits == kPoisonBits ? " (unwritten)" : "")
             << ", ref " << r << " (a non-finite reference asks for the same)";
  }
  return nmseWithin<Ref>(finiteOut, finiteRef, tolerance);
}

/// EXPECTs nmseWithin(out, ref, tolerance); `what` names the comparison in the failure.
inline void expectNmse(absl::Span<const float> out, absl::Span<const double> ref,
                       double tolerance = kF32Tolerance, const std::string &what = "") {
  EXPECT_TRUE(nmseWithin(out, ref, tolerance)) << what;
}
inline void expectNmse(absl::Span<const float> out, absl::Span<const float> ref,
                       double tolerance = kF32Tolerance, const std::string &what = "") {
  EXPECT_TRUE(nmseWithin(out, ref, tolerance)) << what;
}

} // namespace sinter::test

#endif // SINTER_TESTS_SUPPORT_NMSE_H
