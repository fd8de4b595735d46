//! The device-independent form of a prepared plan: a list of kernel launches and copies whose
//! arguments name arena and weight locations, not addresses.
//!
//! [`crate::lower`] builds it once per session; the GPU program resolves each location to a
//! device pointer and captures the list as a CUDA graph, and the host emulator (feature
//! `emulator`) resolves them to host pointers and runs the same kernels on the CPU.

use ferrite_hal::Location;

/// A kernel entry point: which module (`kernels/<module>.cu`) and which `extern "C"` function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// An activation per element.
    Unary,
    /// Broadcasting f32 arithmetic.
    Binary,
    /// Inference batch normalisation.
    BatchNorm,
    /// Softmax, LogSoftmax, Hardmax along an axis.
    Softmax,
    /// ArgMax / ArgMin.
    ArgExtreme,
    /// Transpose, Slice, Expand, Concat, Split.
    CopyStrided,
    /// Gather along an axis.
    Gather,
    /// Constant, reflect or edge padding.
    Pad,
    /// Resize from pack-time tables.
    Resample,
    /// The nine reductions.
    Reduce,
    /// Tiled Gemm / batched MatMul.
    MatMul,
    /// Gemm / batched MatMul of fewer than `TILE` rows, split over K.
    MatMulRows,
    /// Direct (and depthwise) convolution.
    Conv,
    /// Implicit-GEMM convolution.
    ConvGemm,
    /// Transposed convolution.
    ConvTranspose,
    /// Max and average pooling.
    Pool,
    /// Global average pooling.
    GlobalAvgPool,
    /// Running sums.
    CumSum,
    /// A recurrent step's two gate products.
    RecurrentGates,
    /// A recurrent step's cell equations.
    RecurrentCell,
    /// Comparisons into bool.
    Compare,
    /// And, Or, Xor, Not.
    Logical,
    /// Where.
    Choose,
    /// Trilu.
    Trilu,
    /// Cast.
    Convert,
    /// IsNaN / IsInf.
    Classify,
    /// GatherElements.
    GatherElements,
    /// TopK.
    TopK,
    /// ScatterElements.
    ScatterElements,
    /// GatherND.
    GatherNd,
    /// ScatterND.
    ScatterNd,
    /// Det.
    Det,
    /// Broadcasting arithmetic on integer tensors.
    BinaryInteger,
}

impl Kernel {
    /// Every kernel.
    pub const ALL: [Kernel; 33] = [
        Kernel::Unary,
        Kernel::Binary,
        Kernel::BatchNorm,
        Kernel::Softmax,
        Kernel::ArgExtreme,
        Kernel::CopyStrided,
        Kernel::Gather,
        Kernel::Pad,
        Kernel::Resample,
        Kernel::Reduce,
        Kernel::MatMul,
        Kernel::MatMulRows,
        Kernel::Conv,
        Kernel::ConvGemm,
        Kernel::ConvTranspose,
        Kernel::Pool,
        Kernel::GlobalAvgPool,
        Kernel::CumSum,
        Kernel::RecurrentGates,
        Kernel::RecurrentCell,
        Kernel::Compare,
        Kernel::Logical,
        Kernel::Choose,
        Kernel::Trilu,
        Kernel::Convert,
        Kernel::Classify,
        Kernel::GatherElements,
        Kernel::TopK,
        Kernel::ScatterElements,
        Kernel::GatherNd,
        Kernel::ScatterNd,
        Kernel::Det,
        Kernel::BinaryInteger,
    ];

    /// The module (`kernels/<module>.cu`) that defines it.
    pub fn module(self) -> &'static str {
        use Kernel::*;
        match self {
            Unary | Binary | BatchNorm | BinaryInteger => "elementwise",
            Softmax | ArgExtreme | CumSum => "lanes",
            CopyStrided | Gather | Pad | Resample => "movement",
            Reduce => "reduce",
            MatMul | MatMulRows => "matmul",
            Conv | ConvGemm | ConvTranspose => "conv",
            Pool | GlobalAvgPool => "pool",
            RecurrentGates | RecurrentCell => "recurrent",
            Compare | Logical | Choose | Trilu | Convert | Classify | GatherElements => "logic",
            TopK | ScatterElements | GatherNd | ScatterNd | Det => "indexing",
        }
    }

    /// The `extern "C"` function name.
    pub fn entry(self) -> &'static str {
        use Kernel::*;
        match self {
            Unary => "unary",
            Binary => "binary",
            BatchNorm => "batch_norm",
            Softmax => "softmax",
            ArgExtreme => "arg_extreme",
            CopyStrided => "copy_strided",
            Gather => "gather",
            Pad => "pad",
            Resample => "resample",
            Reduce => "reduce",
            MatMul => "matmul",
            MatMulRows => "matmul_rows",
            Conv => "conv",
            ConvGemm => "conv_gemm",
            ConvTranspose => "conv_transpose",
            Pool => "pool",
            GlobalAvgPool => "global_avg_pool",
            CumSum => "cumsum",
            RecurrentGates => "recurrent_gates",
            RecurrentCell => "recurrent_cell",
            Compare => "compare",
            Logical => "logical",
            Choose => "choose",
            Trilu => "trilu",
            Convert => "convert",
            Classify => "classify",
            GatherElements => "gather_elements",
            TopK => "top_k",
            ScatterElements => "scatter_elements",
            GatherNd => "gather_nd",
            ScatterNd => "scatter_nd",
            Det => "det",
            BinaryInteger => "binary_integer",
        }
    }
}

/// One kernel argument, in the order of the kernel's parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A pointer to a tensor's first byte.
    Tensor(Location),
    /// A null pointer: an absent optional operand.
    Null,
    /// A pointer to the program's status word (kernels set bit 0 for a run-time index out of
    /// range, bit 1 for an integer division by zero; the host reports either as invalid input).
    Status,
    /// A value passed by copy: a scalar or a struct whose fields are all 4 bytes wide (so its
    /// C layout is these words, in order, without padding).
    Words(Vec<u32>),
}

/// A kernel launch.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    /// The kernel.
    pub kernel: Kernel,
    /// Blocks per axis.
    pub grid: [u32; 3],
    /// Threads per block per axis.
    pub block: [u32; 3],
    /// Arguments.
    pub args: Vec<Arg>,
}

/// One command of a prepared plan.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Launch a kernel.
    Launch(Launch),
    /// Zero `bytes` at arena byte offset `dst`.
    Zero {
        /// Destination offset in the arena.
        dst: usize,
        /// Length.
        bytes: usize,
    },
    /// Copy `bytes` from `src` to arena byte offset `dst` (device to device).
    Copy {
        /// Source.
        src: Location,
        /// Destination offset in the arena.
        dst: usize,
        /// Length.
        bytes: usize,
    },
}
