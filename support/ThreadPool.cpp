// ThreadPool.cpp - workers that claim chunks of one job at a time.
//
// A job is published under mu_ with a new generation number; workers claim chunk indices under
// the same mutex (chunks are coarse, a few per thread, so the lock is cheap next to the work) and
// the caller claims chunks too, then waits until the last one has finished. A worker that finds
// no job spins on the generation counter for up to kSpinMicros before it sleeps.
#include "support/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "support/Env.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sinter {
namespace {

constexpr int64_t kSpinMicros = 200;

// Set while a thread runs a chunk of some pool: nested parallelFor calls run inline.
thread_local bool tInsideChunk = false;

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

} // namespace

ThreadPool::ThreadPool(unsigned numThreads) {
  unsigned n = std::max(1u, numThreads);
  workers_.reserve(n - 1);
  for (unsigned i = 0; i + 1 < n; ++i)
    workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  workCv_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

unsigned ThreadPool::defaultSize() {
  // The factory rejects a bad SINTER_THREADS first (checkLibraryEnvironment); a pool used
  // without it keeps the hardware's count and says so.
  return static_cast<unsigned>(
      envIntegerOr(kEnvThreads, std::max(1u, std::thread::hardware_concurrency())));
}

ThreadPool &ThreadPool::shared() {
  static ThreadPool *pool = new ThreadPool(defaultSize());
  return *pool;
}

void ThreadPool::runChunks(std::unique_lock<std::mutex> &lock) {
  while (hasJob_ && job_.nextChunk < job_.numChunks) {
    uint64_t c = job_.nextChunk++;
    uint64_t begin = c * job_.chunk;
    uint64_t end = std::min(job_.n, begin + job_.chunk);
    auto *fn = job_.fn;
    lock.unlock();
    tInsideChunk = true;
    (*fn)(begin, end);
    tInsideChunk = false;
    lock.lock();
    if (--job_.pending == 0)
      doneCv_.notify_all();
  }
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly: the next kernel of a decode step usually follows within microseconds.
    auto spinStart = std::chrono::steady_clock::now();
    for (int i = 0; generation_.load(std::memory_order_acquire) == seen; ++i) {
      cpuRelax();
      if ((i & 255) == 255 &&
          std::chrono::steady_clock::now() - spinStart > std::chrono::microseconds(kSpinMicros))
        break;
    }
    std::unique_lock<std::mutex> lock(mu_);
    workCv_.wait(lock, [&] { return stopping_ || generation_.load() != seen; });
    if (stopping_)
      return;
    seen = generation_.load();
    runChunks(lock);
  }
}

void ThreadPool::parallelFor(uint64_t n, absl::FunctionRef<void(uint64_t, uint64_t)> fn,
                             uint64_t grain) {
  if (n == 0)
    return;
  grain = std::max<uint64_t>(grain, 1);
  if (workers_.empty() || n <= grain || tInsideChunk) {
    fn(0, n);
    return;
  }
  // A few chunks per thread balance uneven progress without much claiming.
  uint64_t wanted = uint64_t(size()) * 4;
  uint64_t chunk = std::max(grain, (n + wanted - 1) / wanted);
  std::lock_guard<std::mutex> submit(submitMu_);
  std::unique_lock<std::mutex> lock(mu_);
  job_.fn = &fn;
  job_.n = n;
  job_.chunk = chunk;
  job_.numChunks = (n + chunk - 1) / chunk;
  job_.nextChunk = 0;
  job_.pending = job_.numChunks;
  hasJob_ = true;
  generation_.fetch_add(1, std::memory_order_release);
  lock.unlock();
  workCv_.notify_all();
  lock.lock();
  runChunks(lock);
  doneCv_.wait(lock, [&] { return job_.pending == 0; });
  hasJob_ = false;
}

} // namespace sinter
