//! The one table of the ONNX ops (default domain) that lowering understands: each row is an op
//! type, the function that lowers its nodes (in the module of its family), and how many inputs
//! it takes by opset. A new ONNX op is one row here and its lowering function.

use super::lowerer::{Lowerer, Reason};
use super::{
    compose, constant, control, conv, einsum, elementwise, indexing, integer, logic, matmul,
    movement, pool, qoperator, quant, recurrent, reduce, repeat, resize, signal,
};
use crate::compile::onnx::Node;

/// Lowers one node of the row's op type.
pub(super) type Lowering = fn(&mut Lowerer, &Node) -> Result<(), Reason>;

/// How many inputs an op takes.
#[derive(Clone, Copy, Debug)]
pub(super) enum Inputs {
    /// Any number (variadic, or not checked here).
    Any,
    /// At most this many, in every opset.
    Fixed(usize),
    /// At most `count` from opset `first` on: `(first, count)` pairs, ascending.
    ByOpset(&'static [(i64, usize)]),
}

impl Inputs {
    /// The most inputs a node may have in `opset`.
    pub(super) fn max(self, opset: i64) -> usize {
        match self {
            Inputs::Any => usize::MAX,
            Inputs::Fixed(n) => n,
            Inputs::ByOpset(steps) => steps
                .iter()
                .take_while(|(first, _)| *first <= opset)
                .last()
                .map_or(usize::MAX, |&(_, n)| n),
        }
    }
}

/// One row of [`ONNX_OPS`].
pub(super) struct OnnxOp {
    /// The ONNX op type.
    pub name: &'static str,
    /// Its lowering.
    pub lower: Lowering,
    /// Its inputs by opset.
    pub inputs: Inputs,
}

const fn op(name: &'static str, lower: Lowering, inputs: Inputs) -> OnnxOp {
    OnnxOp {
        name,
        lower,
        inputs,
    }
}

/// Every supported op type, sorted by name.
pub(super) const ONNX_OPS: &[OnnxOp] = &[
    op("Abs", elementwise::activation, Inputs::Any),
    op("Add", elementwise::binary, Inputs::Fixed(2)),
    op("And", logic::compare, Inputs::Fixed(2)),
    op("ArgMax", reduce::arg_extreme, Inputs::Any),
    op("ArgMin", reduce::arg_extreme, Inputs::Any),
    op("AveragePool", pool::pool, Inputs::Fixed(1)),
    op(
        "BatchNormalization",
        elementwise::batch_norm,
        Inputs::Fixed(5),
    ),
    op("BitShift", elementwise::binary, Inputs::Fixed(2)),
    op("BlackmanWindow", signal::window, Inputs::Fixed(1)),
    op("Cast", constant::cast, Inputs::Fixed(1)),
    op("CastLike", constant::cast, Inputs::Fixed(2)),
    op("Ceil", elementwise::activation, Inputs::Any),
    op("Celu", elementwise::activation, Inputs::Any),
    op("CenterCropPad", movement::center_crop_pad, Inputs::Fixed(2)),
    op(
        "Clip",
        elementwise::activation,
        Inputs::ByOpset(&[(1, 1), (11, 3)]),
    ),
    op("Concat", movement::concat, Inputs::Any),
    op("Constant", constant::constant, Inputs::Fixed(0)),
    op(
        "ConstantOfShape",
        constant::constant_of_shape,
        Inputs::Fixed(1),
    ),
    op("Conv", conv::conv, Inputs::Fixed(3)),
    op("ConvInteger", integer::conv_integer, Inputs::Fixed(4)),
    op("ConvTranspose", conv::conv_transpose, Inputs::Fixed(3)),
    op("Cos", elementwise::activation, Inputs::Any),
    op("CumSum", indexing::cum_sum, Inputs::Fixed(2)),
    op("DFT", signal::dft, Inputs::ByOpset(&[(17, 2), (20, 3)])),
    op("DepthToSpace", compose::depth_space, Inputs::Any),
    op("DequantizeLinear", quant::dequantize, Inputs::Fixed(3)),
    op("Det", reduce::det, Inputs::Fixed(1)),
    op("Div", elementwise::binary, Inputs::Fixed(2)),
    op(
        "Dropout",
        movement::dropout,
        Inputs::ByOpset(&[(1, 1), (12, 3)]),
    ),
    op(
        "DynamicQuantizeLinear",
        integer::dynamic_quantize,
        Inputs::Fixed(1),
    ),
    op("Einsum", einsum::einsum, Inputs::Any),
    op("Elu", elementwise::activation, Inputs::Any),
    op("Equal", logic::compare, Inputs::Fixed(2)),
    op("Erf", elementwise::activation, Inputs::Any),
    op("Exp", elementwise::activation, Inputs::Any),
    op("Expand", indexing::expand, Inputs::Fixed(2)),
    op("Flatten", movement::flatten, Inputs::Fixed(1)),
    op("Floor", elementwise::activation, Inputs::Any),
    op("GRU", recurrent::recurrent, Inputs::Fixed(6)),
    op("Gather", movement::gather, Inputs::Fixed(2)),
    op(
        "GatherElements",
        indexing::gather_elements,
        Inputs::Fixed(2),
    ),
    op("GatherND", indexing::gather_nd, Inputs::Fixed(2)),
    op("Gelu", elementwise::activation, Inputs::Any),
    op("Gemm", matmul::gemm, Inputs::Fixed(3)),
    op("GlobalAveragePool", pool::global_pool, Inputs::Fixed(1)),
    op("GlobalMaxPool", pool::global_pool, Inputs::Fixed(1)),
    op("Greater", logic::compare, Inputs::Fixed(2)),
    op("GreaterOrEqual", logic::compare, Inputs::Fixed(2)),
    op("GroupNormalization", compose::group_norm, Inputs::Fixed(3)),
    op("HammingWindow", signal::window, Inputs::Fixed(1)),
    op("HannWindow", signal::window, Inputs::Fixed(1)),
    op("HardSigmoid", elementwise::activation, Inputs::Fixed(1)),
    op("HardSwish", elementwise::activation, Inputs::Fixed(1)),
    op("Hardmax", elementwise::softmax, Inputs::Any),
    op("Identity", movement::identity, Inputs::Fixed(1)),
    op("If", control::if_node, Inputs::Fixed(1)),
    op(
        "InstanceNormalization",
        compose::instance_norm,
        Inputs::Fixed(3),
    ),
    op("IsInf", logic::classify, Inputs::Any),
    op("IsNaN", logic::classify, Inputs::Any),
    op("LSTM", recurrent::recurrent, Inputs::Fixed(8)),
    op("LayerNormalization", compose::layer_norm, Inputs::Fixed(3)),
    op("LeakyRelu", elementwise::activation, Inputs::Fixed(1)),
    op("Less", logic::compare, Inputs::Fixed(2)),
    op("LessOrEqual", logic::compare, Inputs::Fixed(2)),
    op("Log", elementwise::activation, Inputs::Any),
    op("LogSoftmax", elementwise::softmax, Inputs::Any),
    op("Loop", repeat::loop_node, Inputs::Any),
    op("LpNormalization", compose::lp_norm, Inputs::Any),
    op("LpPool", pool::lp_pool, Inputs::Fixed(1)),
    op("MatMul", matmul::matmul, Inputs::Fixed(2)),
    op("MatMulInteger", integer::matmul_integer, Inputs::Fixed(4)),
    op("Max", elementwise::variadic, Inputs::Any),
    op("MaxPool", pool::pool, Inputs::Fixed(1)),
    op("Mean", elementwise::variadic, Inputs::Any),
    op(
        "MelWeightMatrix",
        signal::mel_weight_matrix,
        Inputs::Fixed(5),
    ),
    op("Min", elementwise::variadic, Inputs::Any),
    op("Mish", elementwise::activation, Inputs::Any),
    op("Mod", elementwise::binary, Inputs::Fixed(2)),
    op("Mul", elementwise::binary, Inputs::Fixed(2)),
    op("Neg", elementwise::activation, Inputs::Any),
    op("NonZero", indexing::non_zero, Inputs::Fixed(1)),
    op("Not", logic::not, Inputs::Any),
    op("OneHot", logic::one_hot, Inputs::Fixed(3)),
    op("Or", logic::compare, Inputs::Fixed(2)),
    op("PRelu", elementwise::binary, Inputs::Fixed(2)),
    op(
        "Pad",
        movement::pad,
        Inputs::ByOpset(&[(1, 1), (11, 3), (18, 4)]),
    ),
    op("Pow", elementwise::binary, Inputs::Fixed(2)),
    op("QLinearConv", qoperator::lower, Inputs::Any),
    op("QLinearMatMul", qoperator::lower, Inputs::Any),
    op("QuantizeLinear", quant::quantize, Inputs::Fixed(3)),
    op("RNN", recurrent::recurrent, Inputs::Fixed(6)),
    op("Range", constant::range, Inputs::Fixed(3)),
    op("Reciprocal", elementwise::activation, Inputs::Any),
    op(
        "ReduceL1",
        movement::reduce,
        Inputs::ByOpset(&[(1, 1), (18, 2)]),
    ),
    op(
        "ReduceL2",
        movement::reduce,
        Inputs::ByOpset(&[(1, 1), (18, 2)]),
    ),
    op(
        "ReduceLogSum",
        movement::reduce,
        Inputs::ByOpset(&[(1, 1), (18, 2)]),
    ),
    op(
        "ReduceLogSumExp",
        movement::reduce,
        Inputs::ByOpset(&[(1, 1), (18, 2)]),
    ),
    op(
        "ReduceMax",
        movement::reduce,
        Inputs::ByOpset(&[(1, 1), (18, 2)]),
    ),
    op(
        "ReduceMean",
        movement::reduce,
        Inputs::ByOpset(&[(1, 1), (18, 2)]),
    ),
    op(
        "ReduceMin",
        movement::reduce,
        Inputs::ByOpset(&[(1, 1), (18, 2)]),
    ),
    op(
        "ReduceProd",
        movement::reduce,
        Inputs::ByOpset(&[(1, 1), (18, 2)]),
    ),
    op(
        "ReduceSum",
        movement::reduce,
        Inputs::ByOpset(&[(1, 1), (13, 2)]),
    ),
    op(
        "ReduceSumSquare",
        movement::reduce,
        Inputs::ByOpset(&[(1, 1), (18, 2)]),
    ),
    op("Relu", elementwise::activation, Inputs::Fixed(1)),
    op("Reshape", movement::reshape, Inputs::Fixed(2)),
    op(
        "Resize",
        resize::resize,
        Inputs::ByOpset(&[(1, 2), (11, 4)]),
    ),
    op("Round", elementwise::activation, Inputs::Any),
    op("STFT", signal::stft, Inputs::Fixed(4)),
    op("Scan", repeat::scan_node, Inputs::Any),
    op("Scatter", indexing::scatter_elements, Inputs::Fixed(3)),
    op(
        "ScatterElements",
        indexing::scatter_elements,
        Inputs::Fixed(3),
    ),
    op("ScatterND", indexing::scatter_nd, Inputs::Fixed(3)),
    op("Selu", elementwise::activation, Inputs::Any),
    op("Shape", constant::shape, Inputs::Fixed(1)),
    op("Sigmoid", elementwise::activation, Inputs::Fixed(1)),
    op("Sign", elementwise::activation, Inputs::Any),
    op("Sin", elementwise::activation, Inputs::Any),
    op("Size", constant::size, Inputs::Fixed(1)),
    op(
        "Slice",
        movement::slice,
        Inputs::ByOpset(&[(1, 1), (10, 5)]),
    ),
    op("Softmax", elementwise::softmax, Inputs::Fixed(1)),
    op("Softplus", elementwise::activation, Inputs::Any),
    op("Softsign", elementwise::activation, Inputs::Any),
    op("SpaceToDepth", compose::depth_space, Inputs::Any),
    op(
        "Split",
        movement::split,
        Inputs::ByOpset(&[(1, 1), (13, 2)]),
    ),
    op("Sqrt", elementwise::activation, Inputs::Any),
    op(
        "Squeeze",
        movement::squeeze,
        Inputs::ByOpset(&[(1, 1), (13, 2)]),
    ),
    op("Sub", elementwise::binary, Inputs::Fixed(2)),
    op("Sum", elementwise::variadic, Inputs::Any),
    op("Tanh", elementwise::activation, Inputs::Fixed(1)),
    op("ThresholdedRelu", elementwise::activation, Inputs::Any),
    op("Tile", indexing::tile, Inputs::Fixed(2)),
    op("TopK", indexing::top_k, Inputs::Fixed(2)),
    op("Transpose", movement::transpose, Inputs::Fixed(1)),
    op("Trilu", movement::trilu, Inputs::Fixed(2)),
    op(
        "Unsqueeze",
        movement::unsqueeze,
        Inputs::ByOpset(&[(1, 1), (13, 2)]),
    ),
    op(
        "Upsample",
        resize::resize,
        Inputs::ByOpset(&[(1, 1), (9, 2)]),
    ),
    op("Where", logic::select, Inputs::Fixed(3)),
    op("Xor", logic::compare, Inputs::Fixed(2)),
];

/// The row of `op_type`, if lowering understands it.
pub(super) fn find(op_type: &str) -> Option<&'static OnnxOp> {
    ONNX_OPS
        .binary_search_by(|row| row.name.cmp(op_type))
        .ok()
        .and_then(|i| ONNX_OPS.get(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_without_duplicates_and_every_row_is_found() {
        for pair in ONNX_OPS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} / {}",
                pair[0].name,
                pair[1].name
            );
        }
        for row in ONNX_OPS {
            assert!(find(row.name).is_some_and(|r| r.name == row.name));
        }
        assert!(find("NoSuchOp").is_none());
    }

    #[test]
    fn inputs_follow_the_opset() {
        let pad = find("Pad").unwrap().inputs;
        assert_eq!(
            [pad.max(2), pad.max(11), pad.max(17), pad.max(18)],
            [1, 3, 3, 4]
        );
        assert_eq!(find("Add").unwrap().inputs.max(7), 2);
        assert_eq!(find("Concat").unwrap().inputs.max(13), usize::MAX);
    }
}
