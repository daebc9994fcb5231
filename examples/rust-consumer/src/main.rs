//! rust-consumer - adds two vectors through the `sinter` crate and checks the sum.
//!
//!     cargo run --offline -- [KIND]
//!
//! KIND defaults to the environment's SINTER_BACKEND (else "reference"). Prints the backend and
//! the sum; exits 1 with the error when a call fails or the sum is wrong.
use sinter::{Backend, ComputeBackend, Error};

fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn run(kind: Option<&str>) -> Result<(String, Vec<f32>), Error> {
    let backend = match kind {
        Some(kind) => Backend::new(kind)?,
        None => Backend::from_environment()?,
    };
    let (a, b) = ([1.0f32, 2.0, 3.0, 4.0], [10.0f32, 20.0, 30.0, 40.0]);
    let ha = backend.allocate(16)?;
    let hb = backend.allocate(16)?;
    backend.copy_to_device(&to_bytes(&a), &ha)?;
    backend.copy_to_device(&to_bytes(&b), &hb)?;
    backend.add(&ha, &hb, &ha, 4)?;
    let mut out = [0u8; 16];
    backend.copy_from_device(&ha, &mut out)?;
    backend.free(ha)?;
    backend.free(hb)?;
    let sum = out
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok((backend.name().to_string(), sum))
}

fn main() {
    let kind = std::env::args().nth(1);
    match run(kind.as_deref()) {
        Ok((name, sum)) if sum == [11.0, 22.0, 33.0, 44.0] => {
            println!("rust-consumer: {} computed {:?}", name, sum)
        }
        Ok((name, sum)) => {
            eprintln!(
                "rust-consumer: {} computed {:?}, expected [11, 22, 33, 44]",
                name, sum
            );
            std::process::exit(1)
        }
        Err(e) => {
            eprintln!("rust-consumer: {}", e);
            std::process::exit(1)
        }
    }
}
