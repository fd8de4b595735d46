//! The op kinds: each kind's stable file-format code, name, list ([`Category`]) and family
//! ([`Family`]), from one table (`op_kinds!`).

/// Which list of [`OpKind`]s a kind belongs to: what a device that computes in f32, one with
/// integer kernels, or one that moves bytes implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// Float compute ops ([`OpKind::F32_COMPUTE`]).
    F32Compute,
    /// Integer ops of quantized models ([`OpKind::INTEGER`]).
    Integer,
    /// Data movement ([`OpKind::MOVEMENT`]).
    Movement,
    /// The rest (per-dtype support listed by each device).
    Other,
}

/// The family of an op: the ops whose code shares one module in every layer (hal descriptors,
/// the core's rules in `core/src/rules/<family>.rs`, the CPU's kernels in
/// `targets/cpu/src/ops/<family>/`, the ONNX lowering in `tools/src/compile/lower/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Convolutions, float and integer.
    Conv,
    /// Matrix products, float and integer.
    MatMul,
    /// Elementwise arithmetic, activations, softmax, normalisation, casts.
    Elementwise,
    /// Window and global pooling.
    Pool,
    /// Data movement: permutations, slices, padding, concatenation, resampling.
    Movement,
    /// Gathers and scatters by index tensors.
    Indexing,
    /// Reductions, arg-extremes, top-k, running sums, determinants.
    Reduce,
    /// Quantization and dequantization.
    Quantize,
    /// Comparisons, boolean logic, selection, NaN/Inf tests.
    Logic,
    /// Recurrent layers.
    Recurrent,
}

