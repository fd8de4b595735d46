//! Data-movement steps (Transpose, Concat, Split, Slice, Pad, Copy, Trilu, Resample and Expand): the family's operands taken from the carved step, its
//! kernels in [`crate::ops::movement::reference`] and [`crate::ops::movement::resample`].

use super::operands::*;
use crate::ops::movement::reference as movement;
use crate::ops::movement::resample;

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
        Op::Resample {
            axis,
            extrapolation,
        } if selects(OPS, OpKind::Resample) => {
            input!(step, x_desc = 0);
            let [outer, in_len, inner] = lanes(&x_desc.shape, axis);
            let lanes = resample::Lanes {
                outer,
                in_len,
                inner,
            };
            let indices = cast::<i32>(bytes_in(1)?)?;
            resample::resample(
                f32_in(0)?,
                lanes,
                indices,
                f32_in(2)?,
                extrapolation,
                f32s_mut(out)?,
            )?;
        }
        Op::Expand if selects(OPS, OpKind::Expand) => {
            input!(step, x = 0);
            let bytes = view.bytes(x)?;
            let size = element_size::<OPS>(x.dtype)?;
            movement::expand(bytes, size, &x.shape, out, &out_desc.shape);
        }
        Op::Trilu { upper, k } if selects(OPS, OpKind::Trilu) => {
            input!(step, x = 0);
            let r = x.shape.rank();
            let (rows, cols) = (x.shape.dim(r - 2), x.shape.dim(r - 1));
            let bytes = view.bytes(x)?;
            let size = element_size::<OPS>(x.dtype)?;
            movement::trilu(bytes, size, rows, cols, upper, k as i64, out);
        }
        Op::Transpose { perm } if selects(OPS, OpKind::Transpose) => {
            input!(step, x = 0);
            let bytes = view.bytes(x)?;
            let size = element_size::<OPS>(x.dtype)?;
            movement::transpose(bytes, size, &x.shape, &perm, out, &out_desc.shape);
        }
        Op::Slice { starts, steps } if selects(OPS, OpKind::Slice) => {
            input!(step, x = 0);
            let bytes = view.bytes(x)?;
            let size = element_size::<OPS>(x.dtype)?;
            movement::slice(bytes, size, &x.shape, &starts, &steps, out, &out_desc.shape);
        }
        Op::Pad {
            mode,
            begins,
            value,
            ..
        } if selects(OPS, OpKind::Pad) => {
            input!(step, x = 0);
            let bytes = view.bytes(x)?;
            pad::<OPS>(x, bytes, mode, &begins, value, out, out_desc)?;
        }
        Op::Concat { axis } if selects(OPS, OpKind::Concat) => {
            let mut offset = 0;
            for part in step.inputs.iter() {
                let part = part.ok_or(CpuError::CorruptPlan)?;
                let len = part.shape.dim(axis);
                let bytes = view.bytes(&part)?;
                let size = element_size::<OPS>(part.dtype)?;
                movement::concat_into(bytes, size, out, &out_desc.shape, len, axis, offset);
                offset += len;
            }
        }
        Op::Copy if selects(OPS, OpKind::Copy) => {
            let bytes = bytes_in(0)?;
            if bytes.len() != out.len() {
                return Err(CpuError::CorruptPlan);
            }
            out.copy_from_slice(bytes);
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}

#[inline(always)]
fn pad<const OPS: Selection>(
    x: &TensorDesc,
    src: &[u8],
    mode: ferrite_hal::op::PadMode,
    begins: &[usize; ferrite_hal::MAX_RANK],
    value: f32,
    dst: &mut [u8],
    out: &TensorDesc,
) -> Result<(), CpuError> {
    let (x_shape, out_shape) = (&x.shape, &out.shape);
    // The fill value converts like an ONNX cast of the constant to the tensor's type; the copy
    // only moves elements, so one compiled kernel serves every type.
    let bits: u64 = match x.dtype {
        DType::F32 => value.to_bits().into(),
        DType::F64 => f64::from(value).to_bits(),
        DType::F16 => half::f16::from_f32(value).to_bits().into(),
        DType::BF16 => half::bf16::from_f32(value).to_bits().into(),
        DType::I8 => (value as i8 as u8).into(),
        DType::U8 | DType::Bool => (value as u8).into(),
        DType::I16 => (value as i16 as u16).into(),
        DType::U16 => (value as u16).into(),
        DType::I32 => (value as i32 as u32).into(),
        DType::U32 => (value as u32).into(),
        DType::I64 => value as i64 as u64,
        DType::U64 => value as u64,
    };
    let size = x.dtype.size();
    if !selects_size(OPS, size) {
        return Err(CpuError::Unsupported);
    }
    let value = bits.to_le_bytes();
    let value = value.get(..size).ok_or(CpuError::Unsupported)?;
    movement::pad(src, size, x_shape, mode, begins, value, dst, out_shape);
    Ok(())
}

/// Split writes several outputs: carve each in turn.
#[inline(always)]
pub(super) fn split<const OPS: Selection>(
    step: &Step<'_>,
    axis: usize,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    input!(step, x = 0);
    let mut offset = 0;
    for out_desc in step.outputs.iter() {
        let out_desc = out_desc.ok_or(CpuError::CorruptPlan)?;
        let (view, out, _) = carve(
            arena,
            weights,
            span(&out_desc).ok_or(CpuError::CorruptPlan)?,
            None,
        )?;
        let len = out_desc.shape.dim(axis);
        let bytes = view.bytes(x)?;
        let size = element_size::<OPS>(x.dtype)?;
        movement::split_from(bytes, size, &x.shape, out, len, axis, offset);
        offset += len;
    }
    Ok(())
}
