//! Writes the digits model's op mask (`OPS`, as `ferrite pack --emit rust` does) for the `run`
//! proof, and puts `memory.x` on the linker's path.

use std::path::{Path, PathBuf};

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=memory.x");
    std::fs::copy("memory.x", out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    let onnx_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../demo/digits.onnx");
    println!("cargo:rerun-if-changed={}", onnx_path.display());
    let onnx = std::fs::read(&onnx_path).expect("demo/digits.onnx");
    let packed = ferrite_tools::pack(&onnx, &ferrite_tools::PackOptions::default())
        .expect("the demo model packs");
    let aligned = ferrite_tools::aligned::AlignedBytes::from(&packed.bytes[..]);
    let model = ferrite_core::Model::load(aligned.as_bytes()).expect("the packed model loads");
    let module = ferrite_tools::compile::emit::rust_module(&model, "digits.frt", "digits.onnx");
    std::fs::write(out.join("digits.rs"), module).expect("write digits.rs");
    std::fs::write(out.join("digits.frt"), &packed.bytes).expect("write digits.frt");
}