/// The one table of op kinds: each row is a kind's variant, its stable file-format code, its
/// name, its [`Category`] and its [`Family`]. The enum, [`OpKind::ALL`], [`OpKind::name`],
/// [`OpKind::category`], [`OpKind::family`] and the category lists all come from it; a new op
/// kind is one row here.
macro_rules! op_kinds {
    ($($(#[$doc:meta])* $kind:ident = $code:literal, $name:literal, $category:ident, $family:ident;)*) => {
        /// The kind of an operator, with its stable file-format code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[repr(u16)]
        pub enum OpKind {
            $($(#[$doc])* $kind = $code,)*
        }

        impl OpKind {
            /// Every kind, in code order.
            pub const ALL: [OpKind; [$(OpKind::$kind),*].len()] = [$(OpKind::$kind),*];

            /// The operator's name.
            pub const fn name(self) -> &'static str {
                match self {
                    $(OpKind::$kind => $name,)*
                }
            }

            /// The list the kind belongs to.
            pub const fn category(self) -> Category {
                match self {
                    $(OpKind::$kind => Category::$category,)*
                }
            }

            /// The family whose modules hold the kind's code.
            #[inline]
            pub const fn family(self) -> Family {
                match self {
                    $(OpKind::$kind => Family::$family,)*
                }
            }
        }
    };
}

op_kinds! {
    /// 2-D (or 1-D) convolution, grouped or depthwise.
    Conv = 1, "Conv", F32Compute, Conv;
    /// 2-D (or 1-D) transposed convolution.
    ConvTranspose = 2, "ConvTranspose", F32Compute, Conv;
    /// `alpha * A x B + beta * C`.
    Gemm = 3, "Gemm", F32Compute, MatMul;
    /// Batched matrix product with numpy broadcasting.
    MatMul = 4, "MatMul", F32Compute, MatMul;
    /// Broadcasting elementwise arithmetic.
    Binary = 5, "Binary", F32Compute, Elementwise;
    /// Standalone activation.
    Unary = 6, "Unary", F32Compute, Elementwise;
    /// Softmax along one axis.
    Softmax = 7, "Softmax", F32Compute, Elementwise;
    /// 2-D max pooling.
    MaxPool = 8, "MaxPool", F32Compute, Pool;
    /// 2-D average pooling.
    AvgPool = 9, "AveragePool", F32Compute, Pool;
    /// Mean over all spatial positions.
    GlobalAvgPool = 10, "GlobalAveragePool", F32Compute, Pool;
    /// Batch normalisation with statistics as inputs.
    BatchNorm = 11, "BatchNormalization", F32Compute, Elementwise;
    /// Axis permutation.
    Transpose = 12, "Transpose", Movement, Movement;
    /// Concatenation along an axis.
    Concat = 13, "Concat", Movement, Movement;
    /// Split along an axis.
    Split = 14, "Split", Movement, Movement;
    /// Strided slice.
    Slice = 15, "Slice", Movement, Movement;
    /// Padding (constant, reflect, edge).
    Pad = 16, "Pad", Movement, Movement;
    /// Gather along an axis by integer indices.
    Gather = 17, "Gather", Movement, Indexing;
    /// Reduction over a set of axes.
    Reduce = 18, "Reduce", F32Compute, Reduce;
    /// Byte copy (a constant or an input that is also a graph output).
    Copy = 19, "Copy", Other, Movement;
    /// Linear quantization of floats to 8-bit integers.
    Quantize = 20, "QuantizeLinear", Other, Quantize;
    /// Linear dequantization of integers to floats.
    Dequantize = 21, "DequantizeLinear", Other, Quantize;
    /// Integer convolution with requantization.
    QConv = 22, "QConv", Integer, Conv;
    /// Integer matrix product (fully connected) with requantization.
    QGemm = 23, "QGemm", Integer, MatMul;
    /// Integer elementwise addition of two 8-bit tensors with their own scales.
    QAdd = 24, "QAdd", Integer, Elementwise;
    /// Integer global average pooling with requantization.
    QGlobalAvgPool = 25, "QGlobalAveragePool", Integer, Pool;
    /// 8-bit elementwise function by a 256-entry table.
    QLookup = 26, "QLookup", Integer, Elementwise;
    /// Integer elementwise multiplication (broadcasting) with requantization.
    QMul = 27, "QMul", Integer, Elementwise;
    /// Integer matrix product to int32, zero points as run-time inputs (ONNX MatMulInteger).
    MatMulInteger = 28, "MatMulInteger", Integer, MatMul;
    /// Integer convolution to int32, zero points as run-time inputs (ONNX ConvInteger).
    ConvInteger = 29, "ConvInteger", Integer, Conv;
    /// Quantization to uint8 with parameters from the tensor's range (DynamicQuantizeLinear).
    DynamicQuantize = 30, "DynamicQuantizeLinear", Other, Quantize;
    /// Integer softmax along one axis, by a table of exponentials.
    QSoftmax = 31, "QSoftmax", Integer, Elementwise;
    /// Integer average pooling over a window, with requantization.
    QAvgPool = 32, "QAveragePool", Integer, Pool;
    /// Log of softmax along one axis.
    LogSoftmax = 33, "LogSoftmax", F32Compute, Elementwise;
    /// One-hot of the first maximum along one axis.
    Hardmax = 34, "Hardmax", F32Compute, Elementwise;
    /// Index of the largest value along one axis (int64).
    ArgMax = 35, "ArgMax", Other, Reduce;
    /// Index of the smallest value along one axis (int64).
    ArgMin = 36, "ArgMin", Other, Reduce;
    /// Elementwise comparison (broadcasting) into bool.
    Compare = 37, "Compare", Other, Logic;
    /// Elementwise And / Or / Xor of bool tensors (broadcasting).
    Logical = 38, "Logical", Other, Logic;
    /// Elementwise negation of a bool tensor.
    Not = 39, "Not", Other, Logic;
    /// Elementwise choice between two tensors by a bool condition (broadcasting).
    Where = 40, "Where", Other, Logic;
    /// NaN / infinity detection into bool (IsNaN, IsInf).
    Classify = 41, "IsNaN/IsInf", Other, Logic;
    /// Upper or lower triangle of the last two axes, the rest zero.
    Trilu = 42, "Trilu", Other, Movement;
    /// Element-type conversion (ONNX Cast).
    Convert = 43, "Cast", Other, Elementwise;
    /// Resampling along one axis by a pack-time tap table (Resize, Upsample).
    Resample = 44, "Resample", Other, Movement;
    /// Broadcast of the input to a larger shape (Expand, and Tile through reshapes).
    Expand = 45, "Expand", Other, Movement;
    /// ONNX GatherElements.
    GatherElements = 46, "GatherElements", Other, Indexing;
    /// ONNX ScatterElements.
    ScatterElements = 47, "ScatterElements", Other, Indexing;
    /// ONNX GatherND.
    GatherNd = 48, "GatherND", Other, Indexing;
    /// ONNX ScatterND.
    ScatterNd = 49, "ScatterND", Other, Indexing;
    /// ONNX TopK.
    TopK = 50, "TopK", Other, Reduce;
    /// ONNX CumSum.
    CumSum = 51, "CumSum", Other, Reduce;
    /// One direction of an RNN, GRU or LSTM over a whole sequence.
    Recurrent = 52, "Recurrent", Other, Recurrent;
    /// Determinants of square matrices.
    Det = 53, "Det", Other, Reduce;
    /// A discrete Fourier transform (DFT, or STFT's framed and windowed one).
    Dft = 54, "DFT", Other, MatMul;
    /// A tree ensemble's votes per target (scikit-learn's trees and forests).
    TreeEnsemble = 55, "TreeEnsemble", Other, Reduce;
}

/// The kinds of `category`, in code order (`N` must be their count: checked at compile time).
const fn of_category<const N: usize>(category: Category) -> [OpKind; N] {
    let mut out = [OpKind::Copy; N];
    let (mut n, mut i) = (0, 0);
    while i < OpKind::ALL.len() {
        if OpKind::ALL[i].category() as u8 == category as u8 {
            assert!(n < N, "more kinds in the category than its list holds");
            out[n] = OpKind::ALL[i];
            n += 1;
        }
        i += 1;
    }
    assert!(n == N, "fewer kinds in the category than its list holds");
    out
}

impl OpKind {
    /// The float compute ops (everything but data movement and quantization), which every
    /// device that computes in f32 implements.
    pub const F32_COMPUTE: [OpKind; 14] = of_category(Category::F32Compute);

    /// The integer ops of quantized models (8-bit operands), which a device built without
    /// integer kernels (`ferrite-cpu` without its `quantized` feature) leaves out.
    pub const INTEGER: [OpKind; 10] = of_category(Category::Integer);

    /// The data-movement ops (dtype-agnostic apart from element size).
    pub const MOVEMENT: [OpKind; 6] = of_category(Category::Movement);

    /// The kind with file-format code `code`.
    pub fn from_code(code: u16) -> Option<OpKind> {
        OpKind::ALL.iter().copied().find(|k| *k as u16 == code)
    }

    /// The file-format code.
    pub fn code(self) -> u16 {
        self as u16
    }

    /// A bit unique to this kind, for [`crate::OpSet`].
    pub fn bit(self) -> u64 {
        1u64 << (self as u16)
    }
}
