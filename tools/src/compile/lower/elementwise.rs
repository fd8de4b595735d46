//! Lowering of the elementwise family: binary arithmetic, variadic Max/Min/Mean/Sum, activations,
//! Clip, softmax and its relatives, and batch normalisation (inference and training forms).

use super::attrs::Attrs;
use super::broadcast::legacy_operand;
use super::lowerer::{normalize_axis, Lowerer, Reason};
use super::window::hal_shape;
use crate::compile::ir::TensorId;
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;
use ferrite_hal::geometry::broadcast;
use ferrite_hal::op::{BinaryOp, ReduceOp};
use ferrite_hal::{Activation, DType, Op};

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
