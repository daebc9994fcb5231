// Decoder.h - a Llama decode engine that talks to a ComputeBackend and nothing else.
//
// The decoder uploads the weights once, owns its device buffers (weights, activations, one K and
// one V cache per layer laid out [position][kv_head][head_dim]) and, for each token, issues the
// calls in the order an eager engine such as yule does (Decoder.cpp lists them). Its call stream
// is the realistic trace every later test and benchmark replays.
#ifndef SINTER_TOOLS_MODEL_DECODER_H
#define SINTER_TOOLS_MODEL_DECODER_H

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "sinter/ComputeBackend.h"
#include "tools/model/ModelWeights.h"
#include "tools/model/Sampler.h"

namespace sinter::model {

/// How the decoder issues its work.
struct DecoderOptions {
  /// Positions the KV cache holds; 0 means the model's context length.
  uint32_t maxContext = 0;
  /// Issue F32 weight matrices as `matmul` (1 x k times k x n, the weights uploaded transposed)
  /// instead of `quantized_matmul` with DType F32. Quantized matrices always use quantized_matmul.
  bool f32AsMatmul = false;
};

/// One model on one backend.
class Decoder {
public:
  /// Uploads `weights` (validated first) to `backend`, which must outlive the decoder; the weights
  /// may be dropped afterwards. Errors of the backend (e.g. ResourceExhausted) come back with the
  /// tensor named.
  static absl::StatusOr<std::unique_ptr<Decoder>>
  create(ComputeBackend &backend, const ModelWeights &weights, DecoderOptions options = {});
  /// Frees every buffer the decoder allocated.
  ~Decoder();
  Decoder(const Decoder &) = delete;
  Decoder &operator=(const Decoder &) = delete;

  const ModelConfig &config() const { return config_; }
  uint32_t maxContext() const { return maxContext_; }
  ComputeBackend &backend() const { return backend_; }
  /// Bytes the decoder allocated on the device.
  uint64_t deviceBytes() const { return deviceBytes_; }

  /// Runs `token` at position `pos` (positions 0..pos-1 must have been run before, in any earlier
  /// calls) and writes the vocab_size logits to `logits`. InvalidArgument for a token outside the
  /// vocabulary or a logits span of the wrong size, OutOfRange for pos >= maxContext().
  absl::Status step(uint32_t token, uint32_t pos, absl::Span<float> logits);
  /// step() returning a new vector.
  absl::StatusOr<std::vector<float>> step(uint32_t token, uint32_t pos);

private:
  struct Matrix {
    BufferHandle buffer;
    DType dtype = DType::F32;
    uint32_t rows = 0, cols = 0;
    bool transposed = false; ///< issued as matmul
  };
  struct Layer {
    BufferHandle attnNorm, ffnNorm, kCache, vCache;
    Matrix wq, wk, wv, wo, gate, up, down;
  };

  Decoder(ComputeBackend &backend, const ModelConfig &config, DecoderOptions options);
  absl::StatusOr<BufferHandle> alloc(uint64_t bytes, const char *what);
  absl::StatusOr<BufferHandle> upload(absl::Span<const uint8_t> bytes, const char *what);
  absl::StatusOr<Matrix> uploadMatrix(const WeightTensor &t, const char *what);
  absl::Status matvec(const Matrix &m, BufferHandle x, BufferHandle out);
  absl::Status layerStep(uint32_t l, uint32_t pos);

  ComputeBackend &backend_;
  ModelConfig config_;
  DecoderOptions options_;
  uint32_t maxContext_;
  uint64_t deviceBytes_ = 0;
  std::vector<BufferHandle> owned_;
  std::vector<Layer> layers_;
  BufferHandle embedding_, outputNorm_;
  Matrix classifier_;
  // Activations.
  BufferHandle x_, residual_, xb_, q_, k_, v_, scores_, attnOut_, hb_, hb2_, logits_;
};

/// Called after each position with the token fed, the logits it produced and the chosen next
/// token; a non-ok status stops generation and is returned.
using StepCallback = absl::FunctionRef<absl::Status(uint32_t pos, uint32_t token,
                                                    absl::Span<const float> logits, uint32_t next)>;

/// Feeds `prompt` (at least one token) from position 0, then keeps feeding sampled tokens until
/// `steps` tokens were generated, `stopToken` was generated, or the context is full. Returns the
/// generated tokens (the first is predicted from the last prompt token).
absl::StatusOr<std::vector<uint32_t>> generate(Decoder &decoder, absl::Span<const uint32_t> prompt,
                                               uint32_t steps, Sampler &sampler,
                                               std::optional<uint32_t> stopToken,
                                               std::optional<StepCallback> onStep = std::nullopt);

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_DECODER_H
