// Plan.h - what executes a recorded Trace: the Plan and the PlanCompiler that makes it.
//
// A Plan is compiled once per trace structure (and set of parameter slots) and replayed for every
// later trace of that structure with that trace's buffer table and integer parameters. Compilers
// are injected into the runtime (the plan interpreter in runtime/; the MLIR pipeline with codegen
// from codegen/), so a cache hit in runtime/ never reaches MLIR.
#ifndef SINTER_SUPPORT_PLAN_H
#define SINTER_SUPPORT_PLAN_H

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "support/Trace.h"

namespace sinter {

/// copy_from_device of a buffer the trace touches, handed to the flush that precedes it: a Plan
/// that can (the Vulkan one) copies the bytes out in the flush's own submission and sets `done`;
/// otherwise the caller reads after the run.
struct PlanReadback {
  uint32_t slot = 0;       ///< the trace slot read, from byte 0
  absl::Span<uint8_t> out; ///< where the bytes go
  bool done = false;       ///< set by the Plan when `out` holds them
};

/// What one replay of a Plan gets: the memory of each trace slot, the values of the Plan's
/// parameters (in the order of the IntSlots it was compiled with) and the upload payloads.
struct PlanArgs {
  absl::Span<uint8_t *const> slotData;
  absl::Span<const uint64_t> params;
  absl::Span<const std::shared_ptr<const std::vector<uint8_t>>> payloads;
  /// The caller's handle of each slot, so that errors name the buffers the caller knows.
  absl::Span<const BufferHandle> slotHandles;
  /// The buffer store's device reference of each slot (LazyBackend's BufferStore::deviceRef) when
  /// the bytes live in device memory; then slotData holds nulls. Empty for host memory.
  absl::Span<void *const> slotDevice = {};
  /// Reads a slot's bytes from offset 0 wherever they live (the buffer store's read, after any
  /// device work still running), for the plans that must see device memory on the host
  /// (SINTER_CHECK_FUSION). Set by LazyBackend; null where only slotData is given.
  std::function<absl::Status(uint32_t slot, absl::Span<uint8_t> out)> readSlot = nullptr;
  /// A read that follows the run (null: none); see PlanReadback.
  PlanReadback *readback = nullptr;
  /// The run may return before the device has finished (an overlapped flush,
  /// LazyBackendOptions::overlapCalls): the Plan then guarantees that everything later on the
  /// same device, and any host access to the buffers, comes after this run's work. A Plan that
  /// cannot (the host ones) runs to the end as usual.
  bool mayFinishLater = false;
};

/// An executable form of one trace structure.
class Plan {
public:
  virtual ~Plan();
  /// Runs every kernel in order. On failure the error names the kernel and the trace ops it was
  /// made of; kernels after the failing one do not run.
  virtual absl::Status run(const PlanArgs &args) = 0;
  /// Kernel launches per run (the figure SINTER_STATS prints and tests pin).
  virtual size_t numKernels() const = 0;
  /// One line per kernel: its name and member ops, for logs and sinter-dump.
  virtual std::string describe() const = 0;
};

/// Turns a trace into a Plan. `params` lists the integers that change between traces of this
/// structure: the Plan must read them from PlanArgs::params instead of the trace.
class PlanCompiler {
public:
  virtual ~PlanCompiler();
  /// Short name for logs ("interpreter", "cpu-jit", ...).
  virtual std::string name() const = 0;
  virtual absl::StatusOr<std::unique_ptr<Plan>> compile(const Trace &trace,
                                                        const std::vector<IntSlot> &params) = 0;
};

} // namespace sinter

#endif // SINTER_SUPPORT_PLAN_H
