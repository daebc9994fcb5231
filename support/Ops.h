// Ops.h - one record per ComputeBackend operation that works on buffers (OpCall).
//
// Every backend speaks in OpCalls: the reference backend executes them at once, the lazy backend
// appends them to a Trace, the plan interpreter replays them. Validation (SEMANTICS.md's error
// table), the byte ranges an op reads and writes, its printed form and its scalar execution are
// defined here once, so that every backend rejects exactly the same calls with the same messages.
#ifndef SINTER_SUPPORT_OPS_H
#define SINTER_SUPPORT_OPS_H

#include <array>
#include <cassert>
#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "sinter/ComputeBackend.h"

namespace sinter {

/// The graph operations (the ComputeBackend calls that read or write buffer contents, apart from
/// host transfers). Keep in step with kOpInfos in Ops.cpp (a static_assert checks the count).
enum class OpKind : uint8_t {
  Matmul,
  Softmax,
  RmsNorm,
  Rope,
  Silu,
  ElementMul,
  Add,
  CopyBuffer,
  CopyBufferOffset,
  AttnScore,
  AttnValue,
  QuantizedMatmul,
};
inline constexpr int kNumOpKinds = 12;

/// One recorded call. The meaning of each slot is given by opInfo(kind): buffers and integers in
/// the order of the ComputeBackend method's parameters.
struct OpCall {
  OpKind kind = OpKind::Matmul;
  std::array<BufferHandle, 3> buffers{};
  std::array<uint64_t, 5> ints{};
  float scalar = 0.0f; ///< rms_norm eps, rope freq_base
  DType dtype = DType::F32;

