// ModelWeights.cpp - shape checks, (de)quantization and naming of a model's tensors.
//
// The names are GGUF's (llama.cpp's) tensor names; keeping them here means the GGUF reader, the
// writer and error messages of every loader agree on what a tensor is called.
#include "tools/model/ModelWeights.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sinter/Status.h"
#include "support/Quant.h"

namespace sinter::model {

uint64_t WeightTensor::rowBytes() const { return sinter::rowBytes(dtypeInfo(dtype), cols); }

bool operator==(const WeightTensor &a, const WeightTensor &b) {
  return a.dtype == b.dtype && a.rows == b.rows && a.cols == b.cols && a.data == b.data;
}

WeightTensor makeF32Tensor(uint64_t rows, uint64_t cols, const float *values) {
  WeightTensor t;
  t.rows = rows;
  t.cols = cols;
  t.data.resize(rows * cols * sizeof(float));
  if (!t.data.empty())
    std::memcpy(t.data.data(), values, t.data.size());
  return t;
}

namespace {

absl::Status checkData(const WeightTensor &t, const std::string &name) {
  const DTypeInfo &info = dtypeInfo(t.dtype);
  if (t.cols % info.blockSize != 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: row length %u is not a multiple of the %s block size %u", name, t.cols,
                        info.name, info.blockSize));
  if (t.rows != 0 && t.rowBytes() > t.data.size() / t.rows)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: holds %u bytes, %u rows of %u %s weights need %u", name, t.data.size(),
                        t.rows, t.cols, info.name, t.rows * t.rowBytes()));
  if (t.data.size() != t.rows * t.rowBytes())
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: holds %u bytes, %u rows need %u", name, t.data.size(), t.rows, t.rows * t.rowBytes()));
  return absl::OkStatus();
}

absl::Status checkShape(const WeightTensor &t, const std::string &name, uint64_t rows,
                        uint64_t cols) {
  if (t.rows != rows || t.cols != cols)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: shape [%u][%u] does not match the model's [%u][%u]", name, t.rows,
                        t.cols, rows, cols));
  return checkData(t, name);
}

} // namespace

absl::StatusOr<std::vector<float>> dequantizeTensor(const WeightTensor &t) {
  SINTER_RETURN_IF_ERROR(checkWeightDType(t.dtype, "dequantize"));
  SINTER_RETURN_IF_ERROR(checkData(t, "dequantize"));
  std::vector<float> out(t.rows * t.cols);
  const uint64_t rb = t.rowBytes();
  for (uint64_t r = 0; r < t.rows; ++r)
    dequantizeRow(t.dtype, t.data.data() + r * rb, out.data() + r * t.cols, t.cols);
  return out;
}

absl::StatusOr<WeightTensor> quantizeTensor(const WeightTensor &t, DType dtype) {
  if (t.dtype == dtype)
    return t;
  if (!canQuantize(dtype))
    return absl::UnimplementedError(
        absl::StrCat("quantize: cannot write ", dtypeName(dtype), " weights"));
  const DTypeInfo &info = dtypeInfo(dtype);
  if (t.cols % info.blockSize != 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("quantize: row length %u is not a multiple of the %s block size %u", t.cols,
                        info.name, info.blockSize));
  SINTER_ASSIGN_OR_RETURN(std::vector<float> values, dequantizeTensor(t));
  WeightTensor out;
  out.dtype = dtype;
  out.rows = t.rows;
  out.cols = t.cols;
  const uint64_t rb = out.rowBytes();
  out.data.resize(out.rows * rb);
  for (uint64_t r = 0; r < t.rows; ++r)
    SINTER_RETURN_IF_ERROR(
        quantizeRow(dtype, values.data() + r * t.cols, out.data.data() + r * rb, t.cols));
  return out;
}

std::vector<NamedTensor> namedTensors(const ModelWeights &w) {
  std::vector<NamedTensor> out;
  out.push_back({"token_embd.weight", &w.tokenEmbedding});
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights &L = w.layers[l];
    const std::string p = absl::StrCat("blk.", l, ".");
    out.push_back({p + "attn_norm.weight", &L.attnNorm});
    out.push_back({p + "attn_q.weight", &L.wq});
    out.push_back({p + "attn_k.weight", &L.wk});
    out.push_back({p + "attn_v.weight", &L.wv});
    out.push_back({p + "attn_output.weight", &L.wo});
    out.push_back({p + "ffn_norm.weight", &L.ffnNorm});
    out.push_back({p + "ffn_gate.weight", &L.gate});
    out.push_back({p + "ffn_up.weight", &L.up});
    out.push_back({p + "ffn_down.weight", &L.down});
  }
  out.push_back({"output_norm.weight", &w.outputNorm});
  if (!w.sharedClassifier())
    out.push_back({"output.weight", &w.output});
  return out;
}

