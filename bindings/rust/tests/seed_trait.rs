//! seed_trait.rs - the crate's `ComputeBackend` has the shape of yule-gpu 0.1.0's trait.
//!
//! `signatures::<B>()` names every method of the trait as a function pointer of yule-gpu's
//! signature (with `sinter::Result` for `yule_core::error::Result`): it compiles only while the
//! trait keeps that shape. `HostBackend` implements the 16 required methods and no more, as a
//! backend written for yule-gpu does, so the 3 provided ones must have default bodies; those
//! answer Unimplemented. `Backend` is `Send + Sync` and both go into a `Box<dyn ComputeBackend>`.
use std::collections::HashMap;
use std::sync::Mutex;

use sinter::{
    Backend, BackendKind, BufferHandle, ComputeBackend, DType, DeviceInfo, Error, Result,
    StatusCode,
};

/// Every method as a function pointer of yule-gpu 0.1.0's signature.
#[allow(clippy::type_complexity)]
fn signatures<B: ComputeBackend>() {
    type H = BufferHandle;
    let _: fn(&B) -> &str = B::name;
    let _: fn(&B) -> DeviceInfo = B::device_info;
    let _: fn(&B, usize) -> Result<BufferHandle> = B::allocate;
    let _: fn(&B, BufferHandle) -> Result<()> = B::free;
    let _: fn(&B, &H, &H, &H, u32, u32, u32) -> Result<()> = B::matmul;
    let _: fn(&B, &H, &H, u32) -> Result<()> = B::softmax;
    let _: fn(&B, &H, &H, &H, u32, f32) -> Result<()> = B::rms_norm;
    let _: fn(&B, &H, &H, u32, u32, f32, u32, u32) -> Result<()> = B::rope;
    let _: fn(&B, &H, &H, u32) -> Result<()> = B::silu;
    let _: fn(&B, &H, &H, &H, u32) -> Result<()> = B::element_mul;
    let _: fn(&B, &H, &H, &H, u32) -> Result<()> = B::add;
    let _: fn(&B, &[u8], &H) -> Result<()> = B::copy_to_device;
    let _: fn(&B, &H, &mut [u8]) -> Result<()> = B::copy_from_device;
    let _: fn(&B, &H, &H, usize) -> Result<()> = B::copy_buffer;
    let _: fn(&B, &H, &H, usize, usize, usize) -> Result<()> = B::copy_buffer_offset;
    let _: fn(&B) -> Result<()> = B::synchronize;
    let _: fn(&B, &H, &H, &H, u32, u32, u32, u32, u32) -> Result<()> = B::attn_score;
    let _: fn(&B, &H, &H, &H, u32, u32, u32, u32, u32) -> Result<()> = B::attn_value;
    let _: fn(&B, &H, &H, &H, u32, u32, DType) -> Result<()> = B::quantized_matmul;
}

fn send_sync<T: Send + Sync + ?Sized>() {}

#[test]
fn the_trait_has_the_seed_signatures() {
    signatures::<Backend>();
    signatures::<HostBackend>();
    send_sync::<Backend>();
    send_sync::<dyn ComputeBackend>();
    // yule-gpu's DeviceInfo: name, backend, memory_bytes, compute_units.
    let info = DeviceInfo {
        name: String::from("host"),
        backend: BackendKind::Cpu,
        memory_bytes: 0,
        compute_units: 1,
    };
    assert_eq!(info.clone(), info);
    // yule-gpu's BufferHandle: a public u64.
    assert_eq!(BufferHandle(7).0, 7u64);
}

/// A host-memory backend with only the required methods, as a backend written for yule-gpu has;
/// of the operations it computes `add` and the copies (enough for the test), the rest answer
/// Unimplemented.
struct HostBackend {
    buffers: Mutex<HashMap<u64, Vec<u8>>>,
    next: Mutex<u64>,
}

fn unimplemented<T>(what: &str) -> Result<T> {
    Err(Error::new(StatusCode::Unimplemented, what))
}

fn missing(handle: &BufferHandle) -> Error {
    Error::new(
        StatusCode::NotFound,
        format!("buffer {} not found", handle.0),
    )
}

