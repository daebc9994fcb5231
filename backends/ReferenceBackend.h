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
#include "support/HostBuffers.h"
#include "support/OpCallBackend.h"

namespace sinter {

/// The reference backend ("reference"). Thread-safe: one mutex serializes every call.
class ReferenceBackend final : public OpCallBackend {
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

  absl::Status copyToDevice(absl::Span<const uint8_t> data, BufferHandle handle) override;
  absl::Status copyFromDevice(BufferHandle handle, absl::Span<uint8_t> data) override;
  /// Always Ok: every call has finished before it returns.
  absl::Status synchronize() override;

  /// Validates `op` (validateOp) and runs it with the reference kernels; the path every graph op
  /// takes. Rejected calls change nothing.
  absl::Status submit(const OpCall &op) override;

private:
  mutable absl::Mutex mu_;
  HostBuffers memory_ ABSL_GUARDED_BY(mu_);
};

} // namespace sinter

#endif // SINTER_BACKENDS_REFERENCEBACKEND_H
