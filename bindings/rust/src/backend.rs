//! backend.rs - the `ComputeBackend` trait: the 19 operations of SEMANTICS.md in the exact shape of
//! the trait of the crate yule-gpu 0.1.0.
//!
//! An engine written against yule-gpu's trait compiles against this one when its imports change
//! (`yule_gpu::{BufferHandle, ComputeBackend, DeviceInfo, BackendKind}`,
//! `yule_core::dtype::DType` and `yule_core::error::Result` become the `sinter` items of the same
//! names). The signatures are yule-gpu's: `Send + Sync` supertraits, `name` borrowing a `&str`,
//! buffers passed as `&BufferHandle` (`free` takes its handle by value), byte sizes and byte
//! offsets as `usize`, element counts as `u32`; 16 required methods and 3 provided ones
//! (`attn_score`, `attn_value`, `quantized_matmul`), whose default bodies answer Unimplemented.
//! Sinter's backends implement all 19.
//!
//! The trait is the Rust mirror of include/sinter/ComputeBackend.h. Element counts and element
//! offsets are f32 elements; sizes of buffers, copies and host slices are bytes. What Sinter does
//! differently from yule-gpu's own backends (it rejects what they clamp, ignore or panic on) is in
//! docs/ENGINE_INTEGRATION.md.
use crate::{DType, Error, Result, StatusCode};

/// Names a buffer: a 64-bit id, never 0 for a live buffer, never reused within a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferHandle(pub u64);

impl BufferHandle {
    /// False for the id 0, which no live buffer has.
    pub fn is_valid(self) -> bool {
        self.0 != 0
    }
}

/// The kind of device a backend runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    Cpu,
    Vulkan,
    Cuda,
    Metal,
}

/// What `device_info()` reports (yule-gpu's fields: `backend` is the device's kind).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub backend: BackendKind,
    pub memory_bytes: u64,
    pub compute_units: u32,
}

/// The error of a provided method a backend does not override.
fn not_supported(operation: &str) -> Error {
    Error::new(
        StatusCode::Unimplemented,
        format!("{operation}: this backend does not implement it"),
    )
}

/// The 19 operations. Every operation validates its arguments before it records or runs
/// anything: a rejected call changes nothing and the backend stays usable. Implementations are
/// shared between threads (`Send + Sync`); Sinter's serialize concurrent calls.
pub trait ComputeBackend: Send + Sync {
    /// Short backend name, e.g. "reference", "sinter-cpu", "sinter-vulkan".
    fn name(&self) -> &str;
    /// Device name, kind, memory and compute units.
    fn device_info(&self) -> DeviceInfo;

    /// A new zero-filled buffer of `size_bytes` bytes (0 is allowed). ResourceExhausted, with no
    /// buffer created, when the device cannot hold it.
    fn allocate(&self, size_bytes: usize) -> Result<BufferHandle>;
    /// Releases a buffer. NotFound for an unknown or already-freed handle. Work recorded earlier
    /// that reads the buffer still sees it.
    fn free(&self, handle: BufferHandle) -> Result<()>;