impl HostBackend {
    fn new() -> HostBackend {
        HostBackend {
            buffers: Mutex::new(HashMap::new()),
            next: Mutex::new(1),
        }
    }

    fn read(&self, handle: &BufferHandle) -> Result<Vec<u8>> {
        let buffers = self.buffers.lock().unwrap();
        buffers
            .get(&handle.0)
            .cloned()
            .ok_or_else(|| missing(handle))
    }

    fn write(&self, handle: &BufferHandle, offset: usize, data: &[u8]) -> Result<()> {
        let mut buffers = self.buffers.lock().unwrap();
        let buffer = buffers.get_mut(&handle.0).ok_or_else(|| missing(handle))?;
        match buffer.get_mut(offset..offset + data.len()) {
            Some(dst) => {
                dst.copy_from_slice(data);
                Ok(())
            }
            None => Err(Error::new(StatusCode::OutOfRange, "past the end")),
        }
    }
}

impl ComputeBackend for HostBackend {
    fn name(&self) -> &str {
        "host"
    }
    fn device_info(&self) -> DeviceInfo {
        DeviceInfo {
            name: "host".into(),
            backend: BackendKind::Cpu,
            memory_bytes: 0,
            compute_units: 1,
        }
    }
    fn allocate(&self, size_bytes: usize) -> Result<BufferHandle> {
        let mut next = self.next.lock().unwrap();
        let handle = BufferHandle(*next);
        *next += 1;
        self.buffers
            .lock()
            .unwrap()
            .insert(handle.0, vec![0; size_bytes]);
        Ok(handle)
    }
    fn free(&self, handle: BufferHandle) -> Result<()> {
        let removed = self.buffers.lock().unwrap().remove(&handle.0);
        removed.map(|_| ()).ok_or_else(|| missing(&handle))
    }
    fn matmul(
        &self,
        _a: &BufferHandle,
        _b: &BufferHandle,
        _out: &BufferHandle,
        _m: u32,
        _n: u32,
        _k: u32,
    ) -> Result<()> {
        unimplemented("matmul")
    }
    fn softmax(&self, _input: &BufferHandle, _output: &BufferHandle, _size: u32) -> Result<()> {
        unimplemented("softmax")
    }
    fn rms_norm(
        &self,
        _input: &BufferHandle,
        _weight: &BufferHandle,
        _output: &BufferHandle,
        _size: u32,
        _eps: f32,
    ) -> Result<()> {
        unimplemented("rms_norm")
    }
    fn rope(
        &self,
        _q: &BufferHandle,
        _k: &BufferHandle,
        _pos: u32,
        _head_dim: u32,
        _freq_base: f32,
        _n_heads_q: u32,
        _n_heads_k: u32,
    ) -> Result<()> {
        unimplemented("rope")
    }
    fn silu(&self, _input: &BufferHandle, _output: &BufferHandle, _size: u32) -> Result<()> {
        unimplemented("silu")
    }
    fn element_mul(
        &self,
        _a: &BufferHandle,
        _b: &BufferHandle,
        _output: &BufferHandle,
        _size: u32,
    ) -> Result<()> {
        unimplemented("element_mul")
    }
    fn add(
        &self,
        a: &BufferHandle,
        b: &BufferHandle,
        output: &BufferHandle,
        size: u32,
    ) -> Result<()> {
        let (a, b) = (self.read(a)?, self.read(b)?);
        let n = size as usize * 4;
        if a.len() < n || b.len() < n {
            return Err(Error::new(StatusCode::OutOfRange, "add past the end"));
        }
        let sum: Vec<u8> = a[..n]
            .chunks_exact(4)
            .zip(b[..n].chunks_exact(4))
            .flat_map(|(x, y)| {
                let x = f32::from_le_bytes(x.try_into().unwrap());
                let y = f32::from_le_bytes(y.try_into().unwrap());
                (x + y).to_le_bytes()
            })
            .collect();
        self.write(output, 0, &sum)
    }
    fn copy_to_device(&self, data: &[u8], handle: &BufferHandle) -> Result<()> {
        self.write(handle, 0, data)
    }
    fn copy_from_device(&self, handle: &BufferHandle, data: &mut [u8]) -> Result<()> {
        let buffer = self.read(handle)?;
        let n = data.len();
        match buffer.get(..n) {
            Some(src) => {
                data.copy_from_slice(src);
                Ok(())
            }
            None => Err(Error::new(StatusCode::OutOfRange, "past the end")),
        }
    }
    fn copy_buffer(&self, src: &BufferHandle, dst: &BufferHandle, size: usize) -> Result<()> {
        self.copy_buffer_offset(src, dst, 0, 0, size)
    }
    fn copy_buffer_offset(
        &self,
        src: &BufferHandle,
        dst: &BufferHandle,
        src_offset: usize,
        dst_offset: usize,
        size: usize,
    ) -> Result<()> {
        let buffer = self.read(src)?;
        match buffer.get(src_offset..src_offset + size) {
            Some(bytes) => self.write(dst, dst_offset, bytes),
            None => Err(Error::new(StatusCode::OutOfRange, "past the end")),
        }
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// What an engine does, through `&dyn ComputeBackend` only.
fn add_on(b: &dyn ComputeBackend) -> Result<Vec<u8>> {
    let (x, y) = (b.allocate(8)?, b.allocate(8)?);
    b.copy_to_device(&f32s(&[1.0, 2.0]), &x)?;
    b.copy_to_device(&f32s(&[10.0, 20.0]), &y)?;
    b.add(&x, &y, &x, 2)?;
    let mut out = vec![0u8; 8];
    b.copy_from_device(&x, &mut out)?;
    b.free(x)?;
    b.free(y)?;
    Ok(out)
}

#[test]
fn provided_methods_default_to_unimplemented() {
    let b = HostBackend::new();
    let h = b.allocate(16).unwrap();
    let err = b.attn_score(&h, &h, &h, 2, 1, 0, 0, 2).unwrap_err();
    assert_eq!(err.code(), StatusCode::Unimplemented, "{err}");
    assert!(err.message().contains("attn_score"), "{err}");
    let err = b.attn_value(&h, &h, &h, 2, 1, 0, 2, 0).unwrap_err();
    assert_eq!(err.code(), StatusCode::Unimplemented, "{err}");
    assert!(err.message().contains("attn_value"), "{err}");
    let err = b
        .quantized_matmul(&h, &h, &h, 1, 2, DType::F32)
        .unwrap_err();
    assert_eq!(err.code(), StatusCode::Unimplemented, "{err}");
    assert!(err.message().contains("quantized_matmul"), "{err}");
}

#[test]
fn one_engine_runs_on_either_backend_behind_dyn() {
    let mut backends: Vec<Box<dyn ComputeBackend>> = vec![Box::new(HostBackend::new())];
    match Backend::new("reference") {
        Ok(b) => backends.push(Box::new(b)),
        Err(e) => eprintln!("SKIPPED the Sinter half: {e}"),
    }
    for b in &backends {
        assert_eq!(
            add_on(b.as_ref()).unwrap(),
            f32s(&[11.0, 22.0]),
            "{}",
            b.name()
        );
    }
}

#[test]
fn dtype_has_the_seed_methods() {
    assert_eq!(DType::from_gguf_type_id(12), Some(DType::Q4_K));
    assert_eq!(DType::from_gguf_type_id(31), None);
    assert_eq!(
        (DType::Q4_0.block_size(), DType::Q4_0.size_of_block()),
        (32, 18)
    );
    assert_eq!(
        (DType::Q6_K.block_size(), DType::Q6_K.size_of_block()),
        (256, 210)
    );
    assert_eq!(
        (DType::F16.block_size(), DType::F16.size_of_block()),
        (1, 2)
    );
    assert_eq!(DType::Q4_0.bits_per_weight(), 4.5);
    assert_eq!(DType::F32.bits_per_weight(), 32.0);
    assert!(DType::IQ4_NL.is_quantized() && !DType::BF16.is_quantized());
    // Every id round-trips and every size is whole bytes per block.
    for d in DType::ALL {
        assert_eq!(DType::from_gguf_type_id(d as u32), Some(d));
        assert!(d.size_of_block() > 0 && d.block_size() > 0, "{d:?}");
    }
}
