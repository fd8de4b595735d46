//! Lowering of the compute ops: convolutions, matrix products, elementwise arithmetic,
//! activations, softmax, pooling and batch normalisation.

use super::attrs::Attrs;
use super::lowerer::{normalize_axis, Lowerer, Reason};
use super::window::{
    conv_geometry, hal_shape, kernel_from, resolve_axes, resolve_window, spatial_dims, window_of,
    window_out,
};
use crate::compile::ir::TensorId;
use crate::compile::onnx::build::attr_ints;
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;
use ferrite_hal::geometry::{broadcast, conv_transpose_out, MatMulGeometry};
use ferrite_hal::op::{
    ArgIndex, BinaryOp, CompareOp, Conv, ConvTranspose, Detect, Gemm, LogicalOp, Pool, ReduceOp,
};
use ferrite_hal::{Activation, DType, Op};

pub(super) fn conv(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let w = lw.input(node, 1)?;
    let b = lw.optional_input(node, 2);
    lw.require_f32(&[x, w])?;
    if lw.shape(x).len() == 5 {
        return super::conv3d::conv_3d(lw, node, x, w, b);
    }
    let (window, group, out_shape) = conv_geometry(lw, node, x, w, "Conv")?;
    if let Some(b) = b {
        lw.require_f32(&[b])?;
        if lw.shape(b) != [out_shape[1]] {
            return Err("bias shape differs from the output channels".into());
        }
    }
    let y = lw.output(node, 0, DType::F32, out_shape)?;
    let op = Op::Conv(Conv {
        window,
        group,
        activation: Activation::None,
    });
    lw.emit(node, op, vec![Some(x), Some(w), b], vec![y])?;
    Ok(())
}

pub(super) fn conv_transpose(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let w = lw.input(node, 1)?;
    let b = lw.optional_input(node, 2);
    lw.require_f32(&[x, w])?;
    let xs = lw.shape(x);
    let ws = lw.shape(w);
    if xs.len() == 5 {
        return super::conv3d::conv_transpose_3d(lw, node, x, w, b);
    }
    let spatial = spatial_dims(&xs, "ConvTranspose")?;
    let n = spatial.len();
    if ws.len() != xs.len() || ws[0] != xs[1] {
        return Err("weight shape does not match the input channels".into());
    }
    let group = node.int("group", 1)?;
    if group < 1 || !xs[1].is_multiple_of(group as usize) {
        return Err(format!("group {group} does not divide the channels"));
    }
    let kernel = kernel_from(node, &ws)?;
    if kernel != ws[2..] {
        return Err("kernel_shape differs from the weight's shape".into());
    }
    let oc = ws[1] * group as usize;
    let mut output_padding = super::conv3d::output_padding(node, n)?;
    let (strides, dilations, mut pads) = resolve_axes(node, &spatial, &kernel, true)?;
    super::conv3d::requested_size(
        node,
        &spatial,
        &kernel,
        &strides,
        &dilations,
        &mut pads,
        &mut output_padding,
    )?;
    let window = window_of(&kernel, &strides, &dilations, &pads);
    let op_pad = if n == 1 {
        [0, output_padding[0]]
    } else {
        [output_padding[0], output_padding[1]]
    };
    let dims: Vec<usize> = if n == 1 {
        vec![1, spatial[0]]
    } else {
        spatial.clone()
    };
    let mut out_spatial = Vec::new();
    for a in 0..2 {
        out_spatial.push(
            conv_transpose_out(
                dims[a],
                window.kernel[a],
                window.stride[a],
                window.dilation[a],
                window.pads[a],
                window.pads[a + 2],
                op_pad[a],
            )
            .ok_or("ConvTranspose padding exceeds its output")?,
        );
    }
    if n == 1 {
        out_spatial.remove(0);
    }
    if let Some(b) = b {
        lw.require_f32(&[b])?;
        if lw.shape(b) != [oc] {
            return Err("bias shape differs from the output channels".into());
        }
    }
    let mut out_shape = vec![xs[0], oc];
    out_shape.extend(out_spatial);
    let y = lw.output(node, 0, DType::F32, out_shape)?;
    let op = Op::ConvTranspose(ConvTranspose {
        window,
        output_padding: op_pad,
        group: group as usize,
        activation: Activation::None,
    });
    lw.emit(node, op, vec![Some(x), Some(w), b], vec![y])?;
    Ok(())
}

/// A transposed copy of a matrix: folded for constants, a Transpose op otherwise.
fn transposed(lw: &mut Lowerer, node: &Node, t: usize, what: &str) -> Result<usize, Reason> {
    let s = lw.shape(t);
    let out = lw.temp(node, what, lw.dtype(t), vec![s[1], s[0]]);
    let mut perm = [0usize; ferrite_hal::MAX_RANK];
    perm[0] = 1;
    lw.emit(node, Op::Transpose { perm }, vec![Some(t)], vec![out])?;
    Ok(out)
}

pub(super) fn gemm(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let mut a = lw.input(node, 0)?;
    let mut b = lw.input(node, 1)?;
    let c = lw.optional_input(node, 2);
    lw.require_f32(&[a, b])?;
    if lw.shape(a).len() != 2 || lw.shape(b).len() != 2 {
        return Err("Gemm operands must be matrices".into());
    }
    if node.int("transA", 0)? != 0 {
        a = transposed(lw, node, a, "A_t")?;
    }
    if node.int("transB", 0)? != 0 {
        b = transposed(lw, node, b, "B_t")?;
    }
    let (sa, sb) = (lw.shape(a), lw.shape(b));
    if sa[1] != sb[0] {
        return Err(format!("Gemm inner dimensions differ ({sa:?} x {sb:?})"));
    }
    let out = vec![sa[0], sb[1]];
    if let Some(c) = c {
        lw.require_f32(&[c])?;
        let cs = hal_shape(&lw.shape(c))?;
        if broadcast(&cs, &hal_shape(&out)?) != Some(hal_shape(&out)?) || cs.rank() > 2 {
            return Err("Gemm C does not broadcast to the output".into());
        }
    }
    let y = lw.output(node, 0, DType::F32, out)?;
    let op = Op::Gemm(Gemm {
        alpha: node.float("alpha", 1.0)?,
        beta: node.float("beta", 1.0)?,
        activation: Activation::None,
    });
    lw.emit(node, op, vec![Some(a), Some(b), c], vec![y])?;
    Ok(())
}