absl::Status validateWeights(const ModelWeights &w) {
  const ModelConfig &c = w.config;
  SINTER_RETURN_IF_ERROR(validateConfig(c));
  if (w.layers.size() != c.nLayers)
    return absl::InvalidArgumentError(
        absl::StrFormat("model: %u layers of weights, config says %u", w.layers.size(), c.nLayers));
  for (const NamedTensor &nt : namedTensors(w)) {
    const WeightTensor &t = *nt.tensor;
    const bool isNorm = nt.name.find("norm") != std::string::npos;
    if (isNorm && t.dtype != DType::F32)
      return absl::InvalidArgumentError(
          absl::StrCat(nt.name, ": norm weights must be F32, not ", dtypeName(t.dtype)));
    SINTER_RETURN_IF_ERROR(checkWeightDType(t.dtype, nt.name));
  }
  const uint64_t dim = c.dim, kv = c.kvDim(), hidden = c.hiddenDim, vocab = c.vocabSize;
  SINTER_RETURN_IF_ERROR(checkShape(w.tokenEmbedding, "token_embd.weight", vocab, dim));
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights &L = w.layers[l];
    const std::string p = absl::StrCat("blk.", l, ".");
    SINTER_RETURN_IF_ERROR(checkShape(L.attnNorm, p + "attn_norm.weight", 1, dim));
    SINTER_RETURN_IF_ERROR(checkShape(L.wq, p + "attn_q.weight", dim, dim));
    SINTER_RETURN_IF_ERROR(checkShape(L.wk, p + "attn_k.weight", kv, dim));
    SINTER_RETURN_IF_ERROR(checkShape(L.wv, p + "attn_v.weight", kv, dim));
    SINTER_RETURN_IF_ERROR(checkShape(L.wo, p + "attn_output.weight", dim, dim));
    SINTER_RETURN_IF_ERROR(checkShape(L.ffnNorm, p + "ffn_norm.weight", 1, dim));
    SINTER_RETURN_IF_ERROR(checkShape(L.gate, p + "ffn_gate.weight", hidden, dim));
    SINTER_RETURN_IF_ERROR(checkShape(L.up, p + "ffn_up.weight", hidden, dim));
    SINTER_RETURN_IF_ERROR(checkShape(L.down, p + "ffn_down.weight", dim, hidden));
  }
  SINTER_RETURN_IF_ERROR(checkShape(w.outputNorm, "output_norm.weight", 1, dim));
  if (!w.sharedClassifier())
    SINTER_RETURN_IF_ERROR(checkShape(w.output, "output.weight", vocab, dim));
  if (!w.vocab.empty() && w.vocab.size() != vocab)
    return absl::InvalidArgumentError(absl::StrFormat(
        "model: vocabulary has %u tokens, the embedding %u rows", w.vocab.size(), vocab));
  return absl::OkStatus();
}

absl::Status quantizeMatrices(ModelWeights &w, DType dtype, std::vector<std::string> *kept) {
  const uint32_t block = dtypeInfo(dtype).blockSize;
  auto requant = [&](WeightTensor &t, const std::string &name) -> absl::Status {
    if (t.cols % block != 0) {
      if (kept)
        kept->push_back(name);
      return absl::OkStatus();
    }
    SINTER_ASSIGN_OR_RETURN(t, quantizeTensor(t, dtype));
    return absl::OkStatus();
  };
  for (size_t l = 0; l < w.layers.size(); ++l) {
    LayerWeights &L = w.layers[l];
    const std::string p = absl::StrCat("blk.", l, ".");
    SINTER_RETURN_IF_ERROR(requant(L.wq, p + "attn_q.weight"));
    SINTER_RETURN_IF_ERROR(requant(L.wk, p + "attn_k.weight"));
    SINTER_RETURN_IF_ERROR(requant(L.wv, p + "attn_v.weight"));
    SINTER_RETURN_IF_ERROR(requant(L.wo, p + "attn_output.weight"));
    SINTER_RETURN_IF_ERROR(requant(L.gate, p + "ffn_gate.weight"));
    SINTER_RETURN_IF_ERROR(requant(L.up, p + "ffn_up.weight"));
    SINTER_RETURN_IF_ERROR(requant(L.down, p + "ffn_down.weight"));
  }
  if (!w.sharedClassifier())
    SINTER_RETURN_IF_ERROR(requant(w.output, "output.weight"));
  return absl::OkStatus();
}

