//! Compiles the WGSL compute shaders in `shaders/` to SPIR-V with naga (pure Rust: no system
//! shader compiler). Each `shaders/<name>.wgsl` is prefixed with `shaders/common.wgsl`, validated
//! and written to `$OUT_DIR/<name>.spv`; the crate embeds them with `include_bytes!`.

use naga::back::spv;
use naga::valid::{Capabilities, ValidationFlags, Validator};
use std::path::Path;

/// The shader modules (`shaders/<name>.wgsl`); the crate's `shaders.rs` lists the same names.
const MODULES: [&str; 7] = [
    "elementwise",
    "conv",
    "matmul",
    "pool",
    "softmax",
    "reduce",
    "movement",
];

fn main() {
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let shaders = Path::new("shaders");
    println!("cargo:rerun-if-changed=shaders/common.wgsl");
    let common = std::fs::read_to_string(shaders.join("common.wgsl")).expect("shaders/common.wgsl");
    for name in MODULES {
        let path = shaders.join(format!("{name}.wgsl"));
        println!("cargo:rerun-if-changed={}", path.display());
        let body =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let source = format!("{common}\n{body}");
        let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| {
            panic!(
                "{}",
                e.emit_to_string_with_path(&source, &path.display().to_string())
            )
        });
        let info = Validator::new(ValidationFlags::all(), Capabilities::IMMEDIATES)
            .validate(&module)
            .unwrap_or_else(|e| {
                panic!(
                    "{}",
                    e.emit_to_string_with_path(&source, &path.display().to_string())
                )
            });
        let options = spv::Options {
            lang_version: (1, 3),
            flags: spv::WriterFlags::empty(),
            bounds_check_policies: naga::proc::BoundsCheckPolicies {
                index: naga::proc::BoundsCheckPolicy::Restrict,
                buffer: naga::proc::BoundsCheckPolicy::Restrict,
                image_load: naga::proc::BoundsCheckPolicy::Restrict,
                binding_array: naga::proc::BoundsCheckPolicy::Restrict,
            },
            force_loop_bounding: false,
            ..spv::Options::default()
        };
        let words = spv::write_vec(&module, &info, &options, None)
            .unwrap_or_else(|e| panic!("{}: SPIR-V: {e}", path.display()));
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        std::fs::write(Path::new(&out_dir).join(format!("{name}.spv")), bytes)
            .expect("write SPIR-V");
    }
}
