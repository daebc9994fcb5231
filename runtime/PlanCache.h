// PlanCache.h - compiled Plans by trace structure, with automatic parameter discovery.
//
// The key is the trace's structure: buffer slots in first-use order with their sizes, the op
// kinds, the slots each op uses, dtypes and float arguments, but not the integers. The first
// trace of a structure compiles a Plan with every integer fixed. When a later trace of the same
// structure differs in some integers, exactly those become Plan parameters and the Plan is
// recompiled once; from then on such traces are hits that pass their integers as parameters (as
// PyTorch's automatic dynamic shapes do). The cache is an LRU with a fixed capacity.
#ifndef SINTER_RUNTIME_PLANCACHE_H
#define SINTER_RUNTIME_PLANCACHE_H

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "support/Plan.h"

namespace sinter::runtime {

/// Counters, for SINTER_STATS and tests.
struct PlanCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;        ///< lookups that compiled (new structure or new parameters)
  uint64_t newStructures = 0; ///< misses because the structure was unseen
  uint64_t rediscoveries = 0; ///< misses because integers changed that were fixed
  uint64_t evictions = 0;
  double compileSeconds = 0;
};

class PlanCache {
public:
  /// `compiler` must outlive the cache. `capacity` structures are kept (LRU).
  explicit PlanCache(PlanCompiler &compiler, size_t capacity = 64);
  ~PlanCache();

  /// The result of a lookup: the plan to run and this trace's parameter values.
  struct Lookup {
    Plan *plan = nullptr;
    std::vector<uint64_t> params;
    bool hit = false;
    double compileSeconds = 0;
    size_t numParams() const { return params.size(); }
  };

  /// The plan for `trace`, compiling on a miss. The plan stays valid until the next lookup (which
  /// may evict or recompile it).
  absl::StatusOr<Lookup> lookup(const Trace &trace);

  /// The parameter slots of the cached plan for `trace`'s structure (empty when not cached).
  std::vector<IntSlot> parametersFor(const Trace &trace) const;

  const PlanCacheStats &stats() const { return stats_; }
  size_t size() const { return lru_.size(); }
  size_t capacity() const { return capacity_; }

  /// Structural hash of a trace (everything the key holds; integers excluded).
  static uint64_t structuralHash(const Trace &trace);
  /// True when two traces have the same structure (integers not compared).
  static bool sameStructure(const Trace &a, const Trace &b);

private:
  struct Entry;
  Entry *find(const Trace &trace, uint64_t hash) const;
  /// True when `trace` has `entry`'s structure; then `changed` gets the integers that differ
  /// from the skeleton where they are still fixed (one pass over the entries).
  static bool matches(const Entry &entry, const Trace &trace, std::vector<IntSlot> *changed);
  void touch(Entry *entry);
  void evictIfFull();

  PlanCompiler &compiler_;
  size_t capacity_;
  absl::flat_hash_map<uint64_t, std::vector<std::unique_ptr<Entry>>> entries_;
  std::list<Entry *> lru_; ///< most recently used first
  /// The entry of the last lookup of each Trace::segment, compared first: a decode loop flushes
  /// the same structures again and again, and that comparison needs no hash of the trace.
  /// Segments from kLastSegments on are always hashed.
  static constexpr size_t kLastSegments = 32;
  std::array<Entry *, kLastSegments> last_{};
  PlanCacheStats stats_;
};

} // namespace sinter::runtime

#endif // SINTER_RUNTIME_PLANCACHE_H
