//! Packs the demo model at build time, as a firmware crate would, so the README's firmware
//! example can be compiled and run as a test (`tests/readme_example.rs`), and emits the Rust
//! module `ferrite pack --emit rust` writes (`tests/emitted_module.rs` compiles and runs it).

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let onnx_path = root.join("demo/digits.onnx");
    println!("cargo:rerun-if-changed={}", onnx_path.display());
    let onnx = std::fs::read(&onnx_path).expect("demo/digits.onnx is in the repository");
    let packed = ferrite_tools::pack(&onnx, &ferrite_tools::PackOptions::default())
        .expect("the demo model packs");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("digits.frt"), &packed.bytes).expect("OUT_DIR is writable");
    let aligned = ferrite_tools::aligned::AlignedBytes::from(&packed.bytes[..]);
    let model = ferrite_core::Model::load(aligned.as_bytes()).expect("the packed model loads");
    let module = ferrite_tools::compile::emit::rust_module(&model, "digits.frt", "digits.onnx");
    std::fs::write(out.join("digits.rs"), module).expect("OUT_DIR is writable");
    println!(
        "cargo:rustc-env=DIGITS_ARENA_BYTES={}",
        packed.report.arena_bytes
    );
}
