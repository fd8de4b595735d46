//! Quantization steps (QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear): the family's operands taken from the carved step, its
//! kernels in [`crate::ops::quantize::reference`].

use super::operands::*;
use crate::ops::quantize::reference as quantize;

/// Runs a step of this family with the kernels `OPS` selects.
#[inline(always)]
pub(super) fn run<const OPS: Selection>(
    step: &Step<'_>,
    #[allow(unused_variables)] out_desc: &TensorDesc,
    view: &Readable<'_>,
    out: &mut [u8],
    #[allow(unused_variables)] scratch: Option<&mut [u8]>,
    #[allow(unused_variables)] covered_int8: Selection,
) -> Result<(), CpuError> {
    step_inputs!(step, view => f32_in, optional_f32, bytes_in);
    match step.op {
        Op::Quantize { axis } if selects(OPS, OpKind::Quantize) => {
            input!(step, x = 0);
            input!(step, zero = 2);
            input!(step, scale = 1);
            let ch = channels(x, axis, scale);
            let (x, scale) = (f32_in(0)?, f32_in(1)?);
            let zero = view.bytes(zero)?;
            if const { quantize::runtime_typed(OPS) } {
                if !quantize::takes(OPS, out_desc.dtype, false) {
                    return Err(CpuError::Unsupported);
                }
                quantize::quantize_elements::<OPS>(x, scale, zero, out_desc.dtype, ch, out);
                return Ok(());
            }
            match out_desc.dtype {
                DType::I8 if selects_dtype(OPS, DType::I8) => {
                    quantize::quantize(x, scale, cast::<i8>(zero)?, ch, cast_mut(out)?)
                }
                DType::U8 if selects_dtype(OPS, DType::U8) => {
                    quantize::quantize(x, scale, cast::<u8>(zero)?, ch, cast_mut(out)?)
                }
                DType::I16 if selects_dtype(OPS, DType::I16) => {
                    quantize::quantize(x, scale, cast::<i16>(zero)?, ch, cast_mut(out)?)
                }
                DType::U16 if selects_dtype(OPS, DType::U16) => {
                    quantize::quantize(x, scale, cast::<u16>(zero)?, ch, cast_mut(out)?)
                }
                _ => return Err(CpuError::Unsupported),
            }
        }
        Op::Dequantize { axis } if selects(OPS, OpKind::Dequantize) => {
            input!(step, x = 0);
            input!(step, scale = 1);
            let ch = channels(x, axis, scale);
            let (bytes, scale, y) = (view.bytes(x)?, f32_in(1)?, f32s_mut(out)?);
            let zero = match step.inputs.get(2) {
                Some(z) => Some(view.bytes(&z)?),
                None => None,
            };
            if const { quantize::runtime_typed(OPS) } {
                if !quantize::takes(OPS, x.dtype, true) {
                    return Err(CpuError::Unsupported);
                }
                quantize::dequantize_elements::<OPS>(bytes, x.dtype, scale, zero, ch, y);
                return Ok(());
            }
            match x.dtype {
                DType::I8 if selects_dtype(OPS, DType::I8) => {
                    dequantize_typed::<i8>(bytes, scale, zero, ch, y)?
                }
                DType::U8 if selects_dtype(OPS, DType::U8) => {
                    dequantize_typed::<u8>(bytes, scale, zero, ch, y)?
                }
                DType::I16 if selects_dtype(OPS, DType::I16) => {
                    dequantize_typed::<i16>(bytes, scale, zero, ch, y)?
                }
                DType::U16 if selects_dtype(OPS, DType::U16) => {
                    dequantize_typed::<u16>(bytes, scale, zero, ch, y)?
                }
                DType::I32 if selects_dtype(OPS, DType::I32) => {
                    dequantize_typed::<i32>(bytes, scale, zero, ch, y)?
                }
                _ => return Err(CpuError::Unsupported),
            }
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}

/// DynamicQuantizeLinear writes three outputs: the integers, then the scale and zero point.
#[inline(always)]
pub(super) fn dynamic_quantize(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    input!(step, x = 0);
    let desc = |i: usize| step.outputs.get(i).ok_or(CpuError::CorruptPlan);
    let (y, scale_desc, zero_desc) = (desc(0)?, desc(1)?, desc(2)?);
    let (view, out, _) = carve(arena, weights, span(&y).ok_or(CpuError::CorruptPlan)?, None)?;
    let (scale, zero) = quantize::dynamic_quantize(f32s(view.bytes(x)?)?, out);
    let scalar_out = |t: &TensorDesc, bytes: &[u8], arena: &mut [u8]| -> Result<(), CpuError> {
        let (_, out, _) = carve(arena, weights, span(t).ok_or(CpuError::CorruptPlan)?, None)?;
        out.get_mut(..bytes.len())
            .ok_or(CpuError::CorruptPlan)?
            .copy_from_slice(bytes);
        Ok(())
    };
    scalar_out(&scale_desc, &scale.to_le_bytes(), arena)?;
    scalar_out(&zero_desc, &[zero], arena)
}

/// Per-channel layout of quantization parameters `scale` for `x` along `axis`.
#[inline(always)]
fn channels(x: &TensorDesc, axis: usize, scale: &TensorDesc) -> quantize::Channels {
    let channels = scale.elements();
    let inner = if channels > 1 {
        x.shape.product(axis + 1..x.shape.rank())
    } else {
        1
    };
    quantize::Channels { channels, inner }
}

#[inline(always)]
fn dequantize_typed<T: crate::base::quantized::QuantInt>(
    x: &[u8],
    scale: &[f32],
    zero: Option<&[u8]>,
    ch: quantize::Channels,
    y: &mut [f32],
) -> Result<(), CpuError> {
    let zero = match zero {
        Some(z) => Some(cast::<T>(z)?),
        None => None,
    };
    quantize::dequantize(cast::<T>(x)?, scale, zero, ch, y);
    Ok(())
}
