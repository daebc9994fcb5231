//! errors.rs - the binding's error path and a few ops checked by value.
//!
//! Bad input comes back as Err with SEMANTICS.md's code and the library's message (read from
//! sinter_last_error right after the call); the backend stays usable afterwards.
use sinter::{Backend, BackendKind, BufferHandle, ComputeBackend, DType, StatusCode};

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// The kinds this build has among reference, lazy and cpu (a missing one is reported once).
fn kinds() -> Vec<&'static str> {
    ["reference", "lazy", "cpu"]
        .into_iter()
        .filter(|kind| match Backend::new(kind) {
            Ok(_) => true,
            Err(e) if e.code() == StatusCode::Unimplemented => {
                eprintln!("SKIPPED for kind {kind}: {e}");
                false
            }
            Err(e) => panic!("backend {kind}: {e}"),
        })
        .collect()
}

#[test]
fn unknown_handle_is_not_found_with_the_message() {
    for kind in kinds() {
        let b = Backend::new(kind).unwrap();
        let err = b.free(BufferHandle(987_654_321)).unwrap_err();
        assert_eq!(err.code(), StatusCode::NotFound, "{kind}: {err}");
        assert!(err.message().contains("987654321"), "{kind}: {err}");
        assert!(err.message().contains("free"), "{kind}: {err}");
        assert_eq!(
            b.free(BufferHandle(0)).unwrap_err().code(),
            StatusCode::NotFound,
            "{kind}"
        );
    }
}

#[test]
fn freed_handle_is_not_found_and_the_backend_stays_usable() {
    for kind in kinds() {
        let b = Backend::new(kind).unwrap();
        let (x, gone) = (b.allocate(16).unwrap(), b.allocate(16).unwrap());
        b.free(gone).unwrap();
        let err = b.add(&x, &gone, &x, 4).unwrap_err();
        assert_eq!(err.code(), StatusCode::NotFound, "{kind}: {err}");
        assert!(err.message().contains(&gone.0.to_string()), "{kind}: {err}");
        assert_eq!(
            b.free(gone).unwrap_err().code(),
            StatusCode::NotFound,
            "{kind}"
        );
        // Still usable: x + x.
        b.copy_to_device(&f32s(&[1.0, 2.0, 3.0, 4.0]), &x).unwrap();
        b.add(&x, &x, &x, 4).unwrap();
        let mut out = [0u8; 16];
        b.copy_from_device(&x, &mut out).unwrap();
        assert_eq!(floats(&out), [2.0, 4.0, 6.0, 8.0], "{kind}");
        b.free(x).unwrap();
    }
}

#[test]
fn past_the_end_is_out_of_range_and_bad_shapes_are_invalid_argument() {
    for kind in kinds() {
        let b = Backend::new(kind).unwrap();
        let x = b.allocate(16).unwrap();
        let mut big = [0u8; 32];
        let err = b.copy_from_device(&x, &mut big).unwrap_err();
        assert_eq!(err.code(), StatusCode::OutOfRange, "{kind}: {err}");
        assert!(!err.message().is_empty());
        let (w, xs) = (b.allocate(34 * 4).unwrap(), b.allocate(64 * 4).unwrap());
        let err = b
            .quantized_matmul(&w, &xs, &x, 1, 33, DType::Q8_0)
            .unwrap_err();
        assert_eq!(err.code(), StatusCode::InvalidArgument, "{kind}: {err}");
        assert!(err.message().contains("33"), "{kind}: {err}");
        let err = b.rope(&x, &x, 0, 3, 10000.0, 1, 1).unwrap_err();
        assert_eq!(err.code(), StatusCode::InvalidArgument, "{kind}: {err}");
    }
}

