//! Logic steps (Compare, And/Or/Xor, Not, Where and IsNaN/IsInf): the family's operands taken from the carved step, its
//! kernels in [`crate::ops::logic::reference`].

use super::operands::*;
use crate::ops::elementwise::numeric;
use crate::ops::logic::reference as logic;

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
        Op::Compare(c) if selects(OPS, OpKind::Compare) => {
            input!(step, a = 0);
            input!(step, b = 1);
            let (ab, bb) = (view.bytes(a)?, view.bytes(b)?);
            let shape = out_desc.shape;
            fn operands<'x, T: bytemuck::Pod>(
                a: &'x [u8],
                sa: ferrite_hal::Shape,
                b: &'x [u8],
                sb: ferrite_hal::Shape,
            ) -> Result<[logic::Operand<'x, T>; 2], CpuError> {
                Ok([
                    logic::Operand {
                        data: cast(a)?,
                        shape: sa,
                    },
                    logic::Operand {
                        data: cast(b)?,
                        shape: sb,
                    },
                ])
            }
            let (sa, sb) = (a.shape, b.shape);
            match a.dtype {
                DType::F32 => {
                    let [x, y] = operands::<f32>(ab, sa, bb, sb)?;
                    logic::compare(c, x, y, out, &shape)
                }
                DType::Bool => {
                    let [x, y] = operands::<u8>(ab, sa, bb, sb)?;
                    logic::compare(c, x, y, out, &shape)
                }
                other if selects_dtype(OPS, other) => {
                    let integers = |t: &TensorDesc, bytes| numeric::Integers {
                        dtype: t.dtype,
                        bytes,
                        shape: t.shape,
                    };
                    numeric::compare::<OPS>(c, integers(a, ab), integers(b, bb), out, &shape)?
                }
                _ => return Err(CpuError::Unsupported),
            }
        }
        Op::Logical(l) if selects(OPS, OpKind::Logical) => {
            input!(step, a = 0);
            input!(step, b = 1);
            let x = logic::Operand {
                data: view.bytes(a)?,
                shape: a.shape,
            };
            let y = logic::Operand {
                data: view.bytes(b)?,
                shape: b.shape,
            };
            logic::logical(l, x, y, out, &out_desc.shape);
        }
        Op::Not if selects(OPS, OpKind::Not) => logic::not(bytes_in(0)?, out),
        Op::Classify(d) if selects(OPS, OpKind::Classify) => logic::classify(d, f32_in(0)?, out),
        Op::Where if selects(OPS, OpKind::Where) => {
            input!(step, c = 0);
            input!(step, x = 1);
            input!(step, y = 2);
            let condition = logic::Operand {
                data: view.bytes(c)?,
                shape: c.shape,
            };
            let size = element_size::<OPS>(x.dtype)?;
            let x = logic::Operand {
                data: view.bytes(x)?,
                shape: x.shape,
            };
            let y = logic::Operand {
                data: view.bytes(y)?,
                shape: y.shape,
            };
            logic::select(condition, x, y, size, out, &out_desc.shape);
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}
