//! capi.rs - `Backend`: the ComputeBackend trait over Sinter's C ABI.
//!
//! Each trait method is one call of sinter.h. A failing call returns its status code and the
//! message the library keeps for the calling thread. The library serializes concurrent calls on
//! one backend, so `Backend` is `Send + Sync` (as the trait requires) with no lock of its own, and
//! its methods take `&self`.
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::ptr::{self, NonNull};

use crate::error::check;
use crate::ffi;
use crate::{
    BackendKind, BufferHandle, ComputeBackend, DType, DeviceInfo, Error, Result, StatusCode,
};

/// How to build a backend (the C ABI's sinter_backend_create_on_device arguments).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendOptions {
    /// "auto" (the default: vulkan on a GPU, else cpu; lavapipe does not count as a GPU),
    /// "reference", "lazy", "cpu" or "vulkan"; "" takes SINTER_BACKEND from the environment
    /// (default "auto") and applies SINTER_DISABLE_FUSION on top of these options.
    pub kind: String,
    /// The device: an index from [`list_devices`], "cpu", or part of a device's name; "" lets
    /// the kind choose. With kind "auto" a Vulkan device means vulkan and the CPU cpu.
    pub device: String,
    /// Fusion on or off in the lazy backends.
    pub fusion: bool,
    /// Fusion pattern names to switch off, or ["all"].
    pub disabled_fusions: Vec<String>,
    /// Bytes `allocate` may hand out; 0 means the device's (or host's) memory.
    pub memory_limit_bytes: u64,
}

impl Default for BackendOptions {
    fn default() -> BackendOptions {
        BackendOptions {
            kind: "auto".to_string(),
            device: String::new(),
            fusion: true,
            disabled_fusions: Vec::new(),
            memory_limit_bytes: 0,
        }
    }
}

/// A Sinter backend created through the C ABI; dropped with sinter_backend_destroy.
pub struct Backend {
    raw: NonNull<ffi::sinter_backend>,
    /// sinter_name's answer, read once at creation: `name()` lends it as `&str`.
    name: String,
}

// SAFETY: sinter.h guarantees that every function taking a backend, except
// sinter_backend_destroy, is safe to call from several threads at once: the library serializes
// the calls on one backend and they take effect in that order. sinter_backend_destroy is called
// only from Drop, which has the backend exclusively (`&mut self`), so no other call can overlap
// it. The backend is not tied to the thread that created it (no thread-local state in the
// handle; the per-thread last-error message is read by the thread that made the failing call),
// so moving it to another thread (Send) and sharing `&Backend` between threads (Sync) are sound.
// The other field, `name`, is an immutable String.
unsafe impl Send for Backend {}
unsafe impl Sync for Backend {}

fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        Error::new(
            StatusCode::InvalidArgument,
            format!("{what} \"{}\" holds a NUL byte", s.escape_default()),
        )
    })
}

/// Reads a string the C ABI returns snprintf-style: asks once with a small buffer, again with
/// the exact length when it was truncated.
fn read_string(
    mut call: impl FnMut(*mut c_char, usize, *mut usize) -> ffi::sinter_status,
) -> Result<String> {
    let mut buf = vec![0u8; 64];
    loop {
        let mut len = 0usize;
        check(call(buf.as_mut_ptr().cast(), buf.len(), &mut len))?;
        if len < buf.len() {
            buf.truncate(len);
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
        buf = vec![0u8; len + 1];
    }
}

/// The library's version, "MAJOR.MINOR.PATCH".
pub fn library_version() -> String {
    // SAFETY: a static NUL-terminated string, never NULL.
    unsafe { CStr::from_ptr(ffi::sinter_version()) }
        .to_string_lossy()
        .into_owned()
}

/// What a device is (sinter.h's SINTER_DEVICE_TYPE_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceType {
    /// The host CPU: the reference, lazy and cpu kinds run there.
    Cpu,
    DiscreteGpu,
    IntegratedGpu,
    VirtualGpu,
    /// A Vulkan implementation on the CPU (Mesa's lavapipe, named "llvmpipe").
    Software,
    Other,
}

/// A device Sinter can run on, as [`list_devices`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// What [`BackendOptions::device`] takes: a Vulkan device's Vulkan index; the CPU comes last.
    pub index: u32,
    pub name: String,
    /// Vulkan or Cpu.
    pub kind: BackendKind,
    pub device_type: DeviceType,
    /// Device-local memory (Vulkan) or physical memory (CPU), in bytes.
    pub memory_bytes: u64,
    /// CPU: hardware threads; Vulkan: compute units where the driver reports them, else 0.
    pub compute_units: u32,
}

fn backend_kind(raw: u32) -> BackendKind {
    match raw {
        1 => BackendKind::Vulkan,
        2 => BackendKind::Cuda,
        3 => BackendKind::Metal,
        _ => BackendKind::Cpu,
    }
}

