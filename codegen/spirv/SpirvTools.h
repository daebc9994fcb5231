// SpirvTools.h - SPIRV-Tools (validator, optimizer) as Status-returning functions (no MLIR).
//
// validateSpirv and disassembleSpirv are declared in SpirvCompiler.h for the runtime and tools;
// this header adds the optimizer, which only the kernel builder calls.
#ifndef SINTER_CODEGEN_SPIRV_SPIRVTOOLS_H
#define SINTER_CODEGEN_SPIRV_SPIRVTOOLS_H

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/spirv/SpirvCompiler.h"

namespace sinter::codegen {

/// spirv-opt -O (the performance passes) on a valid module, for Vulkan 1.1.
absl::StatusOr<std::vector<uint32_t>> optimizeSpirv(const std::vector<uint32_t> &words);

} // namespace sinter::codegen

#endif // SINTER_CODEGEN_SPIRV_SPIRVTOOLS_H
