//! Ops that mostly produce constants at pack time: Constant, Shape, Size, ConstantOfShape,
//! Range, and Cast (folded on constants, a run-time conversion otherwise). Their results feed
//! shape computations (PyTorch's `Shape → Gather → Concat → Reshape` chains).

use super::attrs::Attrs;
use super::lowerer::{Lowerer, Reason};
use crate::compile::onnx::proto::data_type;
use crate::compile::onnx::Node;
use crate::compile::tensor::{checked_elements, dtype_from_onnx, Data, HostTensor};
use ferrite_hal::{DType, Op};

pub(super) fn constant(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let value = if let Some(t) = node.tensor("value")? {
        t
    } else if node.attr("value_float").is_some() {
        HostTensor::float(vec![], vec![node.float("value_float", 0.0)?])
    } else if let Some(v) = node.floats("value_floats")? {
        HostTensor::float(vec![v.len()], v)
    } else if node.attr("value_int").is_some() {
        HostTensor::int(DType::I64, vec![], vec![node.int("value_int", 0)?])
    } else if let Some(v) = node.ints("value_ints")? {
        HostTensor::int(DType::I64, vec![v.len()], v)
    } else {
        return Err("only tensor, float and int constants are supported".into());
    };
    lw.const_output(node, 0, value);
    Ok(())
}

pub(super) fn shape(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let s = lw.shape(x);
    let r = s.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clamp(node.int("start", 0)?);
    let end = clamp(node.int("end", r)?);
    let dims: Vec<i64> = s[start..end.max(start)].iter().map(|&d| d as i64).collect();
    lw.const_output(node, 0, HostTensor::int(DType::I64, vec![dims.len()], dims));
    Ok(())
}

pub(super) fn size(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let n: usize = lw.shape(x).iter().product();
    lw.const_output(node, 0, HostTensor::int(DType::I64, vec![], vec![n as i64]));
    Ok(())
}

/// Cast and CastLike: folded on constants, else a run-time conversion. Float64, float16 and
/// bfloat16 are computed in f32; a cast to float16/bfloat16 still rounds to their precision.
pub(super) fn cast(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let to = if node.op_type == "CastLike" {
        lw.dtype(lw.input(node, 1)?)
    } else {
        let code = node.int("to", 0)? as i32;
        dtype_from_onnx(code)
            .ok_or_else(|| format!("cast to {} is not supported", data_type::name(code)))?
    };
    if let Some(v) = lw.value(x) {
        let v = v.cast(to);
        lw.const_output(node, 0, v);
        return Ok(());
    }
    let computed = super::lowerer::computed_dtype(to);
    let from = lw.dtype(x);
    let shape = lw.shape(x);
    if computed == from && !matches!(to, DType::F16 | DType::BF16) {
        lw.alias_output(node, 0, x, shape)?;
        lw.mark_interface(node, to);
        return Ok(());
    }
    if to == DType::F32 && matches!(from, DType::I8 | DType::U8 | DType::I32) {
        // Integers to float (the results of MatMulInteger/ConvInteger, say): a dequantization
        // with scale 1 converts each value exactly as a cast does (rounding to nearest), and
        // the integer pass and every device know it.
        let one = lw.constant(node, "unit_scale", HostTensor::float(vec![], vec![1.0]));
        let y = lw.output(node, 0, DType::F32, shape)?;
        return lw.emit(
            node,
            Op::Dequantize { axis: 0 },
            vec![Some(x), Some(one), None],
            vec![y],
        );
    }
    let source = if to.is_interface_float() && to != DType::F64 {
        // Round through the narrow type, then compute in f32 again.
        let narrow = lw
            .graph
            .add_tensor(format!("{}:{to}", node.label()), to, shape.clone());
        lw.emit(node, Op::Convert, vec![Some(x)], vec![narrow])?;
        narrow
    } else {
        x
    };
    let y = lw.output(node, 0, to, shape)?;
    lw.emit(node, Op::Convert, vec![Some(source)], vec![y])
}

pub(super) fn constant_of_shape(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let dims = lw
        .const_ints(node, 0, "the ConstantOfShape shape")?
        .ok_or("shape is required")?;
    if dims.iter().any(|&d| d < 0) {
        return Err("negative dimension".into());
    }
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    let n = checked_elements(&shape).ok_or("the constant is too large")?;
    let fill = node
        .tensor("value")?
        .unwrap_or(HostTensor::float(vec![1], vec![0.0]));
    if fill.len() != 1 {
        return Err("value must hold one element".into());
    }
    let data = match fill.data {
        Data::Float(v) => Data::Float(vec![v[0]; n]),
        Data::Int(v) => Data::Int(vec![v[0]; n]),
    };
    lw.const_output(
        node,
        0,
        HostTensor {
            dtype: fill.dtype,
            shape,
            data,
        },
    );
    Ok(())
}

pub(super) fn range(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let t = lw.input(node, 0)?;
    let dtype = lw.dtype(t);
    let get = |i| {
        lw.const_scalar(node, i, "Range inputs")
            .and_then(|v| v.ok_or_else(|| "Range needs three inputs".to_string()))
    };
    if dtype == DType::F32 {
        let (start, limit, delta) = (get(0)?, get(1)?, get(2)?);
        if delta == 0.0 {
            return Err("delta is 0".into());
        }
        let n = ((limit - start) / delta).ceil().max(0.0) as usize;
        checked_elements(&[n]).ok_or("the range is too large")?;
        let v: Vec<f32> = (0..n).map(|i| start + i as f32 * delta).collect();
        lw.const_output(node, 0, HostTensor::float(vec![n], v));
    } else {
        let ints = |i| {
            lw.const_ints(node, i, "Range inputs").and_then(|v| {
                v.and_then(|v| v.first().copied())
                    .ok_or_else(|| "Range needs three inputs".to_string())
            })
        };
        let (start, limit, delta) = (ints(0)?, ints(1)?, ints(2)?);
        if delta == 0 {
            return Err("delta is 0".into());
        }
        let span = limit as i128 - start as i128;
        let n = if (span > 0) == (delta > 0) && span != 0 {
            (span.abs() + (delta as i128).abs() - 1) / (delta as i128).abs()
        } else {
            0
        };
        let n = usize::try_from(n)
            .ok()
            .and_then(|n| checked_elements(&[n]))
            .ok_or("the range is too large")?;
        let v: Vec<i64> = (0..n as i128)
            .map(|i| (start as i128 + i * delta as i128) as i64)
            .collect();
        lw.const_output(node, 0, HostTensor::int(dtype, vec![n], v));
    }
    Ok(())
}
