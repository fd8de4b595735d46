//! Constant folding by execution: ops whose inputs are all constants run once on the host with
//! the CPU device's kernels (the same code that runs them at inference), after the core's own
//! step rules have checked them.

use crate::ir::{PlanOp, Tensor};
use crate::tensor::HostTensor;
use ferrite_hal::{Location, Shape, Step, TensorDesc, TensorList, Tensors};

struct Descs(Vec<TensorDesc>);

impl Tensors for Descs {
    fn tensor(&self, index: u32) -> Option<TensorDesc> {
        self.0.get(index as usize).copied()
    }
}

/// Runs `ops` on constant inputs and stores their outputs' values in `tensors`.
pub fn run_on_host(tensors: &mut [Tensor], ops: &[PlanOp]) -> Result<(), String> {
    for op in ops {
        run_one(tensors, op)?;
    }
    Ok(())
}

fn run_one(tensors: &mut [Tensor], op: &PlanOp) -> Result<(), String> {
    let align = |n: usize| n.div_ceil(16) * 16;
    let mut descs = Vec::new();
    let mut arena_len = 0usize;
    let mut place = |t: &Tensor| -> Result<TensorDesc, String> {
        let shape = Shape::new(&t.shape).ok_or("rank too large")?;
        let bytes = shape.bytes(t.dtype).ok_or("too large")?;
        let desc = TensorDesc {
            dtype: t.dtype,
            shape,
            location: Location::Arena(arena_len),
            bytes,
        };
        arena_len += align(bytes).max(16);
        Ok(desc)
    };
    let mut operands: Vec<u8> = Vec::new();
    for input in &op.inputs {
        match input {
            Some(t) => {
                descs.push(place(&tensors[*t])?);
                operands.extend(((descs.len() - 1) as u32).to_le_bytes());
            }
            None => operands.extend(u32::MAX.to_le_bytes()),
        }
    }
    let first_output = operands.len();
    for &t in &op.outputs {
        descs.push(place(&tensors[t])?);
        operands.extend(((descs.len() - 1) as u32).to_le_bytes());
    }
    let scratch = match op.op {
        ferrite_hal::Op::Conv(c) => {
            let x = &tensors[op.inputs[0].ok_or("missing input")?].shape;
            let w = &tensors[op.inputs[1].ok_or("missing input")?].shape;
            let y = &tensors[op.outputs[0]].shape;
            let (oh, ow) = if y.len() == 4 {
                (y[2], y[3])
            } else {
                (1, y[2])
            };
            let n = ferrite_hal::geometry::conv_scratch_elements(&c, w[1], oh, ow).unwrap_or(0);
            let _ = x;
            (n > 0).then(|| {
                let shape = Shape::new(&[n]).unwrap_or(Shape::SCALAR);
                let d = TensorDesc {
                    dtype: ferrite_hal::DType::F32,
                    shape,
                    location: Location::Arena(arena_len),
                    bytes: n * 4,
                };
                arena_len += align(n * 4);
                d
            })
        }
        _ => None,
    };
    let mut arena = vec![0u128; arena_len.div_ceil(16)];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut arena);
    for (slot, input) in op.inputs.iter().flatten().enumerate() {
        let value = tensors[*input]
            .value
            .as_ref()
            .ok_or("input is not constant")?;
        let data = value.to_le_bytes();
        let Location::Arena(o) = descs[slot].location else {
            unreachable!()
        };
        bytes[o..o + data.len()].copy_from_slice(&data);
    }
    let table = Descs(descs);
    let step = Step {
        index: 0,
        op: op.op,
        inputs: TensorList::new(&operands[..first_output], &table),
        outputs: TensorList::new(&operands[first_output..], &table),
        scratch,
    };
    ferrite_core::verify_step(&step).map_err(|rule| format!("cannot fold: {rule}"))?;
    ferrite_cpu::kernels::run_step(&step, bytes, &[]).map_err(|e| format!("cannot fold: {e}"))?;
    for (i, &t) in op.outputs.iter().enumerate() {
        let d = step.outputs.get(i).ok_or("missing output")?;
        let Location::Arena(o) = d.location else {
            unreachable!()
        };
        let value =
            HostTensor::from_le_bytes(d.dtype, tensors[t].shape.clone(), &bytes[o..o + d.bytes])
                .ok_or("cannot read folded value")?;
        tensors[t].value = Some(value);
    }
    Ok(())
}
