// CallOp.h - calls the ComputeBackend method an OpCall describes.
//
// Table-driven tests (errors per op and argument, the conformance cases) are written as OpCalls;
// this sends one through the public interface, so the backend under test validates and runs it
// exactly as an engine's call would.
#ifndef SINTER_TESTS_SUPPORT_CALLOP_H
#define SINTER_TESTS_SUPPORT_CALLOP_H

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "sinter/ComputeBackend.h"
#include "support/Ops.h"

namespace sinter::test {

/// Calls `backend`'s method for `op`; integer slots wider than the method's parameter are
/// truncated to 32 bits as a caller's cast would.
inline absl::Status callOp(ComputeBackend &backend, const OpCall &op) {
  const auto &b = op.buffers;
  auto u = [&](int i) { return static_cast<uint32_t>(op.ints[i]); };
  static_assert(kNumOpKinds == 12, "add the new op here");
  switch (op.kind) {
  case OpKind::Matmul:
    return backend.matmul(b[0], b[1], b[2], u(0), u(1), u(2));
  case OpKind::Softmax:
    return backend.softmax(b[0], b[1], u(0));
  case OpKind::RmsNorm:
    return backend.rmsNorm(b[0], b[1], b[2], u(0), op.scalar);
  case OpKind::Rope:
    return backend.rope(b[0], b[1], u(0), u(1), op.scalar, u(2), u(3));
  case OpKind::Silu:
    return backend.silu(b[0], b[1], u(0));
  case OpKind::ElementMul:
    return backend.elementMul(b[0], b[1], b[2], u(0));
  case OpKind::Add:
    return backend.add(b[0], b[1], b[2], u(0));
  case OpKind::CopyBuffer:
    return backend.copyBuffer(b[0], b[1], op.ints[0]);
  case OpKind::CopyBufferOffset:
    return backend.copyBufferOffset(b[0], b[1], op.ints[0], op.ints[1], op.ints[2]);
  case OpKind::AttnScore:
    return backend.attnScore(b[0], b[1], b[2], u(0), u(1), u(2), u(3), u(4));
  case OpKind::AttnValue:
    return backend.attnValue(b[0], b[1], b[2], u(0), u(1), u(2), u(3), u(4));
  case OpKind::QuantizedMatmul:
    return backend.quantizedMatmul(b[0], b[1], b[2], u(0), u(1), op.dtype);
  }
  return absl::InternalError("callOp: unknown op kind");
}

/// `op` written on slots (BufferHandle{j + 1} for the j-th buffer of a table's case) with each
/// replaced by handles[j], the buffers a backend gave out.
inline OpCall bindSlots(OpCall op, absl::Span<const BufferHandle> handles) {
  for (int j = 0; j < opInfo(op.kind).numBuffers; ++j)
    op.buffers[j] = handles[op.buffers[j].id - 1];
  return op;
}

} // namespace sinter::test

#endif // SINTER_TESTS_SUPPORT_CALLOP_H
