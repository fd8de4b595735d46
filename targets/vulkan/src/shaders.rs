//! The compute kernels: SPIR-V modules compiled from `shaders/*.wgsl` at build time, and the
//! entry point each kernel uses.

use std::ffi::CStr;

/// One SPIR-V module (`shaders/<name>.wgsl` with `shaders/common.wgsl` prepended).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Module {
    /// Activations, broadcasting arithmetic, batch normalisation.
    Elementwise,
    /// Convolution and transposed convolution.
    Conv,
    /// Tiled Gemm / batched MatMul.
    MatMul,
    /// Max, average and global average pooling.
    Pool,
    /// Softmax.
    Softmax,
    /// Reductions.
    Reduce,
    /// Strided copies (transpose, slice, concat, split), pad, gather.
    Movement,
}

impl Module {
    /// Every module.
    pub const ALL: [Module; 7] = [
        Module::Elementwise,
        Module::Conv,
        Module::MatMul,
        Module::Pool,
        Module::Softmax,
        Module::Reduce,
        Module::Movement,
    ];

    /// The module's name (its WGSL file's stem).
    pub fn name(self) -> &'static str {
        match self {
            Module::Elementwise => "elementwise",
            Module::Conv => "conv",
            Module::MatMul => "matmul",
            Module::Pool => "pool",
            Module::Softmax => "softmax",
            Module::Reduce => "reduce",
            Module::Movement => "movement",
        }
    }

    /// The module's SPIR-V, as bytes (little-endian words).
    pub fn spirv(self) -> &'static [u8] {
        macro_rules! spv {
            ($name:literal) => {
                include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".spv"))
            };
        }
        match self {
            Module::Elementwise => spv!("elementwise"),
            Module::Conv => spv!("conv"),
            Module::MatMul => spv!("matmul"),
            Module::Pool => spv!("pool"),
            Module::Softmax => spv!("softmax"),
            Module::Reduce => spv!("reduce"),
            Module::Movement => spv!("movement"),
        }
    }
}

/// One compute pipeline: a module's entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// `elementwise::unary`.
    Unary,
    /// `elementwise::binary`.
    Binary,
    /// `elementwise::batch_norm`.
    BatchNorm,
    /// `conv::conv`.
    Conv,
    /// `conv::conv_transpose`.
    ConvTranspose,
    /// `matmul::matmul` (16 x 16 tiles in workgroup memory).
    MatMul,
    /// `matmul::matmul_rows` (one output per invocation, for products with few rows).
    MatMulRows,
    /// `pool::max_pool`.
    MaxPool,
    /// `pool::avg_pool`.
    AvgPool,
    /// `pool::global_avg_pool`.
    GlobalAvgPool,
    /// `softmax::softmax`.
    Softmax,
    /// `reduce::reduce`.
    Reduce,
    /// `reduce::arg_extreme` (ArgMax / ArgMin).
    ArgExtreme,
    /// `movement::copy_strided`.
    CopyStrided,
    /// `movement::pad`.
    Pad,
    /// `movement::gather`.
    Gather,
    /// `movement::resample`.
    Resample,
}

impl Kernel {
    /// The module holding this kernel.
    pub fn module(self) -> Module {
        match self {
            Kernel::Unary | Kernel::Binary | Kernel::BatchNorm => Module::Elementwise,
            Kernel::Conv | Kernel::ConvTranspose => Module::Conv,
            Kernel::MatMul | Kernel::MatMulRows => Module::MatMul,
            Kernel::MaxPool | Kernel::AvgPool | Kernel::GlobalAvgPool => Module::Pool,
            Kernel::Softmax => Module::Softmax,
            Kernel::Reduce | Kernel::ArgExtreme => Module::Reduce,
            Kernel::CopyStrided | Kernel::Pad | Kernel::Gather | Kernel::Resample => {
                Module::Movement
            }
        }
    }

