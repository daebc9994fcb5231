// HostBuffers.h - a table of zero-filled host buffers under a memory limit.
//
// The reference backend and the lazy backend's host memory both hand out BufferHandles for
// calloc'ed bytes; this is that table, with the errors SEMANTICS.md asks for (NotFound for an
// unknown handle, ResourceExhausted with nothing created when the limit or the host says no).
// Not thread-safe: the owning backend serializes calls.
#ifndef SINTER_SUPPORT_HOSTBUFFERS_H
#define SINTER_SUPPORT_HOSTBUFFERS_H

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "sinter/ComputeBackend.h"

namespace sinter {

class HostBuffers {
public:
  /// `limitBytes` 0 means the host's physical memory.
  explicit HostBuffers(uint64_t limitBytes = 0);

  /// A new zero-filled buffer with a fresh process-wide id. `what` prefixes errors.
  absl::StatusOr<BufferHandle> allocate(uint64_t sizeBytes, const char *what = "allocate");
  /// Releases the bytes; NotFound ("free: buffer 7 not found") when unknown.
  absl::Status release(BufferHandle handle);

  /// Size of a live buffer, or NotFound "buffer 7 not found".
  absl::StatusOr<uint64_t> size(BufferHandle handle) const;
  /// Bytes of a live buffer (asserts it exists: call after validation).
  uint8_t *data(BufferHandle handle) const;
  bool contains(BufferHandle handle) const { return buffers_.contains(handle.id); }

  uint64_t limitBytes() const { return limit_; }
  uint64_t usedBytes() const { return used_; }
  size_t count() const { return buffers_.size(); }

private:
  struct FreeBytes {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  struct Buffer {
    std::unique_ptr<uint8_t, FreeBytes> bytes;
    uint64_t size = 0;
  };
  absl::flat_hash_map<uint64_t, Buffer> buffers_;
  uint64_t limit_;
  uint64_t used_ = 0;
};

/// The host's physical memory in bytes (sysconf), or 16 GiB when it cannot be read.
uint64_t physicalMemoryBytes();

} // namespace sinter

#endif // SINTER_SUPPORT_HOSTBUFFERS_H
