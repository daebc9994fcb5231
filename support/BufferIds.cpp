// BufferIds.cpp - one atomic counter for the buffer ids of every backend in the process.
//
// A 64-bit counter incremented once per allocation cannot wrap in the lifetime of a process, so
// "never reused" needs no free list.
#include "support/BufferIds.h"

#include <atomic>

namespace sinter {

uint64_t nextBufferId() {
  static std::atomic<uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

} // namespace sinter
