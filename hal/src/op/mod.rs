//! Operator descriptors: what one step of a plan computes, with its parameters.
//!
//! These are *normalised* operators: the planner has already resolved ONNX's opset differences,
//! `auto_pad`, negative axes, transposed Gemm operands and so on, so a device implements one
//! well-defined form per operator. Tensor shapes are not stored here; they come with the step's
//! tensors. Parameters travel as 32-bit words ([`Op::encode`] / [`Op::decode`]); decoding checks
//! every value that can be checked without shapes (strides ≥ 1, known enum codes, ...).
//!
//! One module per op family ([`Family`]): `conv`, `matmul`, `elementwise`, `pool`, `movement`,
//! `indexing`, `reduce`, `quantize`, `logic` and `recurrent` each hold their kinds' descriptors
//! and word encoding; the table of kinds below (`op_kinds!`) names each kind's family, and
//! [`Op::encode`] / [`Op::decode_selected`] dispatch on it.

use crate::words::{WordReader, WordWriter};
use crate::{selects, Activation, Selection, ALL_OPS, MAX_RANK};

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
/// `targets/cpu/src/kernels/`, the ONNX lowering in `tools/src/compile/lower/`).
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

mod conv;
mod elementwise;
mod indexing;
mod logic;
mod matmul;
mod movement;
mod pool;
mod quantize;
mod recurrent;
mod reduce;

pub use conv::{Conv, ConvInteger, ConvTranspose, QConv, Window};
pub use elementwise::{BinaryOp, QAdd, QMul, QSoftmax, QADD_LEFT_SHIFT, QSOFTMAX_TABLE_BITS};
pub use indexing::Reduction;
pub use logic::{CompareOp, Detect, LogicalOp};
pub use matmul::{Dft, Gemm, QGemmWeights, MAX_DFT_LENGTH};
pub use movement::{AxisArray, PadMode};
pub use pool::{Pool, QAvgPool, QGlobalAvgPool};
pub use quantize::{Requantize, Rescale};
pub use recurrent::{Cell, Recurrent};
pub use reduce::{
    ArgIndex, ReduceOp, TreeAggregate, TreeEnsemble, TREE_BRANCH_MODES, TREE_LEAF,
    TREE_MISSING_TRUE,
};

