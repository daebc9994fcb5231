// SpirvKernel.cpp - the dispatch-grid rule of each SPIR-V kernel class (plain C++, no MLIR).
//
// The kernel builders and this file agree on one number per op: the size of its parallel
// dimension (spirvUnits). A builder says how many units one workgroup computes; the grid is the
// quotient, folded into two dimensions so that it never exceeds Vulkan's minimum 65535 per axis.
#include <algorithm>

#include "codegen/spirv/SpirvCompiler.h"

namespace sinter::codegen {

uint64_t spirvUnits(OpKind kind, const int64_t *ints) {
  auto u = [&](int i) { return static_cast<uint64_t>(ints[i]); };
  switch (kind) {
  case OpKind::QuantizedMatmul:
    return u(0);
  case OpKind::Matmul:
    return u(0) * u(1);
  case OpKind::AttnScore:
    return u(1);
  case OpKind::AttnValue:
    return u(0);
  case OpKind::Silu:
  case OpKind::ElementMul:
  case OpKind::Add:
    return u(0);
  case OpKind::Rope:
    return (u(2) + u(3)) * (u(1) / 2);
  case OpKind::CopyBuffer:
  case OpKind::CopyBufferOffset:
  case OpKind::Softmax:
  case OpKind::RmsNorm:
    return 1;
  }
  return 1;
}

uint8_t spirvUnitsInts(OpKind kind) {
  switch (kind) {
  case OpKind::QuantizedMatmul:
  case OpKind::AttnValue:
  case OpKind::Silu:
  case OpKind::ElementMul:
  case OpKind::Add:
    return 0b1;
  case OpKind::Matmul:
    return 0b11;
  case OpKind::AttnScore:
    return 0b10;
  case OpKind::Rope:
    return 0b1110;
  case OpKind::CopyBuffer:
  case OpKind::CopyBufferOffset:
  case OpKind::Softmax:
  case OpKind::RmsNorm:
    return 0;
  }
  return 0xff;
}

std::array<uint32_t, 3> SpirvKernel::grid(const int64_t *ints) const {
  uint64_t groups = fixedGroups;
  if (!fixedGroups) {
    uint64_t units = spirvUnits(kind, ints);
    if (units == 0)
      return {0, 0, 0};
    groups = (units + unitsPerGroup - 1) / unitsPerGroup;
    if (maxGroups)
      groups = std::min<uint64_t>(groups, maxGroups);
  }
  uint64_t x = std::min<uint64_t>(groups, 65535);
  uint64_t y = (groups + x - 1) / x;
  return {static_cast<uint32_t>(x), static_cast<uint32_t>(y), 1};
}

} // namespace sinter::codegen
