// FaultInjection.cpp - site names, the error each site injects, and arming for tests.
#include "runtime/FaultInjection.h"

#include <cassert>

#include "absl/strings/str_cat.h"

namespace sinter::runtime::fault {

const char *siteName(Site site) {
  switch (site) {
  case Site::Allocate:
    return "allocate";
  case Site::FlushAllocate:
    return "flush-allocate";
  case Site::KernelCompile:
    return "kernel-compile";
  case Site::SubmitDeviceLost:
    return "submit-device-lost";
  case Site::SubmitOutOfDeviceMemory:
    return "submit-out-of-device-memory";
  case Site::HostRead:
    return "host-read";
  case Site::WrongResult:
    return "wrong-result";
  }
  return "unknown";
}

absl::Status check(Site site, absl::string_view where) {
  if (!fires(site))
    return absl::OkStatus();
  std::string message = absl::StrCat(where, ": injected fault ", siteName(site));
  switch (site) {
  case Site::Allocate:
  case Site::FlushAllocate:
  case Site::SubmitOutOfDeviceMemory:
    return absl::ResourceExhaustedError(message);
  case Site::SubmitDeviceLost:
    return absl::UnavailableError(message);
  default:
    return absl::InternalError(message);
  }
}

ScopedFault::ScopedFault(Site site, int64_t skip, int64_t count) : site_(site) {
  std::lock_guard<std::mutex> lock(detail::siteMutex);
  detail::SiteState &s = detail::sites[static_cast<int>(site)];
  assert(!s.armed && "fault site armed twice");
  s = detail::SiteState{true, skip, count, 0, 0};
  detail::armedSites.fetch_add(1, std::memory_order_relaxed);
}

ScopedFault::~ScopedFault() {
  std::lock_guard<std::mutex> lock(detail::siteMutex);
  detail::sites[static_cast<int>(site_)].armed = false;
  detail::armedSites.fetch_sub(1, std::memory_order_relaxed);
}

uint64_t ScopedFault::hits() const {
  std::lock_guard<std::mutex> lock(detail::siteMutex);
  return detail::sites[static_cast<int>(site_)].hits;
}

uint64_t ScopedFault::fired() const {
  std::lock_guard<std::mutex> lock(detail::siteMutex);
  return detail::sites[static_cast<int>(site_)].fired;
}

} // namespace sinter::runtime::fault
