// OpCallBackend.h - a ComputeBackend whose twelve graph operations arrive as OpCalls.
//
// The reference and the lazy backends differ only in what they do with a validated OpCall (run it
// now or record it), so the per-method plumbing from ComputeBackend's signatures to OpCall
// builders lives here once.
#ifndef SINTER_SUPPORT_OPCALLBACKEND_H
#define SINTER_SUPPORT_OPCALLBACKEND_H

#include "sinter/ComputeBackend.h"
#include "support/Ops.h"

namespace sinter {

/// Implements the graph operations of ComputeBackend by forwarding them to submit().
class OpCallBackend : public ComputeBackend {
public:
  /// Validates and executes (or records) one graph op. Rejected calls change nothing.
  virtual absl::Status submit(const OpCall &op) = 0;

  absl::Status matmul(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t m, uint32_t n,
                      uint32_t k) final {
    return submit(ops::matmul(a, b, out, m, n, k));
  }
  absl::Status softmax(BufferHandle in, BufferHandle out, uint32_t size) final {
    return submit(ops::softmax(in, out, size));
  }
  absl::Status rmsNorm(BufferHandle in, BufferHandle weight, BufferHandle out, uint32_t size,
                       float eps) final {
    return submit(ops::rmsNorm(in, weight, out, size, eps));
  }
  absl::Status rope(BufferHandle q, BufferHandle k, uint32_t pos, uint32_t headDim, float freqBase,
                    uint32_t nHeadsQ, uint32_t nHeadsK) final {
    return submit(ops::rope(q, k, pos, headDim, freqBase, nHeadsQ, nHeadsK));
  }
  absl::Status silu(BufferHandle in, BufferHandle out, uint32_t size) final {
    return submit(ops::silu(in, out, size));
  }
  absl::Status elementMul(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t size) final {
    return submit(ops::elementMul(a, b, out, size));
  }
  absl::Status add(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t size) final {
    return submit(ops::add(a, b, out, size));
  }
  absl::Status copyBuffer(BufferHandle src, BufferHandle dst, uint64_t sizeBytes) final {
    return submit(ops::copyBuffer(src, dst, sizeBytes));
  }
  absl::Status copyBufferOffset(BufferHandle src, BufferHandle dst, uint64_t srcOffset,
                                uint64_t dstOffset, uint64_t sizeBytes) final {
    return submit(ops::copyBufferOffset(src, dst, srcOffset, dstOffset, sizeBytes));
  }
  absl::Status attnScore(BufferHandle q, BufferHandle kCache, BufferHandle scores, uint32_t headDim,
                         uint32_t seqLen, uint32_t headOffset, uint32_t kvOffset,
                         uint32_t kvStride) final {
    return submit(
        ops::attnScore(q, kCache, scores, headDim, seqLen, headOffset, kvOffset, kvStride));
  }
  absl::Status attnValue(BufferHandle weights, BufferHandle vCache, BufferHandle out,
                         uint32_t headDim, uint32_t seqLen, uint32_t kvOffset, uint32_t kvStride,
                         uint32_t outOffset) final {
    return submit(
        ops::attnValue(weights, vCache, out, headDim, seqLen, kvOffset, kvStride, outOffset));
  }
  absl::Status quantizedMatmul(BufferHandle weights, BufferHandle x, BufferHandle out,
                               uint32_t nRows, uint32_t nCols, DType dtype) final {
    return submit(ops::quantizedMatmul(weights, x, out, nRows, nCols, dtype));
  }
};

} // namespace sinter

#endif // SINTER_SUPPORT_OPCALLBACKEND_H
