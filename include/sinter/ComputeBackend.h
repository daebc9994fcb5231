// ComputeBackend.h - the interface inference engines call (SEMANTICS.md is its contract).
//
// It is the C++ twin of the `ComputeBackend` trait of the Rust crate yule-gpu 0.1.0: the same 19
// operations with the same meaning. Element counts and element offsets are f32 elements; sizes of
// buffers, copies and host slices are bytes. Every operation validates its arguments before it
// records or runs anything: a rejected call changes nothing and the backend stays usable.
#ifndef SINTER_COMPUTEBACKEND_H
#define SINTER_COMPUTEBACKEND_H

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "sinter/DType.h"

namespace sinter {

/// Names a buffer: a 64-bit id, never 0, never reused within a process.
struct BufferHandle {
  uint64_t id = 0;

  bool valid() const { return id != 0; }
  friend bool operator==(BufferHandle a, BufferHandle b) { return a.id == b.id; }
  friend bool operator!=(BufferHandle a, BufferHandle b) { return a.id != b.id; }
  friend bool operator<(BufferHandle a, BufferHandle b) { return a.id < b.id; }
  template <typename H> friend H AbslHashValue(H h, BufferHandle b) {
    return H::combine(std::move(h), b.id);
  }
};

/// The kind of device a backend runs on.
enum class BackendKind : uint8_t { Cpu, Vulkan, Cuda, Metal };

/// "Cpu", "Vulkan", "Cuda" or "Metal".
const char *backendKindName(BackendKind kind);

/// What `device_info()` reports.
struct DeviceInfo {
  std::string name;
  BackendKind kind = BackendKind::Cpu;
  uint64_t memoryBytes = 0;
  uint32_t computeUnits = 0;
};

/// The 19 operations of SEMANTICS.md. Implementations are thread-safe: concurrent calls are
/// serialized and take effect in the order they were serialized.
class ComputeBackend {
public:
  virtual ~ComputeBackend();

  /// Short backend name, e.g. "reference", "sinter-cpu", "sinter-vulkan".
  virtual std::string name() const = 0;
  /// Device name, kind, memory and compute units.
  virtual DeviceInfo deviceInfo() const = 0;

  /// A new zero-filled buffer of `sizeBytes` bytes (0 is allowed). ResourceExhausted, with no
  /// buffer created, when the device cannot hold it.
  virtual absl::StatusOr<BufferHandle> allocate(uint64_t sizeBytes) = 0;
  /// Releases a buffer. NotFound for an unknown or already-freed handle. Work recorded earlier
  /// that reads the buffer still sees it.
  virtual absl::Status free(BufferHandle handle) = 0;

  /// out[i*n+j] = sum_p a[i*k+p] * b[p*n+j]; A is m x k, B is k x n, out is m x n, row-major.
  virtual absl::Status matmul(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t m,
                              uint32_t n, uint32_t k) = 0;
  /// out[i] = exp(in[i] - max) / sum exp(in - max) over the first `size` elements.
  virtual absl::Status softmax(BufferHandle in, BufferHandle out, uint32_t size) = 0;
  /// out[i] = in[i] * w[i] / sqrt(mean(in[0..size)^2) + eps).
  virtual absl::Status rmsNorm(BufferHandle in, BufferHandle weight, BufferHandle out,
                               uint32_t size, float eps) = 0;
  /// Rotates interleaved pairs of each of the nHeadsQ heads of q and nHeadsK heads of k in place
  /// by pos * freqBase^(-2i/headDim).
  virtual absl::Status rope(BufferHandle q, BufferHandle k, uint32_t pos, uint32_t headDim,
                            float freqBase, uint32_t nHeadsQ, uint32_t nHeadsK) = 0;
  /// out[i] = in[i] / (1 + exp(-in[i])).
  virtual absl::Status silu(BufferHandle in, BufferHandle out, uint32_t size) = 0;
  /// out[i] = a[i] * b[i].
  virtual absl::Status elementMul(BufferHandle a, BufferHandle b, BufferHandle out,
                                  uint32_t size) = 0;
  /// out[i] = a[i] + b[i].
  virtual absl::Status add(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t size) = 0;

  /// Writes data.size() bytes at offset 0; `data` may be reused as soon as the call returns.
  virtual absl::Status copyToDevice(absl::Span<const uint8_t> data, BufferHandle handle) = 0;
  /// Reads data.size() bytes from offset 0, reflecting every operation recorded before the call.
  /// Errors of deferred work surface here (or at synchronize).
  virtual absl::Status copyFromDevice(BufferHandle handle, absl::Span<uint8_t> data) = 0;
  /// Copies `sizeBytes` bytes from offset 0 of src to offset 0 of dst.
  virtual absl::Status copyBuffer(BufferHandle src, BufferHandle dst, uint64_t sizeBytes) = 0;
  /// dst[dstOffset..+sizeBytes) = src[srcOffset..+sizeBytes), in bytes; overlap acts as memmove.
  virtual absl::Status copyBufferOffset(BufferHandle src, BufferHandle dst, uint64_t srcOffset,
                                        uint64_t dstOffset, uint64_t sizeBytes) = 0;
  /// Returns when every recorded operation has taken effect; reports deferred failures.
  virtual absl::Status synchronize() = 0;

  /// scores[t] = (sum_d q[headOff+d] * kc[t*kvStride + kvOff + d]) / sqrt(headDim), t < seqLen.
  virtual absl::Status attnScore(BufferHandle q, BufferHandle kCache, BufferHandle scores,
                                 uint32_t headDim, uint32_t seqLen, uint32_t headOffset,
                                 uint32_t kvOffset, uint32_t kvStride) = 0;
  /// out[outOff+d] = sum_t w[t] * vc[t*kvStride + kvOff + d], d < headDim (overwrites).
  virtual absl::Status attnValue(BufferHandle weights, BufferHandle vCache, BufferHandle out,
                                 uint32_t headDim, uint32_t seqLen, uint32_t kvOffset,
                                 uint32_t kvStride, uint32_t outOffset) = 0;
  /// out[r] = sum_c W[r][c] * x[c]; W is nRows rows of nCols `dtype` weights, rows back to back.
  virtual absl::Status quantizedMatmul(BufferHandle weights, BufferHandle x, BufferHandle out,
                                       uint32_t nRows, uint32_t nCols, DType dtype) = 0;
};

} // namespace sinter

#endif // SINTER_COMPUTEBACKEND_H
