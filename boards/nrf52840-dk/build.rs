//! Packs `demo/digits.onnx` into `$OUT_DIR/digits.frt` and writes the Rust module that
//! `ferrite pack --emit rust` would (`$OUT_DIR/digits.rs`: the model as an aligned static,
//! `ARENA_BYTES`), refusing a model whose arena does not fit this board's RAM budget; also
//! writes one held-out test image with its label as the fixed sample input.

use std::path::{Path, PathBuf};

/// RAM left for the arena after the stack, statics and defmt's buffer (of 256 KiB).
const ARENA_BUDGET: usize = 192 * 1024;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let onnx_path = root.join("demo/digits.onnx");
    println!("cargo:rerun-if-changed={}", onnx_path.display());
    println!("cargo:rerun-if-changed=memory.x");
    std::fs::copy("memory.x", out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());

    let onnx = std::fs::read(&onnx_path).expect("demo/digits.onnx");
    let packed = ferrite_tools::pack(&onnx, &ferrite_tools::PackOptions::default())
        .expect("the demo model packs");
    assert!(
        packed.report.arena_bytes <= ARENA_BUDGET,
        "the arena needs {} bytes, this board's budget is {ARENA_BUDGET}",
        packed.report.arena_bytes
    );
    std::fs::write(out.join("digits.frt"), &packed.bytes).expect("write digits.frt");
    let aligned = ferrite_tools::aligned::AlignedBytes::from(&packed.bytes[..]);
    let model = ferrite_core::Model::load(aligned.as_bytes()).expect("the packed model loads");
    let module = ferrite_tools::compile::emit::rust_module(&model, "digits.frt", "digits.onnx");
    std::fs::write(out.join("digits.rs"), module).expect("write digits.rs");

    let images =
        ferrite_tools::host::npy::read(&root.join("demo/digits_test_x.npy")).expect("images");
    let labels =
        ferrite_tools::host::npy::read(&root.join("demo/digits_test_y.npy")).expect("labels");
    let pixels: Vec<String> = images.bytes[..64 * 4]
        .chunks_exact(4)
        .map(|c| format!("{:?}", f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect();
    let label = i64::from_le_bytes(labels.bytes[..8].try_into().expect("int64 labels"));
    let sample = format!(
        "/// The first held-out test image (8x8, scaled like the training data).\n\
         pub const SAMPLE: [f32; 64] = [{}];\n/// Its true digit.\npub const SAMPLE_LABEL: usize = {label};\n",
        pixels.join(", ")
    );
    std::fs::write(out.join("sample.rs"), sample).expect("write sample.rs");
}