/// Every device Sinter can run on: the Vulkan devices, then the host CPU (always there).
pub fn list_devices() -> Result<Vec<Device>> {
    let mut count = 0u32;
    // SAFETY: `count` is writable.
    check(unsafe { ffi::sinter_device_count(&mut count) })?;
    (0..count)
        .map(|position| {
            let (mut index, mut kind, mut device_type) = (0u32, 0u32, 0u32);
            let (mut memory_bytes, mut compute_units) = (0u64, 0u32);
            // SAFETY: every pointer is writable or (buf) as long as cap says.
            let name = read_string(|buf, cap, len| unsafe {
                ffi::sinter_device_get(
                    position,
                    &mut index,
                    buf,
                    cap,
                    len,
                    &mut kind,
                    &mut device_type,
                    &mut memory_bytes,
                    &mut compute_units,
                )
            })?;
            let device_type = match device_type {
                0 => DeviceType::Cpu,
                1 => DeviceType::DiscreteGpu,
                2 => DeviceType::IntegratedGpu,
                3 => DeviceType::VirtualGpu,
                4 => DeviceType::Software,
                _ => DeviceType::Other,
            };
            Ok(Device {
                index,
                name,
                kind: backend_kind(kind),
                device_type,
                memory_bytes,
                compute_units,
            })
        })
        .collect()
}

impl Backend {
    /// A backend of `kind` ("auto", "reference", "lazy", "cpu", "vulkan"); the environment is
    /// ignored.
    pub fn new(kind: &str) -> Result<Backend> {
        Backend::with_options(&BackendOptions {
            kind: kind.to_string(),
            ..BackendOptions::default()
        })
    }

    /// A backend of the kind SINTER_BACKEND names (default "auto"), with
    /// SINTER_DISABLE_FUSION applied.
    pub fn from_environment() -> Result<Backend> {
        Backend::with_options(&BackendOptions {
            kind: String::new(),
            ..BackendOptions::default()
        })
    }

    /// A backend built from `options`. FailedPrecondition when the library was built for another
    /// C ABI version than these declarations.
    pub fn with_options(options: &BackendOptions) -> Result<Backend> {
        // SAFETY: no arguments.
        let abi = unsafe { ffi::sinter_abi_version() };
        if abi != ffi::SINTER_ABI_VERSION {
            return Err(Error::new(
                StatusCode::FailedPrecondition,
                format!(
                    "libsinter has C ABI version {abi}, this crate was written for {}",
                    ffi::SINTER_ABI_VERSION
                ),
            ));
        }
        let kind = c_string("backend kind", &options.kind)?;
        let device = c_string("device", &options.device)?;
        let disabled = c_string("disabled fusions", &options.disabled_fusions.join(","))?;
        let mut raw: *mut ffi::sinter_backend = ptr::null_mut();
        // SAFETY: the strings are NUL-terminated and outlive the call; `raw` is writable.
        check(unsafe {
            ffi::sinter_backend_create_on_device(
                kind.as_ptr(),
                device.as_ptr(),
                i32::from(options.fusion),
                disabled.as_ptr(),
                options.memory_limit_bytes,
                &mut raw,
            )
        })?;
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(
                StatusCode::Internal,
                "sinter_backend_create_on_device gave NULL",
            )
        })?;
        let mut backend = Backend {
            raw,
            name: String::new(),
        };
        // SAFETY: a live backend; `buf` holds `cap` bytes and `len` is writable.
        backend.name =
            read_string(|buf, cap, len| unsafe { ffi::sinter_name(backend.ptr(), buf, cap, len) })?;
        Ok(backend)
    }

    fn ptr(&self) -> *mut ffi::sinter_backend {
        self.raw.as_ptr()
    }
}

/// A byte count or byte offset of the trait (usize) as the C ABI's uint64_t: lossless, usize has
/// at most 64 bits on every target Rust supports.
fn bytes(n: usize) -> u64 {
    n as u64
}

impl Drop for Backend {
    fn drop(&mut self) {
        // SAFETY: the backend is owned by `self` and no other reference to it remains.
        unsafe { ffi::sinter_backend_destroy(self.ptr()) }
    }
}

impl ComputeBackend for Backend {
    fn name(&self) -> &str {
        &self.name
    }

    fn device_info(&self) -> DeviceInfo {
        let (mut kind, mut memory_bytes, mut compute_units) = (0u32, 0u64, 0u32);
        // A live backend cannot fail here (only NULL can); an error would read as "".
        let name = read_string(|buf, cap, len| unsafe {
            ffi::sinter_device_info(
                self.ptr(),
                buf,
                cap,
                len,
                &mut kind,
                &mut memory_bytes,
                &mut compute_units,
            )
        })
        .unwrap_or_default();
        DeviceInfo {
            name,
            backend: backend_kind(kind),
            memory_bytes,
            compute_units,
        }
    }

    fn allocate(&self, size_bytes: usize) -> Result<BufferHandle> {
        let mut id = 0u64;
        check(unsafe { ffi::sinter_allocate(self.ptr(), bytes(size_bytes), &mut id) })?;
        Ok(BufferHandle(id))
    }

    fn free(&self, handle: BufferHandle) -> Result<()> {
        check(unsafe { ffi::sinter_free(self.ptr(), handle.0) })
    }

