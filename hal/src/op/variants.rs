//! [`Op`]: one normalised operator with its parameters (each family's descriptors), and what
//! every device asks of it (its kind, its activations, whether it may run in place).

use super::kinds::OpKind;
use super::{
    conv::*, elementwise::*, indexing::*, logic::*, matmul::*, movement::*, pool::*, quantize::*,
    recurrent::*, reduce::*,
};
use crate::Activation;

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
}