bool parseWeightFormat(std::string_view name, WeightFormat *out) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  if (lower == "q4_k_m" || lower == "q5_k_m") {
    *out = lower == "q4_k_m" ? WeightFormat{DType::Q4_K, WeightMix::Q4_K_M}
                             : WeightFormat{DType::Q5_K, WeightMix::Q5_K_M};
    return true;
  }
  DType d;
  if (!parseDType(name, &d))
    return false;
  *out = WeightFormat{d, WeightMix::None};
  return true;
}

std::string weightFormatName(const WeightFormat &format) {
  switch (format.mix) {
  case WeightMix::Q4_K_M:
    return "q4_k_m";
  case WeightMix::Q5_K_M:
    return "q5_k_m";
  case WeightMix::None:
    break;
  }
  return dtypeName(format.dtype);
}

bool moreBits(uint32_t layer, uint32_t nLayers) {
  const uint32_t eighth = nLayers / 8;
  return layer < eighth || layer >= 7 * nLayers / 8 || (layer - eighth) % 3 == 2;
}

namespace {

// The layer number of "blk.N.<rest>", with <rest> in *rest; false for other names.
bool layerOf(std::string_view name, uint32_t *layer, std::string_view *rest) {
  const std::string_view prefix = "blk.";
  if (name.substr(0, prefix.size()) != prefix)
    return false;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0 ||
      !absl::SimpleAtoi(std::string(name.substr(0, dot)), layer))
    return false;
  *rest = name.substr(dot + 1);
  return true;
}

// llama.cpp's substitute for a K-quant whose 256-weight blocks do not fit a row.
DType legacyFallback(DType dtype) {
  switch (dtype) {
  case DType::Q4_K:
    return DType::Q5_0;
  case DType::Q5_K:
    return DType::Q5_1;
  case DType::Q6_K:
    return DType::Q8_0;
  default:
    return dtype;
  }
}

} // namespace

DType tensorFormat(const WeightFormat &format, std::string_view name, uint32_t nLayers,
                   uint64_t cols, bool sharedClassifier) {
  if (name.find("norm") != std::string_view::npos)
    return DType::F32;
  DType d = format.dtype;
  if (format.mix != WeightMix::None) {
    uint32_t layer;
    std::string_view rest;
    const bool classifier =
        name == "output.weight" || (sharedClassifier && name == "token_embd.weight");
    const bool sensitive = layerOf(name, &layer, &rest) &&
                           (rest == "attn_v.weight" || rest == "ffn_down.weight") &&
                           moreBits(layer, nLayers);
    if (classifier || sensitive)
      d = DType::Q6_K;
    if (cols % dtypeInfo(d).blockSize != 0)
      d = legacyFallback(d);
  }
  return cols % dtypeInfo(d).blockSize == 0 ? d : DType::F32;
}

absl::Status quantizeMatrices(ModelWeights &w, const WeightFormat &format,
                              std::vector<std::string> *kept) {
  if (format.mix == WeightMix::None)
    return quantizeMatrices(w, format.dtype, kept);
  for (const NamedTensor &nt : namedTensors(w)) {
    if (nt.name.find("norm") != std::string::npos)
      continue;
    // namedTensors hands out const pointers to `w`'s own tensors, which are not const here.
    WeightTensor &t = const_cast<WeightTensor &>(*nt.tensor);
    const DType d = tensorFormat(format, nt.name, w.config.nLayers, t.cols, w.sharedClassifier());
    if (d == DType::F32 && kept)
      kept->push_back(nt.name);
    SINTER_ASSIGN_OR_RETURN(t, quantizeTensor(t, d));
  }
  return absl::OkStatus();
}

uint64_t decodeBytesPerToken(const ModelWeights &w, uint32_t pos) {
  uint64_t bytes = 0;
  for (const LayerWeights &l : w.layers)
    for (const WeightTensor *t :
         {&l.attnNorm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffnNorm, &l.gate, &l.up, &l.down})
      bytes += t->data.size();
  bytes += w.outputNorm.data.size();
  const WeightTensor &embedding = w.tokenEmbedding;
  bytes += w.sharedClassifier() ? embedding.data.size() : w.output.data.size();
  bytes += embedding.data.size() / std::max<uint64_t>(embedding.rows, 1);        // one row
  bytes += 2ull * w.config.nLayers * (uint64_t(pos) + 1) * w.config.kvDim() * 4; // K and V, f32
  return bytes;
}

} // namespace sinter::model