  friend bool operator==(const OpCall &a, const OpCall &b);
};

/// Names and arity of an op kind.
struct OpInfo {
  OpKind kind;
  const char *name; ///< SEMANTICS.md's spelling, e.g. "rms_norm"
  uint8_t numBuffers;
  std::array<const char *, 3> bufferNames;
  uint8_t numInts;
  std::array<const char *, 5> intNames;
  const char *scalarName; ///< nullptr when the op has no float argument
  bool hasDType;
};

/// One row per OpKind, in OpKind order (Ops.cpp); read it through opInfo.
extern const OpInfo kOpInfos[];

/// The names and arity of `kind` (inline: the record path asks several times a call).
inline const OpInfo &opInfo(OpKind kind) {
  const OpInfo &info = kOpInfos[static_cast<int>(kind)];
  assert(info.kind == kind && "kOpInfos is out of order");
  return info;
}

/// One byte range an op touches in one of its buffers.
struct BufferAccess {
  uint8_t bufferIndex; ///< index into OpCall::buffers
  uint64_t offset;     ///< bytes
  uint64_t size;       ///< bytes (0: nothing is touched)
  bool read;
  bool write;
};
/// An op's accesses: at most one per buffer operand, so a fixed array (the record path builds
/// one a call; absl::InlinedVector's assignment was a fifth of a recorded call).
class AccessList {
public:
  static constexpr size_t kCapacity = 3;
  AccessList() = default;
  /// Empties the list, then add() appends in place, field by field (a BufferAccess built on the
  /// stack and copied whole was read back before its narrow stores had landed: a stall a field).
  void clear() { size_ = 0; }
  void add(uint8_t bufferIndex, uint64_t offset, uint64_t size, bool read, bool write) {
    assert(size_ < kCapacity && "an op has at most three buffer operands");
    BufferAccess &a = items_[size_++];
    a.bufferIndex = bufferIndex;
    a.offset = offset;
    a.size = size;
    a.read = read;
    a.write = write;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const BufferAccess &operator[](size_t i) const { return items_[i]; }
  const BufferAccess *begin() const { return items_.data(); }
  const BufferAccess *end() const { return items_.data() + size_; }

private:
  std::array<BufferAccess, kCapacity> items_; // [size_, kCapacity) unset: no zeroing a call
  uint8_t size_ = 0;
};

/// InvalidArgument when the op's float argument is outside its domain: rms_norm's eps must be
/// finite and not negative, rope's freq_base finite and at least 1. Part of opAccesses too.
absl::Status checkScalar(const OpCall &op);

/// The byte ranges `op` reads and writes. InvalidArgument / Unimplemented for arguments that are
/// wrong whatever the buffers hold (odd head_dim, n_cols not a whole number of blocks, an
/// unsupported dtype, overlapping input and output where SEMANTICS.md does not allow it...).
absl::StatusOr<AccessList> opAccesses(const OpCall &op);

/// Size in bytes of a live buffer; NotFound (with the op and argument named) when unknown.
using BufferSizeFn = absl::FunctionRef<absl::StatusOr<uint64_t>(BufferHandle)>;

/// Checks `op` completely: its arguments (opAccesses), that every buffer exists (NotFound) and
/// that every access lies inside its buffer (OutOfRange). Messages name the op, the argument and
/// the numbers, e.g. "rms_norm: weight buffer 7 holds 256 bytes, needs 8192".
absl::Status validateOp(const OpCall &op, BufferSizeFn sizeOf);

/// validateOp's checks after the handles have been found: sizes[i] is the size of live buffer
/// op.buffers[i] (the lazy backend's record path looks each handle up once for this and for
/// its slot).
absl::Status validateOpSizes(const OpCall &op, const uint64_t *sizes);

/// Checks a host transfer: `what` is "copy_to_device" or "copy_from_device".
absl::Status validateHostTransfer(const char *what, BufferHandle handle, uint64_t bytes,
                                  BufferSizeFn sizeOf);

/// Printed form for logs and errors: "rms_norm(in=%3, weight=%4, out=%5, size=64, eps=1e-05)".
std::string describeOp(const OpCall &op);

/// `message` with every "=%N" that describeOp printed for a trace's slot handle N (slot N - 1)
/// replaced by "=buffer M", M the caller's id of that slot in `slotHandles`: what a deferred
/// failure says to the caller, who never sees trace slots. Other text is left as it is.
std::string withCallerBufferIds(absl::string_view message,
                                absl::Span<const BufferHandle> slotHandles);

/// Base address of a live buffer's bytes.
using BufferDataFn = absl::FunctionRef<uint8_t *(BufferHandle)>;

/// Executes a validated op with the reference kernels (scalar, double accumulation).
void executeReference(const OpCall &op, BufferDataFn data);

namespace ops {
/// Builders, one per operation, arguments in the ComputeBackend method's order.
OpCall matmul(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t m, uint32_t n, uint32_t k);
OpCall softmax(BufferHandle in, BufferHandle out, uint32_t size);
OpCall rmsNorm(BufferHandle in, BufferHandle weight, BufferHandle out, uint32_t size, float eps);
OpCall rope(BufferHandle q, BufferHandle k, uint32_t pos, uint32_t headDim, float freqBase,
            uint32_t nHeadsQ, uint32_t nHeadsK);
OpCall silu(BufferHandle in, BufferHandle out, uint32_t size);
OpCall elementMul(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t size);
OpCall add(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t size);
OpCall copyBuffer(BufferHandle src, BufferHandle dst, uint64_t sizeBytes);
OpCall copyBufferOffset(BufferHandle src, BufferHandle dst, uint64_t srcOffset, uint64_t dstOffset,
                        uint64_t sizeBytes);
OpCall attnScore(BufferHandle q, BufferHandle kCache, BufferHandle scores, uint32_t headDim,
                 uint32_t seqLen, uint32_t headOffset, uint32_t kvOffset, uint32_t kvStride);
OpCall attnValue(BufferHandle weights, BufferHandle vCache, BufferHandle out, uint32_t headDim,
                 uint32_t seqLen, uint32_t kvOffset, uint32_t kvStride, uint32_t outOffset);
OpCall quantizedMatmul(BufferHandle weights, BufferHandle x, BufferHandle out, uint32_t nRows,
                       uint32_t nCols, DType dtype);
} // namespace ops

} // namespace sinter

#endif // SINTER_SUPPORT_OPS_H
