// ThreadPoolTest.cpp - tests support/ThreadPool.cpp (kept beside the CPU code generator that is
// its only user): chunks cover the range exactly once, small and nested calls run inline, and
// concurrent callers are serialized.
#include "support/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace sinter {
namespace {

TEST(ThreadPoolTest, EveryIndexRunsExactlyOnce) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.size(), 4u);
  for (uint64_t n : {1ull, 2ull, 3ull, 17ull, 1000ull, 100003ull}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallelFor(n, [&](uint64_t begin, uint64_t end) {
      ASSERT_LT(begin, end);
      for (uint64_t i = begin; i < end; ++i)
        hits[i].fetch_add(1);
    });
    for (uint64_t i = 0; i < n; ++i)
      ASSERT_EQ(hits[i].load(), 1) << "n " << n << " index " << i;
  }
}

TEST(ThreadPoolTest, UsesSeveralThreadsAndRespectsTheGrain) {
  ThreadPool pool(3);
  std::atomic<uint64_t> shortest{~0ull};
  std::vector<std::thread::id> ids;
  std::mutex mu;
  pool.parallelFor(
      10000,
      [&](uint64_t begin, uint64_t end) {
        if (end != 10000)
          shortest = std::min<uint64_t>(shortest.load(), end - begin);
        std::lock_guard<std::mutex> lock(mu);
        ids.push_back(std::this_thread::get_id());
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      },
      /*grain=*/1000);
  EXPECT_GE(shortest.load(), 1000u);
  std::sort(ids.begin(), ids.end());
  EXPECT_GT(std::unique(ids.begin(), ids.end()) - ids.begin(), 1);
}

TEST(ThreadPoolTest, ZeroDoesNothingAndOneThreadRunsInline) {
  ThreadPool single(1);
  bool called = false;
  single.parallelFor(0, [&](uint64_t, uint64_t) { called = true; });
  EXPECT_FALSE(called);
  std::thread::id caller = std::this_thread::get_id(), ran;
  single.parallelFor(50, [&](uint64_t begin, uint64_t end) {
    EXPECT_EQ(begin, 0u);
    EXPECT_EQ(end, 50u);
    ran = std::this_thread::get_id();
  });
  EXPECT_EQ(ran, caller);
}

TEST(ThreadPoolTest, NestedCallsRunInline) {
  ThreadPool pool(4);
  std::atomic<uint64_t> total{0};
  pool.parallelFor(8, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i)
      pool.parallelFor(100, [&](uint64_t b, uint64_t e) { total += e - b; });
  });
  EXPECT_EQ(total.load(), 800u);
}

TEST(ThreadPoolTest, ConcurrentCallersAreSerialized) {
  ThreadPool pool(3);
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round)
        pool.parallelFor(1000, [&](uint64_t b, uint64_t e) { total += e - b; });
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(total.load(), 4u * 50u * 1000u);
}

TEST(ThreadPoolTest, SharedPoolHonoursSinterThreads) {
  EXPECT_GE(ThreadPool::defaultSize(), 1u);
  EXPECT_EQ(ThreadPool::shared().size(), ThreadPool::defaultSize());
}

} // namespace
} // namespace sinter
