// HostBuffers.cpp - calloc'ed buffers with a byte limit and process-wide ids.
#include "support/HostBuffers.h"

#include <cassert>
#include <unistd.h>

#include "absl/strings/str_format.h"
#include "support/BufferIds.h"

namespace sinter {

uint64_t physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || pageSize <= 0)
    return uint64_t(16) << 30;
  return uint64_t(pages) * uint64_t(pageSize);
}

HostBuffers::HostBuffers(uint64_t limitBytes)
    : limit_(limitBytes ? limitBytes : physicalMemoryBytes()) {}

absl::StatusOr<BufferHandle> HostBuffers::allocate(uint64_t sizeBytes, const char *what) {
  if (sizeBytes > limit_ - used_)
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s: %d bytes requested, %d of the %d-byte limit available", what,
                        sizeBytes, limit_ - used_, limit_));
  // calloc(0) may return nullptr; one byte keeps "nullptr means failure" unambiguous.
  void *bytes = std::calloc(sizeBytes ? sizeBytes : 1, 1);
  if (!bytes)
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s: the host could not provide %d bytes", what, sizeBytes));
  BufferHandle handle{nextBufferId()};
  Buffer &b = buffers_[handle.id];
  b.bytes.reset(static_cast<uint8_t *>(bytes));
  b.size = sizeBytes;
  used_ += sizeBytes;
  return handle;
}

absl::Status HostBuffers::release(BufferHandle handle) {
  auto it = buffers_.find(handle.id);
  if (it == buffers_.end())
    return absl::NotFoundError(absl::StrFormat("free: buffer %d not found", handle.id));
  used_ -= it->second.size;
  buffers_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> HostBuffers::size(BufferHandle handle) const {
  auto it = buffers_.find(handle.id);
  if (it == buffers_.end())
    return absl::NotFoundError(absl::StrFormat("buffer %d not found", handle.id));
  return it->second.size;
}

uint8_t *HostBuffers::data(BufferHandle handle) const {
  auto it = buffers_.find(handle.id);
  assert(it != buffers_.end() && "HostBuffers::data of an unknown buffer");
  return it->second.bytes.get();
}

} // namespace sinter
