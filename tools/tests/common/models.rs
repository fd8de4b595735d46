//! Helpers the lowering test files share: pack a model and run it on the CPU, f32 arrays in and
//! out, and a small deterministic generator (no test depends on a seed crate).

use ferrite_core::Model;
use ferrite_hal::DType;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::npy::NpyArray;
use ferrite_tools::host::runner::run_cpu;

/// Packs `onnx` with `options`, loads the `.frt` and runs it on the CPU device; `what` names the
/// case in a failure.
pub fn run_packed(
    onnx: &[u8],
    options: &PackOptions,
    inputs: &[NpyArray],
    what: &str,
) -> Vec<NpyArray> {
    let packed = pack(onnx, options).unwrap_or_else(|e| panic!("{what}: {e}"));
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).unwrap_or_else(|e| panic!("{what}: {e}"));
    run_cpu(&model, inputs).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// An f32 array of `shape`.
pub fn f32_array(shape: &[usize], values: &[f32]) -> NpyArray {
    NpyArray {
        dtype: DType::F32,
        shape: shape.to_vec(),
        bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// The values of an f32 array.
pub fn f32_values(a: &NpyArray) -> Vec<f32> {
    a.bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// A xorshift generator.
pub struct Rng(pub u32);

impl Rng {
    /// The next 32 random bits.
    pub fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.next() as usize % n.max(1)
    }
}

/// `n` values in `[−scale/2, scale/2)` from `seed`.
pub fn values(seed: u32, n: usize, scale: f32) -> Vec<f32> {
    let mut rng = Rng(seed.wrapping_mul(2_654_435_761).max(1));
    (0..n)
        .map(|_| (rng.next() as f32 / u32::MAX as f32 - 0.5) * scale)
        .collect()
}
