//! build.rs - puts the folder of the libsinter.so that the `sinter` crate links into this
//! program's run path, so the program runs without LD_LIBRARY_PATH.
//!
//! Cargo gives a crate's link arguments to that crate's own tests and examples only, not to the
//! crates that depend on it. What it does pass on: the `cargo:lib_dir=DIR` line of the sinter
//! crate's build.rs (a `links = "sinter"` crate) reaches this build script as DEP_SINTER_LIB_DIR.
//! Any crate with a binary that uses `sinter` can do the same in two lines.
fn main() {
    let dir = std::env::var("DEP_SINTER_LIB_DIR")
        .expect("DEP_SINTER_LIB_DIR is unset: depend on the sinter crate (bindings/rust)");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
}