pub(super) fn matmul(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let a = lw.input(node, 0)?;
    let b = lw.input(node, 1)?;
    lw.require_f32(&[a, b])?;
    let g = MatMulGeometry::new(&hal_shape(&lw.shape(a))?, &hal_shape(&lw.shape(b))?)
        .ok_or("MatMul shapes are incompatible")?;
    let y = lw.output(node, 0, DType::F32, g.output.dims().to_vec())?;
    lw.emit(
        node,
        Op::MatMul {
            activation: Activation::None,
        },
        vec![Some(a), Some(b)],
        vec![y],
    )?;
    Ok(())
}

/// Opset ≤ 6 binary ops broadcast only with `broadcast=1`, B's shape matching A's from `axis`
/// (default: A's trailing dims): B viewed with trailing 1s is the numpy equivalent.
pub(super) fn legacy_operand(
    lw: &mut Lowerer,
    node: &Node,
    b: TensorId,
) -> Result<TensorId, Reason> {
    if lw.opset() >= 7 {
        return Ok(b);
    }
    let a = lw.input(node, 0)?;
    let (sa, sb) = (lw.shape(a), lw.shape(b));
    if node.op_type == "PRelu" {
        // Opset 6 PRelu: one slope, or one per channel (axis 1).
        if sb.len() == 1 && sb[0] > 1 && sa.len() >= 2 && sb[0] == sa[1] {
            let mut shape = sb;
            shape.resize(sa.len() - 1, 1);
            return Ok(lw.temp_alias(node, "channel_slope", b, shape));
        }
        return Ok(b);
    }
    if node.int("broadcast", 0)? == 0 {
        if sa != sb {
            return Err(format!("shapes {sa:?} and {sb:?} differ and broadcast=0"));
        }
        return Ok(b);
    }
    let Some(axis) = node.attr("axis").map(|_| node.int("axis", 0)) else {
        return Ok(b);
    };
    let axis = normalize_axis(axis?, sa.len())?;
    if axis + sb.len() > sa.len() {
        return Err(format!("B {sb:?} does not fit A {sa:?} from axis {axis}"));
    }
    let mut shape = sb;
    shape.resize(sa.len() - axis, 1);
    Ok(lw.temp_alias(node, "legacy_broadcast", b, shape))
}

pub(super) fn binary(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let mut a = lw.input(node, 0)?;
    let b = lw.input(node, 1)?;
    let mut b = legacy_operand(lw, node, b)?;
    let op = match node.op_type.as_str() {
        "Add" => BinaryOp::Add,
        "Sub" => BinaryOp::Sub,
        "Mul" => BinaryOp::Mul,
        "Div" => BinaryOp::Div,
        "Pow" => BinaryOp::Pow,
        "PRelu" => BinaryOp::PRelu,
        "BitShift" => match node.string("direction", "")?.as_str() {
            "LEFT" => BinaryOp::ShiftLeft,
            "RIGHT" => BinaryOp::ShiftRight,
            _ => return Err("direction must be LEFT or RIGHT".into()),
        },
        _ if node.int("fmod", 0)? == 1 => BinaryOp::Fmod,
        _ if lw.dtype(a) == DType::F32 => return Err("Mod of floats needs fmod=1".into()),
        _ => BinaryOp::Mod,
    };
    let (ta, tb) = (lw.dtype(a), lw.dtype(b));
    // Pow's exponent may have another type than its base (the result has the base's).
    let mut result_type = None;
    if op == BinaryOp::Pow && ta != tb {
        if ta == DType::F32 || tb == DType::F32 {
            // Both in f32; an integer base gets its type back (truncating) at the end.
            a = to_type(lw, node, "base", a, DType::F32)?;
            b = to_type(lw, node, "exponent", b, DType::F32)?;
            result_type = (ta != DType::F32).then_some(ta);
        } else {
            b = to_type(lw, node, "exponent", b, ta)?;
        }
    }
    let dtype = lw.dtype(a);
    if dtype != lw.dtype(b) {
        return Err("operands have different types".into());
    }
    if dtype != DType::F32 && !dtype.is_integer() {
        return Err(format!("type {dtype} is not supported for arithmetic"));
    }
    if !op.takes_floats() && dtype == DType::F32 {
        return Err("BitShift takes integers".into());
    }
    let out = broadcast(&hal_shape(&lw.shape(a))?, &hal_shape(&lw.shape(b))?)
        .ok_or("operand shapes do not broadcast")?;
    if op == BinaryOp::PRelu && out.dims() != lw.shape(a) {
        return Err("the slope must broadcast to the input's shape".into());
    }
    let step = Op::Binary {
        op,
        activation: Activation::None,
    };
    let shape = out.dims().to_vec();
    match result_type {
        None => {
            let y = lw.output(node, 0, dtype, shape)?;
            lw.emit(node, step, vec![Some(a), Some(b)], vec![y])
        }
        Some(t) => {
            let power = lw.temp(node, "power", DType::F32, shape.clone());
            lw.emit(node, step, vec![Some(a), Some(b)], vec![power])?;
            let y = lw.output(node, 0, t, shape)?;
            lw.emit(node, Op::Convert, vec![Some(power)], vec![y])
        }
    }
}

