// ReferenceBackend.cpp - buffers in host memory, every op validated then run eagerly.
//
// All checking lives in support/Ops (validateOp, validateHostTransfer) so that this backend and
// the compiled ones reject the same calls with the same messages; this file only owns storage.
#include "backends/ReferenceBackend.h"

#include <unistd.h>

#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "sinter/Status.h"
#include "support/BufferIds.h"

namespace sinter {
namespace {

uint64_t physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || pageSize <= 0)
    return UINT64_MAX; // unknown: let the host's allocator decide
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize);
}

} // namespace

ReferenceBackend::ReferenceBackend(const BackendOptions &options)
    : memoryLimit_(options.memoryLimitBytes ? options.memoryLimitBytes : physicalMemoryBytes()) {}

ReferenceBackend::~ReferenceBackend() = default;

std::string ReferenceBackend::name() const { return "reference"; }

DeviceInfo ReferenceBackend::deviceInfo() const {
  return DeviceInfo{"host (reference)", BackendKind::Cpu, memoryLimit_,
                    std::thread::hardware_concurrency()};
}

absl::StatusOr<BufferHandle> ReferenceBackend::allocate(uint64_t sizeBytes) {
  absl::MutexLock lock(&mu_);
  uint64_t available = memoryLimit_ - bytesInUse_;
  if (sizeBytes > available)
    return absl::ResourceExhaustedError(absl::StrFormat(
        "allocate: %u bytes asked, %u of %u bytes available", sizeBytes, available, memoryLimit_));
  // calloc rather than new: zeroed, and failure is a null pointer instead of an exception. One
  // byte for empty buffers so that every live buffer has a distinct address.
  auto *bytes = static_cast<uint8_t *>(std::calloc(sizeBytes ? sizeBytes : 1, 1));
  if (!bytes)
    return absl::ResourceExhaustedError(
        absl::StrFormat("allocate: the host could not provide %u bytes", sizeBytes));
  BufferHandle handle{nextBufferId()};
  Buffer &buffer = buffers_[handle.id];
  buffer.bytes.reset(bytes);
  buffer.size = sizeBytes;
  bytesInUse_ += sizeBytes;
  return handle;
}