    fn matmul(
        &self,
        a: &BufferHandle,
        b: &BufferHandle,
        out: &BufferHandle,
        m: u32,
        n: u32,
        k: u32,
    ) -> Result<()> {
        check(unsafe { ffi::sinter_matmul(self.ptr(), a.0, b.0, out.0, m, n, k) })
    }

    fn softmax(&self, input: &BufferHandle, output: &BufferHandle, size: u32) -> Result<()> {
        check(unsafe { ffi::sinter_softmax(self.ptr(), input.0, output.0, size) })
    }

    fn rms_norm(
        &self,
        input: &BufferHandle,
        weight: &BufferHandle,
        output: &BufferHandle,
        size: u32,
        eps: f32,
    ) -> Result<()> {
        check(unsafe { ffi::sinter_rms_norm(self.ptr(), input.0, weight.0, output.0, size, eps) })
    }

    fn rope(
        &self,
        q: &BufferHandle,
        k: &BufferHandle,
        pos: u32,
        head_dim: u32,
        freq_base: f32,
        n_heads_q: u32,
        n_heads_k: u32,
    ) -> Result<()> {
        check(unsafe {
            ffi::sinter_rope(
                self.ptr(),
                q.0,
                k.0,
                pos,
                head_dim,
                freq_base,
                n_heads_q,
                n_heads_k,
            )
        })
    }

    fn silu(&self, input: &BufferHandle, output: &BufferHandle, size: u32) -> Result<()> {
        check(unsafe { ffi::sinter_silu(self.ptr(), input.0, output.0, size) })
    }

    fn element_mul(
        &self,
        a: &BufferHandle,
        b: &BufferHandle,
        output: &BufferHandle,
        size: u32,
    ) -> Result<()> {
        check(unsafe { ffi::sinter_element_mul(self.ptr(), a.0, b.0, output.0, size) })
    }

    fn add(
        &self,
        a: &BufferHandle,
        b: &BufferHandle,
        output: &BufferHandle,
        size: u32,
    ) -> Result<()> {
        check(unsafe { ffi::sinter_add(self.ptr(), a.0, b.0, output.0, size) })
    }

    fn copy_to_device(&self, data: &[u8], handle: &BufferHandle) -> Result<()> {
        // SAFETY: the slice is valid for data.len() bytes during the call.
        check(unsafe {
            ffi::sinter_copy_to_device(self.ptr(), data.as_ptr(), data.len(), handle.0)
        })
    }

    fn copy_from_device(&self, handle: &BufferHandle, data: &mut [u8]) -> Result<()> {
        // SAFETY: the slice is valid and exclusively borrowed for data.len() bytes.
        check(unsafe {
            ffi::sinter_copy_from_device(self.ptr(), handle.0, data.as_mut_ptr(), data.len())
        })
    }

    fn copy_buffer(&self, src: &BufferHandle, dst: &BufferHandle, size: usize) -> Result<()> {
        check(unsafe { ffi::sinter_copy_buffer(self.ptr(), src.0, dst.0, bytes(size)) })
    }

    fn copy_buffer_offset(
        &self,
        src: &BufferHandle,
        dst: &BufferHandle,
        src_offset: usize,
        dst_offset: usize,
        size: usize,
    ) -> Result<()> {
        check(unsafe {
            ffi::sinter_copy_buffer_offset(
                self.ptr(),
                src.0,
                dst.0,
                bytes(src_offset),
                bytes(dst_offset),
                bytes(size),
            )
        })
    }

    fn synchronize(&self) -> Result<()> {
        check(unsafe { ffi::sinter_synchronize(self.ptr()) })
    }

    fn attn_score(
        &self,
        q: &BufferHandle,
        k_cache: &BufferHandle,
        scores: &BufferHandle,
        head_dim: u32,
        seq_len: u32,
        head_offset: u32,
        kv_offset: u32,
        kv_stride: u32,
    ) -> Result<()> {
        check(unsafe {
            ffi::sinter_attn_score(
                self.ptr(),
                q.0,
                k_cache.0,
                scores.0,
                head_dim,
                seq_len,
                head_offset,
                kv_offset,
                kv_stride,
            )
        })
    }

    fn attn_value(
        &self,
        weights: &BufferHandle,
        v_cache: &BufferHandle,
        output: &BufferHandle,
        head_dim: u32,
        seq_len: u32,
        kv_offset: u32,
        kv_stride: u32,
        out_offset: u32,
    ) -> Result<()> {
        check(unsafe {
            ffi::sinter_attn_value(
                self.ptr(),
                weights.0,
                v_cache.0,
                output.0,
                head_dim,
                seq_len,
                kv_offset,
                kv_stride,
                out_offset,
            )
        })
    }

    fn quantized_matmul(
        &self,
        weights: &BufferHandle,
        input: &BufferHandle,
        output: &BufferHandle,
        n_rows: u32,
        n_cols: u32,
        dtype: DType,
    ) -> Result<()> {
        check(unsafe {
            ffi::sinter_quantized_matmul(
                self.ptr(),
                weights.0,
                input.0,
                output.0,
                n_rows,
                n_cols,
                dtype.id(),
            )
        })
    }
}