/// `t` converted to `dtype` (folded when constant; as is when already of that type).
fn to_type(
    lw: &mut Lowerer,
    node: &Node,
    what: &str,
    t: TensorId,
    dtype: DType,
) -> Result<TensorId, Reason> {
    if lw.dtype(t) == dtype {
        return Ok(t);
    }
    if let Some(v) = lw.value(t) {
        let v = v.cast(dtype);
        return Ok(lw.constant(node, what, v));
    }
    let y = lw.temp(node, what, dtype, lw.shape(t));
    lw.emit(node, Op::Convert, vec![Some(t)], vec![y])?;
    Ok(y)
}

/// Max, Min, Sum and Mean of any number of inputs (numpy broadcasting): a chain of binary
/// steps, Mean scaled by `1/n` at the end.
pub(super) fn variadic(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let inputs: Vec<TensorId> = (0..node.inputs.len())
        .map(|i| lw.input(node, i))
        .collect::<Result<_, _>>()?;
    let Some(&first) = inputs.first() else {
        return Err("at least one input is required".into());
    };
    let dtype = lw.dtype(first);
    if inputs.iter().any(|&t| lw.dtype(t) != dtype) {
        return Err("operands have different types".into());
    }
    if dtype != DType::F32 && !(dtype.is_integer() && node.op_type != "Mean") {
        return Err(format!(
            "type {dtype} is not supported for {}",
            node.op_type
        ));
    }
    let op = match node.op_type.as_str() {
        "Max" => BinaryOp::Max,
        "Min" => BinaryOp::Min,
        _ => BinaryOp::Add,
    };
    let mean = node.op_type == "Mean";
    let mut acc = first;
    let mut shape = hal_shape(&lw.shape(first))?;
    for (k, &next) in inputs.iter().enumerate().skip(1) {
        shape = broadcast(&shape, &hal_shape(&lw.shape(next))?)
            .ok_or("operand shapes do not broadcast")?;
        let last = k + 1 == inputs.len() && !mean;
        let y = if last {
            lw.output(node, 0, dtype, shape.dims().to_vec())?
        } else {
            lw.temp(node, &format!("partial{k}"), dtype, shape.dims().to_vec())
        };
        let step = Op::Binary {
            op,
            activation: Activation::None,
        };
        lw.emit(node, step, vec![Some(acc), Some(next)], vec![y])?;
        acc = y;
    }
    if mean && inputs.len() > 1 {
        let scale = 1.0 / inputs.len() as f32;
        let k = lw.constant(
            node,
            "inverse_count",
            HostTensor::float(vec![], vec![scale]),
        );
        let y = lw.output(node, 0, DType::F32, shape.dims().to_vec())?;
        let step = Op::Binary {
            op: BinaryOp::Mul,
            activation: Activation::None,
        };
        lw.emit(node, step, vec![Some(acc), Some(k)], vec![y])?;
    } else if inputs.len() == 1 {
        lw.alias_output(node, 0, first, lw.shape(first))?;
    }
    Ok(())
}

pub(super) fn activation(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    if node.op_type == "Clip" && clip_needs_binary(lw, node, x) {
        return clip_as_binary(lw, node, x);
    }
    if matches!(node.op_type.as_str(), "Neg" | "Abs") && lw.dtype(x).is_integer() {
        return integer_neg_abs(lw, node, x);
    }
    lw.require_f32(&[x])?;
    let act = match node.op_type.as_str() {
        "Relu" => Activation::Relu,
        "LeakyRelu" => Activation::LeakyRelu {
            alpha: node.float("alpha", 0.01)?,
        },
        "Sigmoid" => Activation::Sigmoid,
        "Tanh" => Activation::Tanh,
        "HardSigmoid" => Activation::HardSigmoid {
            alpha: node.float("alpha", 0.2)?,
            beta: node.float("beta", 0.5)?,
        },
        "HardSwish" => Activation::HardSwish,
        "Exp" => Activation::Exp,
        "Log" => Activation::Log,
        "Sqrt" => Activation::Sqrt,
        "Reciprocal" => Activation::Reciprocal,
        "Neg" => Activation::Neg,
        "Abs" => Activation::Abs,
        "Sign" => Activation::Sign,
        "Floor" => Activation::Floor,
        "Ceil" => Activation::Ceil,
        "Round" => Activation::Round,
        "Sin" => Activation::Sin,
        "Cos" => Activation::Cos,
        "Erf" => Activation::Erf,
        "Gelu" => match node.string("approximate", "none")?.as_str() {
            "none" => Activation::Gelu { tanh: false },
            "tanh" => Activation::Gelu { tanh: true },
            other => return Err(format!("approximate '{other}' is not 'none' or 'tanh'")),
        },
        "Elu" => Activation::Elu {
            alpha: node.float("alpha", 1.0)?,
        },
        "Selu" => Activation::Selu {
            alpha: node.float("alpha", 1.673_263_2)?,
            gamma: node.float("gamma", 1.050_701)?,
        },
        "Celu" => {
            let alpha = node.float("alpha", 1.0)?;
            if alpha == 0.0 || !alpha.is_finite() {
                return Err(format!("alpha {alpha} must be finite and non-zero"));
            }
            Activation::Celu { alpha }
        }
        "Softplus" => Activation::Softplus,
        "Softsign" => Activation::Softsign,
        "Mish" => Activation::Mish,
        "ThresholdedRelu" => Activation::ThresholdedRelu {
            alpha: node.float("alpha", 1.0)?,
        },
        _ => {
            let (min, max) = if lw.opset() < 11 {
                (
                    node.float("min", f32::NEG_INFINITY)?,
                    node.float("max", f32::INFINITY)?,
                )
            } else {
                (
                    lw.const_scalar(node, 1, "Clip min")?
                        .unwrap_or(f32::NEG_INFINITY),
                    lw.const_scalar(node, 2, "Clip max")?
                        .unwrap_or(f32::INFINITY),
                )
            };
            Activation::Clip { min, max }
        }
    };
    let y = lw.output(node, 0, DType::F32, lw.shape(x))?;
    lw.emit(node, Op::Unary(act), vec![Some(x)], vec![y])?;
    Ok(())
}

