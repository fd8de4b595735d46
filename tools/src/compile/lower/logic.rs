//! Lowering of the logic family: comparisons, boolean logic, Not, IsNaN/IsInf, Where, and OneHot
//! (a comparison and a selection).

use super::attrs::Attrs;
use super::broadcast::legacy_operand;
use super::lowerer::{normalize_axis, Lowerer, Reason};
use super::window::hal_shape;
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;
use ferrite_hal::geometry::broadcast;
use ferrite_hal::op::{CompareOp, Detect, LogicalOp};
use ferrite_hal::{DType, Op};

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
