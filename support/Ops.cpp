// Ops.cpp - the op table, argument validation and printed form of OpCall.
//
// SEMANTICS.md's error table is implemented here once: opAccesses derives, from an op's integers
// alone, the byte range of every buffer argument (rejecting arguments that are wrong whatever the
// buffers hold); validateOp then checks the buffers exist and are large enough.
#include "support/Ops.h"

#include <cassert>
#include <cfloat>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sinter/Status.h"

namespace sinter {

const OpInfo kOpInfos[] = {
    {OpKind::Matmul, "matmul", 3, {"a", "b", "out"}, 3, {"m", "n", "k"}, nullptr, false},
    {OpKind::Softmax, "softmax", 2, {"in", "out"}, 1, {"size"}, nullptr, false},
    {OpKind::RmsNorm, "rms_norm", 3, {"in", "weight", "out"}, 1, {"size"}, "eps", false},
    {OpKind::Rope,
     "rope",
     2,
     {"q", "k"},
     4,
     {"pos", "head_dim", "n_heads_q", "n_heads_k"},
     "freq_base",
     false},
    {OpKind::Silu, "silu", 2, {"in", "out"}, 1, {"size"}, nullptr, false},
    {OpKind::ElementMul, "element_mul", 3, {"a", "b", "out"}, 1, {"size"}, nullptr, false},
    {OpKind::Add, "add", 3, {"a", "b", "out"}, 1, {"size"}, nullptr, false},
    {OpKind::CopyBuffer, "copy_buffer", 2, {"src", "dst"}, 1, {"size"}, nullptr, false},
    {OpKind::CopyBufferOffset,
     "copy_buffer_offset",
     2,
     {"src", "dst"},
     3,
     {"src_offset", "dst_offset", "size"},
     nullptr,
     false},
    {OpKind::AttnScore,
     "attn_score",
     3,
     {"q", "k_cache", "scores"},
     5,
     {"head_dim", "seq_len", "head_offset", "kv_offset", "kv_stride"},
     nullptr,
     false},
    {OpKind::AttnValue,
     "attn_value",
     3,
     {"weights", "v_cache", "out"},
     5,
     {"head_dim", "seq_len", "kv_offset", "kv_stride", "out_offset"},
     nullptr,
     false},
    {OpKind::QuantizedMatmul,
     "quantized_matmul",
     3,
     {"weights", "x", "out"},
     2,
     {"n_rows", "n_cols"},
     nullptr,
     true},
};
static_assert(sizeof(kOpInfos) / sizeof(kOpInfos[0]) == kNumOpKinds,
              "kOpInfos needs one row per OpKind");

namespace {

constexpr uint64_t kF32 = 4;

// Byte arithmetic saturates at UINT64_MAX instead of wrapping: a saturated range can never fit a
// buffer, so an absurd argument is OutOfRange rather than an empty, accepted access.
uint64_t satMul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
uint64_t satAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

// f32 ranges, in elements, appended to `acc` as bytes.
void readF32(AccessList &acc, uint8_t buffer, uint64_t offsetElems, uint64_t countElems) {
  acc.add(buffer, satMul(offsetElems, kF32), satMul(countElems, kF32), true, false);
}
void writeF32(AccessList &acc, uint8_t buffer, uint64_t offsetElems, uint64_t countElems) {
  acc.add(buffer, satMul(offsetElems, kF32), satMul(countElems, kF32), false, true);
}

// Elements [0, end) read from a strided cache: t*stride + offset + d for t < seqLen, d < headDim.
uint64_t stridedEnd(uint64_t seqLen, uint64_t stride, uint64_t offset, uint64_t headDim) {
  if (seqLen == 0 || headDim == 0)
    return 0;
  return satAdd(satAdd(satMul(seqLen - 1, stride), offset), headDim);
}

absl::Status invalid(const OpCall &op, const std::string &what) {
  return absl::InvalidArgumentError(absl::StrCat(opInfo(op.kind).name, ": ", what));
}

bool overlaps(const BufferAccess &a, const BufferAccess &b, const OpCall &op) {
  if (op.buffers[a.bufferIndex] != op.buffers[b.bufferIndex] || a.size == 0 || b.size == 0)
    return false;
  return a.offset < satAdd(b.offset, b.size) && b.offset < satAdd(a.offset, a.size);
}

// An output may not overlap an input unless the op is element-wise with equal ranges (the
// in-place forms SEMANTICS.md allows for softmax, rms_norm, silu, element_mul and add).
absl::Status checkAliasing(const OpCall &op, const AccessList &accesses) {
  // Distinct buffers cannot overlap (most calls: the record path skips the pairs).
  const auto &h = op.buffers;
  if (h[0] != h[1] && h[0] != h[2] && h[1] != h[2])
    return absl::OkStatus();
  bool inPlaceAllowed = op.kind == OpKind::Softmax || op.kind == OpKind::RmsNorm ||
                        op.kind == OpKind::Silu || op.kind == OpKind::ElementMul ||
                        op.kind == OpKind::Add;
  const OpInfo &info = opInfo(op.kind);
  for (const BufferAccess &w : accesses) {
    if (!w.write || w.read)
      continue;
    for (const BufferAccess &r : accesses) {
      if (&r == &w || !r.read || !overlaps(r, w, op))
        continue;
      if (inPlaceAllowed && r.offset == w.offset && r.size == w.size)
        continue;
      return invalid(op,
                     absl::StrFormat("%s buffer %d bytes [%d, %d) overlap %s bytes [%d, %d)",
                                     info.bufferNames[w.bufferIndex], op.buffers[w.bufferIndex].id,
                                     w.offset, w.offset + w.size, info.bufferNames[r.bufferIndex],
                                     r.offset, r.offset + r.size));
    }
  }
  return absl::OkStatus();
}

} // namespace

bool operator==(const OpCall &a, const OpCall &b) {
  return a.kind == b.kind && a.buffers == b.buffers && a.ints == b.ints && a.dtype == b.dtype &&
         // Compare floats bit for bit: a recorded -0.0 or NaN eps is a different call.
         std::memcmp(&a.scalar, &b.scalar, sizeof(float)) == 0;
}

absl::Status checkScalar(const OpCall &op) {
  // NaN fails every comparison below, so it is rejected with the infinities.
  if (op.kind == OpKind::RmsNorm && !(op.scalar >= 0.0f && op.scalar <= FLT_MAX))
    // An infinite eps would zero every output; a negative one makes the root's argument negative.
    return invalid(op, absl::StrFormat("eps %g must be finite and not negative", op.scalar));
  if (op.kind == OpKind::Rope && !(op.scalar >= 1.0f && op.scalar <= FLT_MAX))
    // The frequencies freq_base^(-2i / head_dim) then lie in (0, 1], so every angle pos * freq
    // has a well-defined f32 sine and cosine. A base below 1 makes them grow up to 1 / base
    // (a subnormal base: 1e22 radians a position), angles no two kinds could agree on.
    return invalid(op, absl::StrFormat("freq_base %g must be finite and at least 1", op.scalar));
  return absl::OkStatus();
}

namespace {

// opAccesses into `acc` (the record path's validation keeps the list on its own stack).
absl::Status fillAccesses(const OpCall &op, AccessList &acc) {
  const auto &v = op.ints;
  acc.clear();
  switch (op.kind) {
  case OpKind::Matmul:
    readF32(acc, 0, 0, satMul(v[0], v[2]));
    readF32(acc, 1, 0, satMul(v[2], v[1]));
    writeF32(acc, 2, 0, satMul(v[0], v[1]));
    break;
  case OpKind::Softmax:
  case OpKind::Silu:
    readF32(acc, 0, 0, v[0]);
    writeF32(acc, 1, 0, v[0]);
    break;
  case OpKind::RmsNorm:
    if (v[0] == 0)
      return invalid(op, "size must be positive (the mean divides by it)");
    SINTER_RETURN_IF_ERROR(checkScalar(op));
    readF32(acc, 0, 0, v[0]);
    readF32(acc, 1, 0, v[0]);
    writeF32(acc, 2, 0, v[0]);
    break;
  case OpKind::ElementMul:
  case OpKind::Add:
    readF32(acc, 0, 0, v[0]);
    readF32(acc, 1, 0, v[0]);
    writeF32(acc, 2, 0, v[0]);
    break;
  case OpKind::Rope: {
    uint64_t headDim = v[1];
    if (headDim == 0)
      return invalid(op, "head_dim must be positive (the angle divides by it)");
    if (headDim % 2 != 0)
      return invalid(op, absl::StrFormat("head_dim %d is odd; rope rotates pairs", headDim));
    SINTER_RETURN_IF_ERROR(checkScalar(op));
    acc.add(0, 0, satMul(satMul(v[2], headDim), kF32), true, true); // q
    acc.add(1, 0, satMul(satMul(v[3], headDim), kF32), true, true); // k
    if (overlaps(acc[0], acc[1], op))
      return invalid(op, absl::StrFormat("q and k ranges of buffer %d overlap", op.buffers[0].id));
    break;
  }
  case OpKind::CopyBuffer:
    acc.add(0, 0, v[0], true, false);
    acc.add(1, 0, v[0], false, true);
    // Copying a buffer onto itself at the same offset changes nothing and is allowed.
    return absl::OkStatus();
  case OpKind::CopyBufferOffset:
    acc.add(0, v[0], v[2], true, false);
    acc.add(1, v[1], v[2], false, true);
    return absl::OkStatus(); // overlap is memmove
  case OpKind::AttnScore: {
    uint64_t headDim = v[0], seqLen = v[1];
    if (headDim == 0)
      return invalid(op, "head_dim must be positive (scores divide by sqrt(head_dim))");
    readF32(acc, 0, v[2], headDim);
    readF32(acc, 1, 0, stridedEnd(seqLen, v[4], v[3], headDim));
    writeF32(acc, 2, 0, seqLen);
    break;
  }
  case OpKind::AttnValue: {
    uint64_t headDim = v[0], seqLen = v[1];
    readF32(acc, 0, 0, seqLen);
    readF32(acc, 1, 0, stridedEnd(seqLen, v[3], v[2], headDim));
    writeF32(acc, 2, v[4], headDim);
    break;
  }
  case OpKind::QuantizedMatmul: {
    SINTER_RETURN_IF_ERROR(checkWeightDType(op.dtype, "quantized_matmul"));
    const DTypeInfo &info = dtypeInfo(op.dtype);
    uint64_t nRows = v[0], nCols = v[1];
    if (nCols % info.blockSize != 0)
      return invalid(op, absl::StrFormat("n_cols %d is not a multiple of the %s block size %d",
                                         nCols, info.name, info.blockSize));
    acc.add(0, 0, satMul(nRows, rowBytes(info, nCols)), true, false);
    readF32(acc, 1, 0, nCols);
    writeF32(acc, 2, 0, nRows);
    break;
  }
  }
  return checkAliasing(op, acc);
}

} // namespace

absl::StatusOr<AccessList> opAccesses(const OpCall &op) {
  AccessList acc;
  SINTER_RETURN_IF_ERROR(fillAccesses(op, acc));
  return acc;
}

absl::Status validateOp(const OpCall &op, BufferSizeFn sizeOf) {
  const OpInfo &info = opInfo(op.kind);
  // Handles first: an unknown buffer is NotFound whatever the other arguments say.
  uint64_t sizes[3] = {0, 0, 0};
  for (int i = 0; i < info.numBuffers; ++i) {
    absl::StatusOr<uint64_t> size = sizeOf(op.buffers[i]);
    if (!size.ok())
      return absl::Status(size.status().code(), absl::StrCat(info.name, ": ", info.bufferNames[i],
                                                             " ", size.status().message()));
    sizes[i] = *size;
  }
  return validateOpSizes(op, sizes);
}

absl::Status validateOpSizes(const OpCall &op, const uint64_t *sizes) {
  AccessList accesses;
  SINTER_RETURN_IF_ERROR(fillAccesses(op, accesses));
  const OpInfo &info = opInfo(op.kind);
  for (const BufferAccess &a : accesses) {
    uint64_t have = sizes[a.bufferIndex];
    // A saturated size stands for a range past 2^64 bytes, which no buffer holds. Byte offsets
    // of copy_buffer_offset are 64-bit: compare without forming a wrapping sum.
    if (a.size == 0 || (a.size != UINT64_MAX && a.size <= have && a.offset <= have - a.size))
      continue;
    std::string prefix =
        absl::StrFormat("%s: %s buffer %d holds %d bytes, needs ", info.name,
                        info.bufferNames[a.bufferIndex], op.buffers[a.bufferIndex].id, have);
    uint64_t end;
    if (a.size == UINT64_MAX || __builtin_add_overflow(a.offset, a.size, &end)) {
      // Name the arguments that ask for it: the range itself has no 64-bit end to print.
      std::string args;
      for (int i = 0; i < info.numInts; ++i)
        absl::StrAppend(&args, i ? ", " : "", info.intNames[i], "=", op.ints[i]);
      return absl::OutOfRangeError(absl::StrCat(prefix, "more than 2^64 - 1 bytes (", args, ")"));
    }
    if (a.offset == 0)
      return absl::OutOfRangeError(absl::StrCat(prefix, end));
    return absl::OutOfRangeError(absl::StrFormat("%sbytes [%d, %d)", prefix, a.offset, end));
  }
  return absl::OkStatus();
}

absl::Status validateHostTransfer(const char *what, BufferHandle handle, uint64_t bytes,
                                  BufferSizeFn sizeOf) {
  absl::StatusOr<uint64_t> size = sizeOf(handle);
  if (!size.ok())
    return absl::Status(size.status().code(), absl::StrCat(what, ": ", size.status().message()));
  if (bytes > *size)
    return absl::OutOfRangeError(absl::StrFormat("%s: buffer %d holds %d bytes, host slice has %d",
                                                 what, handle.id, *size, bytes));
  return absl::OkStatus();
}

std::string describeOp(const OpCall &op) {
  const OpInfo &info = opInfo(op.kind);
  std::string s = absl::StrCat(info.name, "(");
  const char *sep = "";
  for (int i = 0; i < info.numBuffers; ++i) {
    absl::StrAppend(&s, sep, info.bufferNames[i], "=%", op.buffers[i].id);
    sep = ", ";
  }
  for (int i = 0; i < info.numInts; ++i)
    absl::StrAppend(&s, sep, info.intNames[i], "=", op.ints[i]);
  if (info.scalarName)
    absl::StrAppend(&s, sep, info.scalarName, "=", absl::StrFormat("%g", op.scalar));
  if (info.hasDType)
    absl::StrAppend(&s, sep, "dtype=", dtypeName(op.dtype));
  absl::StrAppend(&s, ")");
  return s;
}

std::string withCallerBufferIds(absl::string_view message,
                                absl::Span<const BufferHandle> slotHandles) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    size_t at = message.find("=%", i);
    if (at == absl::string_view::npos)
      break;
    size_t end = at + 2;
    uint64_t id = 0;
    while (end < message.size() && absl::ascii_isdigit(message[end]) && id < (1ull << 40))
      id = id * 10 + uint64_t(message[end++] - '0');
    absl::StrAppend(&out, message.substr(i, at - i));
    if (end > at + 2 && id >= 1 && id <= slotHandles.size())
      absl::StrAppend(&out, "=buffer ", slotHandles[id - 1].id);
    else
      absl::StrAppend(&out, message.substr(at, end - at));
    i = end;
  }
  absl::StrAppend(&out, message.substr(i));
  return out;
}

