/* sinter.h - the C ABI of Sinter: one function per ComputeBackend operation.
 *
 * For C programs and for foreign-function bindings (Rust's `extern "C"` without dependencies):
 * an opaque backend handle, 64-bit buffer ids, fixed-width integers, host slices as pointer plus
 * byte length, no enums or structs in any signature. Every call returns a sinter_status whose
 * values equal absl::StatusCode; the failure's message is kept per thread (sinter_last_error).
 * The meaning of each operation is SEMANTICS.md's; this header only adds what crossing C changes.
 */
#ifndef SINTER_SINTER_H
#define SINTER_SINTER_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define SINTER_API
#else
#define SINTER_API __attribute__((visibility("default")))
#endif

/* In C++ the functions are noexcept: no C++ exception ever crosses into C or Rust (an unexpected
 * one, such as std::bad_alloc from the host allocator, terminates instead of unwinding). */
#ifdef __cplusplus
#define SINTER_NOEXCEPT noexcept
extern "C" {
#else
#define SINTER_NOEXCEPT
#endif

/* ---- Versions --------------------------------------------------------------------------- */

/// Bumped whenever a signature or a documented behaviour of this header changes incompatibly.
/// 2: the default kind is "auto" (was "reference"); device listing and choice added.
#define SINTER_ABI_VERSION 2

/// The library version, "MAJOR.MINOR.PATCH" (e.g. "0.1.0"); a static string, never NULL.
SINTER_API const char *sinter_version(void) SINTER_NOEXCEPT;

/// The SINTER_ABI_VERSION the library was built with; a binding compares it with its own.
SINTER_API uint32_t sinter_abi_version(void) SINTER_NOEXCEPT;

/* ---- Status codes ----------------------------------------------------------------------- */

/// The result of every fallible call. The values are absl::StatusCode's, fixed forever.
typedef int32_t sinter_status;

#define SINTER_OK 0
#define SINTER_CANCELLED 1
#define SINTER_UNKNOWN 2
#define SINTER_INVALID_ARGUMENT 3
#define SINTER_DEADLINE_EXCEEDED 4
#define SINTER_NOT_FOUND 5
#define SINTER_ALREADY_EXISTS 6
#define SINTER_PERMISSION_DENIED 7
#define SINTER_RESOURCE_EXHAUSTED 8
#define SINTER_FAILED_PRECONDITION 9
#define SINTER_ABORTED 10
#define SINTER_OUT_OF_RANGE 11
#define SINTER_UNIMPLEMENTED 12
#define SINTER_INTERNAL 13
#define SINTER_UNAVAILABLE 14
#define SINTER_DATA_LOSS 15
#define SINTER_UNAUTHENTICATED 16

/// The code's name in upper case ("OK", "NOT_FOUND", ...); "UNRECOGNIZED" for a value that is no
/// code. A static string, never NULL.
SINTER_API const char *sinter_status_name(sinter_status status) SINTER_NOEXCEPT;

/// The message of the last call that failed on the calling thread, e.g.
/// "free: buffer 7 is not allocated"; "" when no call on this thread has failed (or after
/// sinter_clear_last_error). Successful calls do not clear it: read it right after a call
/// returned something other than SINTER_OK. Never NULL; the string belongs to the library and
/// stays valid until the next failing call or sinter_clear_last_error on the same thread.
SINTER_API const char *sinter_last_error(void) SINTER_NOEXCEPT;

/// Makes sinter_last_error() return "" on the calling thread.
SINTER_API void sinter_clear_last_error(void) SINTER_NOEXCEPT;

/* ---- Backends --------------------------------------------------------------------------- */

/// An opaque backend. Every function that takes one is safe to call from several threads at once
/// (calls are serialized and take effect in that order), except sinter_backend_destroy.
typedef struct sinter_backend sinter_backend;

/// A buffer id: 64 bits, never 0 for a live buffer, never reused within a process.
typedef uint64_t sinter_buffer;

/// Values of the `kind` reported by sinter_device_info.
#define SINTER_DEVICE_CPU 0
#define SINTER_DEVICE_VULKAN 1
#define SINTER_DEVICE_CUDA 2
#define SINTER_DEVICE_METAL 3

/// Builds a backend of `kind`: "auto" (vulkan on a GPU, else cpu; a Vulkan implementation on the
/// CPU such as lavapipe does not count), "reference", "cpu", "vulkan" or "lazy". NULL or "" takes
/// the kind from the environment (SINTER_BACKEND, default "auto") and applies
/// SINTER_DISABLE_FUSION; an explicit kind ignores the environment. On success *out is the new
/// backend (release it with sinter_backend_destroy); on failure *out is NULL. INVALID_ARGUMENT for
/// an unknown kind, an unusable environment variable (SINTER_BACKEND, SINTER_THREADS not a number,
/// ...) or out == NULL; UNIMPLEMENTED for a kind this build lacks.
SINTER_API sinter_status sinter_backend_create(const char *kind,
                                               sinter_backend **out) SINTER_NOEXCEPT;

/// sinter_backend_create with options. `fusion` 0 turns fusion off in the lazy backends (any
/// other value: on). `disabled_fusions` is a comma-separated list of fusion pattern names or
/// "all"; NULL or "" disables none; spaces around names are ignored. `memory_limit_bytes` caps
/// what allocate may hand out (0: the device's or host's memory). With kind NULL or "" the
/// environment is applied on top of these options, as sinter_backend_create does.
SINTER_API sinter_status sinter_backend_create_ex(const char *kind, int32_t fusion,
                                                  const char *disabled_fusions,
                                                  uint64_t memory_limit_bytes,
                                                  sinter_backend **out) SINTER_NOEXCEPT;

/// sinter_backend_create_ex on a chosen device: `device` is an index from sinter_device_get,
/// "cpu", or a case-insensitive part of a device's name ("lavapipe" also names Mesa's llvmpipe);
/// NULL or "" lets the kind choose (vulkan: SINTER_VK_DEVICE, else the best device). With kind
/// "auto" a Vulkan device means the vulkan kind and the CPU the cpu kind; another kind must run
/// on the device (INVALID_ARGUMENT otherwise). NOT_FOUND, listing the devices, for a device that
/// names none.
SINTER_API sinter_status sinter_backend_create_on_device(const char *kind, const char *device,
                                                         int32_t fusion,
                                                         const char *disabled_fusions,
                                                         uint64_t memory_limit_bytes,
                                                         sinter_backend **out) SINTER_NOEXCEPT;

/// Releases the backend and every buffer it still holds, after recorded work has finished or
/// been dropped. NULL is ignored. No other call may use `backend` during or after this call.
SINTER_API void sinter_backend_destroy(sinter_backend *backend) SINTER_NOEXCEPT;

/// Copies the message of the last call that failed on `backend` (from any thread) into `buf`,
/// like snprintf: at most cap - 1 bytes plus a terminating NUL, nothing when cap is 0. Returns
/// the full message length without the NUL (0 when no call has failed on it or backend is NULL).
SINTER_API size_t sinter_backend_last_error(const sinter_backend *backend, char *buf,
                                            size_t cap) SINTER_NOEXCEPT;

/* ---- Devices ---------------------------------------------------------------------------- */

/// Values of the `type` reported by sinter_device_get.
#define SINTER_DEVICE_TYPE_CPU 0            /* the host CPU: reference, lazy, cpu kinds */
#define SINTER_DEVICE_TYPE_DISCRETE_GPU 1   /* Vulkan */
#define SINTER_DEVICE_TYPE_INTEGRATED_GPU 2 /* Vulkan */
#define SINTER_DEVICE_TYPE_VIRTUAL_GPU 3    /* Vulkan */
#define SINTER_DEVICE_TYPE_SOFTWARE 4       /* a Vulkan implementation on the CPU (lavapipe) */
#define SINTER_DEVICE_TYPE_OTHER 5          /* Vulkan */

/// The number of devices Sinter can run on into *count (at least 1: the host CPU): the Vulkan
/// devices, then the CPU. INVALID_ARGUMENT when count is NULL.
SINTER_API sinter_status sinter_device_count(uint32_t *count) SINTER_NOEXCEPT;

/// The device at `position` (0 .. count-1) of that list: its `index` (what
/// sinter_backend_create_on_device takes; a Vulkan device's is its Vulkan index, the
/// SINTER_VK_DEVICE number), its name (into name_buf, snprintf-style as for sinter_name below),
/// `kind` (SINTER_DEVICE_CPU or SINTER_DEVICE_VULKAN), `type` (SINTER_DEVICE_TYPE_*), memory in
/// bytes and compute units (CPU: hardware threads; Vulkan: where the driver reports them, else
/// 0). Each output pointer may be NULL when not wanted. OUT_OF_RANGE for a position past the
/// end.
SINTER_API sinter_status sinter_device_get(uint32_t position, uint32_t *index, char *name_buf,
                                           size_t name_cap, size_t *name_len, uint32_t *kind,
                                           uint32_t *type, uint64_t *memory_bytes,
                                           uint32_t *compute_units) SINTER_NOEXCEPT;

/* ---- The 19 operations ------------------------------------------------------------------
 * Shared rules: `backend` NULL is INVALID_ARGUMENT. Element counts and element offsets (size, m,
 * n, k, head_dim, seq_len, *_offset, kv_stride) are f32 elements; sizes of buffers, copies and
 * host slices are bytes. An unknown or freed buffer is NOT_FOUND, a read or write past the end
 * of a buffer OUT_OF_RANGE; a rejected call records nothing and changes nothing.
 * Strings are returned snprintf-style: `buf` receives at most cap - 1 bytes and a NUL (buf may be
 * NULL when cap is 0), *len (when len is not NULL) the full length without the NUL, so a caller
 * can ask for the length first or detect truncation, which is not an error. */

/// The backend's short name ("reference", "sinter-cpu", "sinter-vulkan").
SINTER_API sinter_status sinter_name(const sinter_backend *backend, char *buf, size_t cap,
                                     size_t *len) SINTER_NOEXCEPT;

/// The device: its name (into name_buf, as for strings above), kind (a SINTER_DEVICE_* value),
/// memory in bytes and compute units. Each of name_len, kind, memory_bytes and compute_units may
/// be NULL when not wanted.
SINTER_API sinter_status sinter_device_info(const sinter_backend *backend, char *name_buf,
                                            size_t name_cap, size_t *name_len, uint32_t *kind,
                                            uint64_t *memory_bytes,
                                            uint32_t *compute_units) SINTER_NOEXCEPT;

/// A new zero-filled buffer of size_bytes bytes (0 is allowed) into *out. RESOURCE_EXHAUSTED when
/// the device (or the memory limit) cannot hold it; then no buffer exists and *out is 0.
/// INVALID_ARGUMENT when out is NULL.
SINTER_API sinter_status sinter_allocate(sinter_backend *backend, uint64_t size_bytes,
                                         sinter_buffer *out) SINTER_NOEXCEPT;

/// Releases a buffer; work recorded earlier that reads it still sees it. NOT_FOUND for 0, an
/// unknown or an already-freed id.
SINTER_API sinter_status sinter_free(sinter_backend *backend, sinter_buffer buffer) SINTER_NOEXCEPT;

/// out[i*n+j] = sum_p a[i*k+p] * b[p*n+j]; A is m x k, B is k x n, out is m x n, row-major.
SINTER_API sinter_status sinter_matmul(sinter_backend *backend, sinter_buffer a, sinter_buffer b,
                                       sinter_buffer out, uint32_t m, uint32_t n,
                                       uint32_t k) SINTER_NOEXCEPT;

/// out[i] = exp(in[i] - max) / sum exp(in - max) over the first `size` elements; in == out is
/// allowed.
SINTER_API sinter_status sinter_softmax(sinter_backend *backend, sinter_buffer in,
                                        sinter_buffer out, uint32_t size) SINTER_NOEXCEPT;

/// out[i] = in[i] * weight[i] / sqrt(mean(in[0..size)^2) + eps); in == out is allowed.
SINTER_API sinter_status sinter_rms_norm(sinter_backend *backend, sinter_buffer in,
                                         sinter_buffer weight, sinter_buffer out, uint32_t size,
                                         float eps) SINTER_NOEXCEPT;

/// Rotates, in place, the interleaved pairs (2i, 2i+1) of n_heads_q heads of q and n_heads_k
/// heads of k (head_dim elements each, heads contiguous) by pos * freq_base^(-2i/head_dim).
/// INVALID_ARGUMENT for an odd head_dim.
SINTER_API sinter_status sinter_rope(sinter_backend *backend, sinter_buffer q, sinter_buffer k,
                                     uint32_t pos, uint32_t head_dim, float freq_base,
                                     uint32_t n_heads_q, uint32_t n_heads_k) SINTER_NOEXCEPT;

/// out[i] = in[i] / (1 + exp(-in[i])); in == out is allowed.
SINTER_API sinter_status sinter_silu(sinter_backend *backend, sinter_buffer in, sinter_buffer out,
                                     uint32_t size) SINTER_NOEXCEPT;

/// out[i] = a[i] * b[i]; an input may be the output.
SINTER_API sinter_status sinter_element_mul(sinter_backend *backend, sinter_buffer a,
                                            sinter_buffer b, sinter_buffer out,
                                            uint32_t size) SINTER_NOEXCEPT;

/// out[i] = a[i] + b[i]; an input may be the output.
SINTER_API sinter_status sinter_add(sinter_backend *backend, sinter_buffer a, sinter_buffer b,
                                    sinter_buffer out, uint32_t size) SINTER_NOEXCEPT;

/// Writes `len` bytes from `data` at offset 0 of `buffer`; `data` may be reused as soon as the
/// call returns. data may be NULL only when len is 0 (INVALID_ARGUMENT otherwise).
SINTER_API sinter_status sinter_copy_to_device(sinter_backend *backend, const uint8_t *data,
                                               size_t len, sinter_buffer buffer) SINTER_NOEXCEPT;

/// Reads `len` bytes from offset 0 of `buffer` into `data`, reflecting every operation recorded
/// before the call; failures of deferred work are reported here (or by sinter_synchronize). data
/// may be NULL only when len is 0 (INVALID_ARGUMENT otherwise).
SINTER_API sinter_status sinter_copy_from_device(sinter_backend *backend, sinter_buffer buffer,
                                                 uint8_t *data, size_t len) SINTER_NOEXCEPT;

/// Copies size_bytes bytes from offset 0 of src to offset 0 of dst.
SINTER_API sinter_status sinter_copy_buffer(sinter_backend *backend, sinter_buffer src,
                                            sinter_buffer dst, uint64_t size_bytes) SINTER_NOEXCEPT;

/// dst[dst_offset..+size_bytes) = src[src_offset..+size_bytes), offsets in bytes; within one
/// buffer, overlapping ranges behave like memmove.
SINTER_API sinter_status sinter_copy_buffer_offset(sinter_backend *backend, sinter_buffer src,
                                                   sinter_buffer dst, uint64_t src_offset,
                                                   uint64_t dst_offset,
                                                   uint64_t size_bytes) SINTER_NOEXCEPT;

/// Returns when every recorded operation has taken effect; reports failures of deferred work.
SINTER_API sinter_status sinter_synchronize(sinter_backend *backend) SINTER_NOEXCEPT;

/// scores[t] = (sum_d q[head_offset+d] * k_cache[t*kv_stride + kv_offset + d]) / sqrt(head_dim)
/// for t < seq_len.
SINTER_API sinter_status sinter_attn_score(sinter_backend *backend, sinter_buffer q,
                                           sinter_buffer k_cache, sinter_buffer scores,
                                           uint32_t head_dim, uint32_t seq_len,
                                           uint32_t head_offset, uint32_t kv_offset,
                                           uint32_t kv_stride) SINTER_NOEXCEPT;

/// out[out_offset+d] = sum_t weights[t] * v_cache[t*kv_stride + kv_offset + d] for d < head_dim
/// (overwrites).
SINTER_API sinter_status sinter_attn_value(sinter_backend *backend, sinter_buffer weights,
                                           sinter_buffer v_cache, sinter_buffer out,
                                           uint32_t head_dim, uint32_t seq_len, uint32_t kv_offset,
                                           uint32_t kv_stride, uint32_t out_offset) SINTER_NOEXCEPT;

/// out[r] = sum_c W[r][c] * x[c]: W holds n_rows rows of n_cols weights of format `dtype` (a GGUF
/// type id, SINTER_DTYPE_*), rows back to back; x and out are f32. INVALID_ARGUMENT for an id
/// that names no format or a format that is not a weight (I8..F64), or n_cols not a whole number
/// of blocks; UNIMPLEMENTED for a weight format not supported yet (e.g. Q8_K, the IQ formats).
SINTER_API sinter_status sinter_quantized_matmul(sinter_backend *backend, sinter_buffer weights,
                                                 sinter_buffer x, sinter_buffer out,
                                                 uint32_t n_rows, uint32_t n_cols,
                                                 uint32_t dtype) SINTER_NOEXCEPT;

/* ---- Weight formats: GGUF/ggml type ids for sinter_quantized_matmul ---------------------- */

#define SINTER_DTYPE_F32 0
#define SINTER_DTYPE_F16 1
#define SINTER_DTYPE_Q4_0 2
#define SINTER_DTYPE_Q4_1 3
#define SINTER_DTYPE_Q5_0 6
#define SINTER_DTYPE_Q5_1 7
#define SINTER_DTYPE_Q8_0 8
#define SINTER_DTYPE_Q8_1 9
#define SINTER_DTYPE_Q2_K 10
#define SINTER_DTYPE_Q3_K 11
#define SINTER_DTYPE_Q4_K 12
#define SINTER_DTYPE_Q5_K 13
#define SINTER_DTYPE_Q6_K 14
#define SINTER_DTYPE_Q8_K 15
#define SINTER_DTYPE_IQ2_XXS 16
#define SINTER_DTYPE_IQ2_XS 17
#define SINTER_DTYPE_IQ3_XXS 18
#define SINTER_DTYPE_IQ1_S 19
#define SINTER_DTYPE_IQ4_NL 20
#define SINTER_DTYPE_IQ3_S 21
#define SINTER_DTYPE_IQ2_S 22
#define SINTER_DTYPE_IQ4_XS 23
#define SINTER_DTYPE_I8 24
#define SINTER_DTYPE_I16 25
#define SINTER_DTYPE_I32 26
#define SINTER_DTYPE_I64 27
#define SINTER_DTYPE_F64 28
#define SINTER_DTYPE_IQ1_M 29
#define SINTER_DTYPE_BF16 30
#define SINTER_DTYPE_TQ1_0 34
#define SINTER_DTYPE_TQ2_0 35

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SINTER_SINTER_H */
