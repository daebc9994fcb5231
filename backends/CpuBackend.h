// CpuBackend.h - the `cpu` backend kind: the lazy recorder with plans JIT-compiled for the host.
//
// With fusion on, the fusion pipeline (passes/FusionCompiler) turns each trace into a kernel
// program and codegen/CpuCompiler compiles it; with fusion off every call is its own kernel; in
// eager mode (BackendOptions::eager) every call runs at once on its single-op kernel
// (EagerBackend). The factory builds it with default compiler options; tests pass their own
// (the compile-failure hook, a private thread pool).
#ifndef SINTER_BACKENDS_CPUBACKEND_H
#define SINTER_BACKENDS_CPUBACKEND_H

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "codegen/CpuCompiler.h"
#include "sinter/ComputeBackend.h"
#include "sinter/Factory.h"

namespace sinter {

/// The cpu backend `options` describe (kind is not looked at), its kernels compiled with
/// `compilerOptions`. Internal when the host cannot be JIT-compiled for.
absl::StatusOr<std::unique_ptr<ComputeBackend>>
createCpuBackend(const BackendOptions &options, codegen::CpuCompilerOptions compilerOptions = {});

/// The same over an existing compiler, whose JIT and kernel cache it shares with other backends
/// (tests that build many short-lived backends compile each kernel once).
absl::StatusOr<std::unique_ptr<ComputeBackend>>
createCpuBackend(const BackendOptions &options, std::shared_ptr<codegen::CpuCompiler> compiler);

} // namespace sinter

#endif // SINTER_BACKENDS_CPUBACKEND_H
