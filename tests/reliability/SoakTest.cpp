// SoakTest.cpp - a bounded long run: many tokens, several threads, allocate/free churn.
//
// Each thread drives a MiniDecoder (28 backend calls a token, one of them a scratch buffer
// allocated, used and freed while pending) and a ReferenceBackend decoder in lockstep, and
// compares every token's output. After a warm-up the process's live heap (ASan's allocator
// figure under ASan, mallinfo2 otherwise) and the backend's live buffers must stop growing, and
// the plan cache must stay within its capacity. SINTER_SOAK_CALLS sets the calls per test
// (default 1,000,000: seconds; tools/run-long-tests.sh runs 20 million).
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "backends/ReferenceBackend.h"
#include "runtime/LazyBackend.h"
#include "runtime/PlanInterpreter.h"
#include "sinter/Factory.h"
#include "tests/reliability/MiniDecoder.h"
#include "tests/support/Nmse.h"

// ASan's own count of live heap bytes (weak: absent outside sanitizer builds).
extern "C" size_t __sanitizer_get_current_allocated_bytes() __attribute__((weak));

namespace sinter::test {
namespace {

uint64_t liveHeapBytes() {
  if (__sanitizer_get_current_allocated_bytes)
    return __sanitizer_get_current_allocated_bytes();
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

uint64_t soakCalls(uint64_t fallback) {
  const char *s = std::getenv("SINTER_SOAK_CALLS");
  uint64_t n = s ? std::strtoull(s, nullptr, 10) : 0;
  return n ? n : fallback;
}

// A buffer store that counts live buffers and bytes (the "device memory" of a lazy backend).
class CountingStore final : public runtime::BufferStore {
public:
  explicit CountingStore(uint64_t limit) : inner_(limit) {}
  absl::StatusOr<BufferHandle> allocate(uint64_t sizeBytes) override {
    absl::StatusOr<BufferHandle> h = inner_.allocate(sizeBytes);
    if (h.ok()) {
      ++buffers;
      bytes += sizeBytes;
    }
    return h;
  }
  absl::Status release(BufferHandle handle) override {
    absl::StatusOr<uint64_t> size = inner_.size(handle);
    absl::Status s = inner_.release(handle);
    if (s.ok()) {
      --buffers;
      bytes -= *size;
    }
    return s;
  }
  absl::StatusOr<uint64_t> size(BufferHandle handle) const override { return inner_.size(handle); }
  bool contains(BufferHandle handle) const override { return inner_.contains(handle); }
  absl::Status write(BufferHandle handle, absl::Span<const uint8_t> data) override {
    return inner_.write(handle, data);
  }
  absl::Status read(BufferHandle handle, absl::Span<uint8_t> out) override {
    return inner_.read(handle, out);
  }
  uint8_t *hostData(BufferHandle handle) const override { return inner_.hostData(handle); }
  DeviceInfo deviceInfo(const std::string &compiler) const override {
    return inner_.deviceInfo(compiler);
  }

  std::atomic<int64_t> buffers{0}, bytes{0};

private:
  runtime::HostBufferStore inner_;
};

struct SoakResult {
  uint64_t calls = 0;
  uint64_t tokens = 0;
  double seconds = 0;
  int64_t heapGrowth = 0; ///< live heap at the end minus after warm-up
};

// `threads` threads, each running `tokensPerThread` tokens of its own decoder on `backend`,
// compared with a reference decoder every token. `bitExact`: compare bytes, else NMSE.
SoakResult soak(ComputeBackend &backend, int threads, uint64_t tokensPerThread, bool bitExact,
                const std::function<void()> &afterWarmup = nullptr) {
  const uint64_t warmupTokens = std::max<uint64_t>(tokensPerThread / 10, 2 * MiniDecoder::kContext);
  tokensPerThread = std::max(tokensPerThread, 3 * warmupTokens);
  std::atomic<uint64_t> failures{0};
  // Two rendezvous points: after warm-up and before the decoders are destroyed. The last thread
  // to arrive takes the heap figure while every decoder is alive and idle.
  struct Rendezvous {
    std::atomic<int> arrived{0};
    std::atomic<bool> done{false};
    uint64_t heap = 0;
  } warm, end;
  auto meet = [&](Rendezvous &point, const std::function<void()> &action) {
    if (++point.arrived == threads) {
      if (action)
        action();
      point.heap = liveHeapBytes();
      point.done = true;
    }
    while (!point.done && failures == 0)
      std::this_thread::yield();
  };
  auto start = std::chrono::steady_clock::now();
  auto body = [&](int t) {
    ReferenceBackend reference;
    MiniDecoder d(backend, 100 + t), r(reference, 100 + t);
    if (!d.status().ok() || !r.status().ok()) {
      ADD_FAILURE() << "setup: " << d.status() << " / " << r.status();
      ++failures;
      return;
    }
    std::vector<uint8_t> got, want;
    for (uint64_t token = 0; token < tokensPerThread && failures == 0; ++token) {
      if (token == warmupTokens)
        meet(warm, afterWarmup);
      absl::Status s = d.step(token);
      if (s.ok())
        s = d.read(got);
      if (!s.ok()) {
        ADD_FAILURE() << "thread " << t << " token " << token << ": " << s;
        ++failures;
        break;
      }
      (void)r.step(token);
      (void)r.read(want);
      bool same = bitExact ? got == want
                           : bool(nmseWithin(absl::Span<const float>(bytesFloats(got)),
                                             absl::Span<const float>(bytesFloats(want)),
                                             kQuantizedActivationTolerance));
      if (!same) {
        ADD_FAILURE() << "thread " << t << " token " << token << ": output differs";
        ++failures;
      }
    }
    meet(end, nullptr);
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(body, t);
  for (std::thread &th : pool)
    th.join();
  SoakResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.tokens = uint64_t(threads) * tokensPerThread;
  result.calls = result.tokens * (MiniDecoder::kCallsPerStep + 1);
  result.heapGrowth = int64_t(end.heap) - int64_t(warm.heap);
  return result;
}

// Slack for allocator bookkeeping (hash-map capacity reached late, thread caches).
constexpr int64_t kHeapSlack = 1 << 20;

void report(const char *what, const SoakResult &r) {
  std::printf("soak %s: %llu calls (%llu tokens) in %.1f s, %.2f us/call, live heap %+lld bytes "
              "after warm-up\n",
              what, static_cast<unsigned long long>(r.calls),
              static_cast<unsigned long long>(r.tokens), r.seconds, r.seconds * 1e6 / r.calls,
              static_cast<long long>(r.heapGrowth));
}

// Four threads on one lazy backend (plan interpreter): the traces of a flush interleave the
// threads' calls, so structures vary and the LRU plan cache is exercised as well as hits.
TEST(SoakTest, FourThreadsShareALazyBackend) {
  constexpr int kThreads = 4;
  uint64_t tokens = soakCalls(1000000) / (MiniDecoder::kCallsPerStep + 1) / kThreads;
  auto store = std::make_unique<CountingStore>(64 << 20);
  CountingStore *counted = store.get();
  runtime::LazyBackendOptions options;
  options.compiler = std::make_unique<runtime::InterpreterCompiler>();
  options.store = std::move(store);
  options.planCacheCapacity = 16;
  runtime::LazyBackend lazy(std::move(options));
  int64_t buffersAtWarmup = -1, bytesAtWarmup = -1;
  SoakResult r = soak(lazy, kThreads, tokens, /*bitExact=*/true, [&] {
    buffersAtWarmup = counted->buffers;
    bytesAtWarmup = counted->bytes;
  });
  report("lazy x4 threads", r);
  runtime::LazyStats stats = lazy.stats();
  std::printf("soak lazy x4 threads: %llu flushes, plan cache %llu hits, %llu misses, %llu "
              "evictions, %llu deferred frees\n",
              static_cast<unsigned long long>(stats.flushes),
              static_cast<unsigned long long>(stats.cache.hits),
              static_cast<unsigned long long>(stats.cache.misses),
              static_cast<unsigned long long>(stats.cache.evictions),
              static_cast<unsigned long long>(stats.deferredFrees));
  EXPECT_LE(r.heapGrowth, kHeapSlack);
  // Every decoder buffer is freed at the end; during the run the count stayed bounded.
  EXPECT_EQ(counted->buffers, 0);
  EXPECT_EQ(counted->bytes, 0);
  EXPECT_GT(buffersAtWarmup, 0);
  EXPECT_LE(buffersAtWarmup, kThreads * 17 + 8);
  EXPECT_LE(stats.cache.newStructures - stats.cache.evictions, 16u) << "plan cache over capacity";
  EXPECT_GT(stats.deferredFrees, 0u);
  EXPECT_GT(stats.cache.hits, 0u);
}

// The cpu kind (fused, JIT kernels): two threads with a backend each, so every token after the
// first few is a plan-cache hit and no kernel is compiled after warm-up.
TEST(SoakTest, CpuBackendsReachASteadyState) {
  constexpr int kThreads = 2;
  uint64_t tokens = soakCalls(1000000) / (MiniDecoder::kCallsPerStep + 1) / kThreads;
  BackendOptions o;
  o.kind = "cpu";
  o.memoryLimitBytes = 64 << 20;
  std::vector<std::unique_ptr<ComputeBackend>> backends;
  for (int t = 0; t < kThreads; ++t) {
    absl::StatusOr<std::unique_ptr<ComputeBackend>> made = createBackend(o);
    ASSERT_TRUE(made.ok()) << made.status();
    backends.push_back(std::move(*made));
  }
  // One backend per thread: run soak() once per backend concurrently.
  std::vector<SoakResult> results(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] { results[t] = soak(*backends[t], 1, tokens, false); });
  for (std::thread &th : pool)
    th.join();
  for (int t = 0; t < kThreads; ++t) {
    report("cpu (one backend per thread)", results[t]);
    auto *lazy = dynamic_cast<runtime::LazyBackend *>(backends[t].get());
    ASSERT_NE(lazy, nullptr);
    runtime::LazyStats stats = lazy->stats();
    // One structure; its integers (pos, seq_len, offsets) become parameters within a few tokens.
    EXPECT_LE(stats.cache.misses, 8u);
    EXPECT_EQ(stats.cache.evictions, 0u);
    EXPECT_GE(stats.cache.hits, results[t].tokens - 8);
  }
  // The threads measured concurrently, so each saw the other's heap too: bound the sum.
  EXPECT_LE(results[0].heapGrowth + results[1].heapGrowth, 2 * kHeapSlack);
}

// The vulkan kind (lavapipe in CI): descriptor sets, pipelines and device memory are reused
// from token to token; exhaustion would surface as a failing call. A tenth of the calls, since
// lavapipe runs each kernel on the CPU.
TEST(SoakTest, VulkanBackendReachesASteadyState) {
  BackendOptions o;
  o.kind = "vulkan";
  o.memoryLimitBytes = 64 << 20;
  absl::StatusOr<std::unique_ptr<ComputeBackend>> made = createBackend(o);
  if (!made.ok())
    GTEST_SKIP() << "vulkan kind not available: " << made.status();
  uint64_t tokens = soakCalls(1000000) / 10 / (MiniDecoder::kCallsPerStep + 1);
  ::testing::internal::CaptureStderr(); // the fallback notes of fused kernels, once per shape
  SoakResult r = soak(**made, 1, tokens, false);
  (void)::testing::internal::GetCapturedStderr();
  report("vulkan", r);
  auto *lazy = dynamic_cast<runtime::LazyBackend *>(made->get());
  if (lazy) {
    runtime::LazyStats stats = lazy->stats();
    EXPECT_LE(stats.cache.misses, 8u);
    EXPECT_EQ(stats.cache.evictions, 0u);
  }
  EXPECT_LE(r.heapGrowth, kHeapSlack);
}

// Many distinct trace structures through a small cache: the LRU evicts, and evicted plans free
// their memory.
TEST(SoakTest, PlanCacheStaysWithinItsCapacity) {
  runtime::LazyBackendOptions options;
  options.planCacheCapacity = 8;
  runtime::LazyBackend lazy(std::move(options));
  BufferHandle a = uploadFloats(lazy, std::vector<float>(64, 1.0f));
  BufferHandle b = uploadFloats(lazy, std::vector<float>(64, 0.5f));
  auto cycle = [&] {
    // Structure n: n+1 adds (64 structures, each run once per cycle).
    for (int n = 0; n < 64; ++n) {
      for (int i = 0; i <= n; ++i)
        ASSERT_TRUE(lazy.add(a, b, b, 64).ok());
      ASSERT_TRUE(lazy.synchronize().ok());
    }
  };
  cycle();
  uint64_t heap = liveHeapBytes();
  for (int c = 0; c < 20; ++c)
    cycle();
  int64_t growth = int64_t(liveHeapBytes()) - int64_t(heap);
  runtime::LazyStats stats = lazy.stats();
  std::printf("soak plan cache: %llu misses, %llu evictions, capacity 8, live heap %+lld bytes\n",
              static_cast<unsigned long long>(stats.cache.misses),
              static_cast<unsigned long long>(stats.cache.evictions),
              static_cast<long long>(growth));
  EXPECT_EQ(stats.cache.newStructures - stats.cache.evictions, 8u);
  EXPECT_EQ(stats.cache.evictions, 21u * 64 - 8);
  EXPECT_LE(growth, kHeapSlack);
}

} // namespace
} // namespace sinter::test
