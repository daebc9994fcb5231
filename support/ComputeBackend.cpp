// ComputeBackend.cpp - the out-of-line pieces of the public interface header.
//
// The virtual destructor is defined here so that the vtable has one home, in SinterSupport, below
// every library that implements it.
#include "sinter/ComputeBackend.h"

namespace sinter {

ComputeBackend::~ComputeBackend() = default;

const char *backendKindName(BackendKind kind) {
  switch (kind) {
  case BackendKind::Cpu:
    return "Cpu";
  case BackendKind::Vulkan:
    return "Vulkan";
  case BackendKind::Cuda:
    return "Cuda";
  case BackendKind::Metal:
    return "Metal";
  }
  return "unknown";
}

} // namespace sinter
