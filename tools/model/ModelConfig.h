// ModelConfig.h - the shape of a Llama-family model and its named presets.
//
// One struct serves every loader (llama2.c, GGUF) and the synthetic generator, so the decoder sees
// one description of a model whatever file it came from. validate() is the single place where a
// shape is checked before anything is allocated from it.
#ifndef SINTER_TOOLS_MODEL_MODELCONFIG_H
#define SINTER_TOOLS_MODEL_MODELCONFIG_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sinter::model {

/// The dimensions and constants of a Llama-family transformer.
struct ModelConfig {
  uint32_t dim = 0;       ///< hidden size (embedding length)
  uint32_t hiddenDim = 0; ///< feed-forward inner size
  uint32_t nLayers = 0;
  uint32_t nHeads = 0;
  uint32_t nKvHeads = 0;
  uint32_t vocabSize = 0;
  uint32_t seqLen = 0; ///< context length the model was trained for
  float ropeBase = 10000.0f;
  float eps = 1e-5f; ///< rms_norm epsilon

  uint32_t headDim() const { return nHeads ? dim / nHeads : 0; }
  uint32_t kvDim() const { return nHeads ? dim / nHeads * nKvHeads : 0; }

  friend bool operator==(const ModelConfig &a, const ModelConfig &b);
  friend bool operator!=(const ModelConfig &a, const ModelConfig &b) { return !(a == b); }
};

/// Ok when the shape is usable: every count positive, dims and heads at most 1 << 17, layers at
/// most 4096, vocab and seqLen at most 1 << 24, nHeads divides dim, nKvHeads divides nHeads, an
/// even head size, a finite rope base of at least 1 and eps. InvalidArgument naming the field and
/// the numbers otherwise.
absl::Status validateConfig(const ModelConfig &config);

/// "dim 64, hidden 172, layers 5, heads 8, kv heads 4, vocab 512, seq 512".
std::string describeConfig(const ModelConfig &config);

/// A named model shape for the synthetic generator.
struct Preset {
  const char *name;
  ModelConfig config;
  bool sharedClassifier; ///< the classifier is the token embedding (no output.weight)
};

/// Every preset: stories260K, tinyllama-1.1b, llama-7b, and the small test shapes micro
/// (every dtype's block size divides its rows) and nano (a few KB, for fuzz seeds).
const std::vector<Preset> &presets();

/// The preset called `name`; NotFound listing the known names otherwise.
absl::StatusOr<Preset> findPreset(std::string_view name);

/// Number of weights of the model (embedding, layers, norms, classifier when not shared).
uint64_t parameterCount(const ModelConfig &config, bool sharedClassifier);

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_MODELCONFIG_H
