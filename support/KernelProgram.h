// KernelProgram.h - a compiled trace as a list of kernels over buffer slots (no MLIR).
//
// The fusion pipeline (passes/) turns a Trace into a KernelProgram: which ops each kernel runs,
// in order, on which slots, and which integers come from Plan parameters. Executors consume it:
// the plan interpreter runs each member op with the reference kernels; code generators build one
// fused function per kernel. Without fusion every op is its own kernel (unfusedProgram).
#ifndef SINTER_SUPPORT_KERNELPROGRAM_H
#define SINTER_SUPPORT_KERNELPROGRAM_H

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/Plan.h"
#include "support/Trace.h"

namespace sinter {

/// One member op of a kernel. `entry` is a Trace entry over slots (Trace::handleOfSlot); its
/// integer i is Plan parameter paramOf[i] when that is >= 0, else the value in entry.op.ints.
struct KernelMember {
  TraceEntry entry;
  std::array<int32_t, 5> paramOf{-1, -1, -1, -1, -1};
  /// Index of the trace entry this op came from (for messages and sinter-dump): set for every
  /// member of an unfused program, and for the members with a parameter in a fused one.
  uint32_t traceEntry = 0;
};

/// The integers of `m` that are Plan parameters, as a mask (bit i: ints[i]): what a code
/// generator reads at run time instead of baking in (codegen::shapeOf's paramMask).
inline uint8_t paramMaskOf(const KernelMember &m) {
  uint8_t mask = 0;
  for (int i = 0; i < 5; ++i)
    if (m.paramOf[i] >= 0)
      mask |= uint8_t(1u << i);
  return mask;
}

/// One kernel launch: a run of member ops executed together.
struct Kernel {
  std::string name;
  /// Fusion patterns that formed the kernel (empty for a kernel of one op).
  std::vector<std::string> patterns;
  std::vector<KernelMember> ops;
  /// A host-side copy (copy_to_device payload), not a device kernel: not counted as a launch.
  bool hostCopy = false;
};

/// A compiled trace.
struct KernelProgram {
  std::vector<Kernel> kernels;
  size_t numParams = 0;

  /// Kernel launches (host copies excluded): the figure the golden kernel counts pin.
  size_t numLaunches() const;
  /// One line per kernel: "kernel 3 rms_norm+qmatmul [rmsnorm-qmatmul]: rms_norm(...), ...",
  /// kernels numbered as sinter-dump numbers them (host copies, "host copy upload: ...", not),
  /// buffers as its trace slots %N (slot + 1).
  /// With `params` (PlanArgs::params, or paramValues of the compiled trace) the members show the
  /// values a run binds instead of the placeholders the program holds.
  std::string describe(absl::Span<const uint64_t> params = {}) const;
};

/// The values the Plan parameters `params` have in `trace` (what its run binds).
std::vector<uint64_t> paramValues(const Trace &trace, const std::vector<IntSlot> &params);

/// Every trace entry as its own kernel, with `params` bound (sorted by entry, index).
KernelProgram unfusedProgram(const Trace &trace, const std::vector<IntSlot> &params);

/// `op` with its parameters substituted from `params`.
OpCall boundOp(const KernelMember &op, absl::Span<const uint64_t> params);

/// Test hook: called before each member op runs; a non-ok status fails that op's kernel.
using OpFaultHook = std::function<absl::Status(const OpCall &op)>;

/// A Plan that runs `program` with the reference kernels, one member op after another.
std::unique_ptr<Plan> makeInterpreterPlan(KernelProgram program, OpFaultHook faultHook = nullptr);

} // namespace sinter

#endif // SINTER_SUPPORT_KERNELPROGRAM_H
