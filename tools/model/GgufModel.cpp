// GgufModel.cpp - llama-architecture GGUF <-> ModelWeights.
//
// Reading checks every key's type and every tensor's dims against the shape the keys give before
// copying a byte, so that a file whose metadata and tensors disagree is one clear error.
#include "tools/model/GgufModel.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sinter/Status.h"
#include "tools/model/GgufReader.h"
#include "tools/model/MappedFile.h"

namespace sinter::model {
namespace {

absl::Status invalid(const std::string &msg) {
  return absl::InvalidArgumentError(absl::StrCat("gguf: ", msg));
}

absl::StatusOr<uint32_t> getU32(const GgufFile &f, const std::string &key,
                                std::optional<uint32_t> fallback) {
  const GgufValue *v = f.find(key);
  if (!v) {
    if (fallback)
      return *fallback;
    return invalid(absl::StrCat("metadata key ", key, " is missing"));
  }
  const std::optional<uint64_t> u = v->asUnsigned();
  if (!u || v->type == GgufType::Bool)
    return invalid(absl::StrCat("metadata key ", key, " is a ", ggufTypeName(v->type),
                                ", expected an unsigned integer"));
  if (*u > std::numeric_limits<uint32_t>::max())
    return invalid(absl::StrCat("metadata key ", key, " is ", *u, ", too large"));
  return uint32_t(*u);
}

absl::StatusOr<float> getF32(const GgufFile &f, const std::string &key, float fallback) {
  const GgufValue *v = f.find(key);
  if (!v)
    return fallback;
  const std::optional<double> d = v->asDouble();
  if (!d || v->type == GgufType::Bool)
    return invalid(
        absl::StrCat("metadata key ", key, " is a ", ggufTypeName(v->type), ", expected a number"));
  return float(*d);
}

std::string dimsString(const std::vector<uint64_t> &dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// The tensor `name` with dims exactly `dims` (innermost first), as a WeightTensor.
absl::StatusOr<WeightTensor> takeTensor(const GgufFile &f, const std::string &name,
                                        std::vector<uint64_t> dims) {
  const GgufTensor *t = f.findTensor(name);
  if (!t)
    return invalid(absl::StrCat("tensor ", name, " is missing"));
  if (t->dims != dims)
    return invalid(absl::StrCat("tensor ", name, " has dims ", dimsString(t->dims), ", expected ",
                                dimsString(dims)));
  if (absl::Status s = checkWeightDType(t->dtype, absl::StrCat("gguf: tensor ", name)); !s.ok())
    return s;
  WeightTensor w;
  w.dtype = t->dtype;
  w.cols = dims[0];
  w.rows = dims.size() > 1 ? dims[1] : 1;
  w.data.assign(t->data.begin(), t->data.end());
  return w;
}

// A norm vector, converted to F32 when the file stores it in another float format.
absl::StatusOr<WeightTensor> takeNorm(const GgufFile &f, const std::string &name, uint64_t dim) {
  SINTER_ASSIGN_OR_RETURN(WeightTensor t, takeTensor(f, name, {dim}));
  if (t.dtype == DType::F32)
    return t;
  SINTER_ASSIGN_OR_RETURN(std::vector<float> values, dequantizeTensor(t));
  return makeF32Tensor(1, dim, values.data());
}

absl::Status readConfig(const GgufFile &f, ModelConfig &c) {
  const GgufValue *arch = f.find("general.architecture");
  if (!arch)
    return invalid("metadata key general.architecture is missing");
  if (arch->type != GgufType::String)
    return invalid(absl::StrCat("general.architecture is a ", ggufTypeName(arch->type),
                                ", expected a string"));
  if (arch->str != "llama")
    return absl::UnimplementedError(
        absl::StrCat("gguf: architecture '", arch->str, "' is not supported (only llama)"));
  SINTER_ASSIGN_OR_RETURN(c.dim, getU32(f, "llama.embedding_length", std::nullopt));
  SINTER_ASSIGN_OR_RETURN(c.nLayers, getU32(f, "llama.block_count", std::nullopt));
  SINTER_ASSIGN_OR_RETURN(c.hiddenDim, getU32(f, "llama.feed_forward_length", std::nullopt));
  SINTER_ASSIGN_OR_RETURN(c.nHeads, getU32(f, "llama.attention.head_count", std::nullopt));
  SINTER_ASSIGN_OR_RETURN(c.nKvHeads, getU32(f, "llama.attention.head_count_kv", c.nHeads));
  SINTER_ASSIGN_OR_RETURN(c.seqLen, getU32(f, "llama.context_length", 2048u));
  SINTER_ASSIGN_OR_RETURN(c.ropeBase, getF32(f, "llama.rope.freq_base", 10000.0f));
  SINTER_ASSIGN_OR_RETURN(c.eps, getF32(f, "llama.attention.layer_norm_rms_epsilon", 1e-5f));
  const GgufTensor *embd = f.findTensor("token_embd.weight");
  if (!embd)
    return invalid("tensor token_embd.weight is missing");
  if (embd->dims.size() != 2 || embd->dims[1] > std::numeric_limits<uint32_t>::max())
    return invalid(absl::StrCat("tensor token_embd.weight has dims ", dimsString(embd->dims),
                                ", expected [", c.dim, ", vocab]"));
  c.vocabSize = uint32_t(embd->dims[1]);
  if (absl::Status s = validateConfig(c); !s.ok())
    return invalid(std::string(s.message()));
  SINTER_ASSIGN_OR_RETURN(uint32_t ropeDims, getU32(f, "llama.rope.dimension_count", c.headDim()));
  if (ropeDims != c.headDim())
    return absl::UnimplementedError(absl::StrFormat(
        "gguf: llama.rope.dimension_count %u differs from the head size %u (partial rope)",
        ropeDims, c.headDim()));
  SINTER_ASSIGN_OR_RETURN(uint32_t vocabKey, getU32(f, "llama.vocab_size", c.vocabSize));
  if (vocabKey != c.vocabSize)
    return invalid(absl::StrFormat("llama.vocab_size %u differs from token_embd.weight's %u rows",
                                   vocabKey, c.vocabSize));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<ModelWeights> modelFromGguf(const GgufFile &f) {
  ModelWeights w;
  SINTER_RETURN_IF_ERROR(readConfig(f, w.config));
  const ModelConfig &c = w.config;
  const uint64_t dim = c.dim, kv = c.kvDim(), hidden = c.hiddenDim, vocab = c.vocabSize;
  SINTER_ASSIGN_OR_RETURN(w.tokenEmbedding, takeTensor(f, "token_embd.weight", {dim, vocab}));
  w.layers.resize(c.nLayers);
  for (uint32_t l = 0; l < c.nLayers; ++l) {
    LayerWeights &L = w.layers[l];
    const std::string p = absl::StrCat("blk.", l, ".");
    SINTER_ASSIGN_OR_RETURN(L.attnNorm, takeNorm(f, p + "attn_norm.weight", dim));
    SINTER_ASSIGN_OR_RETURN(L.wq, takeTensor(f, p + "attn_q.weight", {dim, dim}));
    SINTER_ASSIGN_OR_RETURN(L.wk, takeTensor(f, p + "attn_k.weight", {dim, kv}));
    SINTER_ASSIGN_OR_RETURN(L.wv, takeTensor(f, p + "attn_v.weight", {dim, kv}));
    SINTER_ASSIGN_OR_RETURN(L.wo, takeTensor(f, p + "attn_output.weight", {dim, dim}));
    SINTER_ASSIGN_OR_RETURN(L.ffnNorm, takeNorm(f, p + "ffn_norm.weight", dim));
    SINTER_ASSIGN_OR_RETURN(L.gate, takeTensor(f, p + "ffn_gate.weight", {dim, hidden}));
    SINTER_ASSIGN_OR_RETURN(L.up, takeTensor(f, p + "ffn_up.weight", {dim, hidden}));
    SINTER_ASSIGN_OR_RETURN(L.down, takeTensor(f, p + "ffn_down.weight", {hidden, dim}));
  }
  SINTER_ASSIGN_OR_RETURN(w.outputNorm, takeNorm(f, "output_norm.weight", dim));
  if (f.findTensor("output.weight")) {
    SINTER_ASSIGN_OR_RETURN(w.output, takeTensor(f, "output.weight", {dim, vocab}));
  }
  // The vocabulary is only for printing; a file whose token list does not match is still usable.
  const GgufValue *tokens = f.find("tokenizer.ggml.tokens");
  if (tokens && tokens->type == GgufType::Array && tokens->elemType == GgufType::String &&
      tokens->strings.size() == vocab)
    w.vocab = tokens->strings;
  if (absl::Status s = validateWeights(w); !s.ok())
    return absl::Status(s.code(), absl::StrCat("gguf: ", s.message()));
  return w;
}

GgufFile ggufFromModel(const ModelWeights &w, const std::string &name) {
  const ModelConfig &c = w.config;
  GgufFile f;
  f.alignment = 32;
  auto put = [&f](std::string key, GgufValue v) { f.metadata.push_back({std::move(key), v}); };
  put("general.architecture", GgufValue::string("llama"));
  put("general.name", GgufValue::string(name));
  put("general.alignment", GgufValue::u32(32));
  put("llama.context_length", GgufValue::u32(c.seqLen));
  put("llama.embedding_length", GgufValue::u32(c.dim));
  put("llama.block_count", GgufValue::u32(c.nLayers));
  put("llama.feed_forward_length", GgufValue::u32(c.hiddenDim));
  put("llama.rope.dimension_count", GgufValue::u32(c.headDim()));
  put("llama.attention.head_count", GgufValue::u32(c.nHeads));
  put("llama.attention.head_count_kv", GgufValue::u32(c.nKvHeads));
  put("llama.rope.freq_base", GgufValue::f32(c.ropeBase));
  put("llama.attention.layer_norm_rms_epsilon", GgufValue::f32(c.eps));
  put("llama.vocab_size", GgufValue::u32(c.vocabSize));
  if (!w.vocab.empty()) {
    put("tokenizer.ggml.model", GgufValue::string("llama"));
    put("tokenizer.ggml.tokens", GgufValue::stringArray(w.vocab));
    put("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
    put("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
  }
  for (const NamedTensor &nt : namedTensors(w)) {
    GgufTensor t;
    t.name = nt.name;
    t.dtype = nt.tensor->dtype;
    t.dims = nt.tensor->rows == 1 && nt.name.find("norm") != std::string::npos
                 ? std::vector<uint64_t>{nt.tensor->cols}
                 : std::vector<uint64_t>{nt.tensor->cols, nt.tensor->rows};
    t.data = absl::MakeConstSpan(nt.tensor->data);
    f.tensors.push_back(std::move(t));
  }
  return f;
}

absl::StatusOr<ModelWeights> loadGguf(const std::string &path) {
  SINTER_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::open(path));
  absl::StatusOr<GgufFile> parsed = parseGguf(file->bytes());
  if (!parsed.ok())
    return absl::Status(parsed.status().code(),
                        absl::StrCat(path, ": ", parsed.status().message()));
  absl::StatusOr<ModelWeights> w = modelFromGguf(*parsed);
  if (!w.ok())
    return absl::Status(w.status().code(), absl::StrCat(path, ": ", w.status().message()));
  return w;
}

} // namespace sinter::model
