// CApi.cpp - the C ABI of include/sinter/sinter.h over sinter::ComputeBackend.
//
// Each function checks the pointers C cannot check for us, forwards to the C++ backend and turns
// the absl::Status into its integer code plus a message kept per thread (and per backend). Nothing
// here decides what an operation means: argument validation is the backend's (support/Ops.cpp).
#include "sinter/sinter.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "sinter/ComputeBackend.h"
#include "sinter/DType.h"
#include "sinter/Devices.h"
#include "sinter/Factory.h"

#ifndef SINTER_VERSION_STRING
#define SINTER_VERSION_STRING "0.1.0" // keep in step with project(Sinter VERSION ...)
#endif

struct sinter_backend {
  std::unique_ptr<sinter::ComputeBackend> impl;
  // The last failure on this backend, from any thread; mutable so that const calls can record it.
  mutable std::mutex errorMutex;
  mutable std::string lastError; ///< guarded by errorMutex
};

namespace {

using sinter::BufferHandle;
using sinter::ComputeBackend;

// The header promises absl's numbering; a change there must not go unnoticed here.
static_assert(SINTER_OK == static_cast<int>(absl::StatusCode::kOk));
static_assert(SINTER_CANCELLED == static_cast<int>(absl::StatusCode::kCancelled));
static_assert(SINTER_UNKNOWN == static_cast<int>(absl::StatusCode::kUnknown));
static_assert(SINTER_INVALID_ARGUMENT == static_cast<int>(absl::StatusCode::kInvalidArgument));
static_assert(SINTER_DEADLINE_EXCEEDED == static_cast<int>(absl::StatusCode::kDeadlineExceeded));
static_assert(SINTER_NOT_FOUND == static_cast<int>(absl::StatusCode::kNotFound));
static_assert(SINTER_ALREADY_EXISTS == static_cast<int>(absl::StatusCode::kAlreadyExists));
static_assert(SINTER_PERMISSION_DENIED == static_cast<int>(absl::StatusCode::kPermissionDenied));
static_assert(SINTER_RESOURCE_EXHAUSTED == static_cast<int>(absl::StatusCode::kResourceExhausted));
static_assert(SINTER_FAILED_PRECONDITION ==
              static_cast<int>(absl::StatusCode::kFailedPrecondition));
static_assert(SINTER_ABORTED == static_cast<int>(absl::StatusCode::kAborted));
static_assert(SINTER_OUT_OF_RANGE == static_cast<int>(absl::StatusCode::kOutOfRange));
static_assert(SINTER_UNIMPLEMENTED == static_cast<int>(absl::StatusCode::kUnimplemented));
static_assert(SINTER_INTERNAL == static_cast<int>(absl::StatusCode::kInternal));
static_assert(SINTER_UNAVAILABLE == static_cast<int>(absl::StatusCode::kUnavailable));
static_assert(SINTER_DATA_LOSS == static_cast<int>(absl::StatusCode::kDataLoss));
static_assert(SINTER_UNAUTHENTICATED == static_cast<int>(absl::StatusCode::kUnauthenticated));

static_assert(SINTER_DEVICE_CPU == static_cast<int>(sinter::BackendKind::Cpu));
static_assert(SINTER_DEVICE_VULKAN == static_cast<int>(sinter::BackendKind::Vulkan));
static_assert(SINTER_DEVICE_CUDA == static_cast<int>(sinter::BackendKind::Cuda));
static_assert(SINTER_DEVICE_METAL == static_cast<int>(sinter::BackendKind::Metal));
static_assert(SINTER_DEVICE_TYPE_CPU == static_cast<int>(sinter::DeviceType::Cpu));
static_assert(SINTER_DEVICE_TYPE_DISCRETE_GPU == static_cast<int>(sinter::DeviceType::DiscreteGpu));
static_assert(SINTER_DEVICE_TYPE_INTEGRATED_GPU ==
              static_cast<int>(sinter::DeviceType::IntegratedGpu));
static_assert(SINTER_DEVICE_TYPE_VIRTUAL_GPU == static_cast<int>(sinter::DeviceType::VirtualGpu));
static_assert(SINTER_DEVICE_TYPE_SOFTWARE == static_cast<int>(sinter::DeviceType::Software));
static_assert(SINTER_DEVICE_TYPE_OTHER == static_cast<int>(sinter::DeviceType::Other));

#define SINTER_CHECK_DTYPE(name)                                                                   \
  static_assert(SINTER_DTYPE_##name == static_cast<int>(sinter::DType::name), #name);
SINTER_CHECK_DTYPE(F32)
SINTER_CHECK_DTYPE(F16)
SINTER_CHECK_DTYPE(Q4_0)
SINTER_CHECK_DTYPE(Q4_1)
SINTER_CHECK_DTYPE(Q5_0)
SINTER_CHECK_DTYPE(Q5_1)
SINTER_CHECK_DTYPE(Q8_0)
SINTER_CHECK_DTYPE(Q8_1)
SINTER_CHECK_DTYPE(Q2_K)
SINTER_CHECK_DTYPE(Q3_K)
SINTER_CHECK_DTYPE(Q4_K)
SINTER_CHECK_DTYPE(Q5_K)
SINTER_CHECK_DTYPE(Q6_K)
SINTER_CHECK_DTYPE(Q8_K)
SINTER_CHECK_DTYPE(IQ2_XXS)
SINTER_CHECK_DTYPE(IQ2_XS)
SINTER_CHECK_DTYPE(IQ3_XXS)
SINTER_CHECK_DTYPE(IQ1_S)
SINTER_CHECK_DTYPE(IQ4_NL)
SINTER_CHECK_DTYPE(IQ3_S)
SINTER_CHECK_DTYPE(IQ2_S)
SINTER_CHECK_DTYPE(IQ4_XS)
SINTER_CHECK_DTYPE(I8)
SINTER_CHECK_DTYPE(I16)
SINTER_CHECK_DTYPE(I32)
SINTER_CHECK_DTYPE(I64)
SINTER_CHECK_DTYPE(F64)
SINTER_CHECK_DTYPE(IQ1_M)
SINTER_CHECK_DTYPE(BF16)
SINTER_CHECK_DTYPE(TQ1_0)
SINTER_CHECK_DTYPE(TQ2_0)
#undef SINTER_CHECK_DTYPE

static_assert(sizeof(sinter_buffer) == sizeof(BufferHandle::id));

// Indexed by code; the names are absl::StatusCodeToString's.
constexpr const char *kStatusNames[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};
static_assert(sizeof(kStatusNames) / sizeof(kStatusNames[0]) == SINTER_UNAUTHENTICATED + 1);

std::string &threadLastError() {
  thread_local std::string message;
  return message;
}

// Records a failure (thread-local and, when there is one, on the backend) and returns its code.
sinter_status fail(const sinter_backend *backend, const absl::Status &status) {
  std::string message(status.message());
  if (message.empty())
    message = sinter_status_name(static_cast<sinter_status>(status.code()));
  if (backend) {
    std::lock_guard<std::mutex> lock(backend->errorMutex);
    backend->lastError = message;
  }
  threadLastError() = std::move(message);
  return static_cast<sinter_status>(status.code());
}

// A NULL argument of a call on `backend` (null itself where the backend is what is missing) is
// that backend's last error too, like any other rejected call on it.
sinter_status failNull(const sinter_backend *backend, const char *function, const char *what) {
  return fail(backend,
              absl::InvalidArgumentError(absl::StrFormat("%s: %s is NULL", function, what)));
}

// Runs `body` on the backend behind `backend` after the NULL check every operation shares.
template <typename Backend, typename Body>
sinter_status forward(Backend *backend, const char *function, Body &&body) {
  if (!backend)
    return failNull(nullptr, function, "backend");
  absl::Status status = body(*backend->impl);
  if (status.ok())
    return SINTER_OK;
  return fail(backend, status);
}

// snprintf-style copy of `text` into buf[0..cap); reports the full length through `len`.
void copyString(const std::string &text, char *buf, size_t cap, size_t *len) {
  if (len)
    *len = text.size();
  if (cap == 0)
    return;
  size_t n = text.size() < cap - 1 ? text.size() : cap - 1;
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
}

BufferHandle handle(sinter_buffer id) { return BufferHandle{id}; }

sinter_status create(const char *function, const char *kind, sinter::BackendOptions options,
                     sinter_backend **out) {
  if (!out)
    return failNull(nullptr, function, "out");
  *out = nullptr;
  // An explicit kind is taken as given; only "no kind" consults SINTER_BACKEND and friends.
  bool fromEnvironment = !kind || !*kind;
  if (!fromEnvironment)
    options.kind = kind;
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
      fromEnvironment ? sinter::createBackendFromEnvironment(options)
                      : sinter::createBackend(options);
  if (!backend.ok())
    return fail(nullptr, backend.status());
  auto wrapper = std::make_unique<sinter_backend>();
  wrapper->impl = std::move(backend).value();
  *out = wrapper.release();
  return SINTER_OK;
}

} // namespace

extern "C" {

const char *sinter_version(void) noexcept { return SINTER_VERSION_STRING; }

uint32_t sinter_abi_version(void) noexcept { return SINTER_ABI_VERSION; }

const char *sinter_status_name(sinter_status status) noexcept {
  if (status < 0 || status > SINTER_UNAUTHENTICATED)
    return "UNRECOGNIZED";
  return kStatusNames[status];
}

const char *sinter_last_error(void) noexcept { return threadLastError().c_str(); }

void sinter_clear_last_error(void) noexcept { threadLastError().clear(); }

sinter_status sinter_backend_create(const char *kind, sinter_backend **out) noexcept {
  return create("sinter_backend_create", kind, sinter::BackendOptions{}, out);
}

sinter_status sinter_backend_create_ex(const char *kind, int32_t fusion,
                                       const char *disabled_fusions, uint64_t memory_limit_bytes,
                                       sinter_backend **out) noexcept {
  return sinter_backend_create_on_device(kind, nullptr, fusion, disabled_fusions,
                                         memory_limit_bytes, out);
}

sinter_status sinter_backend_create_on_device(const char *kind, const char *device, int32_t fusion,
                                              const char *disabled_fusions,
                                              uint64_t memory_limit_bytes,
                                              sinter_backend **out) noexcept {
  sinter::BackendOptions options;
  options.fusion = fusion != 0;
  options.memoryLimitBytes = memory_limit_bytes;
  if (device)
    options.device = device;
  if (disabled_fusions) {
    for (absl::string_view name : absl::StrSplit(disabled_fusions, ',', absl::SkipWhitespace()))
      options.disabledFusions.emplace_back(absl::StripAsciiWhitespace(name));
  }
  return create(device ? "sinter_backend_create_on_device" : "sinter_backend_create_ex", kind,
                std::move(options), out);
}

sinter_status sinter_device_count(uint32_t *count) noexcept {
  if (!count)
    return failNull(nullptr, "sinter_device_count", "count");
  *count = 0;
  absl::StatusOr<std::vector<sinter::Device>> devices = sinter::listDevices();
  if (!devices.ok())
    return fail(nullptr, devices.status());
  *count = static_cast<uint32_t>(devices->size());
  return SINTER_OK;
}

sinter_status sinter_device_get(uint32_t position, uint32_t *index, char *name_buf, size_t name_cap,
                                size_t *name_len, uint32_t *kind, uint32_t *type,
                                uint64_t *memory_bytes, uint32_t *compute_units) noexcept {
  if (!name_buf && name_cap != 0)
    return failNull(nullptr, "sinter_device_get", "name_buf (with name_cap > 0)");
  absl::StatusOr<std::vector<sinter::Device>> devices = sinter::listDevices();
  if (!devices.ok())
    return fail(nullptr, devices.status());
  if (position >= devices->size())
    return fail(nullptr, absl::OutOfRangeError(absl::StrFormat(
                             "sinter_device_get: position %u, but there are %u devices", position,
                             devices->size())));
  const sinter::Device &d = (*devices)[position];
  copyString(d.name, name_buf, name_cap, name_len);
  if (index)
    *index = d.index;
  if (kind)
    *kind = static_cast<uint32_t>(d.kind);
  if (type)
    *type = static_cast<uint32_t>(d.type);
  if (memory_bytes)
    *memory_bytes = d.memoryBytes;
  if (compute_units)
    *compute_units = d.computeUnits;
  return SINTER_OK;
}

void sinter_backend_destroy(sinter_backend *backend) noexcept { delete backend; }

size_t sinter_backend_last_error(const sinter_backend *backend, char *buf, size_t cap) noexcept {
  if (!backend)
    return 0;
  std::lock_guard<std::mutex> lock(backend->errorMutex);
  size_t len = 0;
  copyString(backend->lastError, buf, buf ? cap : 0, &len);
  return len;
}

sinter_status sinter_name(const sinter_backend *backend, char *buf, size_t cap,
                          size_t *len) noexcept {
  if (backend && !buf && cap != 0)
    return failNull(backend, "sinter_name", "buf (with cap > 0)");
  return forward(backend, "sinter_name", [&](const ComputeBackend &b) {
    copyString(b.name(), buf, cap, len);
    return absl::OkStatus();
  });
}

sinter_status sinter_device_info(const sinter_backend *backend, char *name_buf, size_t name_cap,
                                 size_t *name_len, uint32_t *kind, uint64_t *memory_bytes,
                                 uint32_t *compute_units) noexcept {
  if (backend && !name_buf && name_cap != 0)
    return failNull(backend, "sinter_device_info", "name_buf (with name_cap > 0)");
  return forward(backend, "sinter_device_info", [&](const ComputeBackend &b) {
    sinter::DeviceInfo info = b.deviceInfo();
    copyString(info.name, name_buf, name_cap, name_len);
    if (kind)
      *kind = static_cast<uint32_t>(info.kind);
    if (memory_bytes)
      *memory_bytes = info.memoryBytes;
    if (compute_units)
      *compute_units = info.computeUnits;
    return absl::OkStatus();
  });
}

sinter_status sinter_allocate(sinter_backend *backend, uint64_t size_bytes,
                              sinter_buffer *out) noexcept {
  if (backend && !out)
    return failNull(backend, "sinter_allocate", "out");
  if (out)
    *out = 0;
  return forward(backend, "sinter_allocate", [&](ComputeBackend &b) {
    absl::StatusOr<BufferHandle> buffer = b.allocate(size_bytes);
    if (!buffer.ok())
      return buffer.status();
    *out = buffer->id;
    return absl::OkStatus();
  });
}

sinter_status sinter_free(sinter_backend *backend, sinter_buffer buffer) noexcept {
  return forward(backend, "sinter_free", [&](ComputeBackend &b) { return b.free(handle(buffer)); });
}

sinter_status sinter_matmul(sinter_backend *backend, sinter_buffer a, sinter_buffer b,
                            sinter_buffer out, uint32_t m, uint32_t n, uint32_t k) noexcept {
  return forward(backend, "sinter_matmul", [&](ComputeBackend &cb) {
    return cb.matmul(handle(a), handle(b), handle(out), m, n, k);
  });
}

sinter_status sinter_softmax(sinter_backend *backend, sinter_buffer in, sinter_buffer out,
                             uint32_t size) noexcept {
  return forward(backend, "sinter_softmax",
                 [&](ComputeBackend &b) { return b.softmax(handle(in), handle(out), size); });
}

sinter_status sinter_rms_norm(sinter_backend *backend, sinter_buffer in, sinter_buffer weight,
                              sinter_buffer out, uint32_t size, float eps) noexcept {
  return forward(backend, "sinter_rms_norm", [&](ComputeBackend &b) {
    return b.rmsNorm(handle(in), handle(weight), handle(out), size, eps);
  });
}

sinter_status sinter_rope(sinter_backend *backend, sinter_buffer q, sinter_buffer k, uint32_t pos,
                          uint32_t head_dim, float freq_base, uint32_t n_heads_q,
                          uint32_t n_heads_k) noexcept {
  return forward(backend, "sinter_rope", [&](ComputeBackend &b) {
    return b.rope(handle(q), handle(k), pos, head_dim, freq_base, n_heads_q, n_heads_k);
  });
}

sinter_status sinter_silu(sinter_backend *backend, sinter_buffer in, sinter_buffer out,
                          uint32_t size) noexcept {
  return forward(backend, "sinter_silu",
                 [&](ComputeBackend &b) { return b.silu(handle(in), handle(out), size); });
}

sinter_status sinter_element_mul(sinter_backend *backend, sinter_buffer a, sinter_buffer b,
                                 sinter_buffer out, uint32_t size) noexcept {
  return forward(backend, "sinter_element_mul", [&](ComputeBackend &cb) {
    return cb.elementMul(handle(a), handle(b), handle(out), size);
  });
}

sinter_status sinter_add(sinter_backend *backend, sinter_buffer a, sinter_buffer b,
                         sinter_buffer out, uint32_t size) noexcept {
  return forward(backend, "sinter_add", [&](ComputeBackend &cb) {
    return cb.add(handle(a), handle(b), handle(out), size);
  });
}

sinter_status sinter_copy_to_device(sinter_backend *backend, const uint8_t *data, size_t len,
                                    sinter_buffer buffer) noexcept {
  if (backend && !data && len != 0)
    return failNull(backend, "sinter_copy_to_device", "data (with len > 0)");
  return forward(backend, "sinter_copy_to_device", [&](ComputeBackend &b) {
    return b.copyToDevice(absl::Span<const uint8_t>(data, len), handle(buffer));
  });
}

sinter_status sinter_copy_from_device(sinter_backend *backend, sinter_buffer buffer, uint8_t *data,
                                      size_t len) noexcept {
  if (backend && !data && len != 0)
    return failNull(backend, "sinter_copy_from_device", "data (with len > 0)");
  return forward(backend, "sinter_copy_from_device", [&](ComputeBackend &b) {
    return b.copyFromDevice(handle(buffer), absl::Span<uint8_t>(data, len));
  });
}

sinter_status sinter_copy_buffer(sinter_backend *backend, sinter_buffer src, sinter_buffer dst,
                                 uint64_t size_bytes) noexcept {
  return forward(backend, "sinter_copy_buffer", [&](ComputeBackend &b) {
    return b.copyBuffer(handle(src), handle(dst), size_bytes);
  });
}

sinter_status sinter_copy_buffer_offset(sinter_backend *backend, sinter_buffer src,
                                        sinter_buffer dst, uint64_t src_offset, uint64_t dst_offset,
                                        uint64_t size_bytes) noexcept {
  return forward(backend, "sinter_copy_buffer_offset", [&](ComputeBackend &b) {
    return b.copyBufferOffset(handle(src), handle(dst), src_offset, dst_offset, size_bytes);
  });
}

sinter_status sinter_synchronize(sinter_backend *backend) noexcept {
  return forward(backend, "sinter_synchronize", [&](ComputeBackend &b) { return b.synchronize(); });
}

sinter_status sinter_attn_score(sinter_backend *backend, sinter_buffer q, sinter_buffer k_cache,
                                sinter_buffer scores, uint32_t head_dim, uint32_t seq_len,
                                uint32_t head_offset, uint32_t kv_offset,
                                uint32_t kv_stride) noexcept {
  return forward(backend, "sinter_attn_score", [&](ComputeBackend &b) {
    return b.attnScore(handle(q), handle(k_cache), handle(scores), head_dim, seq_len, head_offset,
                       kv_offset, kv_stride);
  });
}

sinter_status sinter_attn_value(sinter_backend *backend, sinter_buffer weights,
                                sinter_buffer v_cache, sinter_buffer out, uint32_t head_dim,
                                uint32_t seq_len, uint32_t kv_offset, uint32_t kv_stride,
                                uint32_t out_offset) noexcept {
  return forward(backend, "sinter_attn_value", [&](ComputeBackend &b) {
    return b.attnValue(handle(weights), handle(v_cache), handle(out), head_dim, seq_len, kv_offset,
                       kv_stride, out_offset);
  });
}

sinter_status sinter_quantized_matmul(sinter_backend *backend, sinter_buffer weights,
                                      sinter_buffer x, sinter_buffer out, uint32_t n_rows,
                                      uint32_t n_cols, uint32_t dtype) noexcept {
  return forward(backend, "sinter_quantized_matmul", [&](ComputeBackend &b) {
    // Only ids that name a format become a DType; the rest are refused here, in the words
    // checkWeightDType uses, so no backend ever sees a value outside the enum.
    const sinter::DTypeInfo *info = sinter::lookupDType(dtype);
    if (!info)
      return absl::InvalidArgumentError(
          absl::StrFormat("quantized_matmul: dtype id %u is not a GGUF weight format", dtype));
    return b.quantizedMatmul(handle(weights), handle(x), handle(out), n_rows, n_cols, info->dtype);
  });
}

} // extern "C"
