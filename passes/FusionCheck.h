// FusionCheck.h - SINTER_CHECK_FUSION: run every fused plan against the unfused program.
//
// The checking plan copies the memory of every trace slot to the host (from device memory through
// PlanArgs::readSlot on the vulkan kind), runs the unfused program on the plan interpreter
// (reference kernels, one op a kernel) on that copy, runs the fused plan as usual, and compares
// every observable buffer the program writes with SEMANTICS.md's tolerance (NMSE, NaN never
// passes; the kernels may reassociate, so bytes may differ). A failure names, in sinter-dump's
// numbering, the first launch whose output differs and that buffer, with the largest absolute and
// relative difference; the whole story goes to a file the message names.
#ifndef SINTER_PASSES_FUSIONCHECK_H
#define SINTER_PASSES_FUSIONCHECK_H

#include <memory>
#include <string>
#include <vector>

#include "support/KernelProgram.h"
#include "support/Plan.h"
#include "support/Trace.h"

namespace sinter::passes {

/// NMSE bounds of SEMANTICS.md: f32 kernels, and kernels that quantize activations (a program
/// with a block-quantized quantized_matmul may: the int8 dot-product paths).
inline constexpr double kCheckF32Tolerance = 1e-7;
inline constexpr double kCheckQuantizedTolerance = 5e-4;

/// True when SINTER_CHECK_FUSION asks for the check (non-empty, not "0").
bool checkFusionRequested();

/// Wraps `fused` (the plan of `fusedProgram`) in the checking plan. `dumpPrefix`, when not
/// empty, is the SINTER_DUMP prefix of this compilation (".../plan003"), which the message names.
std::unique_ptr<Plan> makeCheckingPlan(std::unique_ptr<Plan> fused, KernelProgram fusedProgram,
                                       const Trace &trace, const std::vector<IntSlot> &params,
                                       std::string dumpPrefix = "");

/// Test hook (runtime/FaultInjection.h, Site::WrongResult): changes what one fused kernel
/// computes (the first fused member with a float argument: rms_norm's eps becomes 1, rope's
/// freq_base 2), so that a fused plan is wrong in a way only SINTER_CHECK_FUSION notices. Returns
/// the launch number (sinter-dump's) of the kernel it broke, or -1 when there was none to break.
int breakOneFusedKernel(KernelProgram &program);

} // namespace sinter::passes

#endif // SINTER_PASSES_FUSIONCHECK_H