absl::Status ReferenceBackend::free(BufferHandle handle) {
  absl::MutexLock lock(&mu_);
  auto it = buffers_.find(handle.id);
  if (it == buffers_.end())
    return absl::NotFoundError(absl::StrFormat("free: buffer %u not found", handle.id));
  bytesInUse_ -= it->second.size;
  buffers_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ReferenceBackend::sizeOfLocked(BufferHandle handle) const {
  auto it = buffers_.find(handle.id);
  if (it == buffers_.end())
    return absl::NotFoundError(absl::StrFormat("buffer %u not found", handle.id));
  return it->second.size;
}

uint8_t *ReferenceBackend::dataLocked(BufferHandle handle) {
  return buffers_.find(handle.id)->second.bytes.get();
}

absl::Status ReferenceBackend::run(const OpCall &op) {
  absl::MutexLock lock(&mu_);
  // The lambdas run inside the calls below, with mu_ held; the analysis cannot see through them.
  SINTER_RETURN_IF_ERROR(validateOp(
      op, [this](BufferHandle h) ABSL_NO_THREAD_SAFETY_ANALYSIS { return sizeOfLocked(h); }));
  executeReference(op,
                   [this](BufferHandle h) ABSL_NO_THREAD_SAFETY_ANALYSIS { return dataLocked(h); });
  return absl::OkStatus();
}

absl::Status ReferenceBackend::matmul(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t m,
                                      uint32_t n, uint32_t k) {
  return run(ops::matmul(a, b, out, m, n, k));
}

absl::Status ReferenceBackend::softmax(BufferHandle in, BufferHandle out, uint32_t size) {
  return run(ops::softmax(in, out, size));
}

absl::Status ReferenceBackend::rmsNorm(BufferHandle in, BufferHandle weight, BufferHandle out,
                                       uint32_t size, float eps) {
  return run(ops::rmsNorm(in, weight, out, size, eps));
}

absl::Status ReferenceBackend::rope(BufferHandle q, BufferHandle k, uint32_t pos, uint32_t headDim,
                                    float freqBase, uint32_t nHeadsQ, uint32_t nHeadsK) {
  return run(ops::rope(q, k, pos, headDim, freqBase, nHeadsQ, nHeadsK));
}

absl::Status ReferenceBackend::silu(BufferHandle in, BufferHandle out, uint32_t size) {
  return run(ops::silu(in, out, size));
}

absl::Status ReferenceBackend::elementMul(BufferHandle a, BufferHandle b, BufferHandle out,
                                          uint32_t size) {
  return run(ops::elementMul(a, b, out, size));
}

absl::Status ReferenceBackend::add(BufferHandle a, BufferHandle b, BufferHandle out,
                                   uint32_t size) {
  return run(ops::add(a, b, out, size));
}

absl::Status ReferenceBackend::copyToDevice(absl::Span<const uint8_t> data, BufferHandle handle) {
  absl::MutexLock lock(&mu_);
  SINTER_RETURN_IF_ERROR(validateHostTransfer(
      "copy_to_device", handle, data.size(),
      [this](BufferHandle h) ABSL_NO_THREAD_SAFETY_ANALYSIS { return sizeOfLocked(h); }));
  if (!data.empty())
    std::memcpy(dataLocked(handle), data.data(), data.size());
  return absl::OkStatus();
}

absl::Status ReferenceBackend::copyFromDevice(BufferHandle handle, absl::Span<uint8_t> data) {
  absl::MutexLock lock(&mu_);
  SINTER_RETURN_IF_ERROR(validateHostTransfer(
      "copy_from_device", handle, data.size(),
      [this](BufferHandle h) ABSL_NO_THREAD_SAFETY_ANALYSIS { return sizeOfLocked(h); }));
  if (!data.empty())
    std::memcpy(data.data(), dataLocked(handle), data.size());
  return absl::OkStatus();
}

absl::Status ReferenceBackend::copyBuffer(BufferHandle src, BufferHandle dst, uint64_t sizeBytes) {
  return run(ops::copyBuffer(src, dst, sizeBytes));
}

absl::Status ReferenceBackend::copyBufferOffset(BufferHandle src, BufferHandle dst,
                                                uint64_t srcOffset, uint64_t dstOffset,
                                                uint64_t sizeBytes) {
  return run(ops::copyBufferOffset(src, dst, srcOffset, dstOffset, sizeBytes));
}

absl::Status ReferenceBackend::synchronize() { return absl::OkStatus(); }

absl::Status ReferenceBackend::attnScore(BufferHandle q, BufferHandle kCache, BufferHandle scores,
                                         uint32_t headDim, uint32_t seqLen, uint32_t headOffset,
                                         uint32_t kvOffset, uint32_t kvStride) {
  return run(ops::attnScore(q, kCache, scores, headDim, seqLen, headOffset, kvOffset, kvStride));
}

absl::Status ReferenceBackend::attnValue(BufferHandle weights, BufferHandle vCache,
                                         BufferHandle out, uint32_t headDim, uint32_t seqLen,
                                         uint32_t kvOffset, uint32_t kvStride, uint32_t outOffset) {
  return run(ops::attnValue(weights, vCache, out, headDim, seqLen, kvOffset, kvStride, outOffset));
}

absl::Status ReferenceBackend::quantizedMatmul(BufferHandle weights, BufferHandle x,
                                               BufferHandle out, uint32_t nRows, uint32_t nCols,
                                               DType dtype) {
  return run(ops::quantizedMatmul(weights, x, out, nRows, nCols, dtype));
}

} // namespace sinter
