//! Constant folding by execution: ops whose inputs are all constants run once on the host with
//! the CPU device's kernels (the same code that runs them at inference), after the core's own
//! step rules have checked them.

use crate::compile::ir::{PlanOp, Tensor};
use crate::compile::tensor::HostTensor;
use ferrite_hal::{Location, Shape, Step, TensorDesc, TensorList, Tensors};

struct Descs(Vec<TensorDesc>);

impl Tensors for Descs {
    fn tensor(&self, index: u32) -> Option<TensorDesc> {
        self.0.get(index as usize).copied()
    }
}

/// Where a tensor of the folding arena starts (every one is placed in the arena).
fn arena_offset(d: &TensorDesc) -> Result<usize, String> {
    match d.location {
        Location::Arena(o) => Ok(o),
        Location::Weights(_) => Err("a folded tensor was not placed in the arena".into()),
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
    let scratch_elements = crate::compile::planner::scratch_elements(tensors, op);
    let scratch = (scratch_elements > 0).then(|| {
        let d = TensorDesc {
            dtype: ferrite_hal::DType::F32,
            shape: Shape::new(&[scratch_elements]).unwrap_or(Shape::SCALAR),
            location: Location::Arena(arena_len),
            bytes: scratch_elements * 4,
        };
        arena_len += align(scratch_elements * 4);
        d
    });
    let mut arena = vec![0u128; arena_len.div_ceil(16)];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut arena);
    for (desc, input) in descs.iter().zip(op.inputs.iter().flatten()) {
        let value = tensors[*input]
            .value
            .as_ref()
            .ok_or("input is not constant")?;
        let data = value.to_le_bytes();
        let o = arena_offset(desc)?;
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
    ferrite_cpu::steps::run_step(&step, bytes, &[]).map_err(|e| format!("cannot fold: {e}"))?;
    for (i, &t) in op.outputs.iter().enumerate() {
        let d = step.outputs.get(i).ok_or("missing output")?;
        let o = arena_offset(&d)?;
        let value =
            HostTensor::from_le_bytes(d.dtype, tensors[t].shape.clone(), &bytes[o..o + d.bytes])
                .ok_or("cannot read folded value")?;
        tensors[t].value = Some(value);
    }
    Ok(())
}
