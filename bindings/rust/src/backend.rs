//! backend.rs - the `ComputeBackend` trait: the 19 operations of SEMANTICS.md.
//!
//! The Rust mirror of include/sinter/ComputeBackend.h (itself the twin of the yule-gpu 0.1.0
//! trait): the same operations with the names in snake_case, `&self` methods (a backend serializes
//! concurrent calls itself), `Result` for everything that can fail. Element counts and element
//! offsets are f32 elements; sizes of buffers, copies and host slices are bytes.
use crate::{DType, Error};

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

/// What `device_info()` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub kind: BackendKind,
    pub memory_bytes: u64,
    pub compute_units: u32,
}

/// The 19 operations. Every operation validates its arguments before it records or runs
/// anything: a rejected call changes nothing and the backend stays usable.
pub trait ComputeBackend {
    /// Short backend name, e.g. "reference", "sinter-cpu", "sinter-vulkan".
    fn name(&self) -> String;
    /// Device name, kind, memory and compute units.
    fn device_info(&self) -> DeviceInfo;

    /// A new zero-filled buffer of `size_bytes` bytes (0 is allowed). ResourceExhausted, with no
    /// buffer created, when the device cannot hold it.
    fn allocate(&self, size_bytes: u64) -> Result<BufferHandle, Error>;
    /// Releases a buffer. NotFound for an unknown or already-freed handle. Work recorded earlier
    /// that reads the buffer still sees it.
    fn free(&self, handle: BufferHandle) -> Result<(), Error>;

    /// out[i*n+j] = sum_p a[i*k+p] * b[p*n+j]; A is m x k, B is k x n, out is m x n, row-major.
    fn matmul(
        &self,
        a: BufferHandle,
        b: BufferHandle,
        out: BufferHandle,
        m: u32,
        n: u32,
        k: u32,
    ) -> Result<(), Error>;
    /// out[i] = exp(in[i] - max) / sum exp(in - max) over the first `size` elements.
    fn softmax(&self, input: BufferHandle, out: BufferHandle, size: u32) -> Result<(), Error>;
    /// out[i] = in[i] * w[i] / sqrt(mean(in[0..size)^2) + eps).
    fn rms_norm(
        &self,
        input: BufferHandle,
        weight: BufferHandle,
        out: BufferHandle,
        size: u32,
        eps: f32,
    ) -> Result<(), Error>;
    /// Rotates interleaved pairs of each of the n_heads_q heads of q and n_heads_k heads of k in
    /// place by pos * freq_base^(-2i/head_dim).
    #[allow(clippy::too_many_arguments)]
    fn rope(
        &self,
        q: BufferHandle,
        k: BufferHandle,
        pos: u32,
        head_dim: u32,
        freq_base: f32,
        n_heads_q: u32,
        n_heads_k: u32,
    ) -> Result<(), Error>;
    /// out[i] = in[i] / (1 + exp(-in[i])).
    fn silu(&self, input: BufferHandle, out: BufferHandle, size: u32) -> Result<(), Error>;
    /// out[i] = a[i] * b[i].
    fn element_mul(
        &self,
        a: BufferHandle,
        b: BufferHandle,
        out: BufferHandle,
        size: u32,
    ) -> Result<(), Error>;
    /// out[i] = a[i] + b[i].
    fn add(
        &self,
        a: BufferHandle,
        b: BufferHandle,
        out: BufferHandle,
        size: u32,
    ) -> Result<(), Error>;

    /// Writes data.len() bytes at offset 0; `data` may be reused as soon as the call returns.
    fn copy_to_device(&self, data: &[u8], handle: BufferHandle) -> Result<(), Error>;
    /// Reads data.len() bytes from offset 0, reflecting every operation recorded before the
    /// call. Errors of deferred work surface here (or at synchronize).
    fn copy_from_device(&self, handle: BufferHandle, data: &mut [u8]) -> Result<(), Error>;
    /// Copies `size_bytes` bytes from offset 0 of src to offset 0 of dst.
    fn copy_buffer(
        &self,
        src: BufferHandle,
        dst: BufferHandle,
        size_bytes: u64,
    ) -> Result<(), Error>;
    /// dst[dst_offset..+size_bytes) = src[src_offset..+size_bytes), in bytes; overlap acts as
    /// memmove.
    fn copy_buffer_offset(
        &self,
        src: BufferHandle,
        dst: BufferHandle,
        src_offset: u64,
        dst_offset: u64,
        size_bytes: u64,
    ) -> Result<(), Error>;
    /// Returns when every recorded operation has taken effect; reports deferred failures.
    fn synchronize(&self) -> Result<(), Error>;

    /// scores[t] = (sum_d q[head_offset+d] * k_cache[t*kv_stride + kv_offset + d]) /
    /// sqrt(head_dim), for t < seq_len.
    #[allow(clippy::too_many_arguments)]
    fn attn_score(
        &self,
        q: BufferHandle,
        k_cache: BufferHandle,
        scores: BufferHandle,
        head_dim: u32,
        seq_len: u32,
        head_offset: u32,
        kv_offset: u32,
        kv_stride: u32,
    ) -> Result<(), Error>;
    /// out[out_offset+d] = sum_t weights[t] * v_cache[t*kv_stride + kv_offset + d], d < head_dim
    /// (overwrites).
    #[allow(clippy::too_many_arguments)]
    fn attn_value(
        &self,
        weights: BufferHandle,
        v_cache: BufferHandle,
        out: BufferHandle,
        head_dim: u32,
        seq_len: u32,
        kv_offset: u32,
        kv_stride: u32,
        out_offset: u32,
    ) -> Result<(), Error>;
    /// out[r] = sum_c W[r][c] * x[c]; W is n_rows rows of n_cols `dtype` weights, rows back to
    /// back.
    fn quantized_matmul(
        &self,
        weights: BufferHandle,
        x: BufferHandle,
        out: BufferHandle,
        n_rows: u32,
        n_cols: u32,
        dtype: DType,
    ) -> Result<(), Error>;
}
