// ReferenceBackend.h - the eager, scalar backend every other backend is checked against.
//
// Each call is validated with the shared OpCall checks (support/Ops.h) and, if accepted, run at
// once with the reference kernels on host memory. It is slow on purpose: what it computes is
// SEMANTICS.md read literally, so conformance tests use it as the oracle.
#ifndef SINTER_BACKENDS_REFERENCEBACKEND_H
#define SINTER_BACKENDS_REFERENCEBACKEND_H

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "sinter/ComputeBackend.h"
#include "sinter/Factory.h"
#include "support/Ops.h"

namespace sinter {

/// The reference backend ("reference"). Thread-safe: one mutex serializes every call.
class ReferenceBackend final : public ComputeBackend {
public:
  /// Uses options.memoryLimitBytes (0: the host's physical memory); other options are ignored.
  explicit ReferenceBackend(const BackendOptions &options = {});
  ~ReferenceBackend() override;

  std::string name() const override;
  /// {"host (reference)", Cpu, the memory limit, std::thread::hardware_concurrency()}.
  DeviceInfo deviceInfo() const override;

  /// ResourceExhausted, creating nothing, when the buffers alive would exceed the memory limit or
  /// the host cannot provide the bytes.
  absl::StatusOr<BufferHandle> allocate(uint64_t sizeBytes) override;
  absl::Status free(BufferHandle handle) override;

  absl::Status matmul(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t m, uint32_t n,
                      uint32_t k) override;
  absl::Status softmax(BufferHandle in, BufferHandle out, uint32_t size) override;
  absl::Status rmsNorm(BufferHandle in, BufferHandle weight, BufferHandle out, uint32_t size,
                       float eps) override;
  absl::Status rope(BufferHandle q, BufferHandle k, uint32_t pos, uint32_t headDim, float freqBase,
                    uint32_t nHeadsQ, uint32_t nHeadsK) override;
  absl::Status silu(BufferHandle in, BufferHandle out, uint32_t size) override;
  absl::Status elementMul(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t size) override;
  absl::Status add(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t size) override;

  absl::Status copyToDevice(absl::Span<const uint8_t> data, BufferHandle handle) override;
  absl::Status copyFromDevice(BufferHandle handle, absl::Span<uint8_t> data) override;
  absl::Status copyBuffer(BufferHandle src, BufferHandle dst, uint64_t sizeBytes) override;
  absl::Status copyBufferOffset(BufferHandle src, BufferHandle dst, uint64_t srcOffset,
                                uint64_t dstOffset, uint64_t sizeBytes) override;
  /// Always Ok: every call has finished before it returns.
  absl::Status synchronize() override;

  absl::Status attnScore(BufferHandle q, BufferHandle kCache, BufferHandle scores, uint32_t headDim,
                         uint32_t seqLen, uint32_t headOffset, uint32_t kvOffset,
                         uint32_t kvStride) override;
  absl::Status attnValue(BufferHandle weights, BufferHandle vCache, BufferHandle out,
                         uint32_t headDim, uint32_t seqLen, uint32_t kvOffset, uint32_t kvStride,
                         uint32_t outOffset) override;
  absl::Status quantizedMatmul(BufferHandle weights, BufferHandle x, BufferHandle out,
                               uint32_t nRows, uint32_t nCols, DType dtype) override;

  /// Validates `op` (validateOp) and runs it with the reference kernels; the path every graph op
  /// above takes. Rejected calls change nothing.
  absl::Status run(const OpCall &op);

private:
  struct FreeBytes {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  struct Buffer {
    std::unique_ptr<uint8_t, FreeBytes> bytes;
    uint64_t size = 0;
  };

  /// NotFound "buffer N not found" for an id this backend does not hold.
  absl::StatusOr<uint64_t> sizeOfLocked(BufferHandle handle) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  uint8_t *dataLocked(BufferHandle handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t memoryLimit_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Buffer> buffers_ ABSL_GUARDED_BY(mu_);
  uint64_t bytesInUse_ ABSL_GUARDED_BY(mu_) = 0;
};

} // namespace sinter

#endif // SINTER_BACKENDS_REFERENCEBACKEND_H
