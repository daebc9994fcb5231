// PlanCache.cpp - structural keys, parameter discovery and the LRU of compiled plans.
//
// A hit compares the trace with the cached skeleton entry by entry (the hash only picks the
// bucket), reads the parameter integers out of it, and touches nothing else: no MLIR, and no
// allocation beyond the parameter vector.
#include "runtime/PlanCache.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/hash/hash.h"
#include "sinter/Status.h"

namespace sinter::runtime {

struct PlanCache::Entry {
  uint64_t hash = 0;
  Trace skeleton;               ///< the first trace (payloads dropped); fixed integers live here
  std::vector<IntSlot> params;  ///< sorted by (entry, index)
  std::vector<uint8_t> isParam; ///< per entry: bit i set when ints[i] is a parameter
  std::unique_ptr<Plan> plan;
  std::list<Entry *>::iterator lruPos;
};

PlanCache::PlanCache(PlanCompiler &compiler, size_t capacity)
    : compiler_(compiler), capacity_(std::max<size_t>(capacity, 1)) {}
PlanCache::~PlanCache() = default;

namespace {

uint32_t floatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

bool sameBuffers(const Trace &a, const Trace &b) {
  if (a.segment != b.segment || a.buffers.size() != b.buffers.size())
    return false;
  for (size_t i = 0; i < a.buffers.size(); ++i)
    if (a.buffers[i].sizeBytes != b.buffers[i].sizeBytes ||
        a.buffers[i].observable != b.buffers[i].observable)
      return false;
  return true;
}

bool sameEntryStructure(const TraceEntry &a, const TraceEntry &b) {
  if (a.kind != b.kind)
    return false;
  if (a.kind == TraceEntry::Kind::Upload)
    return a.uploadSlot == b.uploadSlot && a.uploadBytes == b.uploadBytes;
  return a.op.kind == b.op.kind && a.op.buffers == b.op.buffers && a.op.dtype == b.op.dtype &&
         floatBits(a.op.scalar) == floatBits(b.op.scalar);
}

} // namespace

uint64_t PlanCache::structuralHash(const Trace &trace) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ trace.buffers.size();
  auto mix = [&h](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  mix(trace.segment);
  for (const TraceBuffer &b : trace.buffers) {
    mix(b.sizeBytes);
    mix(b.observable);
  }
  for (const TraceEntry &e : trace.entries) {
    if (e.kind == TraceEntry::Kind::Upload) {
      mix(0xffff0000u | e.uploadSlot);
      mix(e.uploadBytes);
      continue;
    }
    mix(static_cast<uint64_t>(e.op.kind) << 32 | static_cast<uint32_t>(e.op.dtype));
    for (BufferHandle b : e.op.buffers)
      mix(b.id);
    mix(floatBits(e.op.scalar));
  }
  return absl::HashOf(h);
}

bool PlanCache::sameStructure(const Trace &a, const Trace &b) {
  if (a.entries.size() != b.entries.size() || !sameBuffers(a, b))
    return false;
  for (size_t i = 0; i < a.entries.size(); ++i)
    if (!sameEntryStructure(a.entries[i], b.entries[i]))
      return false;
  return true;
}

PlanCache::Entry *PlanCache::find(const Trace &trace, uint64_t hash) const {
  auto it = entries_.find(hash);
  if (it == entries_.end())
    return nullptr;
  for (const std::unique_ptr<Entry> &e : it->second)
    if (sameStructure(e->skeleton, trace))
      return e.get();
  return nullptr;
}

bool PlanCache::matches(const Entry &entry, const Trace &trace, std::vector<IntSlot> *changed) {
  const Trace &skeleton = entry.skeleton;
  if (skeleton.entries.size() != trace.entries.size() || !sameBuffers(skeleton, trace))
    return false;
  changed->clear();
  for (uint32_t i = 0; i < trace.entries.size(); ++i) {
    const TraceEntry &e = trace.entries[i];
    const TraceEntry &fixed = skeleton.entries[i];
    if (!sameEntryStructure(fixed, e)) {
      changed->clear();
      return false;
    }
    if (e.kind != TraceEntry::Kind::Op)
      continue;
    const uint8_t numInts = opInfo(e.op.kind).numInts;
    for (uint8_t j = 0; j < numInts; ++j)
      if (!(entry.isParam[i] >> j & 1) && e.op.ints[j] != fixed.op.ints[j])
        changed->push_back({i, j});
  }
  return true;
}

void PlanCache::touch(Entry *entry) { lru_.splice(lru_.begin(), lru_, entry->lruPos); }

void PlanCache::evictIfFull() {
  while (lru_.size() >= capacity_) {
    Entry *victim = lru_.back();
    uint64_t hash = victim->hash; // the erase below destroys *victim
    lru_.pop_back();
    auto &bucket = entries_[hash];
    bucket.erase(std::find_if(bucket.begin(), bucket.end(),
                              [&](const std::unique_ptr<Entry> &e) { return e.get() == victim; }));
    if (bucket.empty())
      entries_.erase(hash);
    for (Entry *&last : last_)
      if (last == victim)
        last = nullptr;
    ++stats_.evictions;
  }
}

std::vector<IntSlot> PlanCache::parametersFor(const Trace &trace) const {
  Entry *e = find(trace, structuralHash(trace));
  return e ? e->params : std::vector<IntSlot>{};
}

absl::StatusOr<PlanCache::Lookup> PlanCache::lookup(const Trace &trace) {
  Lookup result;
  // Integers that differ from the skeleton at positions that are still fixed.
  std::vector<IntSlot> changed;
  Entry *entry = nullptr;
  uint64_t hash = 0;
  Entry *last = trace.segment < kLastSegments ? last_[trace.segment] : nullptr;
  if (last && matches(*last, trace, &changed)) {
    entry = last;
    hash = entry->hash;
  } else {
    hash = structuralHash(trace);
    auto it = entries_.find(hash);
    if (it != entries_.end())
      for (const std::unique_ptr<Entry> &e : it->second)
        if (matches(*e, trace, &changed)) {
          entry = e.get();
          break;
        }
  }

  if (!entry || !changed.empty()) {
    std::vector<IntSlot> params;
    if (entry) {
      params = entry->params;
      params.insert(params.end(), changed.begin(), changed.end());
      std::sort(params.begin(), params.end(), [](IntSlot a, IntSlot b) {
        return a.entry != b.entry ? a.entry < b.entry : a.index < b.index;
      });
    }
    auto start = std::chrono::steady_clock::now();
    SINTER_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, compiler_.compile(trace, params));
    result.compileSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats_.compileSeconds += result.compileSeconds;
    ++stats_.misses;
    if (!entry) {
      ++stats_.newStructures;
      evictIfFull();
      auto owned = std::make_unique<Entry>();
      entry = owned.get();
      entry->hash = hash;
      entry->skeleton.buffers = trace.buffers;
      entry->skeleton.entries = trace.entries;
      entry->skeleton.segment = trace.segment;
      entry->isParam.assign(trace.entries.size(), 0);
      lru_.push_front(entry);
      entry->lruPos = lru_.begin();
      entries_[hash].push_back(std::move(owned));
    } else {
      ++stats_.rediscoveries;
    }
    entry->params = std::move(params);
    for (IntSlot p : entry->params)
      entry->isParam[p.entry] |= uint8_t(1u << p.index);
    entry->plan = std::move(plan);
  } else {
    ++stats_.hits;
    result.hit = true;
  }
  touch(entry);
  if (trace.segment < kLastSegments)
    last_[trace.segment] = entry;
  result.plan = entry->plan.get();
  result.params.reserve(entry->params.size());
  for (IntSlot p : entry->params)
    result.params.push_back(trace.entries[p.entry].op.ints[p.index]);
  return result;
}

} // namespace sinter::runtime
