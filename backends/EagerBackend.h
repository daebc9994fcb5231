// EagerBackend.h - runs every graph call at once on the backend it wraps.
//
// The eager per-op path of a lazy backend (BackendOptions::eager): each call is recorded and
// flushed on its own, so it runs on its single-op kernel before the call returns, and its errors
// (deferred ones included) come back from that call. Same kernels, no fusion, one op at a time:
// the honest baseline the benchmarks compare the fused backend with.
#ifndef SINTER_BACKENDS_EAGERBACKEND_H
#define SINTER_BACKENDS_EAGERBACKEND_H

#include <memory>
#include <string>

#include "runtime/LazyBackend.h"
#include "support/OpCallBackend.h"

namespace sinter {

class EagerBackend final : public OpCallBackend {
public:
  /// `inner` should compile without fusion (a trace of one call has nothing to fuse anyway).
  explicit EagerBackend(std::unique_ptr<runtime::LazyBackend> inner);
  ~EagerBackend() override;

  std::string name() const override;
  DeviceInfo deviceInfo() const override;
  absl::StatusOr<BufferHandle> allocate(uint64_t sizeBytes) override;
  absl::Status free(BufferHandle handle) override;
  absl::Status copyToDevice(absl::Span<const uint8_t> data, BufferHandle handle) override;
  absl::Status copyFromDevice(BufferHandle handle, absl::Span<uint8_t> data) override;
  absl::Status synchronize() override;
  /// Validates, records and runs `op` (a flush of one call) before returning.
  absl::Status submit(const OpCall &op) override;

  /// The wrapped backend's counters (one flush per call).
  runtime::LazyStats stats() const { return inner_->stats(); }

private:
  std::unique_ptr<runtime::LazyBackend> inner_;
};

} // namespace sinter

#endif // SINTER_BACKENDS_EAGERBACKEND_H
