// ModelWeights.h - the tensors of a Llama-family model in host memory.
//
// Every loader produces this and the decoder consumes it. A matrix is stored the way GGUF and
// llama2.c both store it: `rows` output rows of `cols` input weights, each row a run of `dtype`
// blocks, rows back to back (exactly the W of quantized_matmul). Norm weights are f32 vectors.
#ifndef SINTER_TOOLS_MODEL_MODELWEIGHTS_H
#define SINTER_TOOLS_MODEL_MODELWEIGHTS_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sinter/DType.h"
#include "tools/model/ModelConfig.h"

namespace sinter::model {

/// A 2-D weight tensor (a vector is rows == 1).
struct WeightTensor {
  DType dtype = DType::F32;
  uint64_t rows = 0;
  uint64_t cols = 0;
  std::vector<uint8_t> data; ///< rows * rowBytes(dtype, cols) bytes

  /// Bytes of one row.
  uint64_t rowBytes() const;
  friend bool operator==(const WeightTensor &a, const WeightTensor &b);
  friend bool operator!=(const WeightTensor &a, const WeightTensor &b) { return !(a == b); }
};

/// The tensors of one transformer block; gate, up and down are llama2.c's w1, w3 and w2.
struct LayerWeights {
  WeightTensor attnNorm; ///< [dim] f32
  WeightTensor wq;       ///< [dim][dim]
  WeightTensor wk;       ///< [kv_dim][dim]
  WeightTensor wv;       ///< [kv_dim][dim]
  WeightTensor wo;       ///< [dim][dim]
  WeightTensor ffnNorm;  ///< [dim] f32
  WeightTensor gate;     ///< [hidden][dim]
  WeightTensor up;       ///< [hidden][dim]
  WeightTensor down;     ///< [dim][hidden]
};

/// A whole model.
struct ModelWeights {
  ModelConfig config;
  WeightTensor tokenEmbedding; ///< [vocab][dim], any dtype (the decoder dequantizes it)
  std::vector<LayerWeights> layers;
  WeightTensor outputNorm; ///< [dim] f32
  /// [vocab][dim]; empty (rows == 0) when the classifier is the token embedding.
  WeightTensor output;
  /// Token texts by id, when the file had a vocabulary (tokenizer.ggml.tokens); else empty.
  std::vector<std::string> vocab;

  bool sharedClassifier() const { return output.rows == 0; }
};

/// A tensor of `rows` x `cols` f32 values copied from `values` (rows * cols floats).
WeightTensor makeF32Tensor(uint64_t rows, uint64_t cols, const float *values);

/// The tensor's values as f32 (dequantized). InvalidArgument / Unimplemented for a dtype that is
/// not a supported weight format, InvalidArgument when the data size does not match the shape.
absl::StatusOr<std::vector<float>> dequantizeTensor(const WeightTensor &tensor);

/// The tensor requantized to `dtype` row by row. Unimplemented when the format cannot be written
/// (canQuantize), InvalidArgument when cols is not a whole number of its blocks.
absl::StatusOr<WeightTensor> quantizeTensor(const WeightTensor &tensor, DType dtype);

/// Checks the shapes and sizes of every tensor against `weights.config` (InvalidArgument naming the
/// tensor and the numbers), and that every matrix dtype is usable as quantized_matmul weights.
absl::Status validateWeights(const ModelWeights &weights);

/// Requantizes every matrix (not norms, not the token embedding) to `dtype`; a matrix whose row
/// length is not a whole number of blocks keeps its format and its name is appended to `kept`.
absl::Status quantizeMatrices(ModelWeights &weights, DType dtype, std::vector<std::string> *kept);

/// How the matrices of a model are formatted: all in one dtype, or a llama.cpp-style mix that
/// gives a few sensitive tensors more bits.
enum class WeightMix {
  None,   ///< every matrix in the base dtype
  Q4_K_M, ///< Q4_K; Q6_K for the classifier and for attn_v/ffn_down of the layers moreBits picks
  Q5_K_M, ///< Q5_K likewise, with Q6_K for the same tensors
};

/// A --dtype value: a dtype name (q8_0, q4_k, ...) or a mix name (q4_k_m, q5_k_m).
struct WeightFormat {
  DType dtype = DType::F32; ///< the base format (Q4_K for q4_k_m, Q5_K for q5_k_m)
  WeightMix mix = WeightMix::None;
};

/// Parses a dtype name or a mix name (case-insensitive); false when it is neither.
bool parseWeightFormat(std::string_view name, WeightFormat *out);
/// "q4_k_m", "q5_k_m", or the dtype's name (dtypeName).
std::string weightFormatName(const WeightFormat &format);

/// Whether layer `layer` of `nLayers` gets the more precise format in a mix (as llama.cpp's
/// quantizer picks it): the first and last eighth of the layers, and every third layer between.
bool moreBits(uint32_t layer, uint32_t nLayers);

/// The format a tensor named as namedTensors names it (`blk.N.attn_v.weight`, `output.weight`,
/// ...) gets under `format` in a model of `nLayers` layers, its rows `cols` weights long;
/// `sharedClassifier`: the token embedding is also the classifier. Norms are F32. Where the rows
/// are not whole 256-weight blocks a mix falls back as llama.cpp does (Q4_K to Q5_0, Q5_K to
/// Q5_1, Q6_K to Q8_0); a format whose blocks still do not fit gives F32.
DType tensorFormat(const WeightFormat &format, std::string_view name, uint32_t nLayers,
                   uint64_t cols, bool sharedClassifier);

/// Requantizes the matrices as tensorFormat assigns them. For WeightMix::None this is
/// quantizeMatrices(weights, format.dtype, kept); a mix also requantizes the token embedding.
/// Tensors that end up F32 without asking for it are appended to `kept`.
absl::Status quantizeMatrices(ModelWeights &weights, const WeightFormat &format,
                              std::vector<std::string> *kept);

/// Bytes one decode step at position `pos` must read: every matrix and norm once, the classifier,
/// one row of the token embedding, and the K and V caches (f32) of positions 0..pos. The
/// numerator of the benchmarks' bandwidth floor.
uint64_t decodeBytesPerToken(const ModelWeights &weights, uint32_t pos);

/// The names the decoder and GGUF use for the tensors, in file order, with pointers into
/// `weights` ("token_embd.weight", "blk.0.attn_norm.weight", ...). The classifier is listed
/// only when present.
struct NamedTensor {
  std::string name;
  const WeightTensor *tensor;
};
std::vector<NamedTensor> namedTensors(const ModelWeights &weights);

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_MODELWEIGHTS_H
