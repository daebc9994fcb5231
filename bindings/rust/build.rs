//! build.rs - finds libsinter.so (the C ABI) and links it.
//!
//! Looked for, in order: the directory in SINTER_LIB_DIR (the CTest test passes the CMake build's
//! `backends/`), `pkg-config --variable=libdir sinter` (an installed Sinter), then the default
//! build directory `../../build/backends` of a source checkout. The directory also goes into the
//! binaries' run path, so `cargo test` runs without LD_LIBRARY_PATH.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn has_library(dir: &Path) -> bool {
    dir.join("libsinter.so").exists() || dir.join("libsinter.dylib").exists()
}

fn from_pkg_config() -> Option<PathBuf> {
    let out = Command::new("pkg-config")
        .args(["--variable=libdir", "sinter"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    if has_library(&dir) {
        Some(dir)
    } else {
        None
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=SINTER_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let dir = match env::var("SINTER_LIB_DIR") {
        Ok(d) if !d.is_empty() => {
            let d = PathBuf::from(d);
            if !has_library(&d) {
                panic!("SINTER_LIB_DIR={} holds no libsinter.so", d.display());
            }
            d
        }
        _ => from_pkg_config()
            .or_else(|| {
                let d = manifest.join("../../build/backends");
                if has_library(&d) {
                    Some(d)
                } else {
                    None
                }
            })
            .unwrap_or_else(|| {
                panic!(
                    "libsinter.so not found: build the CMake target `sinter` and set \
                     SINTER_LIB_DIR to its directory (e.g. build/backends), or install Sinter \
                     where pkg-config finds sinter.pc"
                )
            }),
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=sinter");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    println!("cargo:lib_dir={}", dir.display());
}