/// Neg and Abs of integers (shape arithmetic in function bodies, LayerNormalization's
/// expansion): `0 − x`, and `Max(x, 0 − x)` (unsigned: `x`), wrapping as two's complement does (`−(−128)` is
/// −128 in int8, as in numpy and onnxruntime).
fn integer_neg_abs(lw: &mut Lowerer, node: &Node, x: TensorId) -> Result<(), Reason> {
    let (dtype, shape) = (lw.dtype(x), lw.shape(x));
    let unsigned = matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64);
    if unsigned && node.op_type == "Abs" {
        return lw.alias_output(node, 0, x, shape);
    }
    let zero = lw.constant(node, "zero", HostTensor::int(dtype, vec![], vec![0]));
    let plain = |op| Op::Binary {
        op,
        activation: Activation::None,
    };
    let negated = if node.op_type == "Neg" {
        lw.output(node, 0, dtype, shape.clone())?
    } else {
        lw.temp(node, "negated", dtype, shape.clone())
    };
    let inputs = vec![Some(zero), Some(x)];
    lw.emit(node, plain(BinaryOp::Sub), inputs, vec![negated])?;
    if node.op_type == "Abs" {
        let y = lw.output(node, 0, dtype, shape)?;
        let inputs = vec![Some(x), Some(negated)];
        lw.emit(node, plain(BinaryOp::Max), inputs, vec![y])?;
    }
    Ok(())
}

/// Whether a Clip (opset 11 on: bounds as inputs) must run as Max and Min steps rather than as
/// the fusable f32 activation: its input is an integer, or a bound is computed at run time.
fn clip_needs_binary(lw: &Lowerer, node: &Node, x: TensorId) -> bool {
    if lw.opset() < 11 {
        return false;
    }
    let runtime_bound = [1, 2]
        .into_iter()
        .filter_map(|i| lw.optional_input(node, i))
        .any(|b| lw.value(b).is_none());
    lw.dtype(x) != DType::F32 || runtime_bound
}

/// Clip as `Min(Max(x, min), max)` with each present bound a scalar operand (broadcast): the
/// form for integer inputs and for bounds computed at run time (a log-mel floor at
/// `max(x) − 80 dB`). A min above the max gives the max everywhere, as ONNX defines.
fn clip_as_binary(lw: &mut Lowerer, node: &Node, x: TensorId) -> Result<(), Reason> {
    let dtype = lw.dtype(x);
    if dtype != DType::F32 && !dtype.is_integer() {
        return Err(format!("type {dtype} is not supported for Clip"));
    }
    let shape = lw.shape(x);
    let bounds: Vec<(BinaryOp, TensorId, &str)> =
        [(1, BinaryOp::Max, "min"), (2, BinaryOp::Min, "max")]
            .into_iter()
            .filter_map(|(i, op, what)| Some((op, lw.optional_input(node, i)?, what)))
            .collect();
    let mut acc = x;
    for (k, &(op, bound, what)) in bounds.iter().enumerate() {
        if lw.dtype(bound) != dtype {
            return Err(format!(
                "Clip {what} is {}, the input {dtype}",
                lw.dtype(bound)
            ));
        }
        if lw.shape(bound).iter().product::<usize>() != 1 {
            return Err(format!("Clip {what} must be a scalar"));
        }
        let scalar = if lw.shape(bound).is_empty() {
            bound
        } else {
            lw.temp_alias(node, what, bound, vec![])
        };
        let y = if k + 1 == bounds.len() {
            lw.output(node, 0, dtype, shape.clone())?
        } else {
            lw.temp(node, "at_least_min", dtype, shape.clone())
        };
        let step = Op::Binary {
            op,
            activation: Activation::None,
        };
        lw.emit(node, step, vec![Some(acc), Some(scalar)], vec![y])?;
        acc = y;
    }
    if bounds.is_empty() {
        lw.alias_output(node, 0, x, shape)?;
    }
    Ok(())
}

pub(super) fn softmax(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let shape = lw.shape(x);
    let rank = shape.len().max(1);
    let op = |axis| match node.op_type.as_str() {
        "LogSoftmax" => Op::LogSoftmax { axis },
        "Hardmax" => Op::Hardmax { axis },
        _ => Op::Softmax { axis },
    };
    if lw.opset() >= 13 {
        let axis = normalize_axis(node.int("axis", -1)?, rank)?;
        let y = lw.output(node, 0, DType::F32, shape)?;
        lw.emit(node, op(axis), vec![Some(x)], vec![y])?;
        return Ok(());
    }
    // Before opset 13 the input is coerced to 2-D at `axis`.
    let axis = normalize_axis(node.int("axis", 1)?, rank)?;
    if axis == rank - 1 {
        let y = lw.output(node, 0, DType::F32, shape)?;
        lw.emit(node, op(axis), vec![Some(x)], vec![y])?;
        return Ok(());
    }
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis..].iter().product();
    let x2 = lw.temp_alias(node, "2d", x, vec![outer, inner]);
    let y2 = lw.temp(node, "softmax2d", DType::F32, vec![outer, inner]);
    lw.emit(node, op(1), vec![Some(x2)], vec![y2])?;
    lw.alias_output(node, 0, y2, shape)
}

