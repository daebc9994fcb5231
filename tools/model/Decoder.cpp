// Decoder.cpp - the decode step, call by call.
//
// Per token: copy_buffer_offset of the token's embedding row into x; per layer: copy x ->
// residual; rms_norm; Q, K, V projections; rope; two copy_buffer_offset of K and V into the caches
// at pos; per head attn_score, softmax, attn_value; output projection; add residual; copy;
// rms_norm; gate and up projections; silu; element_mul; down projection; add residual; then the
// final rms_norm, the classifier and copy_from_device of the logits.
#include "tools/model/Decoder.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sinter/Status.h"

namespace sinter::model {
namespace {

absl::Span<const uint8_t> asBytes(const std::vector<float> &v) {
  return {reinterpret_cast<const uint8_t *>(v.data()), v.size() * sizeof(float)};
}

absl::Status annotate(absl::Status s, const std::string &what) {
  if (s.ok())
    return s;
  return absl::Status(s.code(), absl::StrCat("decoder: ", what, ": ", s.message()));
}

} // namespace

Decoder::Decoder(ComputeBackend &backend, const ModelConfig &config, DecoderOptions options)
    : backend_(backend), config_(config), options_(options),
      maxContext_(options.maxContext ? options.maxContext : config.seqLen) {}

Decoder::~Decoder() {
  // Errors cannot be reported from a destructor; a backend that fails to free is already broken.
  for (BufferHandle h : owned_)
    (void)backend_.free(h);
}

absl::StatusOr<BufferHandle> Decoder::alloc(uint64_t bytes, const char *what) {
  absl::StatusOr<BufferHandle> h = backend_.allocate(bytes);
  if (!h.ok())
    return annotate(h.status(), absl::StrCat("allocating ", bytes, " bytes for ", what));
  owned_.push_back(*h);
  deviceBytes_ += bytes;
  return *h;
}

absl::StatusOr<BufferHandle> Decoder::upload(absl::Span<const uint8_t> bytes, const char *what) {
  SINTER_ASSIGN_OR_RETURN(BufferHandle h, alloc(bytes.size(), what));
  SINTER_RETURN_IF_ERROR(
      annotate(backend_.copyToDevice(bytes, h), absl::StrCat("uploading ", what)));
  return h;
}

absl::StatusOr<Decoder::Matrix> Decoder::uploadMatrix(const WeightTensor &t, const char *what) {
  Matrix m;
  m.dtype = t.dtype;
  m.rows = uint32_t(t.rows);
  m.cols = uint32_t(t.cols);
  if (t.dtype != DType::F32 || !options_.f32AsMatmul) {
    SINTER_ASSIGN_OR_RETURN(m.buffer, upload(t.data, what));
    return m;
  }
  // matmul wants B as k x n: the transpose of the [rows][cols] weights.
  std::vector<float> w(t.rows * t.cols), wt(t.rows * t.cols);
  std::memcpy(w.data(), t.data.data(), t.data.size());
  for (uint64_t r = 0; r < t.rows; ++r)
    for (uint64_t c = 0; c < t.cols; ++c)
      wt[c * t.rows + r] = w[r * t.cols + c];
  m.transposed = true;
  SINTER_ASSIGN_OR_RETURN(m.buffer, upload(asBytes(wt), what));
  return m;
}

absl::StatusOr<std::unique_ptr<Decoder>>
Decoder::create(ComputeBackend &backend, const ModelWeights &weights, DecoderOptions options) {
  SINTER_RETURN_IF_ERROR(validateWeights(weights));
  const ModelConfig &c = weights.config;
  std::unique_ptr<Decoder> d(new Decoder(backend, c, options));
  const uint64_t f = sizeof(float);

  // The lookup table is f32 on the device, so a token costs one copy_buffer_offset.
  if (weights.tokenEmbedding.dtype == DType::F32) {
    SINTER_ASSIGN_OR_RETURN(d->embedding_, d->upload(weights.tokenEmbedding.data, "token_embd"));
  } else {
    SINTER_ASSIGN_OR_RETURN(std::vector<float> table, dequantizeTensor(weights.tokenEmbedding));
    SINTER_ASSIGN_OR_RETURN(d->embedding_, d->upload(asBytes(table), "token_embd"));
  }
  d->layers_.resize(c.nLayers);
  for (uint32_t l = 0; l < c.nLayers; ++l) {
    const LayerWeights &w = weights.layers[l];
    Layer &L = d->layers_[l];
    SINTER_ASSIGN_OR_RETURN(L.attnNorm, d->upload(w.attnNorm.data, "attn_norm"));
    SINTER_ASSIGN_OR_RETURN(L.wq, d->uploadMatrix(w.wq, "attn_q"));
    SINTER_ASSIGN_OR_RETURN(L.wk, d->uploadMatrix(w.wk, "attn_k"));
    SINTER_ASSIGN_OR_RETURN(L.wv, d->uploadMatrix(w.wv, "attn_v"));
    SINTER_ASSIGN_OR_RETURN(L.wo, d->uploadMatrix(w.wo, "attn_output"));
    SINTER_ASSIGN_OR_RETURN(L.ffnNorm, d->upload(w.ffnNorm.data, "ffn_norm"));
    SINTER_ASSIGN_OR_RETURN(L.gate, d->uploadMatrix(w.gate, "ffn_gate"));
    SINTER_ASSIGN_OR_RETURN(L.up, d->uploadMatrix(w.up, "ffn_up"));
    SINTER_ASSIGN_OR_RETURN(L.down, d->uploadMatrix(w.down, "ffn_down"));
    const uint64_t cacheBytes = uint64_t(d->maxContext_) * c.kvDim() * f;
    SINTER_ASSIGN_OR_RETURN(L.kCache, d->alloc(cacheBytes, "k cache"));
    SINTER_ASSIGN_OR_RETURN(L.vCache, d->alloc(cacheBytes, "v cache"));
  }
  SINTER_ASSIGN_OR_RETURN(d->outputNorm_, d->upload(weights.outputNorm.data, "output_norm"));
  if (!weights.sharedClassifier()) {
    SINTER_ASSIGN_OR_RETURN(d->classifier_, d->uploadMatrix(weights.output, "output"));
  } else if (weights.tokenEmbedding.dtype == DType::F32 && !options.f32AsMatmul) {
    d->classifier_ = {d->embedding_, DType::F32, c.vocabSize, c.dim, false};
  } else {
    SINTER_ASSIGN_OR_RETURN(d->classifier_,
                            d->uploadMatrix(weights.tokenEmbedding, "output (shared)"));
  }

  const uint64_t dim = c.dim * f, kv = c.kvDim() * f, hidden = c.hiddenDim * f;
  SINTER_ASSIGN_OR_RETURN(d->x_, d->alloc(dim, "x"));
  SINTER_ASSIGN_OR_RETURN(d->residual_, d->alloc(dim, "residual"));
  SINTER_ASSIGN_OR_RETURN(d->xb_, d->alloc(dim, "xb"));
  SINTER_ASSIGN_OR_RETURN(d->q_, d->alloc(dim, "q"));
  SINTER_ASSIGN_OR_RETURN(d->k_, d->alloc(kv, "k"));
  SINTER_ASSIGN_OR_RETURN(d->v_, d->alloc(kv, "v"));
  SINTER_ASSIGN_OR_RETURN(d->scores_, d->alloc(uint64_t(d->maxContext_) * f, "scores"));
  SINTER_ASSIGN_OR_RETURN(d->attnOut_, d->alloc(dim, "attention output"));
  SINTER_ASSIGN_OR_RETURN(d->hb_, d->alloc(hidden, "gate"));
  SINTER_ASSIGN_OR_RETURN(d->hb2_, d->alloc(hidden, "up"));
  SINTER_ASSIGN_OR_RETURN(d->logits_, d->alloc(uint64_t(c.vocabSize) * f, "logits"));
  return d;
}

absl::Status Decoder::matvec(const Matrix &m, BufferHandle x, BufferHandle out) {
  if (m.transposed)
    return backend_.matmul(x, m.buffer, out, 1, m.rows, m.cols);
  return backend_.quantizedMatmul(m.buffer, x, out, m.rows, m.cols, m.dtype);
}

absl::Status Decoder::layerStep(uint32_t l, uint32_t pos) {
  const ModelConfig &c = config_;
  const Layer &L = layers_[l];
  const uint32_t headDim = c.headDim(), kvDim = c.kvDim(), seqLen = pos + 1;
  const uint32_t group = c.nHeads / c.nKvHeads;
  const uint64_t f = sizeof(float);
  ComputeBackend &b = backend_;

  SINTER_RETURN_IF_ERROR(b.copyBuffer(x_, residual_, c.dim * f));
  SINTER_RETURN_IF_ERROR(b.rmsNorm(x_, L.attnNorm, xb_, c.dim, c.eps));
  SINTER_RETURN_IF_ERROR(matvec(L.wq, xb_, q_));
  SINTER_RETURN_IF_ERROR(matvec(L.wk, xb_, k_));
  SINTER_RETURN_IF_ERROR(matvec(L.wv, xb_, v_));
  SINTER_RETURN_IF_ERROR(b.rope(q_, k_, pos, headDim, c.ropeBase, c.nHeads, c.nKvHeads));
  SINTER_RETURN_IF_ERROR(b.copyBufferOffset(k_, L.kCache, 0, uint64_t(pos) * kvDim * f, kvDim * f));
  SINTER_RETURN_IF_ERROR(b.copyBufferOffset(v_, L.vCache, 0, uint64_t(pos) * kvDim * f, kvDim * f));
  for (uint32_t h = 0; h < c.nHeads; ++h) {
    const uint32_t kvOff = h / group * headDim;
    SINTER_RETURN_IF_ERROR(
        b.attnScore(q_, L.kCache, scores_, headDim, seqLen, h * headDim, kvOff, kvDim));
    SINTER_RETURN_IF_ERROR(b.softmax(scores_, scores_, seqLen));
    SINTER_RETURN_IF_ERROR(
        b.attnValue(scores_, L.vCache, attnOut_, headDim, seqLen, kvOff, kvDim, h * headDim));
  }
  SINTER_RETURN_IF_ERROR(matvec(L.wo, attnOut_, xb_));
  SINTER_RETURN_IF_ERROR(b.add(xb_, residual_, x_, c.dim));
  SINTER_RETURN_IF_ERROR(b.copyBuffer(x_, residual_, c.dim * f));
  SINTER_RETURN_IF_ERROR(b.rmsNorm(x_, L.ffnNorm, xb_, c.dim, c.eps));
  SINTER_RETURN_IF_ERROR(matvec(L.gate, xb_, hb_));
  SINTER_RETURN_IF_ERROR(matvec(L.up, xb_, hb2_));
  SINTER_RETURN_IF_ERROR(b.silu(hb_, hb_, c.hiddenDim));
  SINTER_RETURN_IF_ERROR(b.elementMul(hb_, hb2_, hb_, c.hiddenDim));
  SINTER_RETURN_IF_ERROR(matvec(L.down, hb_, xb_));
  SINTER_RETURN_IF_ERROR(b.add(xb_, residual_, x_, c.dim));
  return absl::OkStatus();
}

absl::Status Decoder::step(uint32_t token, uint32_t pos, absl::Span<float> logits) {
  const ModelConfig &c = config_;
  if (token >= c.vocabSize)
    return absl::InvalidArgumentError(
        absl::StrFormat("decoder: token %u is outside the vocabulary of %u", token, c.vocabSize));
  if (pos >= maxContext_)
    return absl::OutOfRangeError(
        absl::StrFormat("decoder: position %u is past the context of %u", pos, maxContext_));
  if (logits.size() != c.vocabSize)
    return absl::InvalidArgumentError(absl::StrFormat(
        "decoder: logits span holds %u floats, the vocabulary %u", logits.size(), c.vocabSize));
  const uint64_t f = sizeof(float);
  SINTER_RETURN_IF_ERROR(
      annotate(backend_.copyBufferOffset(embedding_, x_, uint64_t(token) * c.dim * f, 0, c.dim * f),
               "embedding"));
  for (uint32_t l = 0; l < c.nLayers; ++l)
    SINTER_RETURN_IF_ERROR(annotate(layerStep(l, pos), absl::StrCat("layer ", l)));
  SINTER_RETURN_IF_ERROR(
      annotate(backend_.rmsNorm(x_, outputNorm_, xb_, c.dim, c.eps), "output_norm"));
  SINTER_RETURN_IF_ERROR(annotate(matvec(classifier_, xb_, logits_), "classifier"));
  return annotate(backend_.copyFromDevice(
                      logits_, absl::Span<uint8_t>(reinterpret_cast<uint8_t *>(logits.data()),
                                                   logits.size() * sizeof(float))),
                  "reading logits");
}

absl::StatusOr<std::vector<float>> Decoder::step(uint32_t token, uint32_t pos) {
  std::vector<float> logits(config_.vocabSize);
  SINTER_RETURN_IF_ERROR(step(token, pos, absl::MakeSpan(logits)));
  return logits;
}

absl::StatusOr<std::vector<uint32_t>> generate(Decoder &decoder, absl::Span<const uint32_t> prompt,
                                               uint32_t steps, Sampler &sampler,
                                               std::optional<uint32_t> stopToken,
                                               std::optional<StepCallback> onStep) {
  if (prompt.empty())
    return absl::InvalidArgumentError("generate: the prompt needs at least one token");
  std::vector<uint32_t> out;
  std::vector<float> logits(decoder.config().vocabSize);
  uint32_t token = prompt[0];
  for (uint32_t pos = 0; pos < decoder.maxContext(); ++pos) {
    SINTER_RETURN_IF_ERROR(decoder.step(token, pos, absl::MakeSpan(logits)));
    const bool inPrompt = pos + 1 < prompt.size();
    if (!inPrompt && steps == 0)
      break;
    const uint32_t next = inPrompt ? prompt[pos + 1] : sampler.sample(logits);
    if (onStep)
      SINTER_RETURN_IF_ERROR((*onStep)(pos, token, logits, next));
    token = next;
    if (inPrompt)
      continue;
    if (stopToken && next == *stopToken)
      break;
    out.push_back(next);
    if (out.size() >= steps)
      break;
  }
  return out;
}

} // namespace sinter::model
