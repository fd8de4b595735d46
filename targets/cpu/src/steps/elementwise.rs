//! Elementwise steps (Binary, Unary, Softmax, LogSoftmax, Hardmax, BatchNorm, Cast, QAdd, QMul, QLookup and QSoftmax): the family's operands taken from the carved step, its
//! kernels in [`crate::ops::elementwise::reference`], [`crate::ops::elementwise::numeric`] and [`crate::ops::integer`].

use super::operands::*;
#[cfg(feature = "quantized")]
use crate::base::index;
#[cfg(feature = "quantized")]
use crate::ops::elementwise::int8;
use crate::ops::elementwise::numeric;
use crate::ops::elementwise::reference as elementwise;
use crate::ops::elementwise::reference::Operand;

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
    // Every kind of the family reads input 0, and the binary ones input 1: their descriptors
    // are decoded once, into two slots the arms share (per arm, each took slots of its own in
    // the family's frame, under every kernel it calls).
    input!(step, x = 0);
    let second = match step.op {
        Op::Binary { .. } | Op::QAdd(_) | Op::QMul(_) => step.inputs.get(1),
        _ => None,
    };
    macro_rules! second {
        () => {{
            let Some(b) = &second else {
                return Err(CpuError::CorruptPlan);
            };
            b
        }};
    }
    match step.op {
        Op::Binary { op, activation } if selects(OPS, OpKind::Binary) => {
            let (a, b) = (x, second!());
            if a.dtype == DType::F32 {
                let (a, b) = (operand(view, a)?, operand(view, b)?);
                let out = f32s_mut(out)?;
                if OPS == ALL_OPS {
                    elementwise::binary::<OPS>(op, a, b, out, &out_desc.shape)
                } else {
                    elementwise::binary_out_of_line::<OPS>(op, a, b, out, &out_desc.shape)
                }
                fused::<OPS>(activation, out);
            } else {
                let (ab, bb) = (view.bytes(a)?, view.bytes(b)?);
                integer_binary::<OPS>(op, (a, ab), (b, bb), out, &out_desc.shape)?;
            }
        }
        Op::Convert if selects(OPS, OpKind::Convert) => {
            numeric::convert(x.dtype, view.bytes(x)?, out_desc.dtype, out)?;
        }
        Op::Unary(act) if selects(OPS, OpKind::Unary) => {
            let out = f32s_mut(out)?;
            if let Src::Bytes(x) = view.src(x)? {
                let x = f32s(x)?;
                if x.len() != out.len() {
                    return Err(CpuError::CorruptPlan);
                }
                out.copy_from_slice(x);
            }
            crate::micro::activation::activate::<OPS>(act, out);
        }
        Op::LogSoftmax { axis } if selects(OPS, OpKind::LogSoftmax) => {
            elementwise::log_softmax(Some(f32_in(0)?), &out_desc.shape, axis, f32s_mut(out)?);
        }
        Op::Hardmax { axis } if selects(OPS, OpKind::Hardmax) => {
            elementwise::hardmax(f32_in(0)?, &out_desc.shape, axis, f32s_mut(out)?);
        }
        Op::Softmax { axis } if selects(OPS, OpKind::Softmax) => {
            let x = f32s(bytes_in(0)?)?;
            elementwise::softmax(Some(x), &out_desc.shape, axis, f32s_mut(out)?);
        }
        Op::BatchNorm {
            epsilon,
            activation,
        } if selects(OPS, OpKind::BatchNorm) => {
            let x = match view.src(x)? {
                Src::Bytes(b) => Some(f32s(b)?),
                Src::Output => None,
            };
            let out = f32s_mut(out)?;
            elementwise::batch_norm(
                x,
                &out_desc.shape,
                f32_in(1)?,
                f32_in(2)?,
                f32_in(3)?,
                f32_in(4)?,
                epsilon,
                out,
            );
            fused::<OPS>(activation, out);
        }
        #[cfg(feature = "quantized")]
        Op::QAdd(_) | Op::QMul(_) if selects(OPS, OpKind::QAdd) || selects(OPS, OpKind::QMul) => {
            integer_arithmetic::<OPS>(step, (x, second!()), out_desc, view, out, scratch)?
        }
        #[cfg(feature = "quantized")]
        Op::QLookup if selects(OPS, OpKind::QLookup) => {
            let (x, table) = (bytes_in(0)?, bytes_in(1)?);
            let table: &[u8; 256] = table.try_into().map_err(|_| CpuError::CorruptPlan)?;
            for (y, &b) in out.iter_mut().zip(x) {
                *y = table[b as usize];
            }
        }
        #[cfg(feature = "quantized")]
        Op::QSoftmax(q) if selects(OPS, OpKind::QSoftmax) => {
            let rank = x.shape.rank();
            let lanes = [
                x.shape.product(0..q.axis),
                x.shape.dim(q.axis),
                x.shape.product(q.axis + 1..rank),
            ];
            let table = cast::<i32>(bytes_in(1)?)?;
            let ty = bytes8::<OPS>(x.dtype, out_desc.dtype)?;
            int8::qsoftmax(&q, lanes, (view.bytes(x)?, ty), table, out);
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}

/// QAdd and QMul: in a frame of their own on a firmware (their broadcast strides, 132 B, out of
/// the family's frame, under every kernel of the family).
#[cfg(feature = "quantized")]
#[cfg_attr(not(feature = "std"), inline(never))]
fn integer_arithmetic<const OPS: Selection>(
    step: &Step<'_>,
    (a, b): (&TensorDesc, &TensorDesc),
    out_desc: &TensorDesc,
    view: &Readable<'_>,
    out: &mut [u8],
    scratch: Option<&mut [u8]>,
) -> Result<(), CpuError> {
    match step.op {
        Op::QAdd(q) if selects(OPS, OpKind::QAdd) => {
            let (ab, bb) = (view.bytes(a)?, view.bytes(b)?);
            let tables: &mut [i32] = match scratch {
                Some(s) => cast_mut(s)?,
                None => &mut [],
            };
            match (a.dtype, b.dtype, out_desc.dtype) {
                (DType::I8, DType::I8, DType::I8) if selects_dtype(OPS, DType::I8) => {
                    int8::qadd::<i8, i8, i8>(&q, cast(ab)?, cast(bb)?, cast_mut(out)?, tables)
                }
                (DType::U8, DType::U8, DType::U8) if selects_dtype(OPS, DType::U8) => {
                    int8::qadd::<u8, u8, u8>(&q, cast(ab)?, cast(bb)?, cast_mut(out)?, tables)
                }
                (DType::I16, DType::I16, DType::I16) if selects_dtype(OPS, DType::I16) => {
                    int8::qadd_wide::<i16>(&q, cast(ab)?, cast(bb)?, cast_mut(out)?)
                }
                _ => return Err(CpuError::Unsupported),
            }
        }
        Op::QMul(q) if selects(OPS, OpKind::QMul) => {
            let (ab, bb) = (view.bytes(a)?, view.bytes(b)?);
            let shape = out_desc.shape;
            let strides = [
                shape.strides(),
                ferrite_hal::geometry::broadcast_strides(&a.shape, &shape),
                ferrite_hal::geometry::broadcast_strides(&b.shape, &shape),
            ];
            let pairs = |f: &mut dyn FnMut([usize; 3])| {
                index::for_each_index(shape.dims(), [&strides[0], &strides[1], &strides[2]], f)
            };
            match out_desc.dtype {
                DType::I8 if selects_dtype(OPS, DType::I8) => {
                    int8::qmul::<i8>(&q, cast(ab)?, cast(bb)?, cast_mut(out)?, pairs)
                }
                DType::U8 if selects_dtype(OPS, DType::U8) => {
                    int8::qmul::<u8>(&q, ab, bb, out, pairs)
                }
                _ => return Err(CpuError::Unsupported),
            }
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}

/// [`numeric::binary`] on integer operands `a`, `b` (descriptor and bytes) of one type.
fn integer_binary<const OPS: Selection>(
    op: ferrite_hal::op::BinaryOp,
    a: (&TensorDesc, &[u8]),
    b: (&TensorDesc, &[u8]),
    out: &mut [u8],
    shape: &ferrite_hal::Shape,
) -> Result<(), CpuError> {
    if !selects_dtype(OPS, a.0.dtype) {
        return Err(CpuError::Unsupported);
    }
    fn integers<'x>((t, bytes): (&TensorDesc, &'x [u8])) -> numeric::Integers<'x> {
        numeric::Integers {
            dtype: t.dtype,
            bytes,
            shape: t.shape,
        }
    }
    numeric::binary::<OPS>(op, integers(a), integers(b), out, shape)
}

#[inline(always)]
fn operand<'x>(view: &Readable<'x>, t: &TensorDesc) -> Result<Operand<'x>, CpuError> {
    Ok(match view.src(t)? {
        Src::Bytes(b) => Operand::Data(f32s(b)?, t.shape),
        Src::Output => Operand::Output,
    })
}
