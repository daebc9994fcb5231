// LazyBackend.cpp - validate, record, and at a flush run the cached Plan of the trace.
//
// The record path is a validation, a few hash-map lookups and an append; the flush path is a
// PlanCache lookup (a structural comparison on a hit) and Plan::run. Errors of deferred work are
// kept and returned by the next synchronize or copy_from_device.
#include "runtime/LazyBackend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/FaultInjection.h"
#include "runtime/PlanInterpreter.h"
#include "sinter/Status.h"
#include "support/Env.h"

namespace sinter::runtime {
namespace {

LazyBackendOptions withEnvironment(LazyBackendOptions options) {
  if (const char *s = std::getenv("SINTER_STATS"); s && std::string_view(s) != "0" && *s)
    options.printStats = true;
  // The factory rejects bad values first (checkLibraryEnvironment); a backend built without it
  // keeps its option and says so.
  options.maxTraceEntries = envIntegerOr(kEnvMaxTrace, options.maxTraceEntries);
  options.overlapCalls = envIntegerOr(kEnvOverlap, options.overlapCalls);
  options.overlapGrowth = envIntegerOr(kEnvOverlapGrowth, options.overlapGrowth);
  if (!options.compiler)
    options.compiler = std::make_unique<InterpreterCompiler>();
  if (!options.store)
    options.store = std::make_unique<HostBufferStore>(options.memoryLimitBytes);
  return options;
}

} // namespace

BufferStore::~BufferStore() = default;

absl::StatusOr<BufferHandle> HostBufferStore::allocate(uint64_t sizeBytes) {
  return buffers_.allocate(sizeBytes);
}

absl::Status HostBufferStore::write(BufferHandle handle, absl::Span<const uint8_t> data) {
  if (!data.empty()) // an empty span's data() may be null, which memcpy must not get
    std::memcpy(buffers_.data(handle), data.data(), data.size());
  return absl::OkStatus();
}

absl::Status HostBufferStore::read(BufferHandle handle, absl::Span<uint8_t> out) {
  if (!out.empty())
    std::memcpy(out.data(), buffers_.data(handle), out.size());
  return absl::OkStatus();
}

DeviceInfo HostBufferStore::deviceInfo(const std::string &compiler) const {
  return DeviceInfo{absl::StrCat("host (", compiler, ")"), BackendKind::Cpu, buffers_.limitBytes(),
                    std::max(1u, std::thread::hardware_concurrency())};
}

LazyBackend::LazyBackend(LazyBackendOptions options)
    : options_(withEnvironment(std::move(options))), compiler_(std::move(options_.compiler)),
      memory_(std::move(options_.store)), cache_(*compiler_, options_.planCacheCapacity) {}

LazyBackend::~LazyBackend() {
  std::lock_guard<std::mutex> lock(mu_);
  // Recorded work the caller never waited for still runs: buffers it writes may have been read
  // back by nobody, but a destructor must not leave work half-done either way.
  (void)flushLocked("destruction");
}

std::string LazyBackend::name() const { return options_.name; }

DeviceInfo LazyBackend::deviceInfo() const {
  std::lock_guard<std::mutex> lock(mu_);
  return memory_->deviceInfo(compiler_->name());
}

absl::StatusOr<uint64_t> LazyBackend::liveSize(BufferHandle handle) const {
  if (zombies_.contains(handle.id))
    return absl::NotFoundError(absl::StrFormat("buffer %d not found (freed)", handle.id));
  return memory_->size(handle);
}

absl::StatusOr<BufferHandle> LazyBackend::allocate(uint64_t sizeBytes) {
  std::lock_guard<std::mutex> lock(mu_);
  SINTER_RETURN_IF_ERROR(fault::check(fault::Site::Allocate, "allocate")); // tests only
  absl::StatusOr<BufferHandle> handle = memory_->allocate(sizeBytes);
  if (handle.status().code() == absl::StatusCode::kResourceExhausted && !pendingFrees_.empty()) {
    // Freed buffers that recorded work still reads hold their bytes until that work has run.
    // The reference would have freed them at once, so run it now and try again: deferring must
    // not change what the caller can allocate. A failure of that work stays deferred.
    ++stats_.memoryLimitFlushes;
    (void)flushLocked("memory limit");
    handle = memory_->allocate(sizeBytes);
  }
  if (handle.ok()) {
    known_[handle->id] = Known{sizeBytes, 0, 0};
    ++knownGeneration_; // the insertion may have moved every entry
  }
  return handle;
}

LazyBackend::Known *LazyBackend::known(BufferHandle handle) {
  // The store is the backend's own: every live buffer was allocated through allocate().
  KnownCacheEntry &cached = knownCache_[handle.id % kKnownCacheSize];
  if (cached.generation == knownGeneration_ && cached.id == handle.id)
    return cached.known;
  auto it = known_.find(handle.id);
  if (it == known_.end())
    return nullptr;
  cached = KnownCacheEntry{handle.id, knownGeneration_, &it->second};
  return &it->second;
}

uint32_t LazyBackend::slotOf(BufferHandle handle, Known &k) {
  if (!inTrace(k)) {
    k.slot = static_cast<uint32_t>(slotHandles_.size());
    k.epoch = epoch_;
    slotHandles_.push_back(handle);
    trace_.buffers.push_back(TraceBuffer{k.size, true});
  }
  return k.slot;
}

absl::Status LazyBackend::free(BufferHandle handle) {
  std::lock_guard<std::mutex> lock(mu_);
  Known *k = known(handle);
  if (!k)
    return absl::NotFoundError(absl::StrFormat("free: buffer %d not found", handle.id));
  const bool pending = inTrace(*k);
  const uint32_t slot = k->slot;
  known_.erase(handle.id);
  ++knownGeneration_; // the cache may point at the erased entry
  if (!pending)
    return memory_->release(handle);
  // Pending work uses the buffer: its final version is no longer observable, and the bytes are
  // released after the flush that runs that work.
  trace_.buffers[slot].observable = false;
  zombies_[handle.id] = true;
  pendingFrees_.push_back(handle);
  ++stats_.deferredFrees;
  return absl::OkStatus();
}

absl::Status LazyBackend::submit(const OpCall &op) {
  std::lock_guard<std::mutex> lock(mu_);
  // One lookup a handle gives both the size the validation needs and the slot recording needs.
  const int numBuffers = opInfo(op.kind).numBuffers;
  Known *k[3] = {nullptr, nullptr, nullptr};
  uint64_t sizes[3] = {0, 0, 0};
  for (int i = 0; i < numBuffers; ++i) {
    k[i] = known(op.buffers[i]);
    if (!k[i]) { // unknown or freed: the full validation names the argument and the reason
      absl::Status s = validateOp(op, [&](BufferHandle h) { return liveSize(h); });
      return s.ok() ? absl::InternalError(absl::StrCat(opInfo(op.kind).name,
                                                       ": a buffer is neither live nor unknown"))
                    : s;
    }
    sizes[i] = k[i]->size;
  }
  SINTER_RETURN_IF_ERROR(validateOpSizes(op, sizes));
  if (trace_.entries.size() >= options_.maxTraceEntries) {
    ++stats_.sizeLimitFlushes;
    (void)flushLocked("trace-size limit"); // a failure is kept for the next synchronize
  }
  TraceEntry &entry = trace_.entries.emplace_back(op);
  for (int i = 0; i < numBuffers; ++i)
    entry.op.buffers[i] = Trace::handleOfSlot(slotOf(op.buffers[i], *k[i]));
  ++stats_.callsRecorded;
  if (options_.overlapCalls && op.kind == OpKind::Add &&
      trace_.entries.size() >= overlapThreshold()) {
    ++stats_.overlapFlushes;
    (void)flushLocked("overlap", nullptr, /*overlap=*/true); // a failure waits for the next sync
  }
  return absl::OkStatus();
}

absl::Status LazyBackend::copyToDevice(absl::Span<const uint8_t> data, BufferHandle handle) {
  std::lock_guard<std::mutex> lock(mu_);
  SINTER_RETURN_IF_ERROR(validateHostTransfer("copy_to_device", handle, data.size(),
                                              [&](BufferHandle h) { return liveSize(h); }));
  if (data.empty())
    return absl::OkStatus(); // writes nothing: no upload to record (found by tests/fuzz/CApiFuzz)
  Known *k = known(handle);  // live: validated above
  if (!inTrace(*k)) {
    // No pending op touches the buffer, so writing now is the same as writing in order; this
    // keeps weight uploads from being copied twice.
    return memory_->write(handle, data);
  }
  if (trace_.entries.size() >= options_.maxTraceEntries) {
    ++stats_.sizeLimitFlushes;
    (void)flushLocked("trace-size limit");
    if (!inTrace(*k))
      return memory_->write(handle, data);
  }
  TraceEntry entry;
  entry.kind = TraceEntry::Kind::Upload;
  entry.uploadSlot = slotOf(handle, *k);
  entry.uploadBytes = data.size();
  entry.payload = uint32_t(trace_.payloads.size());
  trace_.payloads.push_back(std::make_shared<const std::vector<uint8_t>>(data.begin(), data.end()));
  trace_.entries.push_back(entry);
  ++stats_.callsRecorded;
  return absl::OkStatus();
}

absl::Status LazyBackend::copyFromDevice(BufferHandle handle, absl::Span<uint8_t> data) {
  std::lock_guard<std::mutex> lock(mu_);
  SINTER_RETURN_IF_ERROR(validateHostTransfer("copy_from_device", handle, data.size(),
                                              [&](BufferHandle h) { return liveSize(h); }));
  // A buffer the pending work touches can be read in the flush's own submission (one submission
  // a decode step instead of two) where the plan supports it.
  PlanReadback readback;
  Known *k = known(handle); // live: validated above
  const bool fold = !data.empty() && inTrace(*k);
  if (fold) {
    readback.slot = k->slot;
    readback.out = data;
  }
  (void)flushLocked("copy_from_device", fold ? &readback : nullptr);
  absl::Status deferred = std::exchange(deferredError_, absl::OkStatus());
  SINTER_RETURN_IF_ERROR(deferred);
  SINTER_RETURN_IF_ERROR(fault::check(fault::Site::HostRead, "copy_from_device")); // tests only
  if (readback.done) {
    ++stats_.foldedReads;
    return absl::OkStatus();
  }
  auto start = std::chrono::steady_clock::now();
  absl::Status read = memory_->read(handle, data);
  stats_.readSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return read;
}

absl::Status LazyBackend::synchronize() {
  std::lock_guard<std::mutex> lock(mu_);
  (void)flushLocked("synchronize");
  return std::exchange(deferredError_, absl::OkStatus());
}

void LazyBackend::releasePendingFrees() {
  for (BufferHandle h : pendingFrees_) {
    zombies_.erase(h.id);
    (void)memory_->release(h);
  }
  pendingFrees_.clear();
}

size_t LazyBackend::overlapThreshold() const {
  size_t calls = options_.overlapCalls;
  const size_t growth = std::max<size_t>(options_.overlapGrowth, 1);
  for (uint32_t i = 0; i < segment_ && calls < options_.maxTraceEntries; ++i)
    calls *= growth;
  return calls;
}

absl::Status LazyBackend::flushLocked(const char *why, PlanReadback *readback, bool overlap) {
  if (trace_.entries.empty()) {
    if (overlapRunning_) { // a flush point: what an overlapped flush left running ends here
      absl::Status drained = memory_->drain();
      if (!drained.ok() && deferredError_.ok())
        deferredError_ = absl::Status(
            drained.code(), absl::StrCat("deferred work failed (overlapped flush, waited for at ",
                                         why, "): ", drained.message()));
      overlapRunning_ = false;
    }
    segment_ = 0;
    releasePendingFrees();
    return deferredError_;
  }
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  auto start = Clock::now();
  if (lastFlushEnd_)
    stats_.betweenFlushSeconds += seconds(*lastFlushEnd_, start);
  size_t numEntries = trace_.entries.size();
  trace_.segment = segment_;
  segment_ = overlap ? segment_ + 1 : 0;
  if (options_.onFlush)
    options_.onFlush(trace_, slotHandles_);
  absl::Status status;
  absl::StatusOr<PlanCache::Lookup> lookup = cache_.lookup(trace_);
  auto found = Clock::now();
  stats_.lookupSeconds += seconds(start, found);
  size_t kernels = 0;
  if (!lookup.ok()) {
    status = absl::Status(lookup.status().code(),
                          absl::StrCat("flush at ", why, ": compiling a plan for ", numEntries,
                                       " recorded calls failed: ", lookup.status().message()));
  } else {
    std::vector<uint8_t *> slotData(slotHandles_.size());
    std::vector<void *> slotDevice(slotHandles_.size());
    bool onDevice = false;
    for (size_t i = 0; i < slotHandles_.size(); ++i) {
      slotData[i] = memory_->hostData(slotHandles_[i]);
      slotDevice[i] = memory_->deviceRef(slotHandles_[i]);
      onDevice = onDevice || slotDevice[i];
    }
    PlanArgs args{slotData, lookup->params, trace_.payloads, slotHandles_};
    if (onDevice) {
      args.slotDevice = slotDevice;
      args.readSlot = [this](uint32_t slot, absl::Span<uint8_t> out) -> absl::Status {
        SINTER_RETURN_IF_ERROR(memory_->drain());
        return memory_->read(slotHandles_[slot], out);
      };
    }
    args.readback = readback;
    args.mayFinishLater = overlap;
    kernels = lookup->plan->numKernels();
    absl::Status run = fault::check(fault::Site::FlushAllocate, "flush"); // tests only
    if (run.ok()) {
      auto begin = Clock::now();
      run = lookup->plan->run(args);
      stats_.runSeconds += seconds(begin, Clock::now());
    }
    if (!run.ok())
      status = absl::Status(
          run.code(), absl::StrCat("deferred work failed (flush at ", why, "): ", run.message()));
    if (options_.printStats || lastPlan_.empty())
      lastPlan_ = lookup->plan->describe();
  }
  ++stats_.flushes;
  stats_.kernelsLaunched += kernels;
  stats_.cache = cache_.stats();
  if (options_.printStats) {
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(
        stderr,
        "sinter-stats: flush #%llu (%s): %zu calls, %zu kernels, plan %s (%zu params), "
        "compile %.3f ms, total %.3f ms%s\n",
        static_cast<unsigned long long>(stats_.flushes), why, numEntries, kernels,
        lookup.ok() && lookup->hit ? "hit" : "miss", lookup.ok() ? lookup->numParams() : size_t(0),
        lookup.ok() ? lookup->compileSeconds * 1e3 : 0.0, ms, status.ok() ? "" : " FAILED");
  }
  trace_.entries.clear();
  trace_.buffers.clear();
  trace_.payloads.clear();
  trace_.segment = 0;
  std::vector<BufferHandle> slotHandles;
  if (!status.ok())
    slotHandles.swap(slotHandles_);
  slotHandles_.clear();
  if (++epoch_ == 0) { // after 2^32 flushes: no handle may look like it is in the new trace
    for (auto &[id, k] : known_)
      k.epoch = 0;
    epoch_ = 1;
  }
  // A complete flush waited for the device (its submission comes after every overlapped one);
  // the bytes of buffers freed meanwhile may be in use until then.
  overlapRunning_ = overlap;
  if (!overlap)
    releasePendingFrees();
  if (!status.ok() && deferredError_.ok())
    // The layers below name the trace's slots; the caller knows its own buffer ids.
    deferredError_ =
        absl::Status(status.code(), withCallerBufferIds(status.message(), slotHandles));
  lastFlushEnd_ = Clock::now();
  return deferredError_;
}

LazyStats LazyBackend::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  LazyStats stats = stats_;
  if (options_.deviceSubmissions)
    stats.submissions = options_.deviceSubmissions();
  return stats;
}

size_t LazyBackend::pendingEntries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return trace_.entries.size();
}

std::vector<IntSlot> LazyBackend::planParameters(const Trace &trace) const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.parametersFor(trace);
}

std::string LazyBackend::lastPlanDescription() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lastPlan_;
}

} // namespace sinter::runtime
