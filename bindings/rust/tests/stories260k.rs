//! stories260k.rs - stories260K decodes through the Rust binding to the C++ driver's tokens.
//!
//! The decode loop (tests/model) issues tools/model/Decoder.cpp's calls through the
//! `ComputeBackend` trait (yule-gpu 0.1.0's shape) and nothing else; greedy decoding from BOS must
//! give exactly the 40 tokens tests/e2e/Stories260KTest.cpp pins, on every backend kind this build
//! has (reference, lazy fused and unfused, cpu, vulkan), and the same tokens the C++ driver
//! `sinter-run` prints when SINTER_RUN names it (the CTest test does), through a
//! `Box<dyn ComputeBackend>` as yule-gpu's `create_backend` hands out. Two decoders on one backend
//! shared by two threads give the golden too (the trait's `Send + Sync`).
//! Each test skips, saying so, when ../shared is absent or the kind is not built.
mod model;

use sinter::{Backend, BackendOptions, ComputeBackend, StatusCode};

/// Vulkan runs on lavapipe in CI, slowly: its comparison with sinter-run decodes fewer tokens.
const VULKAN_STEPS: usize = 20;

/// tests/e2e/Stories260KTest.cpp's kGolden: the first 40 greedy tokens after BOS.
const GOLDEN: [u32; 40] = [
    461, 461, 401, 401, 401, 461, 378, 455, 473, 456, 435, 299, 362, 409, 283, 264, 283, 452, 288,
    13, 431, 431, 431, 431, 431, 431, 431, 431, 431, 431, 431, 431, 431, 293, 430, 417, 363, 416,
    315, 342,
];

fn read_model() -> Option<Vec<u8>> {
    let path = model::stories260k_path();
    match std::fs::read(&path) {
        Ok(file) => Some(file),
        Err(e) => {
            eprintln!(
                "SKIPPED: {} not readable ({e}; needs ../shared or SINTER_SHARED_DIR)",
                path.display()
            );
            None
        }
    }
}

/// The backend `options` describe; None (after saying why) when this build lacks the kind.
fn make(options: &BackendOptions) -> Option<Backend> {
    match Backend::with_options(options) {
        Ok(b) => Some(b),
        Err(e) if e.code() == StatusCode::Unimplemented => {
            eprintln!("SKIPPED: backend kind {} is not built: {e}", options.kind);
            None
        }
        // vulkan on a machine without a usable Vulkan device.
        Err(e) if e.code() == StatusCode::Unavailable => {
            eprintln!("SKIPPED: backend kind {} has no device: {e}", options.kind);
            None
        }
        Err(e) => panic!("backend {}: {e}", options.kind),
    }
}

fn decode<B: ComputeBackend + ?Sized>(backend: &B, file: &[u8], steps: usize) -> Vec<u32> {
    let weights = model::parse_llama2c(file).expect("stories260K parses");
    eprintln!("decoding on {}", backend.name());
    let decoder = model::Decoder::new(backend, &weights).expect("weights upload");
    let tokens = model::generate_greedy(&decoder, steps).expect("decode");
    drop(decoder);
    backend.synchronize().expect("synchronize");
    tokens
}

fn check_kind(kind: &str, fusion: bool) {
    let file = match read_model() {
        Some(f) => f,
        None => return,
    };
    let options = BackendOptions {
        kind: kind.to_string(),
        fusion,
        ..BackendOptions::default()
    };
    let backend = match make(&options) {
        Some(b) => b,
        None => return,
    };
    assert_eq!(
        decode(&backend, &file, GOLDEN.len()),
        GOLDEN,
        "backend kind {kind}, fusion {fusion}"
    );
}

#[test]
fn reference_backend_gives_the_golden() {
    check_kind("reference", true);
}

#[test]
fn lazy_backend_gives_the_golden() {
    check_kind("lazy", true);
}

#[test]
fn lazy_backend_without_fusion_gives_the_golden() {
    check_kind("lazy", false);
}

#[test]
fn cpu_backend_gives_the_golden() {
    check_kind("cpu", true);
}

