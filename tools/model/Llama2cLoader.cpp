// Llama2cLoader.cpp - llama2.c checkpoint reading (and writing, for tests).
//
// The whole expected size is computed from the header (in 64-bit, after the header is validated)
// and compared with the file size before any tensor is copied, so a truncated or padded file is
// one clear error and never a read past the end.
#include "tools/model/Llama2cLoader.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sinter/Status.h"
#include "tools/model/MappedFile.h"

namespace sinter::model {
namespace {

constexpr uint64_t kHeaderBytes = 7 * sizeof(int32_t);

// Sizes, in floats, of the sections after the header, in file order.
struct Layout {
  uint64_t embed, norm, wq, wkv, wo, ffn, final, ropeTables, cls;
  uint64_t totalFloats() const {
    return embed + 2 * norm + wq + 2 * wkv + wo + 3 * ffn + final + ropeTables + cls;
  }
};

Layout layoutOf(const ModelConfig &c, bool shared) {
  const uint64_t L = c.nLayers, dim = c.dim, kv = c.kvDim(), hidden = c.hiddenDim;
  Layout s;
  s.embed = uint64_t(c.vocabSize) * dim;
  s.norm = L * dim;
  s.wq = L * dim * dim;
  s.wkv = L * kv * dim;
  s.wo = L * dim * dim;
  s.ffn = L * hidden * dim;
  s.final = dim;
  s.ropeTables = uint64_t(c.seqLen) * c.headDim(); // two tables of seq_len * head_size / 2
  s.cls = shared ? 0 : s.embed;
  return s;
}

// Reads consecutive f32 tensors from the checked span.
class Cursor {
public:
  explicit Cursor(const uint8_t *p) : p_(p) {}
  WeightTensor take(uint64_t rows, uint64_t cols) {
    WeightTensor t;
    t.rows = rows;
    t.cols = cols;
    t.data.assign(p_, p_ + rows * cols * sizeof(float));
    p_ += t.data.size();
    return t;
  }
  void skip(uint64_t floats) { p_ += floats * sizeof(float); }

private:
  const uint8_t *p_;
};

} // namespace

absl::StatusOr<ModelWeights> parseLlama2c(absl::Span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes)
    return absl::InvalidArgumentError(absl::StrFormat(
        "llama2c: file holds %u bytes, the header needs %u", bytes.size(), kHeaderBytes));
  int32_t h[7];
  std::memcpy(h, bytes.data(), kHeaderBytes);
  for (int i = 0; i < 7; ++i) {
    if (h[i] == 0 || (h[i] < 0 && i != 5) || h[i] == INT32_MIN)
      return absl::InvalidArgumentError(absl::StrFormat(
          "llama2c: header field %d is %d; expected dim, hidden_dim, n_layers, n_heads, "
          "n_kv_heads, vocab_size, seq_len (positive; vocab_size may be negative)",
          i, h[i]));
  }
  const bool shared = h[5] > 0;
  ModelWeights w;
  ModelConfig &c = w.config;
  c.dim = uint32_t(h[0]);
  c.hiddenDim = uint32_t(h[1]);
  c.nLayers = uint32_t(h[2]);
  c.nHeads = uint32_t(h[3]);
  c.nKvHeads = uint32_t(h[4]);
  c.vocabSize = uint32_t(shared ? h[5] : -h[5]);
  c.seqLen = uint32_t(h[6]);
  c.ropeBase = 10000.0f;
  c.eps = 1e-5f;
  if (absl::Status s = validateConfig(c); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat("llama2c: ", s.message()));

  const Layout s = layoutOf(c, shared);
  const uint64_t expected = kHeaderBytes + s.totalFloats() * sizeof(float);
  if (bytes.size() != expected)
    return absl::InvalidArgumentError(
        absl::StrFormat("llama2c: file holds %u bytes, the header (%s, %s classifier) implies %u",
                        bytes.size(), describeConfig(c), shared ? "shared" : "separate", expected));

  const uint64_t L = c.nLayers, dim = c.dim, kv = c.kvDim(), hidden = c.hiddenDim;
  Cursor cur(bytes.data() + kHeaderBytes);
  w.tokenEmbedding = cur.take(c.vocabSize, dim);
  w.layers.resize(L);
  for (auto &layer : w.layers)
    layer.attnNorm = cur.take(1, dim);
  for (auto &layer : w.layers)
    layer.wq = cur.take(dim, dim);
  for (auto &layer : w.layers)
    layer.wk = cur.take(kv, dim);
  for (auto &layer : w.layers)
    layer.wv = cur.take(kv, dim);
  for (auto &layer : w.layers)
    layer.wo = cur.take(dim, dim);
  for (auto &layer : w.layers)
    layer.ffnNorm = cur.take(1, dim);
  for (auto &layer : w.layers)
    layer.gate = cur.take(hidden, dim);
  for (auto &layer : w.layers)
    layer.down = cur.take(dim, hidden);
  for (auto &layer : w.layers)
    layer.up = cur.take(hidden, dim);
  w.outputNorm = cur.take(1, dim);
  cur.skip(s.ropeTables);
  if (!shared)
    w.output = cur.take(c.vocabSize, dim);
  return w;
}

absl::StatusOr<ModelWeights> loadLlama2c(const std::string &path) {
  SINTER_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::open(path));
  absl::StatusOr<ModelWeights> w = parseLlama2c(file->bytes());
  if (!w.ok())
    return absl::Status(w.status().code(), absl::StrCat(path, ": ", w.status().message()));
  return w;
}

absl::StatusOr<std::vector<uint8_t>> serializeLlama2c(const ModelWeights &w) {
  SINTER_RETURN_IF_ERROR(validateWeights(w));
  for (const NamedTensor &nt : namedTensors(w)) {
    if (nt.tensor->dtype != DType::F32)
      return absl::InvalidArgumentError(
          absl::StrCat("llama2c: ", nt.name, " is ", dtypeName(nt.tensor->dtype), ", not F32"));
  }
  const ModelConfig &c = w.config;
  const bool shared = w.sharedClassifier();
  std::vector<uint8_t> out(kHeaderBytes);
  const int32_t h[7] = {int32_t(c.dim),      int32_t(c.hiddenDim),
                        int32_t(c.nLayers),  int32_t(c.nHeads),
                        int32_t(c.nKvHeads), shared ? int32_t(c.vocabSize) : -int32_t(c.vocabSize),
                        int32_t(c.seqLen)};
  std::memcpy(out.data(), h, kHeaderBytes);
  auto put = [&out](const WeightTensor &t) { out.insert(out.end(), t.data.begin(), t.data.end()); };
  put(w.tokenEmbedding);
  const WeightTensor LayerWeights::*order[] = {
      &LayerWeights::attnNorm, &LayerWeights::wq,   &LayerWeights::wk,
      &LayerWeights::wv,       &LayerWeights::wo,   &LayerWeights::ffnNorm,
      &LayerWeights::gate,     &LayerWeights::down, &LayerWeights::up};
  for (auto member : order)
    for (const LayerWeights &layer : w.layers)
      put(layer.*member);
  put(w.outputNorm);
  out.resize(out.size() + layoutOf(c, shared).ropeTables * sizeof(float), 0);
  if (!shared)
    put(w.output);
  return out;
}

} // namespace sinter::model
