//! QuantizeLinear and DequantizeLinear: 8- and 16-bit linear quantization, per tensor, per
//! channel or blocked.
//!
//! Both run as ops of their own (a QDQ model runs mixed: float compute with quantize/dequantize
//! at the borders); a DequantizeLinear of constant int8 weights folds away at pack time. Blocked
//! quantization (opset 21: one scale per `block_size` elements along the axis) runs on the same
//! per-channel steps: its scale and zero point are expanded along the axis (a constant-index
//! Gather, folded when they are constants) and the tensor is viewed as one long axis, along
//! which a per-channel step is per element. Every parameter is checked here, so a bad scale or
//! zero point is an error naming the tensor.

use super::attrs::Attrs;
use super::lowerer::{normalize_axis, Lowerer, Reason};
use super::TensorId;
use crate::compile::onnx::Node;
use crate::compile::tensor::{dtype_from_onnx, HostTensor};
use ferrite_hal::{DType, Op};

/// The parameters' axis: `axis` (opset 13+, default 1) for vectors, 0 for scalars.
fn parameter_axis(
    lw: &Lowerer,
    node: &Node,
    x: TensorId,
    scale: TensorId,
) -> Result<usize, Reason> {
    let scale_shape = lw.shape(scale);
    if scale_shape.len() > 1 {
        return Err(format!(
            "scale '{}' must be a scalar or a vector, it is {scale_shape:?}",
            lw.name(scale)
        ));
    }
    let n: usize = scale_shape.iter().product();
    if n == 1 {
        return Ok(0);
    }
    if lw.opset() < 13 {
        return Err("per-axis quantization needs opset 13".into());
    }
    let rank = lw.shape(x).len();
    let axis = normalize_axis(node.int("axis", 1)?, rank)?;
    let len = lw.shape(x)[axis];
    if n != len {
        return Err(format!(
            "scale '{}' has {n} values, axis {axis} has {len}",
            lw.name(scale)
        ));
    }
    Ok(axis)
}

/// A constant scale must be positive and finite.
fn check_scale(lw: &Lowerer, scale: TensorId) -> Result<(), Reason> {
    if lw.dtype(scale) != DType::F32 {
        return Err(format!(
            "scale '{}' is {}, only float32 scales are supported",
            lw.name(scale),
            lw.dtype(scale)
        ));
    }
    if let Some(v) = lw.value(scale) {
        if let Some(bad) = v
            .to_f32s()
            .into_iter()
            .find(|s| !(s.is_finite() && *s > 0.0))
        {
            return Err(format!(
                "scale '{}' holds {bad}: scales must be positive and finite",
                lw.name(scale)
            ));
        }
    }
    Ok(())
}

/// The zero point must match the scale's shape.
fn check_zero_point(lw: &Lowerer, zero: TensorId, scale: TensorId) -> Result<(), Reason> {
    let (z, s) = (lw.shape(zero), lw.shape(scale));
    let count = |d: &[usize]| d.iter().product::<usize>();
    if count(&z) != count(&s) || z.len() > 1 {
        return Err(format!(
            "zero point '{}' has shape {z:?}, its scale {s:?}",
            lw.name(zero)
        ));
    }
    Ok(())
}

pub(super) fn quantize(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let scale = lw.input(node, 1)?;
    if lw.dtype(x) != DType::F32 {
        return Err(format!(
            "input '{}' is {}, only float32 is quantized",
            lw.name(x),
            lw.dtype(x)
        ));
    }
    check_scale(lw, scale)?;
    let zero = match lw.optional_input(node, 2) {
        Some(z) => {
            if node.int("block_size", 0)? == 0 {
                check_zero_point(lw, z, scale)?;
            }
            z
        }
        None => {
            // No zero point: 0 of `output_dtype` (opset 21), else uint8.
            let dtype = match node.int("output_dtype", 0)? {
                0 => DType::U8,
                code => dtype_from_onnx(code as i32)
                    .ok_or_else(|| format!("output_dtype {code} is not supported"))?,
            };
            let shape = lw.shape(scale);
            let n = shape.iter().product();
            lw.constant(
                node,
                "zero_point",
                HostTensor::int(dtype, shape, vec![0; n]),
            )
        }
    };
    let dtype = lw.dtype(zero);
    if !matches!(dtype, DType::I8 | DType::U8 | DType::I16 | DType::U16) {
        return Err(format!(
            "zero point '{}' is {dtype}: only 8- and 16-bit integer quantization is supported",
            lw.name(zero)
        ));
    }
    if let Some(flat_operands) = blocked(lw, node, x, scale, Some(zero))? {
        let flat = lw.temp(node, "flat", dtype, vec![lw.shape(x).iter().product()]);
        lw.emit(
            node,
            Op::Quantize { axis: 0 },
            flat_operands.to_vec(),
            vec![flat],
        )?;
        return lw.alias_output(node, 0, flat, lw.shape(x));
    }
    let axis = parameter_axis(lw, node, x, scale)?;
    let y = lw.output(node, 0, dtype, lw.shape(x))?;
    lw.emit(
        node,
        Op::Quantize { axis },
        vec![Some(x), Some(scale), Some(zero)],
        vec![y],
    )
}