    /// The entry point's name.
    pub fn entry(self) -> &'static CStr {
        match self {
            Kernel::Unary => c"unary",
            Kernel::Binary => c"binary",
            Kernel::BatchNorm => c"batch_norm",
            Kernel::Conv => c"conv",
            Kernel::ConvTranspose => c"conv_transpose",
            Kernel::MatMul => c"matmul",
            Kernel::MatMulRows => c"matmul_rows",
            Kernel::MaxPool => c"max_pool",
            Kernel::AvgPool => c"avg_pool",
            Kernel::GlobalAvgPool => c"global_avg_pool",
            Kernel::Softmax => c"softmax",
            Kernel::Reduce => c"reduce",
            Kernel::ArgExtreme => c"arg_extreme",
            Kernel::CopyStrided => c"copy_strided",
            Kernel::Pad => c"pad",
            Kernel::Gather => c"gather",
            Kernel::Resample => c"resample",
        }
    }

    /// Invocations per workgroup along x (the matmul tile is 16 x 16; the rest are 1-D).
    pub fn group_size(self) -> u32 {
        match self {
            Kernel::MatMul => 16,
            _ => 64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_KERNELS: [Kernel; 17] = [
        Kernel::Unary,
        Kernel::Binary,
        Kernel::BatchNorm,
        Kernel::Conv,
        Kernel::ConvTranspose,
        Kernel::MatMul,
        Kernel::MatMulRows,
        Kernel::MaxPool,
        Kernel::AvgPool,
        Kernel::GlobalAvgPool,
        Kernel::Softmax,
        Kernel::Reduce,
        Kernel::ArgExtreme,
        Kernel::CopyStrided,
        Kernel::Pad,
        Kernel::Gather,
        Kernel::Resample,
    ];

    fn words(bytes: &[u8]) -> Vec<u32> {
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    /// The names of a SPIR-V module's `OpEntryPoint`s (opcode 15: model, id, name...).
    fn entry_points(module: &[u32]) -> Vec<String> {
        let mut names = Vec::new();
        let mut at = 5; // after the header
        while at < module.len() {
            let (count, opcode) = ((module[at] >> 16) as usize, module[at] & 0xffff);
            assert!(count > 0, "malformed instruction at word {at}");
            if opcode == 15 {
                let name: Vec<u8> = module[at + 3..at + count]
                    .iter()
                    .flat_map(|w| w.to_le_bytes())
                    .take_while(|&b| b != 0)
                    .collect();
                names.push(String::from_utf8(name).unwrap());
            }
            at += count;
        }
        names
    }

    #[test]
    fn every_module_is_spirv_and_every_kernel_has_its_entry_point() {
        for module in Module::ALL {
            let w = words(module.spirv());
            assert_eq!(w[0], 0x0723_0203, "{}: not SPIR-V", module.name());
        }
        for kernel in ALL_KERNELS {
            let names = entry_points(&words(kernel.module().spirv()));
            let entry = kernel.entry().to_str().unwrap();
            assert!(
                names.iter().any(|n| n == entry),
                "{kernel:?}: {entry} not in {names:?}"
            );
        }
    }

    /// naga validated every module at build time; `spirv-val` (SPIRV-Tools), when installed,
    /// checks them again against the Vulkan 1.1 environment.
    #[test]
    fn spirv_val_accepts_every_module() {
        let Ok(version) = std::process::Command::new("spirv-val")
            .arg("--version")
            .output()
        else {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "\nSKIPPED: spirv-val is not installed (spirv-tools)"
            );
            return;
        };
        assert!(version.status.success());
        let dir = std::env::temp_dir().join(format!("ferrite-spirv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for module in Module::ALL {
            let path = dir.join(format!("{}.spv", module.name()));
            std::fs::write(&path, module.spirv()).unwrap();
            let out = std::process::Command::new("spirv-val")
                .args(["--target-env", "vulkan1.1"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: {}",
                module.name(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
