// Synthetic.h - deterministic random Llama models of any shape, quantized to a chosen dtype.
//
// Benchmarks and tests need realistic model sizes without downloads: the generator fills every
// tensor from a seeded xoshiro256** stream per row (so the result does not depend on the number of
// threads), with weights scaled so that activations stay finite through any number of layers.
#ifndef SINTER_TOOLS_MODEL_SYNTHETIC_H
#define SINTER_TOOLS_MODEL_SYNTHETIC_H

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sinter/DType.h"
#include "tools/model/ModelConfig.h"
#include "tools/model/ModelWeights.h"

namespace sinter::model {

/// How to generate.
struct SyntheticOptions {
  DType dtype = DType::F32; ///< format of the matrices and the token embedding
  /// A mix (WeightMix::Q4_K_M with dtype Q4_K, ...) assigns formats per tensor (tensorFormat).
  WeightMix mix = WeightMix::None;
  uint64_t seed = 1;
  unsigned threads = 0;  ///< 0: one per hardware thread
  bool withVocab = true; ///< a made-up vocabulary "<unk>", "<s>", "</s>", "▁w3", "▁w4", ...
  /// Leave every tensor all zero bytes (shapes and formats as usual): for tests that look only at
  /// the calls a model makes (kernel counts), which then skip generating a billion weights.
  bool zeroWeights = false;
};

/// A model of shape `config`. Matrices are uniform with standard deviation 1/sqrt(row length)
/// (the token embedding 1/sqrt(dim)), norm weights 1 + U(-0.1, 0.1); all drawn as f32 and then
/// quantized, each tensor to tensorFormat({dtype, mix}, ...). A matrix whose row length is not a
/// whole number of `dtype` blocks (for a mix: of its fallback's either) stays F32 and its name is
/// appended to `keptF32` (when given). InvalidArgument for an unusable shape,
/// Unimplemented for a dtype quantizeRow cannot write.
absl::StatusOr<ModelWeights> generateSynthetic(const ModelConfig &config, bool sharedClassifier,
                                               const SyntheticOptions &options,
                                               std::vector<std::string> *keptF32 = nullptr);

/// generateSynthetic for a preset (findPreset).
absl::StatusOr<ModelWeights> generatePreset(const std::string &preset,
                                            const SyntheticOptions &options,
                                            std::vector<std::string> *keptF32 = nullptr);

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_SYNTHETIC_H
