// EagerBackend.cpp - forwards to the wrapped lazy backend and flushes after every graph call.
#include "backends/EagerBackend.h"

#include "sinter/Status.h"

namespace sinter {

EagerBackend::EagerBackend(std::unique_ptr<runtime::LazyBackend> inner)
    : inner_(std::move(inner)) {}

EagerBackend::~EagerBackend() = default;

std::string EagerBackend::name() const { return inner_->name(); }

DeviceInfo EagerBackend::deviceInfo() const { return inner_->deviceInfo(); }

absl::StatusOr<BufferHandle> EagerBackend::allocate(uint64_t sizeBytes) {
  return inner_->allocate(sizeBytes);
}

absl::Status EagerBackend::free(BufferHandle handle) { return inner_->free(handle); }

absl::Status EagerBackend::copyToDevice(absl::Span<const uint8_t> data, BufferHandle handle) {
  // Nothing is ever pending here, so the lazy backend copies at once.
  return inner_->copyToDevice(data, handle);
}

absl::Status EagerBackend::copyFromDevice(BufferHandle handle, absl::Span<uint8_t> data) {
  return inner_->copyFromDevice(handle, data);
}

absl::Status EagerBackend::synchronize() { return inner_->synchronize(); }

absl::Status EagerBackend::submit(const OpCall &op) {
  SINTER_RETURN_IF_ERROR(inner_->submit(op));
  return inner_->synchronize();
}

} // namespace sinter
