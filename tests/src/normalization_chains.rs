//! Property tests of the CPU device's fused normalizations (`ferrite_cpu`'s `normalization`):
//! random LayerNormalizations (rank 1–4, any axis, a scale of the normalized axes' shape with
//! or without leading 1s, a bias or none) and InstanceNormalizations (rank 3–4, per channel),
//! their input the model's input or a sum that dies into the output (so the chain may run in
//! place), now and then that sum a second model output too, now and then the mean read on
//! through a view (which must keep the steps), on values far from zero or rows of one value
//! (variance 0) — each run with the chain fused into one step and step by step.
//!
//! The fused kernel forms the same values in the same order as the composed steps, so the two
//! runs must give the same bits; each must also be the normalization (against an f64
//! reference), and every chain must have been fused (a pattern the program stopped
//! recognising turns this red).

use crate::geometry::{self, Values};
use ferrite_core::Model;
use ferrite_cpu::CpuDevice;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::onnx::build::{attr_float, attr_int, ModelBuilder};
use ferrite_tools::compile::onnx::proto::data_type;
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::runner::run_with;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// Normalizations CI runs.
pub const CASES: u32 = 200;

/// One normalization's geometry.
#[derive(Clone, Debug)]
pub struct Case {
    shape: Vec<usize>,
    /// LayerNormalization's first normalized axis; `None`: InstanceNormalization.
    axis: Option<usize>,
    /// Leading 1s on the scale's and bias's shape (LayerNormalization).
    padded: bool,
    bias: bool,
    /// The input a sum `x + x` (which may then be overwritten), else the model's input.
    summed: bool,
    /// The sum a second model output (so it must survive).
    keep_sum: bool,
    epsilon: f32,
    /// Rows of one value (variance zero).
    flat: bool,
    /// LayerNormalization's mean (output 1) read through a view by a later step, an output of
    /// the model: the chain's values are then needed, so it must stay steps.
    mean_view: bool,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(1usize..=9, 1..=4),
        any::<bool>(),
        any::<u8>(),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        (0usize..3, any::<u8>(), any::<u64>()),
    )
        .prop_map(
            |(mut shape, layer, axis, (padded, bias, summed, keep_sum), (eps, bits, seed))| {
                let instance = !layer && shape.len() >= 3;
                if instance && shape.len() > 4 {
                    shape.truncate(4);
                }
                Case {
                    axis: (!instance).then(|| axis as usize % shape.len()),
                    shape,
                    padded,
                    bias: bias || instance,
                    summed,
                    keep_sum: summed && keep_sum,
                    epsilon: [1e-5, 1e-3, 0.1][eps],
                    flat: bits % 8 == 0,
                    mean_view: !instance && bits % 5 == 1,
                    seed,
                }
            },
        )
}