/// One normalised operator with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// Inputs `X [N,C,H,W] or [N,C,L]`, `W`, optional `B`; output `Y`.
    Conv(Conv),
    /// Inputs `X`, `W`, optional `B`; output `Y`.
    ConvTranspose(ConvTranspose),
    /// Inputs `A`, `B`, optional `C`.
    Gemm(Gemm),
    /// Inputs `A`, `B` (numpy matmul semantics, rank ≥ 1).
    MatMul {
        /// Fused activation.
        activation: Activation,
    },
    /// Inputs `A`, `B` broadcast to the output.
    Binary {
        /// The arithmetic.
        op: BinaryOp,
        /// Fused activation.
        activation: Activation,
    },
    /// One input, same shape out.
    Unary(Activation),
    /// Softmax along `axis` (the input is `[outer, axis, inner]`).
    Softmax {
        /// Axis, in `0..rank`.
        axis: usize,
    },
    /// 2-D max pooling over `[N, C, H, W]` (or `[N, C, L]`).
    MaxPool(Pool),
    /// 2-D average pooling.
    AvgPool(Pool),
    /// Mean over every position after the channel axis.
    GlobalAvgPool,
    /// Inputs `X`, `scale`, `bias`, `mean`, `var` (per channel, axis 1).
    BatchNorm {
        /// Added to the variance.
        epsilon: f32,
        /// Fused activation.
        activation: Activation,
    },
    /// Output axis `i` is input axis `perm[i]`.
    Transpose {
        /// Permutation (first `rank` entries).
        perm: AxisArray<usize>,
    },
    /// Inputs concatenated along `axis`.
    Concat {
        /// Axis, in `0..rank`.
        axis: usize,
    },
    /// One input split along `axis` into the outputs (sizes from the output shapes).
    Split {
        /// Axis, in `0..rank`.
        axis: usize,
    },
    /// Output element `i` along each axis reads input `start + i * step`.
    Slice {
        /// First index per axis.
        starts: AxisArray<usize>,
        /// Step per axis (non-zero).
        steps: AxisArray<isize>,
    },
    /// Pads `begins`/`ends` elements around each axis.
    Pad {
        /// Mode.
        mode: PadMode,
        /// Elements added before each axis.
        begins: AxisArray<usize>,
        /// Elements added after each axis.
        ends: AxisArray<usize>,
        /// Fill value for [`PadMode::Constant`].
        value: f32,
    },
    /// Inputs `data`, `indices` (int32 or int64); gathers along `axis`.
    Gather {
        /// Axis of `data`, in `0..rank`.
        axis: usize,
    },
    /// Reduces the axes set in `axes` (bit `i` = axis `i`).
    Reduce {
        /// Function.
        op: ReduceOp,
        /// Bit mask of reduced axes.
        axes: u32,
    },
    /// Copies the input to the output byte for byte.
    Copy,
    /// Inputs `x` (f32), `scale` (f32), `zero_point` (the output's 8-bit type):
    /// `y = saturate(round_half_to_even(x / scale) + zero_point)`. Scale and zero point are
    /// scalars or vectors along `axis` (per-channel).
    Quantize {
        /// The per-channel axis, in `0..rank` (any for scalar parameters).
        axis: usize,
    },
    /// Inputs `X` (int8/uint8, or int16: TFLite's 16 × 8 scheme), `W` (int8), bias
    /// (int32), requantization (int32 pairs); output of `X`'s type.
    QConv(QConv),
    /// Inputs `A [M, K]` (int8/uint8, or int16), `B` (int8, zero point 0) `[N, K]` — one row of weights
    /// per output, so every dot product reads two contiguous rows — or `[N/4, K/4, 4, 4]` (`K` a
    /// multiple of 8), four outputs' words interleaved ([`QGemmWeights`]), bias int32 `[N]`, requantization `[C, 2]`
    /// int32 with `C` 1 or `N`; output `[M, N]` of `A`'s type.
    QGemm(Requantize),
    /// Inputs `A`, `B` (int8/uint8/int16, one shape and type); output of that shape and
    /// type.
    QAdd(QAdd),
    /// Input `X [N, C, H, W]` or `[N, C, L]` (int8/uint8/int16); output `[N, C, 1, 1]`
    /// (or `[N, C, 1]`) of its type.
    QGlobalAvgPool(QGlobalAvgPool),
    /// Inputs `X` (int8/uint8) and a table of 256 values of the same type; `Y[i]` is the table
    /// entry at `X[i]`'s byte. Any elementwise function of a quantized tensor (Sigmoid, Tanh,
    /// HardSwish, ... with the quantizations around it) is such a table, made at pack time.
    QLookup,
    /// Inputs `A`, `B` (int8/uint8, broadcasting as numpy); output of the broadcast shape.
    QMul(QMul),
    /// Inputs `A`, `B` (int8 or uint8 each; numpy matmul semantics), `a_zero` (A's type: one
    /// value, or one per row of a matrix `A`), `b_zero` (B's type: one value, or one per column of
    /// a matrix `B`); output int32 `Σ (a − a_zero)(b − b_zero)`.
    MatMulInteger,
    /// Inputs `X`, `W` (int8 or uint8 each), `x_zero` (one value of X's type), `w_zero` (W's
    /// type: one value, or one per output channel); output int32.
    ConvInteger(ConvInteger),
    /// Input `x` (f32); outputs `y` (uint8, x's shape), `scale` (f32 scalar), `zero_point` (uint8
    /// scalar): the range of `x` widened to include 0, mapped onto 0..=255.
    DynamicQuantize,
    /// Inputs `X` (int8/uint8) and the exponential table (int32 `[256]`); output of X's shape and
    /// type.
    QSoftmax(QSoftmax),
    /// Input `X [N, C, H, W]` or `[N, C, L]` (int8/uint8); output of the same type.
    QAvgPool(QAvgPool),
    /// `x − max − ln Σ e^(x − max)` along `axis`.
    LogSoftmax {
        /// Axis, in `0..rank`.
        axis: usize,
    },
    /// 1 at the first maximum along `axis`, 0 elsewhere.
    Hardmax {
        /// Axis, in `0..rank`.
        axis: usize,
    },
    /// Input X (f32); output int64: X's shape with `axis` reduced (kept as 1 or removed).
    ArgMax(ArgIndex),
    /// As [`Op::ArgMax`], for the smallest value.
    ArgMin(ArgIndex),
    /// Inputs `A`, `B` of one type (float32, int32, int64, int8, uint8 or bool; numpy
    /// broadcasting); output bool.
    Compare(CompareOp),
    /// Inputs `A`, `B` (bool, broadcasting); output bool.
    Logical(LogicalOp),
    /// Input bool; output bool.
    Not,
    /// Inputs `condition` (bool), `X`, `Y` (one type; all three broadcasting); output of X's type.
    Where,
    /// Input float32; output bool.
    Classify(Detect),
    /// Keeps element `(i, j)` of each matrix (the last two axes) when `j − i ≥ k` (upper) or
    /// `j − i ≤ k` (lower); the others become 0. Any element type.
    Trilu {
        /// The upper triangle (else the lower).
        upper: bool,
        /// The diagonal offset.
        k: i32,
    },
    /// Converts every element of the input to the output's type, as ONNX Cast: floats to
    /// integers truncate toward zero (saturating), to bool test `!= 0`, between float widths
    /// round to nearest even.
    Convert,
    /// Inputs `x` (f32), `indices` (int32 `[n, taps]`), `weights` (f32 `[n, taps]`); output x's
    /// shape with `axis` of length `n`: output position `j` along `axis` is
    /// `Σ_k weights[j, k] · x[.., indices[j, k], ..]`, or `extrapolation` where
    /// `indices[j, 0]` is −1. Every mode of ONNX Resize (nearest, linear, cubic, antialiased,
    /// each coordinate transformation) is such a table, computed at pack time per axis.
    Resample {
        /// The resampled axis, in `0..rank`.
        axis: usize,
        /// The value of positions outside the input (tf_crop_and_resize).
        extrapolation: f32,
    },
    /// Input `x` (any type); output of x's type, x broadcast (numpy rules) to its shape.
    Expand,
    /// Inputs `data` (any type), `indices` (int32/int64, data's rank); output of indices' shape:
    /// `data` at each position with the `axis` coordinate taken from `indices` (negative
    /// counting from the end; out of range is a run-time error).
    GatherElements {
        /// Axis, in `0..rank`.
        axis: usize,
    },
    /// Inputs `data`, `indices` (int32/int64), `updates` (indices' shape, data's type); output
    /// `data` with each update written (or combined by `reduction`) at its position with the
    /// `axis` coordinate taken from `indices`.
    ScatterElements {
        /// Axis, in `0..rank`.
        axis: usize,
        /// How an update combines with the value there.
        reduction: Reduction,
    },
    /// Inputs `data`, `indices` (int32/int64 `[..., q]`); output the slices of `data` the
    /// index tuples select (ONNX GatherND).
    GatherNd {
        /// Leading dims shared by data and indices.
        batch_dims: usize,
    },
    /// Inputs `data`, `indices` (`[..., q]`), `updates`; output `data` with the slices the
    /// index tuples select replaced (or combined) by `updates` (ONNX ScatterND).
    ScatterNd {
        /// How an update combines with the value there.
        reduction: Reduction,
    },
    /// Input `x` (f32 or integers); outputs the `k` largest (or smallest) values along `axis`
    /// (k = the outputs' length there) and their int64 indices, ties to the lower index.
    TopK {
        /// Axis, in `0..rank`.
        axis: usize,
        /// The largest (else the smallest).
        largest: bool,
    },
    /// Input `x` (f32, int32 or int64); output the running sums along `axis`.
    CumSum {
        /// Axis, in `0..rank`.
        axis: usize,
        /// Each sum leaves out its own element.
        exclusive: bool,
        /// Sums run from the end.
        reverse: bool,
    },
    /// One direction of a recurrent layer. Inputs `X` `[seq, batch, input]`, `W`
    /// `[gates·hidden, input]`, `R` `[gates·hidden, hidden]`, optional `B` `[2·gates·hidden]`
    /// (W's biases then R's), `initial_h` `[batch, hidden]`, `initial_c` and `P` (peepholes,
    /// `[3·hidden]`, LSTM); outputs `Y` `[seq, batch, hidden]`, `Y_h` and (LSTM) `Y_c`
    /// `[batch, hidden]`; all f32, with a scratch of `2·batch·gates·hidden` f32. Gate order
    /// and equations as ONNX RNN (gates i), GRU (z, r, h) and LSTM (i, o, f, c).
    Recurrent(Recurrent),
    /// Input X (f32 `[..., n, n]`); output `[...]`: each matrix's determinant (LU with partial
    /// pivoting, in f64, in an `n·n` f64 scratch — `2·n·n` f32 elements).
    Det,
    /// A discrete Fourier transform along an axis, of whole signals (DFT) or of frames
    /// (STFT), with a pack-time twiddle table as an input.
    Dft(Dft),
    /// Decision trees walked per row, their leaves' votes aggregated per target (ONNX-ML
    /// TreeEnsembleRegressor / Classifier's scores). Inputs: `x` f32 `[N, features]`; the node
    /// table, i32 `[nodes, 4]` (branch: feature, mode, true child, false child; leaf: first
    /// vote, [`TREE_LEAF`], vote count, 0); the thresholds, f32 `[nodes]`; the roots, i32
    /// `[trees]`; the votes' targets, i32 `[votes]`, and weights, f32 `[votes]`. Output f32
    /// `[N, targets]`. Every index in the tables is checked when the trees are walked.
    TreeEnsemble(TreeEnsemble),
    /// Inputs `x` (int8, uint8 or int32), `scale` (f32), optional `zero_point` (x's type):
    /// `y = (x - zero_point) * scale`, with the same per-tensor / per-axis forms.
    Dequantize {
        /// The per-channel axis, in `0..rank` (any for scalar parameters).
        axis: usize,
    },
}

