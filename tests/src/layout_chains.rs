//! Property tests of the CPU device's channel-blocked tensors (`ferrite_cpu::program::layout`): random
//! chains of convolutions — a regular convolution of any kernel, stride and padding, a 3 × 3
//! depthwise one at stride 1 or 2, a pointwise one, a residual Add, a padded 3 × 3 one, fused
//! and separate Relu and Clip, now and then an in-place Flatten of a middle tensor as a second
//! model output — run with the tensors between convolutions channel-blocked (once with the
//! direct kernels, once with Winograd's transform for the 3 × 3 stride-1 layers) and once all
//! planar. Channel counts are whole blocks (8, 16, 32, 48), or not (then the tensor stays
//! planar); planes from 1 × 1 up.
//!
//! Blocking changes where values lie, never which sums are formed or in what order, so the
//! direct run must give the planar run's bits (any difference is a bug: a misplaced value, a
//! layout the planner and a kernel disagree on), or be within a few roundings where the planar
//! run multiplied unfolded windows instead. Winograd's transform groups the terms differently:
//! within [`WINOGRAD_TOLERANCE`] of the output's scale.

pub use crate::geometry::Budget;
use crate::geometry::{self, Values};
use ferrite_core::Model;
use ferrite_cpu::CpuDevice;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::onnx::build::{attr_int, attr_ints, ModelBuilder};
use ferrite_tools::compile::onnx::proto::data_type;
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::runner::run_with;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// How far a Winograd output may lie from the planar one, relative to 1 + the largest planar
/// output: two layers of up to 48 × 9 terms each, each transform a few roundings.
pub const WINOGRAD_TOLERANCE: f32 = 1e-5;

/// What CI runs ([`Budget::CHAINS`]); `FERRITE_GEOMETRY_CASES` does not change it.
impl Budget {
    /// Chains per build.
    pub const CHAINS: Budget = Budget { cases: 200 };
}

/// One chain's geometry.
#[derive(Clone, Debug)]
pub struct Chain {
    channels: usize,
    h: usize,
    w: usize,
    /// The middle tensors' channels and the last convolution's.
    middle: usize,
    last: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    /// Top, left, bottom, right.
    pads: [usize; 4],
    depthwise_stride: usize,
    residual: bool,
    /// 0: none, 1: Relu, 2: Clip(0, 6).
    activation: u8,
    /// Flatten the pointwise output in place as a second model output.
    alias: bool,
    seed: u64,
}

fn chain() -> impl Strategy<Value = Chain> {
    let channels = prop_oneof![
        3 => (1usize..=3).prop_map(|n| 16 * n),
        1 => Just(8usize),
        1 => 1usize..=40,
    ];
    (
        (1usize..=12, 1usize..=16, 1usize..=16),
        (channels.clone(), channels),
        (
            (1usize..=5, 1usize..=5),
            (1usize..=2, 1usize..=2),
            any::<[u8; 4]>(),
        ),
        (
            1usize..=2,
            any::<bool>(),
            0u8..=2,
            any::<u8>(),
            any::<u64>(),
        ),
    )
        .prop_map(
            |((channels, h, w), (middle, last), (kernel, stride, p), more)| {
                let (kh, kw) = kernel;
                let (depthwise_stride, residual, activation, alias, seed) = more;
                Chain {
                    channels,
                    h,
                    w,
                    middle,
                    last,
                    kernel: [kh, kw],
                    stride: [stride.0, stride.1],
                    pads: [
                        p[0] as usize % kh,
                        p[1] as usize % kw,
                        p[2] as usize % kh,
                        p[3] as usize % kw,
                    ],
                    depthwise_stride,
                    residual,
                    activation,
                    alias: alias % 5 == 0,
                    seed,
                }
            },
        )
}

/// `Relu`, `Clip(0, 6)` or nothing after `input`, as a node named `name` giving `output`.
fn activate(m: ModelBuilder, kind: u8, input: &str, output: &str) -> ModelBuilder {
    match kind {
        1 => m.node("Relu", output, &[input], &[output], vec![]),
        2 => m
            .init_f32(&format!("{output}_lo"), &[], &[0.0])
            .init_f32(&format!("{output}_hi"), &[], &[6.0])
            .node(
                "Clip",
                output,
                &[input, &format!("{output}_lo"), &format!("{output}_hi")],
                &[output],
                vec![],
            ),
        _ => m.node("Identity", output, &[input], &[output], vec![]),
    }
}

