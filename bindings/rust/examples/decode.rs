//! decode.rs - greedy decode of a llama2.c checkpoint through the `ComputeBackend` trait.
//!
//!     cargo run --offline --example decode -- [MODEL.bin] [KIND] [STEPS]
//!
//! MODEL.bin defaults to stories260K in ../shared/models (or $SINTER_SHARED_DIR/models), KIND to
//! the environment's SINTER_BACKEND (else "reference"), STEPS to 40. Prints the token ids and
//! tokens/s: the same loop the crate's tests check against the C++ driver, as an engine would
//! write it.
#[path = "../tests/model/mod.rs"]
mod model;

use std::time::Instant;

use sinter::{Backend, ComputeBackend};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(model::stories260k_path);
    let backend = match args.get(1) {
        Some(kind) => Backend::new(kind),
        None => Backend::from_environment(),
    }
    .unwrap_or_else(|e| {
        eprintln!("decode: {e}");
        std::process::exit(1)
    });
    let steps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(40);
    let file = std::fs::read(&path).unwrap_or_else(|e| {
        eprintln!("decode: {}: {e}", path.display());
        std::process::exit(1)
    });
    let weights = model::parse_llama2c(&file).unwrap_or_else(|e| {
        eprintln!("decode: {e}");
        std::process::exit(1)
    });
    let decoder = model::Decoder::new(&backend, &weights).expect("weights upload");
    let start = Instant::now();
    let tokens = model::generate_greedy(&decoder, steps).unwrap_or_else(|e| {
        eprintln!("decode: {e}");
        std::process::exit(1)
    });
    let seconds = start.elapsed().as_secs_f64();
    let ids: Vec<String> = tokens.iter().map(u32::to_string).collect();
    println!(
        "backend: {} ({:?})",
        backend.name(),
        backend.device_info().backend
    );
    println!("tokens: {}", ids.join(" "));
    println!(
        "speed: {} tokens in {:.3} s: {:.1} tokens/s",
        tokens.len(),
        seconds,
        tokens.len() as f64 / seconds
    );
}