namespace ops {
namespace {
OpCall make(OpKind kind, std::array<BufferHandle, 3> buffers, std::array<uint64_t, 5> ints,
            float scalar = 0.0f, DType dtype = DType::F32) {
  OpCall op;
  op.kind = kind;
  op.buffers = buffers;
  op.ints = ints;
  op.scalar = scalar;
  op.dtype = dtype;
  return op;
}
} // namespace

OpCall matmul(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t m, uint32_t n,
              uint32_t k) {
  return make(OpKind::Matmul, {a, b, out}, {m, n, k});
}
OpCall softmax(BufferHandle in, BufferHandle out, uint32_t size) {
  return make(OpKind::Softmax, {in, out}, {size});
}
OpCall rmsNorm(BufferHandle in, BufferHandle weight, BufferHandle out, uint32_t size, float eps) {
  return make(OpKind::RmsNorm, {in, weight, out}, {size}, eps);
}
OpCall rope(BufferHandle q, BufferHandle k, uint32_t pos, uint32_t headDim, float freqBase,
            uint32_t nHeadsQ, uint32_t nHeadsK) {
  return make(OpKind::Rope, {q, k}, {pos, headDim, nHeadsQ, nHeadsK}, freqBase);
}
OpCall silu(BufferHandle in, BufferHandle out, uint32_t size) {
  return make(OpKind::Silu, {in, out}, {size});
}
OpCall elementMul(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t size) {
  return make(OpKind::ElementMul, {a, b, out}, {size});
}
OpCall add(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t size) {
  return make(OpKind::Add, {a, b, out}, {size});
}
OpCall copyBuffer(BufferHandle src, BufferHandle dst, uint64_t sizeBytes) {
  return make(OpKind::CopyBuffer, {src, dst}, {sizeBytes});
}
OpCall copyBufferOffset(BufferHandle src, BufferHandle dst, uint64_t srcOffset, uint64_t dstOffset,
                        uint64_t sizeBytes) {
  return make(OpKind::CopyBufferOffset, {src, dst}, {srcOffset, dstOffset, sizeBytes});
}
OpCall attnScore(BufferHandle q, BufferHandle kCache, BufferHandle scores, uint32_t headDim,
                 uint32_t seqLen, uint32_t headOffset, uint32_t kvOffset, uint32_t kvStride) {
  return make(OpKind::AttnScore, {q, kCache, scores},
              {headDim, seqLen, headOffset, kvOffset, kvStride});
}
OpCall attnValue(BufferHandle weights, BufferHandle vCache, BufferHandle out, uint32_t headDim,
                 uint32_t seqLen, uint32_t kvOffset, uint32_t kvStride, uint32_t outOffset) {
  return make(OpKind::AttnValue, {weights, vCache, out},
              {headDim, seqLen, kvOffset, kvStride, outOffset});
}
OpCall quantizedMatmul(BufferHandle weights, BufferHandle x, BufferHandle out, uint32_t nRows,
                       uint32_t nCols, DType dtype) {
  return make(OpKind::QuantizedMatmul, {weights, x, out}, {nRows, nCols}, 0.0f, dtype);
}
} // namespace ops

} // namespace sinter