fn encode_axes<T: Copy>(w: &mut WordWriter, values: &AxisArray<T>, f: impl Fn(T) -> u32) {
    for v in values {
        w.u32(f(*v));
    }
}

fn decode_axes<T: Copy + Default>(
    r: &mut WordReader<'_>,
    f: impl Fn(u32) -> Option<T>,
) -> Option<AxisArray<T>> {
    let mut out = [T::default(); MAX_RANK];
    for slot in out.iter_mut() {
        *slot = f(r.u32()?)?;
    }
    Some(out)
}

impl Op {
    /// The kind of this op.
    #[inline]
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Conv(_) => OpKind::Conv,
            Op::ConvTranspose(_) => OpKind::ConvTranspose,
            Op::Gemm(_) => OpKind::Gemm,
            Op::MatMul { .. } => OpKind::MatMul,
            Op::Binary { .. } => OpKind::Binary,
            Op::Unary(_) => OpKind::Unary,
            Op::Softmax { .. } => OpKind::Softmax,
            Op::MaxPool(_) => OpKind::MaxPool,
            Op::AvgPool(_) => OpKind::AvgPool,
            Op::GlobalAvgPool => OpKind::GlobalAvgPool,
            Op::BatchNorm { .. } => OpKind::BatchNorm,
            Op::Transpose { .. } => OpKind::Transpose,
            Op::Concat { .. } => OpKind::Concat,
            Op::Split { .. } => OpKind::Split,
            Op::Slice { .. } => OpKind::Slice,
            Op::Pad { .. } => OpKind::Pad,
            Op::Gather { .. } => OpKind::Gather,
            Op::Reduce { .. } => OpKind::Reduce,
            Op::Copy => OpKind::Copy,
            Op::Quantize { .. } => OpKind::Quantize,
            Op::Dequantize { .. } => OpKind::Dequantize,
            Op::QConv(_) => OpKind::QConv,
            Op::QGemm(_) => OpKind::QGemm,
            Op::QAdd(_) => OpKind::QAdd,
            Op::QGlobalAvgPool(_) => OpKind::QGlobalAvgPool,
            Op::QLookup => OpKind::QLookup,
            Op::QMul(_) => OpKind::QMul,
            Op::MatMulInteger => OpKind::MatMulInteger,
            Op::ConvInteger(_) => OpKind::ConvInteger,
            Op::DynamicQuantize => OpKind::DynamicQuantize,
            Op::QSoftmax(_) => OpKind::QSoftmax,
            Op::QAvgPool(_) => OpKind::QAvgPool,
            Op::LogSoftmax { .. } => OpKind::LogSoftmax,
            Op::Hardmax { .. } => OpKind::Hardmax,
            Op::ArgMax(_) => OpKind::ArgMax,
            Op::ArgMin(_) => OpKind::ArgMin,
            Op::Compare(_) => OpKind::Compare,
            Op::Logical(_) => OpKind::Logical,
            Op::Not => OpKind::Not,
            Op::Convert => OpKind::Convert,
            Op::Resample { .. } => OpKind::Resample,
            Op::Expand => OpKind::Expand,
            Op::GatherElements { .. } => OpKind::GatherElements,
            Op::ScatterElements { .. } => OpKind::ScatterElements,
            Op::GatherNd { .. } => OpKind::GatherNd,
            Op::ScatterNd { .. } => OpKind::ScatterNd,
            Op::TopK { .. } => OpKind::TopK,
            Op::CumSum { .. } => OpKind::CumSum,
            Op::Recurrent(_) => OpKind::Recurrent,
            Op::Det => OpKind::Det,
            Op::Dft(_) => OpKind::Dft,
            Op::TreeEnsemble(_) => OpKind::TreeEnsemble,
            Op::Where => OpKind::Where,
            Op::Classify(_) => OpKind::Classify,
            Op::Trilu { .. } => OpKind::Trilu,
        }
    }

    /// The fused activation, if this op carries one.
    pub fn activation(&self) -> Option<Activation> {
        match *self {
            Op::Conv(c) => Some(c.activation),
            Op::ConvTranspose(c) => Some(c.activation),
            Op::Gemm(g) => Some(g.activation),
            Op::MatMul { activation }
            | Op::Binary { activation, .. }
            | Op::BatchNorm { activation, .. } => Some(activation),
            _ => None,
        }
    }

    /// Every activation the op applies (its fused one, a `Unary`'s, a recurrent cell's three),
    /// [`Activation::None`] where there is none: what a selection must name for the op to run.
    pub fn activations(&self) -> [Activation; 3] {
        match *self {
            Op::Unary(a) => [a, Activation::None, Activation::None],
            Op::Recurrent(r) => r.activations,
            _ => [
                self.activation().unwrap_or(Activation::None),
                Activation::None,
                Activation::None,
            ],
        }
    }

    /// Whether the output may occupy exactly the bytes of an input of the same shape (in-place).
    pub fn allows_in_place(&self) -> bool {
        matches!(
            self,
            Op::Binary { .. } | Op::Unary(_) | Op::BatchNorm { .. }
        )
    }

    /// Encodes the parameters as words (each family's module writes its own).
    pub fn encode(&self, w: &mut WordWriter) {
        match self.kind().family() {
            Family::Conv => conv::encode(self, w),
            Family::MatMul => matmul::encode(self, w),
            Family::Elementwise => elementwise::encode(self, w),
            Family::Pool => pool::encode(self, w),
            Family::Movement => movement::encode(self, w),
            Family::Indexing => indexing::encode(self, w),
            Family::Reduce => reduce::encode(self, w),
            Family::Quantize => quantize::encode(self, w),
            Family::Logic => logic::encode(self, w),
            Family::Recurrent => recurrent::encode(self, w),
        }
    }

    /// Decodes the parameters of an op of kind `kind`; `None` if a value is out of its domain or
    /// the word count is wrong.
    pub fn decode(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
        Op::decode_selected::<ALL_OPS>(kind, r)
    }

    /// As [`Op::decode`], for a build that links only the kinds in kind mask `OPS` (a
    /// firmware's selection, `ferrite pack --emit rust`'s `OPS`): any other kind is `None`, and
    /// its decoding code is not linked.
    pub fn decode_selected<const OPS: crate::Selection>(
        kind: OpKind,
        r: &mut WordReader<'_>,
    ) -> Option<Op> {
        // Each family's module decodes its kinds, those `OPS` selects.
        let op = match kind.family() {
            Family::Conv => conv::decode::<OPS>(kind, r),
            Family::MatMul => matmul::decode::<OPS>(kind, r),
            Family::Elementwise => elementwise::decode::<OPS>(kind, r),
            Family::Pool => pool::decode::<OPS>(kind, r),
            Family::Movement => movement::decode::<OPS>(kind, r),
            Family::Indexing => indexing::decode::<OPS>(kind, r),
            Family::Reduce => reduce::decode::<OPS>(kind, r),
            Family::Quantize => quantize::decode::<OPS>(kind, r),
            Family::Logic => logic::decode::<OPS>(kind, r),
            Family::Recurrent => recurrent::decode::<OPS>(kind, r),
        }?;
        r.is_done().then_some(op)
    }
}

