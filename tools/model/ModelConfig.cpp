// ModelConfig.cpp - validation, printing and the preset table of model shapes.
//
// The preset shapes are those of the published models (TinyLlama 1.1B, Llama 7B, Karpathy's
// stories260K); only the shape is taken, the weights are generated (Synthetic.cpp).
#include "tools/model/ModelConfig.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace sinter::model {

bool operator==(const ModelConfig &a, const ModelConfig &b) {
  return a.dim == b.dim && a.hiddenDim == b.hiddenDim && a.nLayers == b.nLayers &&
         a.nHeads == b.nHeads && a.nKvHeads == b.nKvHeads && a.vocabSize == b.vocabSize &&
         a.seqLen == b.seqLen && a.ropeBase == b.ropeBase && a.eps == b.eps;
}

absl::Status validateConfig(const ModelConfig &c) {
  // Caps keep every size computed from a config (L * hidden * dim * 4 bytes and the like) far
  // from 64-bit overflow, so loaders can compare them with file sizes safely.
  constexpr uint32_t kMaxDim = 1u << 17;
  constexpr uint32_t kMaxLayers = 1u << 12;
  constexpr uint32_t kMaxVocab = 1u << 24;
  struct Field {
    const char *name;
    uint32_t value;
    uint32_t max;
  };
  const Field fields[] = {{"dim", c.dim, kMaxDim},
                          {"hidden_dim", c.hiddenDim, kMaxDim},
                          {"n_layers", c.nLayers, kMaxLayers},
                          {"n_heads", c.nHeads, kMaxDim},
                          {"n_kv_heads", c.nKvHeads, kMaxDim},
                          {"vocab_size", c.vocabSize, kMaxVocab},
                          {"seq_len", c.seqLen, kMaxVocab}};
  for (const Field &f : fields) {
    if (f.value == 0 || f.value > f.max)
      return absl::InvalidArgumentError(
          absl::StrFormat("model: %s is %u, must be in 1..%u", f.name, f.value, f.max));
  }
  if (c.dim % c.nHeads != 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("model: dim %u is not a multiple of n_heads %u", c.dim, c.nHeads));
  if (c.nKvHeads > c.nHeads || c.nHeads % c.nKvHeads != 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "model: n_heads %u is not a multiple of n_kv_heads %u", c.nHeads, c.nKvHeads));
  if (c.headDim() % 2 != 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("model: head size %u is odd (rope rotates pairs)", c.headDim()));
  // rope's own rule (docs/CONTRACT.md), checked at load rather than at the first token.
  if (!std::isfinite(c.ropeBase) || c.ropeBase < 1.0f)
    return absl::InvalidArgumentError(
        absl::StrCat("model: rope base ", c.ropeBase, " is not finite and at least 1"));
  if (!std::isfinite(c.eps) || c.eps < 0.0f)
    return absl::InvalidArgumentError(absl::StrCat("model: rms eps ", c.eps, " is not >= 0"));
  return absl::OkStatus();
}

std::string describeConfig(const ModelConfig &c) {
  return absl::StrFormat("dim %u, hidden %u, layers %u, heads %u, kv heads %u, vocab %u, seq %u, "
                         "rope base %g, eps %g",
                         c.dim, c.hiddenDim, c.nLayers, c.nHeads, c.nKvHeads, c.vocabSize, c.seqLen,
                         c.ropeBase, c.eps);
}

const std::vector<Preset> &presets() {
  // dim, hidden, layers, heads, kv heads, vocab, seq, rope base, eps
  static const std::vector<Preset> kPresets = {
      {"stories260K", {64, 172, 5, 8, 4, 512, 512, 10000.0f, 1e-5f}, true},
      {"tinyllama-1.1b", {2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f, 1e-5f}, false},
      {"llama-7b", {4096, 11008, 32, 32, 32, 32000, 2048, 10000.0f, 1e-6f}, false},
      {"micro", {256, 512, 2, 4, 2, 256, 64, 10000.0f, 1e-5f}, false},
      {"nano", {32, 64, 1, 4, 2, 32, 16, 10000.0f, 1e-5f}, false},
  };
  return kPresets;
}

absl::StatusOr<Preset> findPreset(std::string_view name) {
  std::vector<std::string> names;
  for (const Preset &p : presets()) {
    if (name == p.name)
      return p;
    names.push_back(p.name);
  }
  return absl::NotFoundError(absl::StrCat("unknown preset '", std::string(name),
                                          "' (known: ", absl::StrJoin(names, ", "), ")"));
}

uint64_t parameterCount(const ModelConfig &c, bool sharedClassifier) {
  const uint64_t dim = c.dim, hidden = c.hiddenDim, kv = c.kvDim();
  const uint64_t perLayer = 2 * dim + 2 * dim * dim + 2 * dim * kv + 3 * dim * hidden;
  const uint64_t embed = uint64_t(c.vocabSize) * dim;
  return embed + c.nLayers * perLayer + dim + (sharedClassifier ? 0 : embed);
}

} // namespace sinter::model
