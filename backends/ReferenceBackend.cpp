// ReferenceBackend.cpp - buffers in host memory, every op validated then run eagerly.
//
// All checking lives in support/Ops (validateOp, validateHostTransfer) so that this backend and
// the compiled ones reject the same calls with the same messages; this file only owns storage.
#include "backends/ReferenceBackend.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "sinter/Status.h"

namespace sinter {
ReferenceBackend::ReferenceBackend(const BackendOptions &options)
    : memory_(options.memoryLimitBytes) {}

ReferenceBackend::~ReferenceBackend() = default;

std::string ReferenceBackend::name() const { return "reference"; }

DeviceInfo ReferenceBackend::deviceInfo() const {
  absl::MutexLock lock(&mu_);
  return DeviceInfo{"host (reference)", BackendKind::Cpu, memory_.limitBytes(),
                    std::thread::hardware_concurrency()};
}

absl::StatusOr<BufferHandle> ReferenceBackend::allocate(uint64_t sizeBytes) {
  absl::MutexLock lock(&mu_);
  return memory_.allocate(sizeBytes);
}

absl::Status ReferenceBackend::free(BufferHandle handle) {
  absl::MutexLock lock(&mu_);
  return memory_.release(handle);
}

absl::Status ReferenceBackend::submit(const OpCall &op) {
  absl::MutexLock lock(&mu_);
  // The lambdas run inside the calls below, with mu_ held; the analysis cannot see through them.
  SINTER_RETURN_IF_ERROR(validateOp(
      op, [this](BufferHandle h) ABSL_NO_THREAD_SAFETY_ANALYSIS { return memory_.size(h); }));
  executeReference(op, [this](BufferHandle h)
                           ABSL_NO_THREAD_SAFETY_ANALYSIS { return memory_.data(h); });
  return absl::OkStatus();
}

absl::Status ReferenceBackend::copyToDevice(absl::Span<const uint8_t> data, BufferHandle handle) {
  absl::MutexLock lock(&mu_);
  SINTER_RETURN_IF_ERROR(validateHostTransfer(
      "copy_to_device", handle, data.size(),
      [this](BufferHandle h) ABSL_NO_THREAD_SAFETY_ANALYSIS { return memory_.size(h); }));
  if (!data.empty())
    std::memcpy(memory_.data(handle), data.data(), data.size());
  return absl::OkStatus();
}

absl::Status ReferenceBackend::copyFromDevice(BufferHandle handle, absl::Span<uint8_t> data) {
  absl::MutexLock lock(&mu_);
  SINTER_RETURN_IF_ERROR(validateHostTransfer(
      "copy_from_device", handle, data.size(),
      [this](BufferHandle h) ABSL_NO_THREAD_SAFETY_ANALYSIS { return memory_.size(h); }));
  if (!data.empty())
    std::memcpy(data.data(), memory_.data(handle), data.size());
  return absl::OkStatus();
}

absl::Status ReferenceBackend::synchronize() { return absl::OkStatus(); }

} // namespace sinter
