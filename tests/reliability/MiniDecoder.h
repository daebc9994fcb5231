// MiniDecoder.h - a small decode-step workload for the fault-injection and soak tests.
//
// One step records what a Llama layer records per token (norm, projections, rope, KV-cache
// writes at a position, attention per head, residual, SwiGLU-like gating, a quantized
// projection) on 64-wide buffers, plus allocate/free churn: a scratch buffer allocated, used and
// freed while the work that reads it is still pending. The same decoder on a ReferenceBackend in
// lockstep is the oracle. Everything a step needs is derived from the token number, so two
// decoders given the same seed and tokens compute the same thing.
#ifndef SINTER_TESTS_RELIABILITY_MINIDECODER_H
#define SINTER_TESTS_RELIABILITY_MINIDECODER_H

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sinter/ComputeBackend.h"
#include "sinter/Status.h"
#include "tests/support/TestData.h"

namespace sinter::test {

class MiniDecoder {
public:
  static constexpr uint32_t kDim = 64, kHeadDim = 16, kHeads = 4, kContext = 32;
  static constexpr DType kWeightDType = DType::Q8_0;
  /// Backend calls one step() records (copy_from_device of the output not counted).
  static constexpr uint64_t kCallsPerStep = 28;

  /// Allocates and uploads the weights; check ok() before use.
  MiniDecoder(ComputeBackend &backend, uint32_t seed) : b_(backend) {
    std::mt19937 rng(seed);
    auto upload = [&](const std::vector<uint8_t> &bytes) -> BufferHandle {
      absl::StatusOr<BufferHandle> h = b_.allocate(bytes.size());
      if (!h.ok()) {
        status_ = h.status();
        return BufferHandle{};
      }
      owned_.push_back(*h);
      if (absl::Status s = b_.copyToDevice(bytes, *h); !s.ok())
        status_ = s;
      return *h;
    };
    auto zeros = [&](uint64_t floats) { return upload(std::vector<uint8_t>(floats * 4, 0)); };
    norm_ = upload(floatBytes(randomFloats(kDim, rng, 0.5f, 1.5f)));
    wq_ = upload(floatBytes(randomFloats(kDim * kDim, rng, -0.2f, 0.2f)));
    wk_ = upload(floatBytes(randomFloats(kDim * kDim, rng, -0.2f, 0.2f)));
    wo_ = upload(randomWeights(kWeightDType, kDim, kDim, rng));
    x_ = zeros(kDim);
    h_ = zeros(kDim);
    q_ = zeros(kDim);
    k_ = zeros(kDim);
    kCache_ = zeros(kDim * kContext);
    vCache_ = zeros(kDim * kContext);
    scores_ = zeros(kContext);
    att_ = zeros(kDim);
    x2_ = zeros(kDim);
    g_ = zeros(kDim);
    out_ = zeros(kDim);
    y_ = zeros(kDim);
  }

  ~MiniDecoder() {
    for (BufferHandle h : owned_)
      (void)b_.free(h);
  }

  const absl::Status &status() const { return status_; }

  /// The token's input vector (a deterministic function of the token).
  static std::vector<float> input(uint64_t token) {
    std::vector<float> x(kDim);
    for (uint32_t i = 0; i < kDim; ++i)
      x[i] = 0.5f * std::sin(0.37f * float(token % 1000) + 0.11f * float(i));
    return x;
  }

  /// Records the calls of one token; the first failing call's status.
  absl::Status step(uint64_t token) {
    uint32_t pos = uint32_t(token % kContext);
    uint32_t seqLen = uint32_t(std::min<uint64_t>(token, kContext - 1)) + 1;
    SINTER_RETURN_IF_ERROR(b_.copyToDevice(floatBytes(input(token)), x_));
    SINTER_RETURN_IF_ERROR(b_.rmsNorm(x_, norm_, h_, kDim, 1e-5f));
    SINTER_RETURN_IF_ERROR(b_.matmul(h_, wq_, q_, 1, kDim, kDim));
    SINTER_RETURN_IF_ERROR(b_.matmul(h_, wk_, k_, 1, kDim, kDim));
    SINTER_RETURN_IF_ERROR(b_.rope(q_, k_, pos, kHeadDim, 10000.0f, kHeads, kHeads));
    SINTER_RETURN_IF_ERROR(b_.copyBufferOffset(k_, kCache_, 0, uint64_t(pos) * kDim * 4, kDim * 4));
    SINTER_RETURN_IF_ERROR(b_.copyBufferOffset(h_, vCache_, 0, uint64_t(pos) * kDim * 4, kDim * 4));
    for (uint32_t head = 0; head < kHeads; ++head) {
      uint32_t off = head * kHeadDim;
      SINTER_RETURN_IF_ERROR(b_.attnScore(q_, kCache_, scores_, kHeadDim, seqLen, off, off, kDim));
      SINTER_RETURN_IF_ERROR(b_.softmax(scores_, scores_, seqLen));
      SINTER_RETURN_IF_ERROR(
          b_.attnValue(scores_, vCache_, att_, kHeadDim, seqLen, off, kDim, off));
    }
    SINTER_RETURN_IF_ERROR(b_.add(att_, x_, x2_, kDim));
    SINTER_RETURN_IF_ERROR(b_.silu(x2_, g_, kDim));
    SINTER_RETURN_IF_ERROR(b_.elementMul(g_, x2_, out_, kDim));
    // Churn: a scratch buffer read by pending work and freed before that work ran.
    absl::StatusOr<BufferHandle> scratch = b_.allocate(kDim * 4);
    if (!scratch.ok())
      return scratch.status();
    SINTER_RETURN_IF_ERROR(b_.copyBuffer(out_, *scratch, kDim * 4));
    SINTER_RETURN_IF_ERROR(b_.add(*scratch, x2_, out_, kDim));
    SINTER_RETURN_IF_ERROR(b_.free(*scratch));
    SINTER_RETURN_IF_ERROR(b_.quantizedMatmul(wo_, out_, y_, kDim, kDim, kWeightDType));
    SINTER_RETURN_IF_ERROR(b_.copyBuffer(y_, x_, kDim * 4));
    return absl::OkStatus();
  }

  /// copy_from_device of the step's output (flushes).
  absl::Status read(std::vector<uint8_t> &out) {
    out.resize(kDim * 4);
    return b_.copyFromDevice(y_, absl::MakeSpan(out));
  }

  BufferHandle output() const { return y_; }
  BufferHandle keyCache() const { return kCache_; }
  BufferHandle weights() const { return wq_; }

private:
  ComputeBackend &b_;
  absl::Status status_;
  std::vector<BufferHandle> owned_;
  BufferHandle norm_, wq_, wk_, wo_, x_, h_, q_, k_, kCache_, vCache_, scores_, att_, x2_, g_, out_,
      y_;
};

} // namespace sinter::test

#endif // SINTER_TESTS_RELIABILITY_MINIDECODER_H
