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
    /// `matmul::matmul`.
    MatMul,
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
    /// `movement::copy_strided`.
    CopyStrided,
    /// `movement::pad`.
    Pad,
    /// `movement::gather`.
    Gather,
}

impl Kernel {
    /// The module holding this kernel.
    pub fn module(self) -> Module {
        match self {
            Kernel::Unary | Kernel::Binary | Kernel::BatchNorm => Module::Elementwise,
            Kernel::Conv | Kernel::ConvTranspose => Module::Conv,
            Kernel::MatMul => Module::MatMul,
            Kernel::MaxPool | Kernel::AvgPool | Kernel::GlobalAvgPool => Module::Pool,
            Kernel::Softmax => Module::Softmax,
            Kernel::Reduce => Module::Reduce,
            Kernel::CopyStrided | Kernel::Pad | Kernel::Gather => Module::Movement,
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
            Kernel::MaxPool => c"max_pool",
            Kernel::AvgPool => c"avg_pool",
            Kernel::GlobalAvgPool => c"global_avg_pool",
            Kernel::Softmax => c"softmax",
            Kernel::Reduce => c"reduce",
            Kernel::CopyStrided => c"copy_strided",
            Kernel::Pad => c"pad",
            Kernel::Gather => c"gather",
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
