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

namespace sinter::runtime {
namespace {

LazyBackendOptions withEnvironment(LazyBackendOptions options) {
  if (const char *s = std::getenv("SINTER_STATS"); s && std::string_view(s) != "0" && *s)
    options.printStats = true;
  size_t limit;
  if (const char *s = std::getenv("SINTER_MAX_TRACE"); s && absl::SimpleAtoi(s, &limit) && limit)
    options.maxTraceEntries = limit;
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
  absl::MutexLock lock(&mu_);
  // Recorded work the caller never waited for still runs: buffers it writes may have been read
  // back by nobody, but a destructor must not leave work half-done either way.
  (void)flushLocked("destruction");
}

std::string LazyBackend::name() const { return options_.name; }

DeviceInfo LazyBackend::deviceInfo() const {
  absl::MutexLock lock(&mu_);
  return memory_->deviceInfo(compiler_->name());
}

absl::StatusOr<uint64_t> LazyBackend::liveSize(BufferHandle handle) const {
  if (zombies_.contains(handle.id))
    return absl::NotFoundError(absl::StrFormat("buffer %d not found (freed)", handle.id));
  return memory_->size(handle);
}

absl::StatusOr<BufferHandle> LazyBackend::allocate(uint64_t sizeBytes) {
  absl::MutexLock lock(&mu_);
  SINTER_RETURN_IF_ERROR(fault::check(fault::Site::Allocate, "allocate")); // tests only
  return memory_->allocate(sizeBytes);
}

absl::Status LazyBackend::free(BufferHandle handle) {
  absl::MutexLock lock(&mu_);
  if (zombies_.contains(handle.id) || !memory_->contains(handle))
    return absl::NotFoundError(absl::StrFormat("free: buffer %d not found", handle.id));
  auto slot = slotOfHandle_.find(handle.id);
  if (slot == slotOfHandle_.end())
    return memory_->release(handle);
  // Pending work uses the buffer: its final version is no longer observable, and the bytes are
  // released after the flush that runs that work.
  trace_.buffers[slot->second].observable = false;
  zombies_[handle.id] = true;
  pendingFrees_.push_back(handle);
  ++stats_.deferredFrees;
  return absl::OkStatus();
}

uint32_t LazyBackend::slotFor(BufferHandle handle) {
  auto [it, inserted] = slotOfHandle_.try_emplace(handle.id, uint32_t(slotHandles_.size()));
  if (inserted) {
    slotHandles_.push_back(handle);
    trace_.buffers.push_back(TraceBuffer{*memory_->size(handle), true});
  }
  return it->second;
}

absl::Status LazyBackend::submit(const OpCall &op) {
  absl::MutexLock lock(&mu_);
  SINTER_RETURN_IF_ERROR(validateOp(op, [&](BufferHandle h) { return liveSize(h); }));
  if (trace_.entries.size() >= options_.maxTraceEntries) {
    ++stats_.sizeLimitFlushes;
    (void)flushLocked("trace-size limit"); // a failure is kept for the next synchronize
  }
  TraceEntry entry;
  entry.op = op;
  for (int i = 0; i < opInfo(op.kind).numBuffers; ++i)
    entry.op.buffers[i] = Trace::handleOfSlot(slotFor(op.buffers[i]));
  trace_.entries.push_back(entry);
  ++stats_.callsRecorded;
  return absl::OkStatus();
}

absl::Status LazyBackend::copyToDevice(absl::Span<const uint8_t> data, BufferHandle handle) {
  absl::MutexLock lock(&mu_);
  SINTER_RETURN_IF_ERROR(validateHostTransfer("copy_to_device", handle, data.size(),
                                              [&](BufferHandle h) { return liveSize(h); }));
  if (data.empty())
    return absl::OkStatus(); // writes nothing: no upload to record (found by tests/fuzz/CApiFuzz)
  if (!slotOfHandle_.contains(handle.id)) {
    // No pending op touches the buffer, so writing now is the same as writing in order; this
    // keeps weight uploads from being copied twice.
    return memory_->write(handle, data);
  }
  if (trace_.entries.size() >= options_.maxTraceEntries) {
    ++stats_.sizeLimitFlushes;
    (void)flushLocked("trace-size limit");
    if (!slotOfHandle_.contains(handle.id))
      return memory_->write(handle, data);
  }
  TraceEntry entry;
  entry.kind = TraceEntry::Kind::Upload;
  entry.uploadSlot = slotFor(handle);
  entry.uploadBytes = data.size();
  entry.payload = uint32_t(trace_.payloads.size());
  trace_.payloads.push_back(std::make_shared<const std::vector<uint8_t>>(data.begin(), data.end()));
  trace_.entries.push_back(entry);
  ++stats_.callsRecorded;
  return absl::OkStatus();
}

absl::Status LazyBackend::copyFromDevice(BufferHandle handle, absl::Span<uint8_t> data) {
  absl::MutexLock lock(&mu_);
  SINTER_RETURN_IF_ERROR(validateHostTransfer("copy_from_device", handle, data.size(),
                                              [&](BufferHandle h) { return liveSize(h); }));
  (void)flushLocked("copy_from_device");
  absl::Status deferred = std::exchange(deferredError_, absl::OkStatus());
  SINTER_RETURN_IF_ERROR(deferred);
  SINTER_RETURN_IF_ERROR(fault::check(fault::Site::HostRead, "copy_from_device")); // tests only
  auto start = std::chrono::steady_clock::now();
  absl::Status read = memory_->read(handle, data);
  stats_.readSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return read;
}

absl::Status LazyBackend::synchronize() {
  absl::MutexLock lock(&mu_);
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

absl::Status LazyBackend::flushLocked(const char *why) {
  if (trace_.entries.empty()) {
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
    if (onDevice)
      args.slotDevice = slotDevice;
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
  slotHandles_.clear();
  slotOfHandle_.clear();
  releasePendingFrees();
  if (!status.ok() && deferredError_.ok())
    deferredError_ = status;
  lastFlushEnd_ = Clock::now();
  return deferredError_;
}

LazyStats LazyBackend::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

size_t LazyBackend::pendingEntries() const {
  absl::MutexLock lock(&mu_);
  return trace_.entries.size();
}

std::vector<IntSlot> LazyBackend::planParameters(const Trace &trace) const {
  absl::MutexLock lock(&mu_);
  return cache_.parametersFor(trace);
}

std::string LazyBackend::lastPlanDescription() const {
  absl::MutexLock lock(&mu_);
  return lastPlan_;
}

} // namespace sinter::runtime
