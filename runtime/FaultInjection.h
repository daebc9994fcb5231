// FaultInjection.h - test-only fault sites: failures a test can make the runtime see on demand.
//
// Each site is one line at the place where the real failure would surface (an allocation, a
// kernel compile, a queue submit, a host read; a fused kernel computing a wrong result, for
// SINTER_CHECK_FUSION's tests). The sites are compiled into every build and are inert until a
// test arms one (fault::ScopedFault, C++ only: libsinter.so does not export it, and no
// environment variable arms a site): then the check is one relaxed atomic load. The hot checks
// are inline and depend on nothing but <atomic> and <mutex>, so code below the runtime in the
// layering (codegen's CpuCompiler, passes' FusionCompiler, runtime/vulkan) can call them without
// linking SinterRuntime; only the arming API and check() live in FaultInjection.cpp.
#ifndef SINTER_RUNTIME_FAULTINJECTION_H
#define SINTER_RUNTIME_FAULTINJECTION_H

#include <atomic>
#include <cstdint>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sinter::runtime::fault {

/// Where a fault can be injected, and what a fault there means.
enum class Site : uint8_t {
  /// LazyBackend::allocate: the buffer store has no memory (ResourceExhausted, nothing created).
  Allocate,
  /// A flush cannot get the memory its plan needs (staging, scratch, command buffers): the whole
  /// flush fails before any kernel runs (ResourceExhausted, reported by the next synchronize or
  /// copy_from_device).
  FlushAllocate,
  /// A kernel fails to compile (CpuCompiler): the kernel's ops fall back to unfused kernels.
  KernelCompile,
  /// The Vulkan queue submit returns VK_ERROR_DEVICE_LOST (Unavailable, deferred).
  SubmitDeviceLost,
  /// The Vulkan queue submit returns VK_ERROR_OUT_OF_DEVICE_MEMORY (ResourceExhausted, deferred).
  SubmitOutOfDeviceMemory,
  /// copy_from_device cannot read the bytes back to the host (Internal, at that call; the buffer
  /// keeps its contents and a retry may succeed).
  HostRead,
  /// A fused kernel computes a wrong result: the fusion compiler (passes/FusionCompiler.cpp)
  /// changes a float argument of one fused kernel's member before the backend compiles it
  /// (passes::breakOneFusedKernel). Nothing fails; only SINTER_CHECK_FUSION notices.
  WrongResult,
};
inline constexpr int kNumSites = 7;

/// "allocate", "flush-allocate", "kernel-compile", "submit-device-lost",
/// "submit-out-of-device-memory", "host-read", "wrong-result".
const char *siteName(Site site);

namespace detail {

struct SiteState {
  bool armed = false;
  int64_t skip = 0;      ///< hits that still pass before the first failure
  int64_t remaining = 0; ///< failures still to inject; negative: every later hit fails
  uint64_t hits = 0;     ///< hits while armed
  uint64_t fired = 0;    ///< failures injected while armed
};

/// Number of armed sites: the fast path reads only this.
inline std::atomic<int> armedSites{0};
inline std::mutex siteMutex;
inline SiteState sites[kNumSites];

inline bool firesSlow(Site site) {
  std::lock_guard<std::mutex> lock(siteMutex);
  SiteState &s = sites[static_cast<int>(site)];
  if (!s.armed)
    return false;
  ++s.hits;
  if (s.skip > 0) {
    --s.skip;
    return false;
  }
  if (s.remaining == 0)
    return false;
  if (s.remaining > 0)
    --s.remaining;
  ++s.fired;
  return true;
}

} // namespace detail

/// True when a test armed `site` and this hit is one that must fail. One relaxed atomic load
/// when no site is armed (always, outside tests).
inline bool fires(Site site) {
  if (detail::armedSites.load(std::memory_order_relaxed) == 0)
    return false;
  return detail::firesSlow(site);
}

/// What a Vulkan queue submit returns at an armed submit site: 0 (VK_SUCCESS) normally,
/// -4 (VK_ERROR_DEVICE_LOST) or -2 (VK_ERROR_OUT_OF_DEVICE_MEMORY) when a test injects it. As an
/// int so that this header needs no Vulkan headers; the caller maps it with vkStatus as it maps
/// a real result:
///   VkResult r = VkResult(fault::injectedSubmitResult());
///   if (r == VK_SUCCESS) r = vkQueueSubmit(...);
inline int32_t injectedSubmitResult() {
  if (fires(Site::SubmitDeviceLost))
    return -4;
  if (fires(Site::SubmitOutOfDeviceMemory))
    return -2;
  return 0;
}

/// OkStatus, or when `site` fires the site's error: "<where>: injected fault <site name>" with
/// the code listed at the site (Internal for sites without one).
absl::Status check(Site site, absl::string_view where);

/// Arms one site for the lifetime of the object (tests only; sites are process-wide, so one
/// ScopedFault per site at a time). After `skip` hits pass, the next `count` hits fail; a
/// negative `count` fails every hit after the skipped ones.
class ScopedFault {
public:
  explicit ScopedFault(Site site, int64_t skip = 0, int64_t count = 1);
  ~ScopedFault();
  ScopedFault(const ScopedFault &) = delete;
  ScopedFault &operator=(const ScopedFault &) = delete;

  /// Hits of the site since it was armed (failed or not).
  uint64_t hits() const;
  /// Failures injected since it was armed.
  uint64_t fired() const;

private:
  Site site_;
};

} // namespace sinter::runtime::fault

#endif // SINTER_RUNTIME_FAULTINJECTION_H
