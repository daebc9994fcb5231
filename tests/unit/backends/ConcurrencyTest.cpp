// ConcurrencyTest.cpp - several threads using one backend (and several backends) at once.
//
// ComputeBackend promises thread safety: concurrent calls are serialized. Each thread here runs
// its own allocate / upload / op chain / read back / free loop with its own numbers, so a lost
// update, a torn buffer or a reused id shows up as a wrong result or a repeated id.
#include <algorithm>
#include <random>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "backends/ReferenceBackend.h"
#include "support/BufferIds.h"
#include "tests/support/TestData.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

constexpr int kThreads = 8;
constexpr int kRounds = 40;
constexpr uint32_t kSize = 256;

// Rounds of out = rms_norm(a + b) * a on the shared backend, each compared with the same chain on
// a private backend; the ids used on the shared one are kept.
struct Worker {
  ComputeBackend *shared;
  int index;
  std::vector<uint64_t> ids;
  int failures = 0;

  void run() {
    std::mt19937 rng(1000 + index);
    ReferenceBackend privateBackend;
    for (int round = 0; round < kRounds; ++round) {
      std::vector<float> a = test::randomFloats(kSize, rng), b = test::randomFloats(kSize, rng);
      std::vector<float> got = chain(*shared, a, b, /*recordIds=*/true);
      std::vector<float> want = chain(privateBackend, a, b, /*recordIds=*/false);
      if (got != want)
        ++failures;
    }
  }

  std::vector<float> chain(ComputeBackend &backend, const std::vector<float> &a,
                           const std::vector<float> &b, bool recordIds) {
    BufferHandle ha = test::uploadFloats(backend, a), hb = test::uploadFloats(backend, b);
    BufferHandle w = test::uploadFloats(backend, std::vector<float>(kSize, 2.0f));
    absl::StatusOr<BufferHandle> out = backend.allocate(kSize * 4);
    if (!out.ok()) {
      ++failures;
      return {};
    }
    bool ok = backend.add(ha, hb, *out, kSize).ok() &&
              backend.rmsNorm(*out, w, *out, kSize, 1e-6f).ok() &&
              backend.elementMul(*out, ha, *out, kSize).ok() && backend.synchronize().ok();
    std::vector<float> result =
        ok ? test::downloadFloats(backend, *out, kSize) : std::vector<float>{};
    for (BufferHandle h : {ha, hb, w, *out}) {
      if (recordIds)
        ids.push_back(h.id);
      if (!backend.free(h).ok())
        ++failures;
    }
    return result;
  }
};

TEST(ConcurrencyTest, ThreadsSharingOneBackendGetCorrectResultsAndFreshIds) {
  // Exactly what the threads can hold at once (4 buffers each): a leak or a lost free in the
  // accounting makes some allocate fail, or the final whole-limit allocate below.
  BackendOptions options;
  options.memoryLimitBytes = uint64_t(kThreads) * 4 * kSize * 4;
  ReferenceBackend backend(options);
  std::vector<Worker> workers;
  for (int i = 0; i < kThreads; ++i)
    workers.push_back(Worker{&backend, i, {}, 0});
  std::vector<std::thread> threads;
  for (Worker &w : workers)
    threads.emplace_back([&w] { w.run(); });
  for (std::thread &t : threads)
    t.join();

  absl::flat_hash_set<uint64_t> seen;
  size_t total = 0;
  for (const Worker &w : workers) {
    EXPECT_EQ(w.failures, 0) << "worker " << w.index;
    EXPECT_EQ(w.ids.size(), size_t(kRounds) * 4) << "worker " << w.index << " lost buffers";
    for (uint64_t id : w.ids) {
      EXPECT_NE(id, 0u);
      EXPECT_TRUE(seen.insert(id).second) << "id " << id << " handed out twice";
    }
    total += w.ids.size();
  }
  EXPECT_EQ(seen.size(), total);
  // Everything was freed: the whole limit is available again.
  EXPECT_TRUE(backend.allocate(options.memoryLimitBytes).ok());
}

TEST(ConcurrencyTest, BufferIdsAreUniqueAcrossThreadsAndBackends) {
  std::vector<std::vector<uint64_t>> perThread(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&perThread, i] {
      ReferenceBackend backend; // one backend per thread: ids still never collide
      for (int n = 0; n < 500; ++n) {
        absl::StatusOr<BufferHandle> h = backend.allocate(4);
        if (!h.ok())
          return;
        perThread[i].push_back(h->id);
        perThread[i].push_back(nextBufferId());
      }
    });
  for (std::thread &t : threads)
    t.join();
  absl::flat_hash_set<uint64_t> seen;
  for (const auto &ids : perThread) {
    EXPECT_EQ(ids.size(), 1000u);
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end())) << "ids of one thread must increase";
    for (uint64_t id : ids)
      EXPECT_TRUE(seen.insert(id).second) << "id " << id << " repeated";
  }
}

} // namespace
} // namespace sinter