    /// out[i*n+j] = sum_p a[i*k+p] * b[p*n+j]; A is m x k, B is k x n, out is m x n, row-major.
    fn matmul(
        &self,
        a: &BufferHandle,
        b: &BufferHandle,
        out: &BufferHandle,
        m: u32,
        n: u32,
        k: u32,
    ) -> Result<()>;
    /// out[i] = exp(in[i] - max) / sum exp(in - max) over the first `size` elements.
    fn softmax(&self, input: &BufferHandle, output: &BufferHandle, size: u32) -> Result<()>;
    /// out[i] = in[i] * w[i] / sqrt(mean(in[0..size)^2) + eps).
    fn rms_norm(
        &self,
        input: &BufferHandle,
        weight: &BufferHandle,
        output: &BufferHandle,
        size: u32,
        eps: f32,
    ) -> Result<()>;
    /// Rotates interleaved pairs of each of the n_heads_q heads of q and n_heads_k heads of k in
    /// place by pos * freq_base^(-2i/head_dim).
    #[allow(clippy::too_many_arguments)]
    fn rope(
        &self,
        q: &BufferHandle,
        k: &BufferHandle,
        pos: u32,
        head_dim: u32,
        freq_base: f32,
        n_heads_q: u32,
        n_heads_k: u32,
    ) -> Result<()>;
    /// out[i] = in[i] / (1 + exp(-in[i])).
    fn silu(&self, input: &BufferHandle, output: &BufferHandle, size: u32) -> Result<()>;
    /// out[i] = a[i] * b[i].
    fn element_mul(
        &self,
        a: &BufferHandle,
        b: &BufferHandle,
        output: &BufferHandle,
        size: u32,
    ) -> Result<()>;
    /// out[i] = a[i] + b[i].
    fn add(
        &self,
        a: &BufferHandle,
        b: &BufferHandle,
        output: &BufferHandle,
        size: u32,
    ) -> Result<()>;

    /// Writes data.len() bytes at offset 0; `data` may be reused as soon as the call returns.
    fn copy_to_device(&self, data: &[u8], handle: &BufferHandle) -> Result<()>;
    /// Reads data.len() bytes from offset 0, reflecting every operation recorded before the
    /// call. Errors of deferred work surface here (or at synchronize).
    fn copy_from_device(&self, handle: &BufferHandle, data: &mut [u8]) -> Result<()>;
    /// Copies `size` bytes from offset 0 of src to offset 0 of dst.
    fn copy_buffer(&self, src: &BufferHandle, dst: &BufferHandle, size: usize) -> Result<()>;
    /// dst[dst_offset..+size) = src[src_offset..+size), all in bytes; overlap acts as memmove.
    fn copy_buffer_offset(
        &self,
        src: &BufferHandle,
        dst: &BufferHandle,
        src_offset: usize,
        dst_offset: usize,
        size: usize,
    ) -> Result<()>;
    /// Returns when every recorded operation has taken effect; reports deferred failures.
    fn synchronize(&self) -> Result<()>;

    /// scores[t] = (sum_d q[head_offset+d] * k_cache[t*kv_stride + kv_offset + d]) /
    /// sqrt(head_dim), for t < seq_len. Provided: the default answers Unimplemented.
    #[allow(clippy::too_many_arguments)]
    fn attn_score(
        &self,
        _q: &BufferHandle,
        _k_cache: &BufferHandle,
        _scores: &BufferHandle,
        _head_dim: u32,
        _seq_len: u32,
        _head_offset: u32,
        _kv_offset: u32,
        _kv_stride: u32,
    ) -> Result<()> {
        Err(not_supported("attn_score"))
    }
    /// out[out_offset+d] = sum_t weights[t] * v_cache[t*kv_stride + kv_offset + d], d < head_dim
    /// (overwrites). Provided: the default answers Unimplemented.
    #[allow(clippy::too_many_arguments)]
    fn attn_value(
        &self,
        _weights: &BufferHandle,
        _v_cache: &BufferHandle,
        _output: &BufferHandle,
        _head_dim: u32,
        _seq_len: u32,
        _kv_offset: u32,
        _kv_stride: u32,
        _out_offset: u32,
    ) -> Result<()> {
        Err(not_supported("attn_value"))
    }
    /// out[r] = sum_c W[r][c] * x[c]; W is n_rows rows of n_cols `dtype` weights, rows back to
    /// back. Provided: the default answers Unimplemented.
    fn quantized_matmul(
        &self,
        _weights: &BufferHandle,
        _input: &BufferHandle,
        _output: &BufferHandle,
        _n_rows: u32,
        _n_cols: u32,
        _dtype: DType,
    ) -> Result<()> {
        Err(not_supported("quantized_matmul"))
    }
}