pub(super) fn arg_extreme(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let shape = lw.shape(x);
    let axis = normalize_axis(node.int("axis", 0)?, shape.len())?;
    let index = ArgIndex {
        axis,
        last: node.int("select_last_index", 0)? != 0,
    };
    let mut out = shape.clone();
    if node.int("keepdims", 1)? != 0 {
        out[axis] = 1;
    } else {
        out.remove(axis);
    }
    if shape[axis] == 0 && out.iter().product::<usize>() > 0 {
        return Err(format!("axis {axis} is empty: there is no index to report"));
    }
    let y = lw.output(node, 0, DType::I64, out)?;
    let op = if node.op_type == "ArgMax" {
        Op::ArgMax(index)
    } else {
        Op::ArgMin(index)
    };
    lw.emit(node, op, vec![Some(x)], vec![y])
}

/// A pooling node's input (f32, or 8-bit integers for MaxPool), its shape, spatial dims and
/// `kernel_shape`.
type PoolInput = (TensorId, Vec<usize>, Vec<usize>, Vec<usize>);

fn pool_input(lw: &Lowerer, node: &Node) -> Result<PoolInput, Reason> {
    let x = lw.input(node, 0)?;
    // A maximum commutes with any monotone encoding: MaxPool runs on int8 and uint8 as they are.
    let integer_max = node.op_type == "MaxPool" && matches!(lw.dtype(x), DType::I8 | DType::U8);
    if !integer_max {
        lw.require_f32(&[x])?;
    }
    let xs = lw.shape(x);
    let spatial = spatial_dims(&xs, &node.op_type)?;
    let kernel = node
        .ints("kernel_shape")?
        .ok_or("kernel_shape is required")?
        .into_iter()
        .map(|k| k.max(0) as usize)
        .collect::<Vec<_>>();
    Ok((x, xs, spatial, kernel))
}

/// A 3-D pool (a rank-5 input), max, average or Lp, as two 2-D pools of the same kind: over
/// (H, W) on the view `[N, C·D, H, W]`, then over D with a `(kd, 1)` window on the view
/// `[N, C, D, H'·W']`. A box window is separable: its maximum is the maximum over D of the
/// maxima over (H, W), its sum (of `|x|^p`) the sum of the sums, and the elements an average
/// counts (with or without the padding, in ceil mode too) the product of the counts per axis.
/// `None` when the input is not rank 5.
fn pool_3d(lw: &mut Lowerer, node: &Node) -> Result<Option<()>, Reason> {
    let x = lw.input(node, 0)?;
    let &[n, c, d, h, w] = &lw.shape(x)[..] else {
        return Ok(None);
    };
    let kernel: Vec<usize> = node
        .ints("kernel_shape")?
        .ok_or("kernel_shape is required")?
        .into_iter()
        .map(|k| k.max(0) as usize)
        .collect();
    let (strides, dilations, pads) = resolve_axes(node, &[d, h, w], &kernel, false)?;
    let to_i64 = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let geometry = ["kernel_shape", "strides", "dilations", "pads", "auto_pad"];
    let kept: Vec<_> = node
        .attrs
        .iter()
        .filter(|a| !geometry.contains(&a.name.as_str()))
        .cloned()
        .collect();
    let label = node.label();
    let step = |what: &str,
                input: String,
                output: String,
                k: [usize; 2],
                s: [usize; 2],
                dl: [usize; 2],
                p: [usize; 4]| {
        let mut attrs = kept.clone();
        attrs.push(attr_ints("kernel_shape", &to_i64(&k)));
        attrs.push(attr_ints("strides", &to_i64(&s)));
        attrs.push(attr_ints("dilations", &to_i64(&dl)));
        attrs.push(attr_ints("pads", &to_i64(&p)));
        Node {
            name: format!("{label}/{what}"),
            op_type: node.op_type.clone(),
            domain: node.domain.clone(),
            inputs: vec![input],
            outputs: vec![output],
            attrs,
        }
    };
    let (planes, planes_pooled) = (format!("{label}:planes"), format!("{label}:planes_pooled"));
    let view = lw.temp_alias(node, "planes", x, vec![n, c * d, h, w]);
    lw.names.insert(planes.clone(), view);
    let hw = step(
        "hw",
        planes,
        planes_pooled.clone(),
        [kernel[1], kernel[2]],
        [strides[1], strides[2]],
        [dilations[1], dilations[2]],
        [pads[1], pads[2], pads[4], pads[5]],
    );
    // The Indices output (refused by the 2-D lowering) stays on the first step.
    let hw = Node {
        outputs: [
            hw.outputs.clone(),
            node.outputs.iter().skip(1).cloned().collect(),
        ]
        .concat(),
        ..hw
    };
    lw.lower_op(&hw)?;
    let pooled = lw
        .lookup(&planes_pooled)
        .ok_or("the (H, W) pool was not lowered")?;
    let &[_, _, h2, w2] = &lw.shape(pooled)[..] else {
        return Err("the (H, W) pool has an unexpected shape".into());
    };
    let (columns, depth_pooled) = (format!("{label}:columns"), format!("{label}:depth_pooled"));
    let view = lw.temp_alias(node, "columns", pooled, vec![n, c, d, h2 * w2]);
    lw.names.insert(columns.clone(), view);
    let depth = step(
        "d",
        columns,
        depth_pooled.clone(),
        [kernel[0], 1],
        [strides[0], 1],
        [dilations[0], 1],
        [pads[0], 0, pads[3], 0],
    );
    lw.lower_op(&depth)?;
    let out = lw
        .lookup(&depth_pooled)
        .ok_or("the D pool was not lowered")?;
    let d2 = lw.shape(out)[2];
    lw.alias_output(node, 0, out, vec![n, c, d2, h2, w2])?;
    Ok(Some(()))
}