/// On lavapipe in CI; skipped where the build has no SPIR-V code generator or no device.
#[test]
fn vulkan_backend_gives_the_golden() {
    check_kind("vulkan", true);
}

/// Backend::from_environment(): SINTER_BACKEND and SINTER_DISABLE_FUSION decide (e.g. vulkan).
#[test]
fn environment_backend_gives_the_golden() {
    let kind = match std::env::var("SINTER_BACKEND")
        .ok()
        .filter(|k| !k.is_empty())
    {
        Some(k) => k,
        None => {
            eprintln!(
                "SKIPPED: SINTER_BACKEND is not set (it names the kind this test decodes on)"
            );
            return;
        }
    };
    let file = match read_model() {
        Some(f) => f,
        None => return,
    };
    let backend =
        Backend::from_environment().unwrap_or_else(|e| panic!("SINTER_BACKEND={kind}: {e}"));
    assert_eq!(
        decode(&backend, &file, GOLDEN.len()),
        GOLDEN,
        "SINTER_BACKEND={kind}"
    );
}

/// The tokens of the C++ driver itself: `sinter-run --quiet` prints the generated ids.
fn sinter_run_tokens(sinter_run: &str, kind: &str, steps: usize) -> Vec<u32> {
    let out = std::process::Command::new(sinter_run)
        .arg("--model")
        .arg(model::stories260k_path())
        .args(["--backend", kind, "--steps", &steps.to_string(), "--quiet"])
        .env_remove("SINTER_BACKEND")
        .env_remove("SINTER_DISABLE_FUSION")
        .output()
        .unwrap_or_else(|e| panic!("running {sinter_run}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{sinter_run} --backend {kind} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .split_whitespace()
        .map(|t| {
            t.parse()
                .unwrap_or_else(|_| panic!("token {t:?} in {stdout:?}"))
        })
        .collect()
}

/// 60 tokens (past the pinned 40; VULKAN_STEPS on vulkan) from the Rust loop, run on a
/// `Box<dyn ComputeBackend>`, and from sinter-run agree, per kind.
#[test]
fn decode_matches_the_cpp_driver() {
    let sinter_run = match std::env::var("SINTER_RUN").ok().filter(|p| !p.is_empty()) {
        Some(p) => p,
        None => {
            eprintln!("SKIPPED: SINTER_RUN (the path of sinter-run) is not set");
            return;
        }
    };
    let file = match read_model() {
        Some(f) => f,
        None => return,
    };
    for kind in ["reference", "lazy", "cpu", "vulkan"] {
        let options = BackendOptions {
            kind: kind.to_string(),
            ..BackendOptions::default()
        };
        let backend: Box<dyn ComputeBackend> = match make(&options) {
            Some(b) => Box::new(b),
            None => continue,
        };
        let steps = if kind == "vulkan" { VULKAN_STEPS } else { 60 };
        let ours = decode(backend.as_ref(), &file, steps);
        let theirs = sinter_run_tokens(&sinter_run, kind, steps);
        assert_eq!(ours, theirs, "backend kind {kind}: Rust loop vs sinter-run");
        let n = steps.min(GOLDEN.len());
        assert_eq!(ours[..n], GOLDEN[..n], "backend kind {kind}");
    }
}

/// One backend shared by two threads, each decoding with its own decoder: the calls interleave,
/// serialized by the library, and both threads get the golden.
#[test]
fn two_threads_decode_on_one_backend() {
    let file = match read_model() {
        Some(f) => f,
        None => return,
    };
    let backend = match make(&BackendOptions {
        kind: "lazy".to_string(),
        ..BackendOptions::default()
    }) {
        Some(b) => b,
        None => return,
    };
    let steps = 12;
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| decode(&backend, &file, steps)))
            .collect();
        for run in runs {
            assert_eq!(run.join().expect("decode thread"), GOLDEN[..steps]);
        }
    });
}

#[test]
fn parser_rejects_a_truncated_checkpoint() {
    let file = match read_model() {
        Some(f) => f,
        None => return,
    };
    let err = model::parse_llama2c(&file[..file.len() - 4])
        .err()
        .expect("truncated file fails");
    assert!(err.contains("the header implies"), "{err}");
}