/// The case's model (opset 17), its input's values and the scale and bias.
fn model(c: &Case) -> (Vec<u8>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut v = Values(c.seed);
    let elements: usize = c.shape.iter().product();
    let (param_shape, params): (Vec<usize>, usize) = match c.axis {
        Some(axis) => {
            let tail = c.shape[axis..].to_vec();
            let count = tail.iter().product();
            let mut shape = if c.padded { vec![1; axis] } else { vec![] };
            shape.extend(tail);
            (shape, count)
        }
        None => (vec![c.shape[1]], c.shape[1]),
    };
    let scale = v.f32s(params);
    let bias = v.f32s(params);
    let row = match c.axis {
        Some(axis) => c.shape[axis..].iter().product(),
        None => c.shape[2..].iter().product::<usize>(),
    };
    // Values far from zero (an offset per row), or each row one value.
    let x: Vec<f32> = v
        .f32s(elements)
        .chunks(row.max(1))
        .enumerate()
        .flat_map(|(r, values)| {
            let offset = 50.0 * (r % 3) as f32 - 20.0;
            values
                .iter()
                .map(|&u| match c.flat {
                    true => offset,
                    false => offset + 3.0 * u,
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let dims = |s: &[usize]| s.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let mut b = ModelBuilder::new(17)
        .input("x", data_type::FLOAT, &geometry::dims(&c.shape))
        .init_f32("scale", &dims(&param_shape), &scale)
        .init_f32("bias", &dims(&param_shape), &bias);
    let input = if c.summed {
        b = b.node("Add", "sum", &["x", "x"], &["s"], vec![]);
        "s"
    } else {
        "x"
    };
    let operands: Vec<&str> = match c.bias {
        true => vec![input, "scale", "bias"],
        false => vec![input, "scale"],
    };
    let outputs: &[&str] = match c.mean_view {
        true => &["y", "mean"],
        false => &["y"],
    };
    b = match c.axis {
        Some(axis) => b.node(
            "LayerNormalization",
            "norm",
            &operands,
            outputs,
            vec![
                attr_int("axis", axis as i64),
                attr_float("epsilon", c.epsilon),
            ],
        ),
        None => b.node(
            "InstanceNormalization",
            "norm",
            &operands,
            &["y"],
            vec![attr_float("epsilon", c.epsilon)],
        ),
    };
    b = b.output("y");
    if c.mean_view {
        // The mean flattened (a view of its bytes), then squared: a later step reads the
        // chain's first value through another tensor.
        b = b
            .node(
                "Flatten",
                "flat",
                &["mean"],
                &["flat_mean"],
                vec![attr_int("axis", 0)],
            )
            .node(
                "Mul",
                "square",
                &["flat_mean", "flat_mean"],
                &["mean2"],
                vec![],
            )
            .output("mean2");
    }
    if c.keep_sum {
        b = b.output("s");
    }
    (b.encode(), x, scale, bias)
}

/// The normalization in f64 of the (summed) input.
fn reference(c: &Case, x: &[f32], scale: &[f32], bias: &[f32]) -> Vec<f64> {
    let from = c.axis.unwrap_or(2);
    let row: usize = c.shape[from..].iter().product();
    let factor = if c.summed { 2.0 } else { 1.0 };
    let mut y = Vec::with_capacity(x.len());
    for (r, values) in x.chunks(row.max(1)).enumerate() {
        let values: Vec<f64> = values.iter().map(|&v| v as f64 * factor).collect();
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        let inv = 1.0 / (var + c.epsilon as f64).sqrt();
        for (j, v) in values.iter().enumerate() {
            // Per position in the row, or per channel (row r of [N, C] rows).
            let p = match c.axis {
                Some(_) => j,
                None => r % c.shape[1],
            };
            let b = if c.bias { bias[p] as f64 } else { 0.0 };
            y.push((v - mean) * inv * scale[p] as f64 + b);
        }
    }
    y
}

/// One case, fused and step by step: the same bits, the normalization, and fused.
fn run_case(c: &Case) -> Result<(), TestCaseError> {
    let (onnx, x, scale, bias) = model(c);
    let packed = pack(&onnx, &PackOptions::default())
        .map_err(|e| TestCaseError::fail(format!("pack refused it: {e}")))?;
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes())
        .map_err(|e| TestCaseError::fail(format!("load refused it: {e}")))?;
    let fused = CpuDevice::new().program(&model).fused_normalizations();
    let want = usize::from(!c.mean_view);
    if fused != want {
        return Err(TestCaseError::fail(format!(
            "{fused} normalizations fused, not {want}"
        )));
    }
    let inputs = [geometry::f32_array(&c.shape, &x)];
    let fail =
        |e: ferrite_tools::host::error::RunError| TestCaseError::fail(format!("run failed: {e}"));
    let one_step = run_with(&model, &inputs, CpuDevice::new()).map_err(fail)?;
    let by_steps = run_with(&model, &inputs, CpuDevice::new().with_fusion(false)).map_err(fail)?;
    if one_step != by_steps {
        return Err(TestCaseError::fail("fused and step-by-step outputs differ"));
    }
    let got = crate::compare::floats(&one_step[0]);
    let want = reference(c, &x, &scale, &bias);
    let worst = got
        .iter()
        .zip(&want)
        .map(|(&g, &w)| (g as f64 - w).abs() / (1.0 + w.abs()))
        // A NaN output counts as the worst.
        .map(|d| if d.is_nan() { f64::INFINITY } else { d })
        .fold(0.0f64, f64::max);
    // Values up to ~170 centred in f32: a few roundings of the mean, scaled by 1/σ; a row of
    // one value leaves the mean's rounding (~1e-5) over √ε (down to 3e-3).
    let tolerance = if c.flat { 2e-2 } else { 2e-3 };
    if got.len() != want.len() || worst > tolerance {
        return Err(TestCaseError::fail(format!(
            "outputs differ from the f64 reference by up to {worst} (relative)"
        )));
    }
    Ok(())
}

/// Every case of `cases` (seeded) fused, equal to the steps and to the reference.
pub fn run(cases: u32) -> Result<(), String> {
    geometry::runner(cases, 47)
        .run(&case(), |c| run_case(&c))
        .map_err(|e| format!("fused normalizations: {e}"))
}