pub(super) fn pool(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    if let Some(()) = pool_3d(lw, node)? {
        return Ok(());
    }
    let (x, xs, spatial, kernel) = pool_input(lw, node)?;
    let is_max = node.op_type == "MaxPool";
    if is_max && node.outputs.get(1).is_some_and(|o| !o.is_empty()) {
        return Err(
            "the Indices output of MaxPool is not supported (it serves MaxUnpool; export the pool without return_indices)"
                .into(),
        );
    }
    if node.int("storage_order", 0)? != 0 {
        return Err("storage_order=1 is not supported".into());
    }
    let window = resolve_window(node, &spatial, &kernel, false)?;
    let p = Pool {
        window,
        ceil_mode: node.int("ceil_mode", 0)? != 0,
        count_include_pad: node.int("count_include_pad", 0)? != 0,
    };
    for axis in 0..2 {
        let span = p.window.kernel[axis].saturating_mul(p.window.dilation[axis]);
        if p.window.pads[axis] >= span || p.window.pads[axis + 2] >= span {
            return Err("pads must be smaller than the pooling window".into());
        }
    }
    let out_spatial = window_out(&p.window, &spatial, Some(p.ceil_mode))?;
    let mut out_shape = xs[..2].to_vec();
    out_shape.extend(out_spatial);
    let dtype = lw.dtype(x);
    let y = lw.output(node, 0, dtype, out_shape)?;
    // A window that is exactly the (unpadded) input is a global pool: one contiguous pass
    // (float only: the reduction is an f32 kernel).
    let whole = if spatial.len() == 1 {
        [1, spatial[0]]
    } else {
        [spatial[0], spatial[1]]
    };
    let global = p.window.kernel == whole
        && p.window.pads == [0; 4]
        && p.window.dilation == [1, 1]
        && dtype == DType::F32;
    let op = match (global, is_max) {
        (true, false) => Op::GlobalAvgPool,
        (true, true) => Op::Reduce {
            op: ReduceOp::Max,
            axes: (2..xs.len()).fold(0u32, |m, a| m | 1 << a),
        },
        (false, true) => Op::MaxPool(p),
        (false, false) => Op::AvgPool(p),
    };
    lw.emit(node, op, vec![Some(x)], vec![y])?;
    Ok(())
}

/// LpPool: `(Σ_window |x|^p)^(1/p)` as `|x|^p`, an average pool counting the padding (zeros
/// contribute nothing), a multiplication by the window size and a `1/p` power.
pub(super) fn lp_pool(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    if let Some(()) = pool_3d(lw, node)? {
        return Ok(());
    }
    let (x, xs, spatial, kernel) = pool_input(lw, node)?;
    let p = node.int("p", 2)?;
    if p < 1 {
        return Err(format!("p {p} must be at least 1"));
    }
    let window = resolve_window(node, &spatial, &kernel, false)?;
    let pool = Pool {
        window,
        ceil_mode: node.int("ceil_mode", 0)? != 0,
        count_include_pad: true,
    };
    let out_spatial = window_out(&pool.window, &spatial, Some(pool.ceil_mode))?;
    let mut out_shape = xs[..2].to_vec();
    out_shape.extend(out_spatial);
    let plain = |op| Op::Binary {
        op,
        activation: Activation::None,
    };
    let scalar = |lw: &mut Lowerer, what: &str, v: f32| {
        lw.constant(node, what, HostTensor::float(vec![], vec![v]))
    };
    let magnitude = lw.temp(node, "magnitude", DType::F32, xs.clone());
    lw.emit(
        node,
        Op::Unary(Activation::Abs),
        vec![Some(x)],
        vec![magnitude],
    )?;
    let exponent = scalar(lw, "p", p as f32);
    let powered = lw.temp(node, "powered", DType::F32, xs);
    let inputs = vec![Some(magnitude), Some(exponent)];
    lw.emit(node, plain(BinaryOp::Pow), inputs, vec![powered])?;
    let mean = lw.temp(node, "mean", DType::F32, out_shape.clone());
    lw.emit(node, Op::AvgPool(pool), vec![Some(powered)], vec![mean])?;
    let count = scalar(lw, "count", (kernel.iter().product::<usize>()) as f32);
    let sum = lw.temp(node, "sum", DType::F32, out_shape.clone());
    lw.emit(
        node,
        plain(BinaryOp::Mul),
        vec![Some(mean), Some(count)],
        vec![sum],
    )?;
    let root = scalar(lw, "inverse_p", 1.0 / p as f32);
    let y = lw.output(node, 0, DType::F32, out_shape)?;
    lw.emit(
        node,
        plain(BinaryOp::Pow),
        vec![Some(sum), Some(root)],
        vec![y],
    )
}

/// GlobalAveragePool (its own op) and GlobalMaxPool (a max reduction over the spatial axes).
pub(super) fn global_pool(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let xs = lw.shape(x);
    if xs.len() < 3 {
        return Err("input must have spatial dimensions".into());
    }
    let mut out = xs[..2].to_vec();
    out.extend(std::iter::repeat_n(1, xs.len() - 2));
    let op = if node.op_type == "GlobalMaxPool" {
        let axes = (2..xs.len()).fold(0u32, |m, a| m | 1 << a);
        Op::Reduce {
            op: ReduceOp::Max,
            axes,
        }
    } else {
        Op::GlobalAvgPool
    };
    let y = lw.output(node, 0, DType::F32, out)?;
    lw.emit(node, op, vec![Some(x)], vec![y])
}

