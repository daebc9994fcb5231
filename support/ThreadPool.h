// ThreadPool.h - a fixed pool of worker threads with a blocking parallelFor.
//
// The CPU backend splits each kernel's parallel dimension (rows, row blocks, elements) across the
// machine's cores. Kernels come in quick succession during a decode step, so idle workers spin for
// a short while before they sleep: the wake-up latency of a condition variable would otherwise be
// paid once per kernel. No MLIR here.
#ifndef SINTER_SUPPORT_THREADPOOL_H
#define SINTER_SUPPORT_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace sinter {

class ThreadPool {
public:
  /// A pool of `numThreads` threads in all, the caller of parallelFor included (so numThreads - 1
  /// workers are started; 0 is taken as 1).
  explicit ThreadPool(unsigned numThreads);
  /// Joins the workers; no parallelFor may be running.
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// The process-wide pool: std::thread::hardware_concurrency() threads, or SINTER_THREADS when
  /// that is set to a positive number. Created on first use, never destroyed.
  static ThreadPool &shared();
  /// The thread count the shared pool uses (SINTER_THREADS, else the hardware's).
  static unsigned defaultSize();

  /// Threads in all, the caller included.
  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  /// Calls fn(begin, end) on disjoint chunks that cover [0, n), at least `grain` long except the
  /// last, on the workers and the calling thread; returns when every chunk has run. With one
  /// thread, n <= grain, or when called from inside a chunk of this pool, fn(0, n) runs inline.
  /// Calls from several threads are serialized.
  void parallelFor(uint64_t n, absl::FunctionRef<void(uint64_t, uint64_t)> fn, uint64_t grain = 1);

private:
  struct Job {
    absl::FunctionRef<void(uint64_t, uint64_t)> *fn = nullptr;
    uint64_t n = 0;
    uint64_t chunk = 0;
    uint64_t numChunks = 0;
    uint64_t nextChunk = 0; ///< guarded by mu_
    uint64_t pending = 0;   ///< chunks not yet finished; guarded by mu_
  };

  void workerLoop();
  /// Claims and runs chunks of the current job until none are left. Called with `lock` held;
  /// returns with it held.
  void runChunks(std::unique_lock<std::mutex> &lock);

  std::vector<std::thread> workers_;
  std::mutex submitMu_; ///< one parallelFor at a time
  std::mutex mu_;
  std::condition_variable workCv_;
  std::condition_variable doneCv_;
  Job job_;               ///< guarded by mu_
  bool hasJob_ = false;   ///< guarded by mu_
  bool stopping_ = false; ///< guarded by mu_
  /// Bumped (under mu_) for each job; workers spin on it before sleeping on workCv_.
  std::atomic<uint64_t> generation_{0};
};

} // namespace sinter

#endif // SINTER_SUPPORT_THREADPOOL_H