/// The chain's ONNX model, its input's shape, and `None` where its first convolution has no
/// output (pack refuses it; nothing to compare).
fn model(c: &Chain) -> Option<(Vec<u8>, [usize; 4])> {
    let [kh, kw] = c.kernel;
    let [pt, pl, pb, pr] = c.pads;
    (c.h + pt + pb).checked_sub(kh)?;
    (c.w + pl + pr).checked_sub(kw)?;
    let mut v = Values(c.seed);
    let (m, n) = (c.middle, c.last);
    let shape = [1, c.channels, c.h, c.w];
    let ints = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let conv = |kernel: [usize; 2], stride: [usize; 2], pads: [usize; 4], group: usize| {
        vec![
            attr_ints("kernel_shape", &ints(&kernel)),
            attr_ints("strides", &ints(&stride)),
            attr_ints("pads", &ints(&pads)),
            attr_int("group", group as i64),
        ]
    };
    let mut b = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &geometry::dims(&shape))
        .init_f32(
            "w1",
            &ints(&[m, c.channels, kh, kw]),
            &v.f32s(m * c.channels * kh * kw),
        )
        .init_f32("b1", &[m as i64], &v.f32s(m))
        .init_f32("w2", &ints(&[m, 1, 3, 3]), &v.f32s(m * 9))
        .init_f32("b2", &[m as i64], &v.f32s(m))
        .init_f32("w3", &ints(&[m, m, 1, 1]), &v.f32s(m * m))
        .init_f32("w4", &ints(&[n, m, 3, 3]), &v.f32s(n * m * 9))
        .init_f32("b4", &[n as i64], &v.f32s(n))
        .node(
            "Conv",
            "c1",
            &["x", "w1", "b1"],
            &["c1"],
            conv(c.kernel, c.stride, c.pads, 1),
        );
    b = activate(b, c.activation, "c1", "a1");
    let s = c.depthwise_stride;
    b = b.node(
        "Conv",
        "c2",
        &["a1", "w2", "b2"],
        &["c2"],
        conv([3, 3], [s, s], [1; 4], m),
    );
    b = activate(b, 2 - c.activation % 2, "c2", "a2");
    b = b.node(
        "Conv",
        "c3",
        &["a2", "w3"],
        &["c3"],
        conv([1, 1], [1, 1], [0; 4], 1),
    );
    let joined = if c.residual {
        b = b.node("Add", "add", &["c3", "a2"], &["sum"], vec![]);
        b = activate(b, 1, "sum", "a3");
        "a3"
    } else {
        "c3"
    };
    b = b.node(
        "Conv",
        "c4",
        &[joined, "w4", "b4"],
        &["y"],
        conv([3, 3], [1, 1], [1; 4], 1),
    );
    b = b.output("y");
    if c.alias {
        b = b
            .node(
                "Flatten",
                "flat",
                &[joined],
                &["flat"],
                vec![attr_int("axis", 1)],
            )
            .output("flat");
    }
    Some((b.encode(), shape))
}

/// One chain, blocked and planar: the same bits; `Ok(true)` where the program blocked a tensor.
fn run_chain(c: &Chain) -> Result<bool, TestCaseError> {
    let Some((onnx, shape)) = model(c) else {
        return Ok(false);
    };
    let packed = pack(&onnx, &PackOptions::default())
        .map_err(|e| TestCaseError::fail(format!("pack refused it: {e}")))?;
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes())
        .map_err(|e| TestCaseError::fail(format!("load refused it: {e}")))?;
    let x = Values(c.seed ^ 0x5555).f32s(shape.iter().product());
    let inputs = [geometry::f32_array(&shape, &x)];
    let blocked_device = CpuDevice::new();
    let blocked = blocked_device.program(&model).blocked_tensors() > 0;
    let fail =
        |e: ferrite_tools::host::error::RunError| TestCaseError::fail(format!("run failed: {e}"));
    let planar = run_with(
        &model,
        &inputs,
        CpuDevice::new().with_channel_blocking(false),
    )
    .map_err(fail)?;
    let direct = run_with(&model, &inputs, blocked_device.with_winograd(false)).map_err(fail)?;
    let winograd = run_with(&model, &inputs, blocked_device).map_err(fail)?;
    for (run, what, tolerance) in [
        (&direct, "blocked (direct)", 1e-5),
        (&winograd, "blocked (Winograd)", WINOGRAD_TOLERANCE),
    ] {
        if run.len() != planar.len() {
            return Err(TestCaseError::fail("a different number of outputs"));
        }
        for (a, b) in run.iter().zip(&planar) {
            let (a, b) = (crate::compare::floats(a), crate::compare::floats(b));
            let scale = 1.0 + b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let close = a.len() == b.len()
                && a.iter()
                    .zip(&b)
                    .all(|(x, y)| x.to_bits() == y.to_bits() || (x - y).abs() <= tolerance * scale);
            if !close {
                let worst = a
                    .iter()
                    .zip(&b)
                    .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
                return Err(TestCaseError::fail(format!(
                    "{what} and planar outputs differ by up to {worst} (scale {scale})"
                )));
            }
        }
    }
    Ok(blocked)
}

/// Every chain of `budget` (its cases, seeded) equal blocked and planar; the number of chains
/// whose program blocked a tensor.
pub fn run(budget: Budget) -> Result<u32, String> {
    let blocked = core::cell::Cell::new(0u32);
    geometry::runner(budget.cases, 31)
        .run(&chain(), |c| {
            if run_chain(&c)? {
                blocked.set(blocked.get() + 1);
            }
            Ok(())
        })
        .map_err(|e| format!("channel-blocked chains: {e}"))?;
    Ok(blocked.get())
}