pub(super) fn batch_norm(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let params: Vec<usize> = (1..5)
        .map(|i| lw.input(node, i))
        .collect::<Result<_, _>>()?;
    lw.require_f32(&[x])?;
    lw.require_f32(&params)?;
    let training = node.int("training_mode", 0)? != 0;
    if training && lw.opset() >= 14 {
        return batch_norm_training(lw, node, x, &params);
    }
    if training || node.outputs.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(
            "running mean/variance outputs (training) are not supported before opset 14".into(),
        );
    }
    if lw.opset() < 9 && node.int("spatial", 1)? != 1 {
        return Err("spatial=0 is not supported".into());
    }
    let xs = lw.shape(x);
    if xs.len() < 2 || params.iter().any(|&p| lw.shape(p) != [xs[1]]) {
        return Err("parameters must have one value per channel".into());
    }
    let y = lw.output(node, 0, DType::F32, xs)?;
    let op = Op::BatchNorm {
        epsilon: node.float("epsilon", 1e-5)?,
        activation: Activation::None,
    };
    let mut inputs = vec![Some(x)];
    inputs.extend(params.into_iter().map(Some));
    lw.emit(node, op, inputs, vec![y])?;
    Ok(())
}

/// BatchNormalization with `training_mode=1` (opset 14 on): normalised by the batch's own
/// mean and (biased) variance over every axis but the channels', with the running statistics
/// `momentum · running + (1 − momentum) · batch` as outputs 1 and 2, as ONNX defines it.
fn batch_norm_training(
    lw: &mut Lowerer,
    node: &Node,
    x: TensorId,
    params: &[TensorId],
) -> Result<(), Reason> {
    let xs = lw.shape(x);
    if xs.len() < 2 || params.iter().any(|&p| lw.shape(p) != [xs[1]]) {
        return Err("parameters must have one value per channel".into());
    }
    let c = xs[1];
    let momentum = node.float("momentum", 0.9)?;
    let axes = (0..xs.len())
        .filter(|&a| a != 1)
        .fold(0u32, |m, a| m | 1 << a);
    let mut kept = vec![1; xs.len()];
    kept[1] = c;
    let plain = |op| Op::Binary {
        op,
        activation: Activation::None,
    };
    let mean = lw.temp(node, "batch_mean", DType::F32, kept.clone());
    let reduce_mean = Op::Reduce {
        op: ReduceOp::Mean,
        axes,
    };
    lw.emit(node, reduce_mean, vec![Some(x)], vec![mean])?;
    let centred = lw.temp(node, "centred", DType::F32, xs.clone());
    lw.emit(
        node,
        plain(BinaryOp::Sub),
        vec![Some(x), Some(mean)],
        vec![centred],
    )?;
    let square = lw.temp(node, "square", DType::F32, xs.clone());
    lw.emit(
        node,
        plain(BinaryOp::Mul),
        vec![Some(centred), Some(centred)],
        vec![square],
    )?;
    let var = lw.temp(node, "batch_var", DType::F32, kept);
    lw.emit(node, reduce_mean, vec![Some(square)], vec![var])?;
    let (mean, var) = (
        lw.temp_alias(node, "mean_c", mean, vec![c]),
        lw.temp_alias(node, "var_c", var, vec![c]),
    );
    let y = lw.output(node, 0, DType::F32, xs)?;
    let op = Op::BatchNorm {
        epsilon: node.float("epsilon", 1e-5)?,
        activation: Activation::None,
    };
    let inputs = vec![
        Some(x),
        Some(params[0]),
        Some(params[1]),
        Some(mean),
        Some(var),
    ];
    lw.emit(node, op, inputs, vec![y])?;
    // running = momentum · running + (1 − momentum) · batch, for outputs 1 and 2 if asked.
    let keep = lw.constant(node, "momentum", HostTensor::float(vec![], vec![momentum]));
    let take = lw.constant(
        node,
        "one_minus_momentum",
        HostTensor::float(vec![], vec![1.0 - momentum]),
    );
    for (i, (running, batch)) in [(params[2], mean), (params[3], var)]
        .into_iter()
        .enumerate()
    {
        if node.outputs.get(i + 1).is_none_or(|o| o.is_empty()) {
            continue;
        }
        let old = lw.temp(node, "kept", DType::F32, vec![c]);
        lw.emit(
            node,
            plain(BinaryOp::Mul),
            vec![Some(running), Some(keep)],
            vec![old],
        )?;
        let new = lw.temp(node, "taken", DType::F32, vec![c]);
        lw.emit(
            node,
            plain(BinaryOp::Mul),
            vec![Some(batch), Some(take)],
            vec![new],
        )?;
        let out = lw.output(node, i + 1, DType::F32, vec![c])?;
        lw.emit(
            node,
            plain(BinaryOp::Add),
            vec![Some(old), Some(new)],
            vec![out],
        )?;
    }
    Ok(())
}

pub(super) fn compare(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let a = lw.input(node, 0)?;
    let b = lw.input(node, 1)?;
    let b = legacy_operand(lw, node, b)?;
    if lw.dtype(a) != lw.dtype(b) {
        return Err("operands have different types".into());
    }
    let op = match node.op_type.as_str() {
        "And" => Some(LogicalOp::And),
        "Or" => Some(LogicalOp::Or),
        "Xor" => Some(LogicalOp::Xor),
        _ => None,
    };
    let op = match op {
        Some(l) => {
            if lw.dtype(a) != DType::Bool {
                return Err(format!("type {} is not supported (bool only)", lw.dtype(a)));
            }
            Op::Logical(l)
        }
        None => Op::Compare(match node.op_type.as_str() {
            "Equal" => CompareOp::Equal,
            "Less" => CompareOp::Less,
            "LessOrEqual" => CompareOp::LessOrEqual,
            "Greater" => CompareOp::Greater,
            _ => CompareOp::GreaterOrEqual,
        }),
    };
    let out = broadcast(&hal_shape(&lw.shape(a))?, &hal_shape(&lw.shape(b))?)
        .ok_or("operand shapes do not broadcast")?;
    let y = lw.output(node, 0, DType::Bool, out.dims().to_vec())?;
    lw.emit(node, op, vec![Some(a), Some(b)], vec![y])
}