/// For a blocked QuantizeLinear or DequantizeLinear (`block_size` > 0): `x`, `scale` and
/// `zero` as flat views of one element each (`scale` and `zero` expanded along the axis), for
/// a per-channel step along axis 0. `None` without `block_size`.
fn blocked(
    lw: &mut Lowerer,
    node: &Node,
    x: TensorId,
    scale: TensorId,
    zero: Option<TensorId>,
) -> Result<Option<[Option<TensorId>; 3]>, Reason> {
    let block = node.int("block_size", 0)?;
    if block == 0 {
        return Ok(None);
    }
    let block = usize::try_from(block).map_err(|_| format!("block_size {block} is negative"))?;
    let (xs, ss) = (lw.shape(x), lw.shape(scale));
    let axis = normalize_axis(node.int("axis", 1)?, xs.len())?;
    let blocks = xs[axis].div_ceil(block);
    let fits = ss.len() == xs.len()
        && (0..xs.len()).all(|d| ss[d] == if d == axis { blocks } else { xs[d] });
    if !fits {
        return Err(format!(
            "scale '{}' has shape {ss:?}: blocks of {block} along axis {axis} of {xs:?} need {:?}",
            lw.name(scale),
            (0..xs.len())
                .map(|d| if d == axis { blocks } else { xs[d] })
                .collect::<Vec<_>>()
        ));
    }
    if let Some(z) = zero {
        if lw.shape(z) != ss {
            return Err(format!(
                "zero point '{}' has shape {:?}, its scale {ss:?}",
                lw.name(z),
                lw.shape(z)
            ));
        }
    }
    let index: Vec<i64> = (0..xs[axis]).map(|i| (i / block) as i64).collect();
    let index = lw.constant(
        node,
        "block_index",
        HostTensor::int(DType::I64, vec![xs[axis]], index),
    );
    let elements: usize = xs.iter().product();
    // Element i of the expanded tensor is element `source(i)` of the blocked one.
    let inner: usize = xs[axis + 1..].iter().product();
    let source = |i: usize| {
        let (outer, rest) = (i / (xs[axis] * inner), i % (xs[axis] * inner));
        (outer * blocks + rest / inner / block) * inner + rest % inner
    };
    let mut expand = |what: &str, t: TensorId| -> Result<TensorId, Reason> {
        // A constant is expanded here; a run-time one by a constant-index Gather.
        if let Some(v) = lw.value(t) {
            let value = if v.dtype == DType::F32 {
                let f = v.to_f32s();
                HostTensor::float(
                    vec![elements],
                    (0..elements).map(|i| f[source(i)]).collect(),
                )
            } else {
                let q = v.to_i64s();
                HostTensor::int(
                    v.dtype,
                    vec![elements],
                    (0..elements).map(|i| q[source(i)]).collect(),
                )
            };
            return Ok(lw.constant(node, what, value));
        }
        let full = lw.temp(node, what, lw.dtype(t), xs.clone());
        lw.emit(
            node,
            Op::Gather { axis },
            vec![Some(t), Some(index)],
            vec![full],
        )?;
        Ok(lw.temp_alias(node, &format!("{what}:flat"), full, vec![elements]))
    };
    let scale = expand("scale_per_element", scale)?;
    let zero = zero.map(|z| expand("zero_per_element", z)).transpose()?;
    let x = lw.temp_alias(node, "flat_input", x, vec![elements]);
    Ok(Some([Some(x), Some(scale), zero]))
}

pub(super) fn dequantize(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let scale = lw.input(node, 1)?;
    let dtype = lw.dtype(x);
    if !matches!(
        dtype,
        DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::I32
    ) {
        return Err(format!(
            "input '{}' is {dtype}: only 8- and 16-bit integers and int32 are dequantized",
            lw.name(x)
        ));
    }
    check_scale(lw, scale)?;
    let zero = lw.optional_input(node, 2);
    if let Some([flat_x, flat_scale, flat_zero]) = blocked(lw, node, x, scale, zero)? {
        if zero.is_some_and(|z| lw.dtype(z) != dtype) {
            return Err("the zero point's type differs from the input's".into());
        }
        if dtype == DType::I32 {
            return Err("blocked dequantization of int32 is not supported".into());
        }
        let flat = lw.temp(node, "flat", DType::F32, vec![lw.shape(x).iter().product()]);
        lw.emit(
            node,
            Op::Dequantize { axis: 0 },
            vec![flat_x, flat_scale, flat_zero],
            vec![flat],
        )?;
        return lw.alias_output(node, 0, flat, lw.shape(x));
    }
    let axis = parameter_axis(lw, node, x, scale)?;
    if let Some(z) = zero {
        check_zero_point(lw, z, scale)?;
        if lw.dtype(z) != dtype {
            return Err(format!(
                "zero point '{}' is {}, its input {dtype}",
                lw.name(z),
                lw.dtype(z)
            ));
        }
        if dtype == DType::I32 {
            let zero_is_zero = lw
                .value(z)
                .is_some_and(|v| v.to_i64s().iter().all(|&q| q == 0));
            if !zero_is_zero {
                return Err(format!(
                    "zero point '{}' of an int32 input must be 0",
                    lw.name(z)
                ));
            }
        }
    }
    let y = lw.output(node, 0, DType::F32, lw.shape(x))?;
    lw.emit(
        node,
        Op::Dequantize { axis },
        vec![Some(x), Some(scale), zero],
        vec![y],
    )
}
