// LazyBackend.h - the ComputeBackend that records calls and runs them as compiled Plans.
//
// Each graph call is validated exactly as the reference backend validates it, then appended to
// the pending Trace; nothing runs until a flush point: synchronize, copy_from_device (which
// flushes everything recorded, not only what the read depends on: one flush per token is the
// point), or the trace-size limit. A flush looks the trace up in the PlanCache (compiling on a
// miss) and runs the Plan over the buffer store's memory (host memory unless the options name a
// BufferStore, as the Vulkan backend does for device memory). Failures of deferred work are
// reported by the next synchronize or copy_from_device.
#ifndef SINTER_RUNTIME_LAZYBACKEND_H
#define SINTER_RUNTIME_LAZYBACKEND_H

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "runtime/PlanCache.h"
#include "support/HostBuffers.h"
#include "support/OpCallBackend.h"
#include "support/Plan.h"

namespace sinter::runtime {

/// Counters of one backend, for SINTER_STATS and tests.
struct LazyStats {
  uint64_t callsRecorded = 0;
  uint64_t flushes = 0;
  uint64_t kernelsLaunched = 0;
  uint64_t sizeLimitFlushes = 0;
  /// Flushes an allocation made to reclaim the bytes of buffers freed while work still read them.
  uint64_t memoryLimitFlushes = 0;
  uint64_t deferredFrees = 0;
  PlanCacheStats cache;
  /// Host time of the flushes: finding the plan (keying the trace, comparing it with the cached
  /// one, taking its parameters), and running it (Plan::run: for a device, resolving and
  /// submitting the commands and waiting for them).
  double lookupSeconds = 0;
  double runSeconds = 0;
  /// Host time from the end of one flush to the start of the next: the engine's own work and
  /// recording its calls (a decode step's calls, when it flushes once a token).
  double betweenFlushSeconds = 0;
  /// Host time of copy_from_device after its flush: the device-to-host transfer (none for a
  /// folded read, which the flush's run time includes).
  double readSeconds = 0;
  /// copy_from_device calls whose bytes the flush's plan copied out in its own submission.
  uint64_t foldedReads = 0;
  /// Flushes made early without waiting (LazyBackendOptions::overlapCalls); also in `flushes`.
  uint64_t overlapFlushes = 0;
  /// Queue submissions of the device the plans ran on (LazyBackendOptions::deviceSubmissions);
  /// unset where the plans run on the host.
  std::optional<uint64_t> submissions;
};

/// Where a lazy backend keeps the bytes of its buffers: host memory by default (HostBufferStore),
/// device memory for a GPU backend. The recorder, the plan cache and parameter discovery do not
/// depend on it; a Plan reaches each slot's bytes through PlanArgs::slotData (hostData) or
/// PlanArgs::slotDevice (deviceRef). The backend serializes every call under its lock, and calls
/// write and read only when no recorded work touches the buffer (after a flush has completed).
class BufferStore {
public:
  virtual ~BufferStore();
  /// A new zero-filled buffer with a fresh process-wide id; ResourceExhausted (and nothing
  /// created) when the memory or the limit says no.
  virtual absl::StatusOr<BufferHandle> allocate(uint64_t sizeBytes) = 0;
  /// Releases the bytes; NotFound "free: buffer 7 not found" when unknown.
  virtual absl::Status release(BufferHandle handle) = 0;
  /// Size of a live buffer, or NotFound "buffer 7 not found".
  virtual absl::StatusOr<uint64_t> size(BufferHandle handle) const = 0;
  virtual bool contains(BufferHandle handle) const = 0;
  /// Writes `data` at offset 0 of a live buffer, now.
  virtual absl::Status write(BufferHandle handle, absl::Span<const uint8_t> data) = 0;
  /// Reads out.size() bytes from offset 0 of a live buffer, now.
  virtual absl::Status read(BufferHandle handle, absl::Span<uint8_t> out) = 0;
  /// The buffer's bytes in host memory, or null when they live elsewhere.
  virtual uint8_t *hostData(BufferHandle handle) const = 0;
  /// The store's opaque reference to a live buffer for Plans over device memory (null for host
  /// memory). Valid until the buffer is released or the next allocate.
  virtual void *deviceRef(BufferHandle handle) const { return nullptr; }
  /// What deviceInfo() reports; `compiler` is the plan compiler's name.
  virtual DeviceInfo deviceInfo(const std::string &compiler) const = 0;
  /// Waits for device work that a Plan run with PlanArgs::mayFinishLater left running (a device
  /// store); the host store has none.
  virtual absl::Status drain() { return absl::OkStatus(); }
};

/// The default store: HostBuffers under a byte limit (0: the host's physical memory).
class HostBufferStore final : public BufferStore {
public:
  explicit HostBufferStore(uint64_t limitBytes = 0) : buffers_(limitBytes) {}
  absl::StatusOr<BufferHandle> allocate(uint64_t sizeBytes) override;
  absl::Status release(BufferHandle handle) override { return buffers_.release(handle); }
  absl::StatusOr<uint64_t> size(BufferHandle handle) const override {
    return buffers_.size(handle);
  }
  bool contains(BufferHandle handle) const override { return buffers_.contains(handle); }
  absl::Status write(BufferHandle handle, absl::Span<const uint8_t> data) override;
  absl::Status read(BufferHandle handle, absl::Span<uint8_t> out) override;
  uint8_t *hostData(BufferHandle handle) const override { return buffers_.data(handle); }
  DeviceInfo deviceInfo(const std::string &compiler) const override;

private:
  HostBuffers buffers_;
};

struct LazyBackendOptions {
  /// Makes the Plans; the plan interpreter when null.
  std::unique_ptr<PlanCompiler> compiler;
  /// Keeps the buffers; a HostBufferStore of memoryLimitBytes when null.
  std::unique_ptr<BufferStore> store;
  /// name() of the backend.
  std::string name = "sinter-lazy";
  /// A trace this long is flushed on the next call (SINTER_MAX_TRACE overrides).
  size_t maxTraceEntries = 1 << 16;
  size_t planCacheCapacity = 64;
  /// Limit of the default host store; 0: the host's physical memory.
  uint64_t memoryLimitBytes = 0;
  /// Overlap the device with the engine's recording (SINTER_OVERLAP overrides): an `add` call
  /// that leaves at least this many calls pending flushes them at once without waiting for the
  /// device (PlanArgs::mayFinishLater), so the device runs them while the engine records the
  /// rest of the token; the next flush point waits for everything. An add ends a decode
  /// layer's residual stream, so the pieces cut between fused kernels, not through them. The
  /// pieces of a token are keyed by their place in it (Trace::segment), so each keeps its own
  /// plan. 0 (the default): flush only at the flush points.
  size_t overlapCalls = 0;
  /// Each piece of a token waits for `overlapGrowth` times the calls of the one before
  /// (overlapCalls, then overlapCalls * growth, ...; SINTER_OVERLAP_GROWTH overrides): the
  /// first piece starts the device early, and the later ones are long enough for the device to
  /// run while the next is recorded, with few submissions (each costs the device a few µs).
  size_t overlapGrowth = 8;
  /// Print one line per flush to stderr (also set by SINTER_STATS=1).
  bool printStats = false;
  /// The device's queue submissions so far (LazyStats::submissions), for a store on a device
  /// whose plans count them (the vulkan kind); null on the host.
  std::function<uint64_t()> deviceSubmissions;
  /// Called at each flush, before the plan runs, with the trace and the caller's handle of each
  /// slot (sinter-dump records workloads with it; benchmarks replay the calls).
  std::function<void(const Trace &, absl::Span<const BufferHandle> slotHandles)> onFlush;
};

class LazyBackend final : public OpCallBackend {
public:
  explicit LazyBackend(LazyBackendOptions options = {});
  ~LazyBackend() override;