pub(super) fn not(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    if lw.dtype(x) != DType::Bool {
        return Err(format!("type {} is not supported (bool only)", lw.dtype(x)));
    }
    let y = lw.output(node, 0, DType::Bool, lw.shape(x))?;
    lw.emit(node, Op::Not, vec![Some(x)], vec![y])
}

pub(super) fn classify(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let detect = if node.op_type == "IsNaN" {
        Detect {
            nan: true,
            positive_infinity: false,
            negative_infinity: false,
        }
    } else {
        Detect {
            nan: false,
            positive_infinity: node.int("detect_positive", 1)? != 0,
            negative_infinity: node.int("detect_negative", 1)? != 0,
        }
    };
    let y = lw.output(node, 0, DType::Bool, lw.shape(x))?;
    lw.emit(node, Op::Classify(detect), vec![Some(x)], vec![y])
}

pub(super) fn select(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let c = lw.input(node, 0)?;
    let x = lw.input(node, 1)?;
    let y = lw.input(node, 2)?;
    if lw.dtype(c) != DType::Bool {
        return Err(format!("the condition is {}, not bool", lw.dtype(c)));
    }
    if lw.dtype(x) != lw.dtype(y) {
        return Err("X and Y have different types".into());
    }
    let xy = broadcast(&hal_shape(&lw.shape(x))?, &hal_shape(&lw.shape(y))?)
        .ok_or("X and Y do not broadcast")?;
    let out =
        broadcast(&hal_shape(&lw.shape(c))?, &xy).ok_or("the condition does not broadcast")?;
    let z = lw.output(node, 0, lw.dtype(x), out.dims().to_vec())?;
    lw.emit(node, Op::Where, vec![Some(c), Some(x), Some(y)], vec![z])
}

/// OneHot: `values[1]` where an index (negative ones count from `depth`) equals the position
/// along the new axis, `values[0]` elsewhere — comparisons with a constant range, an Or and a
/// Where. Out-of-range indices give a row of `values[0]`, as the ONNX reference.
pub(super) fn one_hot(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let mut indices = lw.input(node, 0)?;
    let depth = lw
        .const_scalar(node, 1, "depth")?
        .ok_or("depth is required")?;
    if !(depth >= 1.0 && depth <= (1u32 << 24) as f32) {
        return Err(format!("depth {depth} is not a positive count"));
    }
    let depth = depth as i64;
    let values_id = lw.input(node, 2)?;
    let values = lw
        .value(values_id)
        .ok_or("values must be a constant (computed at pack time)")?
        .clone();
    if values.len() != 2 {
        return Err("values must hold [off, on]".into());
    }
    let shape = lw.shape(indices);
    let rank = shape.len();
    let axis = normalize_axis(node.int("axis", -1)?, rank + 1)?;
    if !lw.dtype(indices).is_integer() {
        // Float indices are cast to int64 first (ONNX).
        let converted = lw.temp(node, "indices", DType::I64, shape.clone());
        lw.emit(node, Op::Convert, vec![Some(indices)], vec![converted])?;
        indices = converted;
    }
    let index_type = lw.dtype(indices);
    let mut column = shape.clone();
    column.insert(axis, 1);
    let column = lw.temp_alias(node, "column", indices, column);
    let mut out_shape = shape;
    out_shape.insert(axis, depth as usize);
    let mut range_shape = vec![1; rank + 1];
    range_shape[axis] = depth as usize;
    let ranges = [(0..depth).collect::<Vec<_>>(), (-depth..0).collect()];
    let mut hits = Vec::new();
    for (k, range) in ranges.into_iter().enumerate() {
        let r = HostTensor::int(index_type, range_shape.clone(), range).cast(index_type);
        let r = lw.constant(node, &format!("range{k}"), r);
        let hit = lw.temp(node, &format!("hit{k}"), DType::Bool, out_shape.clone());
        let op = Op::Compare(CompareOp::Equal);
        lw.emit(node, op, vec![Some(column), Some(r)], vec![hit])?;
        hits.push(hit);
    }
    let hit = lw.temp(node, "hit", DType::Bool, out_shape.clone());
    let op = Op::Logical(LogicalOp::Or);
    lw.emit(node, op, vec![Some(hits[0]), Some(hits[1])], vec![hit])?;
    let scalar = |i: usize| {
        let mut v = values.clone();
        v.shape = vec![];
        v.data = match &values.data {
            crate::compile::tensor::Data::Float(f) => {
                crate::compile::tensor::Data::Float(vec![f[i]])
            }
            crate::compile::tensor::Data::Int(n) => crate::compile::tensor::Data::Int(vec![n[i]]),
        };
        v
    };
    let (off, on) = (scalar(0), scalar(1));
    let off = lw.constant(node, "off", off);
    let on = lw.constant(node, "on", on);
    let y = lw.output(node, 0, lw.dtype(on), out_shape)?;
    lw.emit(
        node,
        Op::Where,
        vec![Some(hit), Some(on), Some(off)],
        vec![y],
    )
}

/// Det of float matrices `[..., n, n]`.
pub(super) fn det(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let shape = lw.shape(x);
    let r = shape.len();
    if r < 2 || shape[r - 1] != shape[r - 2] {
        return Err(format!("Det needs square matrices, not {shape:?}"));
    }
    let y = lw.output(node, 0, DType::F32, shape[..r - 2].to_vec())?;
    lw.emit(node, Op::Det, vec![Some(x)], vec![y])
}
