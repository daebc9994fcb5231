// LruMap.h - a map that keeps at most `capacity` entries and drops the least recently used.
//
// The compilers key their compiled kernels by KernelSpec, which holds values a caller chooses
// (rms_norm's eps, rope's freq_base, sizes before they become plan parameters), so an unbounded
// map grows with every distinct value. The caches hold shared_ptrs in it: an entry dropped here
// lives on while a Plan still uses it, and is freed when the last user lets go.
// Not thread-safe: the owner serializes calls.
#ifndef SINTER_SUPPORT_LRUMAP_H
#define SINTER_SUPPORT_LRUMAP_H

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <list>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace sinter {

template <class Key, class Value> class LruMap {
public:
  /// Keeps up to `capacity` entries (at least 1).
  explicit LruMap(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}
  LruMap(const LruMap &) = delete;
  LruMap &operator=(const LruMap &) = delete;

  /// The value of `key`, made the most recently used; null when absent. Valid until the next
  /// insert or clear.
  Value *find(const Key &key) {
    auto it = index_.find(key);
    if (it == index_.end())
      return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  bool contains(const Key &key) const { return index_.contains(key); }

  /// Stores `value` under `key` (replacing an existing value) as the most recently used, then
  /// drops the least recently used entries beyond the capacity, never this one. Values are
  /// destroyed after the map is consistent again, so their destructors may look at it.
  Value &insert(const Key &key, Value value) {
    if (Value *old = find(key)) {
      Value previous = std::exchange(*old, std::move(value)); // destroyed after the swap
      (void)previous;
      return *old;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    Order dropped;
    while (order_.size() > capacity_) {
      dropped.splice(dropped.end(), order_, std::prev(order_.end()));
      index_.erase(dropped.back().first);
      ++evictions_;
    }
    return order_.front().second;
  }

  /// Drops every entry (not counted as evictions).
  void clear() {
    Order dropped;
    dropped.swap(order_);
    index_.clear();
  }

  size_t size() const { return order_.size(); }
  size_t capacity() const { return capacity_; }
  /// Entries dropped to make room, over the life of the map.
  uint64_t evictions() const { return evictions_; }

private:
  using Order = std::list<std::pair<Key, Value>>; ///< most recently used first
  size_t capacity_;
  Order order_;
  absl::flat_hash_map<Key, typename Order::iterator> index_;
  uint64_t evictions_ = 0;
};

} // namespace sinter

#endif // SINTER_SUPPORT_LRUMAP_H
