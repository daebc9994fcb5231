// PlanCacheTest.cpp - tests runtime/PlanCache.cpp: structural keys, hits, misses, automatic
// parameter discovery and the LRU bound.
#include "runtime/PlanCache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sinter::runtime {
namespace {

// Counts compiles and remembers the parameters of the last one.
class CountingCompiler : public PlanCompiler {
public:
  std::string name() const override { return "counting"; }
  absl::StatusOr<std::unique_ptr<Plan>> compile(const Trace &trace,
                                                const std::vector<IntSlot> &params) override {
    ++compiles;
    lastParams = params;
    if (fail)
      return absl::InternalError("no");
    return std::unique_ptr<Plan>(new NullPlan());
  }
  struct NullPlan : Plan {
    absl::Status run(const PlanArgs &) override { return absl::OkStatus(); }
    size_t numKernels() const override { return 0; }
    std::string describe() const override { return ""; }
  };
  int compiles = 0;
  bool fail = false;
  std::vector<IntSlot> lastParams;
};

BufferHandle slot(uint32_t s) { return Trace::handleOfSlot(s); }

// rms_norm(slot0, slot1 -> slot2), rope(slot2, slot3) at `pos`.
Trace makeTrace(uint32_t pos, uint64_t size = 64) {
  Trace t;
  t.buffers = {{size * 4, true}, {size * 4, true}, {size * 4, true}, {size * 4, true}};
  TraceEntry norm;
  norm.op = ops::rmsNorm(slot(0), slot(1), slot(2), uint32_t(size), 1e-5f);
  TraceEntry rope;
  rope.op = ops::rope(slot(2), slot(3), pos, 8, 10000.0f, uint32_t(size / 8), uint32_t(size / 8));
  t.entries = {norm, rope};
  return t;
}

TEST(PlanCacheTest, SameTraceIsAHit) {
  CountingCompiler compiler;
  PlanCache cache(compiler);
  auto first = cache.lookup(makeTrace(0));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->hit);
  auto second = cache.lookup(makeTrace(0));
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->hit);
  EXPECT_EQ(compiler.compiles, 1);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
}

TEST(PlanCacheTest, ChangingIntegerBecomesAParameterOnce) {
  CountingCompiler compiler;
  PlanCache cache(compiler);
  ASSERT_TRUE(cache.lookup(makeTrace(0)).ok());
  EXPECT_TRUE(compiler.lastParams.empty());
  auto second = cache.lookup(makeTrace(1));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->hit);
  ASSERT_EQ(compiler.lastParams.size(), 1u);
  // Entry 1 (rope), integer 0 (pos).
  EXPECT_EQ(compiler.lastParams[0], (IntSlot{1, 0}));
  EXPECT_EQ(second->params, std::vector<uint64_t>{1});
  for (uint32_t pos = 2; pos < 20; ++pos) {
    auto next = cache.lookup(makeTrace(pos));
    ASSERT_TRUE(next.ok());
    EXPECT_TRUE(next->hit) << "pos " << pos;
    EXPECT_EQ(next->params, std::vector<uint64_t>{pos});
  }
  EXPECT_EQ(compiler.compiles, 2);
  EXPECT_EQ(cache.stats().rediscoveries, 1u);
}

TEST(PlanCacheTest, DifferentBufferSizesAreDifferentStructures) {
  CountingCompiler compiler;
  PlanCache cache(compiler);
  ASSERT_TRUE(cache.lookup(makeTrace(0, 64)).ok());
  auto other = cache.lookup(makeTrace(0, 128));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->hit);
  EXPECT_EQ(cache.stats().newStructures, 2u);
  EXPECT_NE(PlanCache::structuralHash(makeTrace(0, 64)),
            PlanCache::structuralHash(makeTrace(0, 128)));
  EXPECT_EQ(PlanCache::structuralHash(makeTrace(0)), PlanCache::structuralHash(makeTrace(7)));
}

TEST(PlanCacheTest, FloatArgumentsAndSlotsArePartOfTheStructure) {
  Trace a = makeTrace(0);
  Trace b = makeTrace(0);
  b.entries[0].op.scalar = 1e-6f;
  EXPECT_FALSE(PlanCache::sameStructure(a, b));
  Trace c = makeTrace(0);
  c.entries[1].op.buffers[1] = slot(0); // rope on another slot
  EXPECT_FALSE(PlanCache::sameStructure(a, c));
  Trace d = makeTrace(0);
  d.buffers[3].observable = false;
  EXPECT_FALSE(PlanCache::sameStructure(a, d));
}

TEST(PlanCacheTest, LeastRecentlyUsedStructureIsEvicted) {
  CountingCompiler compiler;
  PlanCache cache(compiler, /*capacity=*/2);
  ASSERT_TRUE(cache.lookup(makeTrace(0, 8)).ok());
  ASSERT_TRUE(cache.lookup(makeTrace(0, 16)).ok());
  ASSERT_TRUE(cache.lookup(makeTrace(0, 8)).ok());  // 8 is now the most recent
  ASSERT_TRUE(cache.lookup(makeTrace(0, 24)).ok()); // evicts 16
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.stats().evictions, 1u);
  auto again8 = cache.lookup(makeTrace(0, 8));
  ASSERT_TRUE(again8.ok());
  EXPECT_TRUE(again8->hit);
  auto again16 = cache.lookup(makeTrace(0, 16));
  ASSERT_TRUE(again16.ok());
  EXPECT_FALSE(again16->hit);
}

// The last lookup's entry is compared first (no hash); other structures still find theirs, and
// evicting that entry leaves nothing dangling (the ASan twin of this test would say).
TEST(PlanCacheTest, AlternatingStructuresHitAndTheLastEntryMayBeEvicted) {
  CountingCompiler compiler;
  PlanCache cache(compiler, /*capacity=*/2);
  ASSERT_TRUE(cache.lookup(makeTrace(0, 8)).ok());
  ASSERT_TRUE(cache.lookup(makeTrace(0, 16)).ok());
  for (uint32_t i = 0; i < 6; ++i) {
    auto r = cache.lookup(makeTrace(0, i % 2 ? 16 : 8));
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->hit) << "lookup " << i;
  }
  EXPECT_EQ(compiler.compiles, 2);
  // A structure whose position changed, right after the other: found through its hash, and
  // the changed integer becomes a parameter (a rediscovery, not a new structure).
  auto moved = cache.lookup(makeTrace(5, 8));
  ASSERT_TRUE(moved.ok());
  EXPECT_FALSE(moved->hit);
  EXPECT_EQ(moved->params, std::vector<uint64_t>{5});
  EXPECT_EQ(cache.stats().rediscoveries, 1u);
  EXPECT_EQ(cache.stats().newStructures, 2u);

  PlanCache one(compiler, /*capacity=*/1);
  ASSERT_TRUE(one.lookup(makeTrace(0, 8)).ok());
  ASSERT_TRUE(one.lookup(makeTrace(0, 16)).ok()); // evicts the last entry (8)
  auto again = one.lookup(makeTrace(0, 8));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->hit);
  EXPECT_EQ(one.stats().evictions, 2u);
  auto same = one.lookup(makeTrace(0, 8));
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->hit);
}

TEST(PlanCacheTest, CompileFailureIsReturnedAndNotCached) {
  CountingCompiler compiler;
  compiler.fail = true;
  PlanCache cache(compiler);
  auto result = cache.lookup(makeTrace(0));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(cache.size(), 0u);
  compiler.fail = false;
  EXPECT_TRUE(cache.lookup(makeTrace(0)).ok());
}

} // namespace
} // namespace sinter::runtime