/// Where yule-gpu 0.1.0's CPU backend clamps, ignores or panics, Sinter rejects the call and
/// changes nothing (docs/ENGINE_INTEGRATION.md lists these).
#[test]
fn what_yule_clamps_or_ignores_is_an_error_here() {
    for kind in kinds() {
        let b = Backend::new(kind).unwrap();
        let (small, big) = (b.allocate(8).unwrap(), b.allocate(16).unwrap());
        b.copy_to_device(&f32s(&[1.0, 2.0, 3.0, 4.0]), &big)
            .unwrap();
        // copy_buffer past either buffer's end: yule copies the part that fits.
        let err = b.copy_buffer(&big, &small, 16).unwrap_err();
        assert_eq!(err.code(), StatusCode::OutOfRange, "{kind}: {err}");
        // copy_buffer_offset past the source's end: yule panics.
        let err = b.copy_buffer_offset(&small, &big, 4, 0, 8).unwrap_err();
        assert_eq!(err.code(), StatusCode::OutOfRange, "{kind}: {err}");
        // A host slice longer than the buffer: yule panics.
        let err = b.copy_to_device(&[0u8; 12], &small).unwrap_err();
        assert_eq!(err.code(), StatusCode::OutOfRange, "{kind}: {err}");
        // rope's head counts: yule ignores them and rotates the whole buffers; here 2 heads of 4
        // do not fit an 8-byte q.
        let err = b.rope(&small, &big, 1, 4, 10000.0, 2, 1).unwrap_err();
        assert_eq!(err.code(), StatusCode::OutOfRange, "{kind}: {err}");
        // rope's freq_base and rms_norm's eps out of their domain: yule computes with them.
        let err = b.rope(&big, &big, 1, 4, 0.5, 1, 1).unwrap_err();
        assert_eq!(err.code(), StatusCode::InvalidArgument, "{kind}: {err}");
        let err = b.rms_norm(&big, &big, &big, 4, -1.0).unwrap_err();
        assert_eq!(err.code(), StatusCode::InvalidArgument, "{kind}: {err}");
        // An element count past the end: yule panics on the slice index.
        let err = b.add(&small, &small, &small, 4).unwrap_err();
        assert_eq!(err.code(), StatusCode::OutOfRange, "{kind}: {err}");
        // Nothing changed: big and small still hold what they held.
        let mut out = [0u8; 16];
        b.copy_from_device(&big, &mut out).unwrap();
        assert_eq!(floats(&out), [1.0, 2.0, 3.0, 4.0], "{kind}");
        let mut out = [0u8; 8];
        b.copy_from_device(&small, &mut out).unwrap();
        assert_eq!(floats(&out), [0.0, 0.0], "{kind}");
    }
}

#[test]
fn unknown_kind_is_invalid_argument() {
    let err = Backend::new("no-such-kind").err().unwrap();
    assert_eq!(err.code(), StatusCode::InvalidArgument, "{err}");
    assert!(err.message().contains("no-such-kind"), "{err}");
    let err = Backend::new("ref\0erence").err().unwrap();
    assert_eq!(err.code(), StatusCode::InvalidArgument, "{err}");
    assert!(err.to_string().starts_with("INVALID_ARGUMENT: "), "{err}");
}

#[test]
fn ops_compute_through_the_trait() {
    for kind in kinds() {
        let b = Backend::new(kind).unwrap();
        assert!(!b.name().is_empty());
        let info = b.device_info();
        assert!(!info.name.is_empty(), "{kind}: {info:?}");
        assert_eq!(info.backend, BackendKind::Cpu, "{kind}: {info:?}");
        // matmul: [1 2; 3 4] x [5 6; 7 8] = [19 22; 43 50].
        let (a, m, out) = (
            b.allocate(16).unwrap(),
            b.allocate(16).unwrap(),
            b.allocate(16).unwrap(),
        );
        b.copy_to_device(&f32s(&[1.0, 2.0, 3.0, 4.0]), &a).unwrap();
        b.copy_to_device(&f32s(&[5.0, 6.0, 7.0, 8.0]), &m).unwrap();
        b.matmul(&a, &m, &out, 2, 2, 2).unwrap();
        b.synchronize().unwrap();
        let mut bytes = [0u8; 16];
        b.copy_from_device(&out, &mut bytes).unwrap();
        assert_eq!(floats(&bytes), [19.0, 22.0, 43.0, 50.0], "{kind}");
        // quantized_matmul with F32 rows and copy_buffer_offset.
        b.quantized_matmul(&a, &m, &out, 2, 2, DType::F32).unwrap();
        b.copy_buffer_offset(&out, &out, 4, 0, 4).unwrap();
        b.copy_from_device(&out, &mut bytes).unwrap();
        // out = [1*5+2*6, 3*5+4*6, 43, 50], then out[0] = out[1].
        assert_eq!(floats(&bytes), [39.0, 39.0, 43.0, 50.0], "{kind}");
    }
}

#[test]
fn dtype_ids_are_gguf_ids() {
    assert_eq!(DType::F32.id(), 0);
    assert_eq!(DType::Q4_0.id(), 2);
    assert_eq!(DType::Q6_K.id(), 14);
    assert_eq!(DType::BF16.id(), 30);
    assert_eq!(DType::TQ2_0.id(), 35);
    assert_eq!(DType::from_id(8), Some(DType::Q8_0));
    assert_eq!(DType::from_id(4), None);
    assert!(DType::ALL.windows(2).all(|w| w[0].id() < w[1].id()));
    assert_eq!(StatusCode::NotFound.name(), "NOT_FOUND");
    assert_eq!(StatusCode::from_raw(5), StatusCode::NotFound);
    assert_eq!(StatusCode::from_raw(99), StatusCode::Unrecognized(99));
}

#[test]
fn library_version_is_the_project_version() {
    let v = sinter::library_version();
    assert_eq!(v.split('.').count(), 3, "{v}");
    assert_eq!(v, env!("CARGO_PKG_VERSION"));
}