  std::string name() const override;
  DeviceInfo deviceInfo() const override;
  absl::StatusOr<BufferHandle> allocate(uint64_t sizeBytes) override;
  /// Releases the handle at once (later uses are NotFound); the bytes live until recorded work
  /// that reads them has run.
  absl::Status free(BufferHandle handle) override;
  absl::Status copyToDevice(absl::Span<const uint8_t> data, BufferHandle handle) override;
  /// Flushes everything recorded, then reads.
  absl::Status copyFromDevice(BufferHandle handle, absl::Span<uint8_t> data) override;
  absl::Status synchronize() override;
  absl::Status submit(const OpCall &op) override;

  /// Counters so far.
  LazyStats stats() const;
  /// Entries recorded and not yet flushed.
  size_t pendingEntries() const;
  /// The parameter slots the plan cache found for traces of `trace`'s structure (empty when
  /// none is cached). Tools use it to print a recorded trace with its parameters.
  std::vector<IntSlot> planParameters(const Trace &trace) const;
  /// describe() of the Plan the last flush ran ("" before the first flush).
  std::string lastPlanDescription() const;

private:
  /// What the recorder knows of a live handle: its size, and its slot in the pending trace when
  /// `epoch` is the present one (a flush starts a new epoch instead of clearing the slots).
  struct Known {
    uint64_t size = 0;
    uint32_t slot = 0;
    uint32_t epoch = 0; // 0: never in a trace (epochs count from 1)
  };
  /// Runs the trace. `readback`, when given, names a read of a slot the plan may fold into its
  /// own submission.
  /// `overlap`: the run may return before the device finishes (LazyBackendOptions::
  /// overlapCalls); the next flush point waits.
  absl::Status flushLocked(const char *why, PlanReadback *readback = nullptr, bool overlap = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The entry of a live handle, or null when it is unknown or freed.
  Known *known(BufferHandle handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The handle's slot in the pending trace, adding it on first use.
  uint32_t slotOf(BufferHandle handle, Known &k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool inTrace(const Known &k) const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return k.epoch == epoch_; }
  /// The pending calls at which an add ends the present piece (LazyBackendOptions::overlapCalls
  /// times overlapGrowth to the power of segment_).
  size_t overlapThreshold() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> liveSize(BufferHandle handle) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void releasePendingFrees() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  /// Serializes every call. A std::mutex: the record path takes it once a call, and absl::Mutex
  /// as Debian builds it (deadlock detection on) cost about a quarter of a recorded call.
  mutable std::mutex mu_;
  LazyBackendOptions options_;
  std::unique_ptr<PlanCompiler> compiler_;
  std::unique_ptr<BufferStore> memory_ ABSL_GUARDED_BY(mu_);
  /// Handles freed by the caller whose bytes pending work still reads.
  absl::flat_hash_map<uint64_t, bool> zombies_ ABSL_GUARDED_BY(mu_);
  std::vector<BufferHandle> pendingFrees_ ABSL_GUARDED_BY(mu_);
  PlanCache cache_ ABSL_GUARDED_BY(mu_);
  Trace trace_ ABSL_GUARDED_BY(mu_);
  std::vector<BufferHandle> slotHandles_ ABSL_GUARDED_BY(mu_);
  /// Every live handle allocated here (freed ones leave at free): one lookup a buffer argument
  /// gives the size validation needs and the slot recording needs.
  absl::flat_hash_map<uint64_t, Known> known_ ABSL_GUARDED_BY(mu_);
  /// A direct-mapped cache in front of known_: a recorded call looks up to three handles, and a
  /// decode step's few hundred buffers repeat every step. Entry id % kKnownCacheSize holds a
  /// pointer into known_, valid while its generation is knownGeneration_ (allocate may rehash
  /// known_, free drops an entry: both start a new generation).
  struct KnownCacheEntry {
    uint64_t id = 0;
    uint64_t generation = 0; // 0: empty (generations count from 1)
    Known *known = nullptr;
  };
  static constexpr size_t kKnownCacheSize = 1024;
  std::array<KnownCacheEntry, kKnownCacheSize> knownCache_ ABSL_GUARDED_BY(mu_){};
  uint64_t knownGeneration_ ABSL_GUARDED_BY(mu_) = 1;
  uint32_t epoch_ ABSL_GUARDED_BY(mu_) = 1;
  /// Overlapped flushes since the last complete one (the next trace's Trace::segment), and
  /// whether one may still be running on the device.
  uint32_t segment_ ABSL_GUARDED_BY(mu_) = 0;
  bool overlapRunning_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status deferredError_ ABSL_GUARDED_BY(mu_);
  LazyStats stats_ ABSL_GUARDED_BY(mu_);
  /// When the last flush ended (LazyStats::betweenFlushSeconds); unset before the first.
  std::optional<std::chrono::steady_clock::time_point> lastFlushEnd_ ABSL_GUARDED_BY(mu_);
  std::string lastPlan_ ABSL_GUARDED_BY(mu_);
};

} // namespace sinter::runtime

#endif // SINTER_RUNTIME_LAZYBACKEND_H
