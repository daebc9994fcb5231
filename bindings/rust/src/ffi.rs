//! ffi.rs - the C ABI of include/sinter/sinter.h, declared by hand.
//!
//! One declaration per function of the header, in its order, with the header's integer types
//! (`sinter_status` is `i32`, `sinter_buffer` is `u64`, `size_t` is `usize`). Nothing here is
//! safe to call directly; `crate::Backend` wraps it.
#![allow(non_camel_case_types)]

use std::os::raw::c_char;

/// The opaque `sinter_backend` of the C ABI.
#[repr(C)]
pub struct sinter_backend {
    _private: [u8; 0],
}

pub type sinter_status = i32;
pub type sinter_buffer = u64;

/// SINTER_ABI_VERSION of the header these declarations were written from.
pub const SINTER_ABI_VERSION: u32 = 2;

extern "C" {
    pub fn sinter_version() -> *const c_char;
    pub fn sinter_abi_version() -> u32;
    pub fn sinter_status_name(status: sinter_status) -> *const c_char;
    pub fn sinter_last_error() -> *const c_char;
    pub fn sinter_clear_last_error();

    pub fn sinter_backend_create(
        kind: *const c_char,
        out: *mut *mut sinter_backend,
    ) -> sinter_status;
    pub fn sinter_backend_create_ex(
        kind: *const c_char,
        fusion: i32,
        disabled_fusions: *const c_char,
        memory_limit_bytes: u64,
        out: *mut *mut sinter_backend,
    ) -> sinter_status;
    pub fn sinter_backend_create_on_device(
        kind: *const c_char,
        device: *const c_char,
        fusion: i32,
        disabled_fusions: *const c_char,
        memory_limit_bytes: u64,
        out: *mut *mut sinter_backend,
    ) -> sinter_status;
    pub fn sinter_backend_destroy(backend: *mut sinter_backend);
    pub fn sinter_device_count(count: *mut u32) -> sinter_status;
    #[allow(clippy::too_many_arguments)]
    pub fn sinter_device_get(
        position: u32,
        index: *mut u32,
        name_buf: *mut c_char,
        name_cap: usize,
        name_len: *mut usize,
        kind: *mut u32,
        device_type: *mut u32,
        memory_bytes: *mut u64,
        compute_units: *mut u32,
    ) -> sinter_status;
    pub fn sinter_backend_last_error(
        backend: *const sinter_backend,
        buf: *mut c_char,
        cap: usize,
    ) -> usize;

    pub fn sinter_name(
        backend: *const sinter_backend,
        buf: *mut c_char,
        cap: usize,
        len: *mut usize,
    ) -> sinter_status;
    pub fn sinter_device_info(
        backend: *const sinter_backend,
        name_buf: *mut c_char,
        name_cap: usize,
        name_len: *mut usize,
        kind: *mut u32,
        memory_bytes: *mut u64,
        compute_units: *mut u32,
    ) -> sinter_status;
    pub fn sinter_allocate(
        backend: *mut sinter_backend,
        size_bytes: u64,
        out: *mut sinter_buffer,
    ) -> sinter_status;
    pub fn sinter_free(backend: *mut sinter_backend, buffer: sinter_buffer) -> sinter_status;
    pub fn sinter_matmul(
        backend: *mut sinter_backend,
        a: sinter_buffer,
        b: sinter_buffer,
        out: sinter_buffer,
        m: u32,
        n: u32,
        k: u32,
    ) -> sinter_status;
    pub fn sinter_softmax(
        backend: *mut sinter_backend,
        input: sinter_buffer,
        out: sinter_buffer,
        size: u32,
    ) -> sinter_status;
    pub fn sinter_rms_norm(
        backend: *mut sinter_backend,
        input: sinter_buffer,
        weight: sinter_buffer,
        out: sinter_buffer,
        size: u32,
        eps: f32,
    ) -> sinter_status;
    pub fn sinter_rope(
        backend: *mut sinter_backend,
        q: sinter_buffer,
        k: sinter_buffer,
        pos: u32,
        head_dim: u32,
        freq_base: f32,
        n_heads_q: u32,
        n_heads_k: u32,
    ) -> sinter_status;
    pub fn sinter_silu(
        backend: *mut sinter_backend,
        input: sinter_buffer,
        out: sinter_buffer,
        size: u32,
    ) -> sinter_status;
    pub fn sinter_element_mul(
        backend: *mut sinter_backend,
        a: sinter_buffer,
        b: sinter_buffer,
        out: sinter_buffer,
        size: u32,
    ) -> sinter_status;
    pub fn sinter_add(
        backend: *mut sinter_backend,
        a: sinter_buffer,
        b: sinter_buffer,
        out: sinter_buffer,
        size: u32,
    ) -> sinter_status;
    pub fn sinter_copy_to_device(
        backend: *mut sinter_backend,
        data: *const u8,
        len: usize,
        buffer: sinter_buffer,
    ) -> sinter_status;
    pub fn sinter_copy_from_device(
        backend: *mut sinter_backend,
        buffer: sinter_buffer,
        data: *mut u8,
        len: usize,
    ) -> sinter_status;
    pub fn sinter_copy_buffer(
        backend: *mut sinter_backend,
        src: sinter_buffer,
        dst: sinter_buffer,
        size_bytes: u64,
    ) -> sinter_status;
    pub fn sinter_copy_buffer_offset(
        backend: *mut sinter_backend,
        src: sinter_buffer,
        dst: sinter_buffer,
        src_offset: u64,
        dst_offset: u64,
        size_bytes: u64,
    ) -> sinter_status;
    pub fn sinter_synchronize(backend: *mut sinter_backend) -> sinter_status;
    pub fn sinter_attn_score(
        backend: *mut sinter_backend,
        q: sinter_buffer,
        k_cache: sinter_buffer,
        scores: sinter_buffer,
        head_dim: u32,
        seq_len: u32,
        head_offset: u32,
        kv_offset: u32,
        kv_stride: u32,
    ) -> sinter_status;
    pub fn sinter_attn_value(
        backend: *mut sinter_backend,
        weights: sinter_buffer,
        v_cache: sinter_buffer,
        out: sinter_buffer,
        head_dim: u32,
        seq_len: u32,
        kv_offset: u32,
        kv_stride: u32,
        out_offset: u32,
    ) -> sinter_status;
    pub fn sinter_quantized_matmul(
        backend: *mut sinter_backend,
        weights: sinter_buffer,
        x: sinter_buffer,
        out: sinter_buffer,
        n_rows: u32,
        n_cols: u32,
        dtype: u32,
    ) -> sinter_status;
}
