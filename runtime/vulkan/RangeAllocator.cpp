// RangeAllocator.cpp - best-fit free list with coalescing (see RangeAllocator.h).
#include "runtime/vulkan/RangeAllocator.h"

#include <cassert>

namespace sinter::runtime::vulkan {

RangeAllocator::RangeAllocator(uint64_t capacity) : capacity_(capacity) {
  if (capacity > 0)
    insertFree(0, capacity);
}

void RangeAllocator::insertFree(uint64_t offset, uint64_t size) {
  byOffset_.emplace(offset, size);
  bySize_.emplace(size, offset);
}

void RangeAllocator::eraseFree(std::map<uint64_t, uint64_t>::iterator it) {
  auto [lo, hi] = bySize_.equal_range(it->second);
  for (auto s = lo; s != hi; ++s) {
    if (s->second == it->first) {
      bySize_.erase(s);
      break;
    }
  }
  byOffset_.erase(it);
}

std::optional<uint64_t> RangeAllocator::allocate(uint64_t size, uint64_t alignment) {
  assert(alignment > 0 && (alignment & (alignment - 1)) == 0 && "alignment must be a power of 2");
  if (size == 0)
    size = 1;
  // Best fit: the smallest free range that can hold size plus its alignment padding. Ranges at
  // least size + alignment - 1 long always fit; shorter ones may fit when already aligned.
  for (auto s = bySize_.lower_bound(size); s != bySize_.end(); ++s) {
    uint64_t start = s->second, length = s->first;
    uint64_t aligned = (start + alignment - 1) & ~(alignment - 1);
    if (aligned + size > start + length)
      continue;
    eraseFree(byOffset_.find(start));
    // The padding before `aligned` stays with the allocation (it is at most alignment - 1 bytes
    // and would only fragment the list); the tail goes back.
    uint64_t end = aligned + size;
    if (end < start + length)
      insertFree(end, start + length - end);
    live_[aligned] = Taken{start, end - start};
    used_ += end - start;
    return aligned;
  }
  return std::nullopt;
}

bool RangeAllocator::free(uint64_t offset) {
  auto found = live_.find(offset);
  if (found == live_.end())
    return false;
  uint64_t start = found->second.start, size = found->second.size;
  used_ -= size;
  live_.erase(found);
  // Coalesce with the free neighbours on both sides.
  auto next = byOffset_.lower_bound(start);
  if (next != byOffset_.end() && next->first == start + size) {
    size += next->second;
    eraseFree(next);
  }
  auto after = byOffset_.lower_bound(start);
  if (after != byOffset_.begin()) {
    auto prev = std::prev(after);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      eraseFree(prev);
    }
  }
  insertFree(start, size);
  return true;
}

uint64_t RangeAllocator::largestFreeRange() const {
  return bySize_.empty() ? 0 : bySize_.rbegin()->first;
}

} // namespace sinter::runtime::vulkan