/// Two input zero points, the output zero point and the output clamp of a binary integer op:
/// five words, each a value of an 8-bit type, with `min <= max`.
fn decode_zeros_and_clamp(r: &mut WordReader<'_>) -> Option<[i32; 5]> {
    let v = [r.i32()?, r.i32()?, r.i32()?, r.i32()?, r.i32()?];
    // Values of some 8- or 16-bit type; the verifier checks them against the operands' types.
    let integer = -32768..=65535;
    (v.iter().all(|x| integer.contains(x)) && v[3] <= v[4]).then_some(v)
}

fn positive(v: usize) -> Option<usize> {
    (v >= 1).then_some(v)
}

fn finite(v: f32) -> Option<f32> {
    v.is_finite().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(op: Op) {
        let mut w = WordWriter::default();
        op.encode(&mut w);
        let words = w.words().unwrap();
        let mut bytes = [0u8; 4 * crate::words::MAX_PARAM_WORDS];
        for (i, v) in words.iter().enumerate() {
            bytes[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        let mut r = WordReader::new(&bytes[..4 * words.len()]);
        assert_eq!(Op::decode(op.kind(), &mut r), Some(op));
    }

    #[test]
    fn ops_round_trip() {
        let window = Window {
            kernel: [3, 3],
            stride: [2, 1],
            dilation: [1, 2],
            pads: [1, 0, 1, 2],
        };
        round_trip(Op::Conv(Conv {
            window,
            group: 4,
            activation: Activation::Clip { min: 0.0, max: 6.0 },
        }));
        round_trip(Op::Slice {
            starts: [1, 2, 0, 0, 0, 0, 0, 0],
            steps: [-1, 2, 1, 1, 1, 1, 1, 1],
        });
        round_trip(Op::Pad {
            mode: PadMode::Reflect,
            begins: [0, 1, 2, 3, 0, 0, 0, 0],
            ends: [3, 2, 1, 0, 0, 0, 0, 0],
            value: 0.5,
        });
        round_trip(Op::MaxPool(Pool {
            window,
            ceil_mode: true,
            count_include_pad: false,
        }));
        round_trip(Op::Reduce {
            op: ReduceOp::Max,
            axes: 0b101,
        });
        let requantize = Requantize {
            input_zero: -3,
            output_zero: 5,
            min: -128,
            max: 127,
        };
        let r = |m, s| Rescale {
            multiplier: m,
            shift: s,
        };
        round_trip(Op::QConv(QConv {
            window,
            group: 2,
            requantize,
        }));
        round_trip(Op::QGemm(requantize));
        round_trip(Op::QAdd(QAdd {
            a: r(1 << 30, -1),
            b: r(1_500_000_000, 0),
            output: r(1 << 30, 12),
            a_zero: -4,
            b_zero: 7,
            output_zero: 0,
            min: 0,
            max: 127,
        }));
        round_trip(Op::QGlobalAvgPool(QGlobalAvgPool {
            rescale: r(1_234_567_890, -5),
            requantize,
        }));
        round_trip(Op::QLookup);
        round_trip(Op::MatMulInteger);
        round_trip(Op::LogSoftmax { axis: 2 });
        round_trip(Op::Compare(CompareOp::GreaterOrEqual));
        round_trip(Op::Logical(LogicalOp::Xor));
        round_trip(Op::Not);
        round_trip(Op::Convert);
        round_trip(Op::Expand);
        round_trip(Op::Det);
        round_trip(Op::TreeEnsemble(TreeEnsemble {
            targets: 3,
            aggregate: TreeAggregate::Average,
        }));
        round_trip(Op::Dft(Dft {
            axis: 1,
            length: 400,
            frame_step: 160,
            inverse: false,
            onesided: true,
        }));
        round_trip(Op::Recurrent(Recurrent {
            cell: Cell::Gru {
                linear_before_reset: true,
            },
            reverse: true,
            clip: 3.5,
            activations: [Activation::Sigmoid, Activation::Tanh, Activation::Relu],
        }));
        round_trip(Op::GatherElements { axis: 2 });
        round_trip(Op::ScatterElements {
            axis: 1,
            reduction: Reduction::Max,
        });
        round_trip(Op::GatherNd { batch_dims: 1 });
        round_trip(Op::ScatterNd {
            reduction: Reduction::Mul,
        });
        round_trip(Op::TopK {
            axis: 0,
            largest: false,
        });
        round_trip(Op::CumSum {
            axis: 1,
            exclusive: true,
            reverse: false,
        });
        round_trip(Op::Resample {
            axis: 3,
            extrapolation: -1.5,
        });
        for op in [BinaryOp::Mod, BinaryOp::ShiftLeft, BinaryOp::ShiftRight] {
            round_trip(Op::Binary {
                op,
                activation: Activation::None,
            });
        }
        round_trip(Op::Trilu {
            upper: false,
            k: -2,
        });
        round_trip(Op::Where);
        round_trip(Op::Classify(Detect {
            nan: false,
            positive_infinity: true,
            negative_infinity: false,
        }));
        round_trip(Op::Hardmax { axis: 0 });
        round_trip(Op::ArgMax(ArgIndex {
            axis: 1,
            last: true,
        }));
        round_trip(Op::ArgMin(ArgIndex {
            axis: 0,
            last: false,
        }));
        round_trip(Op::DynamicQuantize);
        round_trip(Op::ConvInteger(ConvInteger { window, group: 3 }));
        round_trip(Op::QSoftmax(QSoftmax {
            axis: 1,
            rescale: r(1 << 30, 9),
            output_zero: -128,
            min: -128,
            max: 127,
        }));
        round_trip(Op::QAvgPool(QAvgPool {
            pool: Pool {
                window,
                ceil_mode: false,
                count_include_pad: true,
            },
            rescale: r(1_100_000_000, -1),
            requantize,
        }));
        round_trip(Op::QMul(QMul {
            rescale: r(1 << 30, -7),
            a_zero: 3,
            b_zero: -128,
            output_zero: 1,
            min: -128,
            max: 127,
        }));
    }

    #[test]
    fn integer_parameters_out_of_range_are_rejected() {
        let mut w = WordWriter::default();
        Op::QGlobalAvgPool(QGlobalAvgPool {
            rescale: Rescale {
                multiplier: -1,
                shift: 0,
            },
            requantize: Requantize {
                input_zero: 0,
                output_zero: 0,
                min: 0,
                max: 1,
            },
        })
        .encode(&mut w);
        let words = w.words().unwrap();
        let mut bytes = [0u8; 4 * crate::words::MAX_PARAM_WORDS];
        for (i, v) in words.iter().enumerate() {
            bytes[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        let mut r = WordReader::new(&bytes[..4 * words.len()]);
        assert_eq!(Op::decode(OpKind::QGlobalAvgPool, &mut r), None);
    }

    #[test]
    fn zero_stride_is_rejected() {
        let bytes = [0u8; 4 * 14];
        let mut r = WordReader::new(&bytes);
        assert_eq!(Op::decode(OpKind::Conv, &mut r), None);
    }
}
