//! Sinter from Rust: the 19-operation `ComputeBackend` trait, in the exact shape of yule-gpu
//! 0.1.0's trait, and `Backend`, its implementation over Sinter's C ABI
//! (include/sinter/sinter.h, in libsinter.so).
//!
//! An engine written against yule-gpu changes its imports only:
//! `use sinter::{BackendKind, BufferHandle, ComputeBackend, DType, DeviceInfo, Result};`.
//!
//! ```no_run
//! use sinter::{Backend, ComputeBackend};
//! let backend = Backend::new("lazy")?;
//! let x = backend.allocate(16)?;
//! backend.copy_to_device(&[0u8; 16], &x)?;
//! backend.silu(&x, &x, 4)?;
//! let mut out = [0u8; 16];
//! backend.copy_from_device(&x, &mut out)?;
//! # Ok::<(), sinter::Error>(())
//! ```
mod backend;
mod capi;
mod dtype;
mod error;
pub mod ffi;

pub use backend::{BackendKind, BufferHandle, ComputeBackend, DeviceInfo};
pub use capi::{library_version, list_devices, Backend, BackendOptions, Device, DeviceType};
pub use dtype::DType;
pub use error::{Error, Result, StatusCode};
