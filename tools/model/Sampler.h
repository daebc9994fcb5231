// Sampler.h - picks the next token from logits: greedy, or temperature with top-p (nucleus).
//
// Sampling is seeded, so a run with the same seed, model and backend picks the same tokens; the
// generator is the project's own (splitmix64) so results do not depend on the C++ library.
#ifndef SINTER_TOOLS_MODEL_SAMPLER_H
#define SINTER_TOOLS_MODEL_SAMPLER_H

#include <cstdint>

#include "absl/types/span.h"

namespace sinter::model {

/// How to sample.
struct SamplerOptions {
  float temperature = 0.0f; ///< 0 (or less): greedy argmax
  float topP = 1.0f;        ///< keep the smallest set of tokens whose probability reaches topP
  uint64_t seed = 1;
};

/// Index of the largest value (the first one on ties); 0 for an empty span. NaN is never chosen
/// unless every value is NaN.
uint32_t argmax(absl::Span<const float> logits);

/// A seeded sampler.
class Sampler {
public:
  explicit Sampler(SamplerOptions options);
  /// The next token for `logits` (one per vocabulary entry).
  uint32_t sample(absl::Span<const float> logits);

private:
  double uniform(); ///< in [0, 1)
  SamplerOptions options_;
  uint64_t state_;
};

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_SAMPLER_H
