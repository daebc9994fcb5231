// RangeAllocator.h - free-list sub-allocation of offsets inside one fixed-size block.
//
// Pure bookkeeping (no Vulkan), so the churn and fragmentation behaviour is testable alone.
// Best fit over the free ranges (ordered by size), neighbours coalesced on free (ordered by
// offset); every operation is O(log n) in the number of free ranges.
#ifndef SINTER_RUNTIME_VULKAN_RANGEALLOCATOR_H
#define SINTER_RUNTIME_VULKAN_RANGEALLOCATOR_H

#include <cstdint>
#include <map>
#include <optional>

#include "absl/container/flat_hash_map.h"

namespace sinter::runtime::vulkan {

class RangeAllocator {
public:
  explicit RangeAllocator(uint64_t capacity);

  /// The offset of `size` bytes aligned to `alignment` (a power of two), or nullopt when no
  /// free range holds them. size 0 is treated as 1.
  std::optional<uint64_t> allocate(uint64_t size, uint64_t alignment);
  /// Returns the range that allocate returned at `offset`; false when there is none.
  bool free(uint64_t offset);

  uint64_t capacity() const { return capacity_; }
  uint64_t usedBytes() const { return used_; }
  size_t numAllocations() const { return live_.size(); }
  size_t numFreeRanges() const { return byOffset_.size(); }
  /// The largest free range (what the biggest allocation with alignment 1 could get).
  uint64_t largestFreeRange() const;
  bool empty() const { return live_.empty(); }

private:
  void insertFree(uint64_t offset, uint64_t size);
  void eraseFree(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t capacity_;
  uint64_t used_ = 0;
  /// Free ranges: offset -> size, and (size, offset) for best fit.
  std::map<uint64_t, uint64_t> byOffset_;
  std::multimap<uint64_t, uint64_t> bySize_;
  /// Live allocations: offset -> {start of the range taken (before alignment padding), size}.
  struct Taken {
    uint64_t start;
    uint64_t size;
  };
  absl::flat_hash_map<uint64_t, Taken> live_;
};

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_RANGEALLOCATOR_H
