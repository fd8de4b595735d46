//! Property tests over random geometries: every kernel strategy — pointwise GEMM, im2col,
//! depthwise masked / padded / direct, transposed convolution, max and average pooling, the
//! int8 and int16 (16 × 8) QConv and QGemm paths, Resize and the strided copies (Transpose, Slice, Expand, Concat) — run through
//! the whole pipeline (ONNX → pack → verify → device) over thousands of seeded random
//! geometries and compared with a naive reference written here.
//!
//! The geometries are what breaks kernels: kernels 1–7, strides 1–3, dilations 1–3, pads
//! 0…kernel−1 on each side, planes smaller than the kernel, 1×N and N×1 planes, channel counts
//! that are not a multiple of any SIMD width, groups and depthwise multipliers. A geometry ONNX
//! allows must pack and run; one with no output (a window larger than the padded input) must be
//! refused at pack time with a typed error. Nothing may panic.
//!
//! proptest generates the cases from a fixed seed (the same cases on every run and machine) and
//! shrinks a failure to a small geometry. [`Budget`] sets how many cases per family: CI runs
//! [`Budget::CI`]; `FERRITE_GEOMETRY_CASES=N` runs N per family (see `docs/security.md`).

use crate::Backend;
use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::onnx::build::{
    attr_float, attr_int, attr_ints, attr_string, ModelBuilder, D,
};
use ferrite_tools::compile::onnx::proto::{data_type, TensorProto};
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::npy::NpyArray;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::collections::BTreeMap;

/// Cases per op family.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Random geometries per family.
    pub cases: u32,
}

impl Budget {
    /// What CI runs per family and build (9,000 geometries in all, seconds on the host).
    pub const CI: Budget = Budget { cases: 600 };

    /// [`Budget::CI`], or `FERRITE_GEOMETRY_CASES` cases per family.
    pub fn from_env() -> Budget {
        std::env::var("FERRITE_GEOMETRY_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Budget::CI, |cases| Budget { cases })
    }
}

/// What a run covered: geometries per family, how many were refused as invalid, and how often
/// each convolution strategy was chosen.
#[derive(Debug, Default)]
pub struct Coverage {
    /// Cases run per family (`conv`, `qconv`, ...).
    pub cases: BTreeMap<&'static str, u32>,
    /// Cases per family refused at pack time (no output).
    pub refused: BTreeMap<&'static str, u32>,
    /// Times each convolution strategy (`pack`'s report) was chosen.
    pub strategies: BTreeMap<&'static str, usize>,
    /// Times each op was packed, by label.
    pub ops: BTreeMap<String, usize>,
}

impl Coverage {
    /// The total number of geometries.
    pub fn total(&self) -> u32 {
        self.cases.values().sum()
    }
}

impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} geometries:", self.total())?;
        for (family, n) in &self.cases {
            let refused = self.refused.get(family).copied().unwrap_or(0);
            write!(f, " {family} {n} ({refused} refused)")?;
        }
        write!(f, "; conv strategies:")?;
        for (s, n) in &self.strategies {
            write!(f, " {s} {n}")?;
        }
        Ok(())
    }
}

/// A deterministic stream of values for one case's tensors.
pub(crate) struct Values(pub(crate) u64);

impl Values {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(crate) fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
            .collect()
    }
    fn i8s(&mut self, n: usize, lo: i32, hi: i32) -> Vec<i8> {
        self.ints(n, lo, hi).into_iter().map(|v| v as i8).collect()
    }
    fn ints(&mut self, n: usize, lo: i32, hi: i32) -> Vec<i32> {
        let span = (hi - lo + 1) as u64;
        (0..n).map(|_| lo + (self.next() % span) as i32).collect()
    }
}

/// The activation type of an integer-op case: int8, or int16 (TFLite's 16 × 8 scheme).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Activations {
    Int8,
    Int16,
}

impl Activations {
    /// The type's values.
    fn range(self) -> (i32, i32) {
        match self {
            Activations::Int8 => (-128, 127),
            Activations::Int16 => (-32768, 32767),
        }
    }
    /// The opset whose QuantizeLinear takes the type.
    fn opset(self) -> i64 {
        match self {
            Activations::Int8 => 13,
            Activations::Int16 => 21,
        }
    }
    fn data_type(self) -> i32 {
        match self {
            Activations::Int8 => data_type::INT8,
            Activations::Int16 => data_type::INT16,
        }
    }
    /// `values` as raw tensor bytes of the type.
    fn bytes(self, values: &[i32]) -> Vec<u8> {
        match self {
            Activations::Int8 => values.iter().map(|&v| v as i8 as u8).collect(),
            Activations::Int16 => values
                .iter()
                .flat_map(|&v| (v as i16).to_le_bytes())
                .collect(),
        }
    }
    fn array(self, shape: &[usize], values: &[i32]) -> NpyArray {
        NpyArray {
            dtype: match self {
                Activations::Int8 => ferrite_hal::DType::I8,
                Activations::Int16 => ferrite_hal::DType::I16,
            },
            shape: shape.to_vec(),
            bytes: self.bytes(values),
        }
    }
    /// A scalar zero point of the type.
    fn zero(self, name: &str, v: i32) -> TensorProto {
        raw_tensor(name, &[], self.data_type(), self.bytes(&[v]))
    }
    /// A zero point for a case: small for int8, up to ±2000 for int16 (asymmetric, as
    /// onnxruntime's quantizer writes them).
    fn zero_of(self, seed: u64, spread: u64) -> i32 {
        let spread = match self {
            Activations::Int8 => spread,
            Activations::Int16 => spread * 100,
        };
        (seed % (2 * spread + 1)) as i32 - spread as i32
    }
}

pub(crate) fn f32_array(shape: &[usize], values: &[f32]) -> NpyArray {
    NpyArray {
        dtype: ferrite_hal::DType::F32,
        shape: shape.to_vec(),
        bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

pub(crate) fn dims(shape: &[usize]) -> Vec<D> {
    shape.iter().map(|&d| D::N(d as i64)).collect()
}

fn i64s(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

fn raw_tensor(name: &str, dims: &[usize], data_type: i32, raw: Vec<u8>) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: i64s(dims),
        data_type,
        raw_data: raw,
        ..Default::default()
    }
}

/// What pack must do with a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Accept it (ONNX defines its output).
    Valid,
    /// Refuse it with a typed error (ONNX gives it no output).
    Invalid,
    /// Either (an empty output).
    Either,
}

impl From<bool> for Expect {
    fn from(valid: bool) -> Expect {
        if valid {
            Expect::Valid
        } else {
            Expect::Invalid
        }
    }
}

/// A float32 scalar initializer (a quantization scale).
fn scalar(name: &str, v: f32) -> TensorProto {
    TensorProto {
        name: name.into(),
        data_type: data_type::FLOAT,
        float_data: vec![v],
        ..Default::default()
    }
}

/// An int8 scalar initializer (a zero point).
fn zero8(name: &str, v: i32) -> TensorProto {
    raw_tensor(name, &[], data_type::INT8, vec![v as i8 as u8])
}

/// Packs `onnx`, runs it on `B` and returns its first output as floats, or `Ok(None)` when pack
/// refused the model (a typed error, which `expect` decides is right or wrong).
fn pack_and_run<B: Backend>(
    onnx: &[u8],
    inputs: &[NpyArray],
    expect: impl Into<Expect>,
    coverage: &mut Coverage,
) -> Result<Option<Vec<f32>>, TestCaseError> {
    let expect = expect.into();
    let packed = match pack(onnx, &PackOptions::default()) {
        Ok(p) => p,
        Err(e) if expect != Expect::Valid => {
            let _ = e.to_string();
            return Ok(None);
        }
        Err(e) => return Err(TestCaseError::fail(format!("pack refused it: {e}"))),
    };
    if expect == Expect::Invalid {
        return Err(TestCaseError::fail(
            "pack accepted a geometry with no output",
        ));
    }
    for (s, n) in &packed.report.conv_strategies {
        *coverage.strategies.entry(s).or_default() += n;
    }
    for (op, n) in &packed.report.ops {
        *coverage.ops.entry(op.clone()).or_default() += n;
    }
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes())
        .map_err(|e| TestCaseError::fail(format!("load refused it: {e}")))?;
    let outputs =
        B::run(&model, inputs).map_err(|e| TestCaseError::fail(format!("run failed: {e}")))?;
    let out = outputs
        .first()
        .ok_or_else(|| TestCaseError::fail("no output"))?;
    Ok(Some(crate::compare::floats(out)))
}

/// Compares floats within `1e-4 × (1 + Σ|terms|)` per element (`scale`: the sum of absolute
/// products of each output, from the reference).
fn close(actual: &[f32], expected: &[f64], scale: &[f64]) -> Result<(), TestCaseError> {
    if actual.len() != expected.len() {
        return Err(TestCaseError::fail(format!(
            "{} outputs, expected {}",
            actual.len(),
            expected.len()
        )));
    }
    for (i, ((a, e), s)) in actual.iter().zip(expected).zip(scale).enumerate() {
        let bound = 1e-4 * (1.0 + s);
        let diff = (*a as f64 - e).abs();
        if diff.is_nan() || diff > bound {
            return Err(TestCaseError::fail(format!(
                "element {i}: {a} instead of {e}"
            )));
        }
    }
    Ok(())
}

/// Output length of a window of `k` taps dilated by `d` over `n + pads` at stride `s`; `None`
/// when the window does not fit once.
fn window_out(n: usize, k: usize, s: usize, d: usize, pads: usize, ceil: bool) -> Option<usize> {
    let span = d * (k - 1) + 1;
    let padded = n + pads;
    if padded < span {
        return None;
    }
    let out = if ceil {
        (padded - span).div_ceil(s) + 1
    } else {
        (padded - span) / s + 1
    };
    Some(out)
}

// ---------------------------------------------------------------- convolution

/// One convolution geometry (NCHW; `group` divides both channel counts).
#[derive(Clone, Debug)]
pub struct ConvCase {
    n: usize,
    group: usize,
    icg: usize,
    ocg: usize,
    h: usize,
    w: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    /// Top, left, bottom, right.
    pads: [usize; 4],
    bias: bool,
    relu: bool,
    seed: u64,
}

impl ConvCase {
    /// What pack must do: refuse a window with no output; a zero-size tensor anywhere may be
    /// refused or run (to an output matching the reference).
    fn expect(&self) -> Expect {
        let empty = [self.n, self.c(), self.oc(), self.h, self.w].contains(&0);
        match self.out() {
            _ if empty => Expect::Either,
            Some(_) => Expect::Valid,
            None => Expect::Invalid,
        }
    }
    fn c(&self) -> usize {
        self.group * self.icg
    }
    fn oc(&self) -> usize {
        self.group * self.ocg
    }
    fn out(&self) -> Option<[usize; 2]> {
        let [pt, pl, pb, pr] = self.pads;
        Some([
            window_out(
                self.h,
                self.kernel[0],
                self.stride[0],
                self.dilation[0],
                pt + pb,
                false,
            )?,
            window_out(
                self.w,
                self.kernel[1],
                self.stride[1],
                self.dilation[1],
                pl + pr,
                false,
            )?,
        ])
    }
    fn attrs(&self) -> Vec<ferrite_tools::compile::onnx::proto::AttributeProto> {
        let [pt, pl, pb, pr] = self.pads;
        vec![
            attr_ints("kernel_shape", &i64s(&self.kernel)),
            attr_ints("strides", &i64s(&self.stride)),
            attr_ints("dilations", &i64s(&self.dilation)),
            attr_ints("pads", &i64s(&[pt, pl, pb, pr])),
            attr_int("group", self.group as i64),
        ]
    }
    fn weight_len(&self) -> usize {
        self.oc() * self.icg * self.kernel[0] * self.kernel[1]
    }

    /// The naive convolution of integer-valued or float inputs: `(value, Σ|products|)`.
    fn reference(&self, x: &[f64], w: &[f64], b: Option<&[f64]>) -> (Vec<f64>, Vec<f64>) {
        let [oh, ow] = self.out().unwrap_or([0, 0]);
        let (c, oc, h, wd) = (self.c(), self.oc(), self.h, self.w);
        let [kh, kw] = self.kernel;
        let (mut y, mut s) = (Vec::new(), Vec::new());
        for n in 0..self.n {
            for o in 0..oc {
                let g = o / self.ocg;
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut acc = b.map_or(0.0, |b| b[o]);
                        let mut abs = acc.abs();
                        for i in 0..self.icg {
                            let ci = g * self.icg + i;
                            for ky in 0..kh {
                                let iy = (oy * self.stride[0] + ky * self.dilation[0]) as isize
                                    - self.pads[0] as isize;
                                if iy < 0 || iy >= h as isize {
                                    continue;
                                }
                                for kx in 0..kw {
                                    let ix = (ox * self.stride[1] + kx * self.dilation[1]) as isize
                                        - self.pads[1] as isize;
                                    if ix < 0 || ix >= wd as isize {
                                        continue;
                                    }
                                    let xv = x[((n * c + ci) * h + iy as usize) * wd + ix as usize];
                                    let wv = w[((o * self.icg + i) * kh + ky) * kw + kx];
                                    acc += xv * wv;
                                    abs += (xv * wv).abs();
                                }
                            }
                        }
                        y.push(acc);
                        s.push(abs);
                    }
                }
            }
        }
        (y, s)
    }
}

fn conv_case() -> impl Strategy<Value = ConvCase> {
    let kernel = (1usize..=7, 1usize..=7);
    (
        (1usize..=2, prop_oneof![Just(0usize), 1usize..=4], 1usize..=5, 1usize..=5),
        (1usize..=14, 1usize..=14, kernel, (1usize..=3, 1usize..=3)),
        (
            prop_oneof![3 => Just([1usize, 1]), 1 => (1usize..=3, 1usize..=3).prop_map(|(a, b)| [a, b])],
            any::<[u8; 4]>(),
            any::<bool>(),
            any::<bool>(),
            any::<u64>(),
        ),
    )
        .prop_map(
            |((n, group, icg, ocg), (h, w, (kh, kw), (sh, sw)), (dilation, p, bias, relu, seed))| {
                // group 0 = depthwise: one input channel per group, `ocg` the multiplier, many
                // channels (not a SIMD multiple).
                let (group, icg) = if group == 0 {
                    (1 + (seed % 13) as usize, 1)
                } else {
                    (group, icg)
                };
                let pads = [
                    p[0] as usize % kh,
                    p[1] as usize % kw,
                    p[2] as usize % kh,
                    p[3] as usize % kw,
                ];
                // Now and then a zero-size tensor: no output channels, or an empty plane.
                let ocg = if seed % 23 == 1 { 0 } else { ocg };
                let h = if seed % 29 == 1 { 0 } else { h };
                ConvCase {
                    n,
                    group,
                    icg,
                    ocg,
                    h,
                    w,
                    kernel: [kh, kw],
                    stride: [sh, sw],
                    dilation,
                    pads,
                    bias,
                    relu,
                    seed,
                }
            },
        )
}

/// Also pointwise cases (kernel 1, stride 1, no pads, often wide), which the random kernels
/// rarely give.
fn pointwise(mut c: ConvCase) -> ConvCase {
    c.kernel = [1, 1];
    c.stride = [1, 1];
    c.dilation = [1, 1];
    c.pads = [0; 4];
    c.group = 1;
    c.icg = 1 + (c.seed % 19) as usize;
    c.ocg = 1 + (c.seed / 19 % 17) as usize;
    c
}

/// Depthwise cases for each strategy: "same" width at stride 1 (masked), strided over planes
/// too large for the phase copies (direct), and the rest as drawn (padded).
fn depthwise(mut c: ConvCase) -> ConvCase {
    c.icg = 1;
    c.group = 1 + (c.seed % 13) as usize;
    match c.seed / 13 % 3 {
        0 => {
            c.stride = [1, 1];
            let total = (c.kernel[1] - 1) * c.dilation[1];
            c.pads[1] = (c.seed / 39) as usize % (total + 1);
            c.pads[3] = total - c.pads[1];
        }
        1 => {
            c.group = 1 + (c.seed % 2) as usize;
            c.stride = [
                2 + (c.seed / 39 % 2) as usize,
                2 + (c.seed / 78 % 2) as usize,
            ];
            c.h = 150 + (c.seed / 156 % 60) as usize;
            c.w = 150 + (c.seed / 9360 % 60) as usize;
        }
        _ => {}
    }
    c
}

fn run_conv<B: Backend>(case: &ConvCase, cov: &mut Coverage) -> Result<(), TestCaseError> {
    let mut v = Values(case.seed);
    let xs = [case.n, case.c(), case.h, case.w];
    let x = v.f32s(xs.iter().product());
    let w = v.f32s(case.weight_len());
    let b = v.f32s(case.oc());
    let mut m = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &dims(&xs))
        .init_f32(
            "w",
            &i64s(&[case.oc(), case.icg, case.kernel[0], case.kernel[1]]),
            &w,
        );
    let mut inputs = vec!["x", "w"];
    if case.bias {
        m = m.init_f32("b", &[case.oc() as i64], &b);
        inputs.push("b");
    }
    let conv_out = if case.relu { "c" } else { "y" };
    m = m.node("Conv", "conv", &inputs, &[conv_out], case.attrs());
    if case.relu {
        m = m.node("Relu", "relu", &["c"], &["y"], vec![]);
    }
    let onnx = m.output("y").encode();
    let Some(actual) = pack_and_run::<B>(&onnx, &[f32_array(&xs, &x)], case.expect(), cov)? else {
        return Ok(());
    };
    let to64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let b64 = to64(&b);
    let (mut y, s) = case.reference(&to64(&x), &to64(&w), case.bias.then_some(&b64[..]));
    if case.relu {
        y.iter_mut().for_each(|v| *v = v.max(0.0));
    }
    close(&actual, &y, &s)
}

// ---------------------------------------------------------------- int8 convolution

/// The requantized output of an integer op from its exact integer accumulator, in f64, clamped
/// to `range`; `None` where the value is within float32 precision of a rounding tie (the scale
/// ratio, formed from float32 scales, may put such a value on either side).
fn requantize_reference(
    acc: f64,
    real: f64,
    zero: i32,
    relu: bool,
    (lo, hi): (i32, i32),
) -> Option<i32> {
    let v = acc * real;
    let v = if relu { v.max(0.0) } else { v };
    if ((v - v.floor()) - 0.5).abs() < 4e-7 * v.abs() + 1e-9 {
        return None;
    }
    Some((v.round_ties_even() as i64 + zero as i64).clamp(lo as i64, hi as i64) as i32)
}

fn run_qconv<B: Backend>(case: &ConvCase, cov: &mut Coverage) -> Result<(), TestCaseError> {
    run_qconv_of::<B>(case, cov, Activations::Int8)
}

fn run_qconv16<B: Backend>(case: &ConvCase, cov: &mut Coverage) -> Result<(), TestCaseError> {
    run_qconv_of::<B>(case, cov, Activations::Int16)
}

/// A DequantizeLinear → Conv (→ Relu) → QuantizeLinear case on `act` activations against exact
/// integer accumulation (int16: sums past int32 on the larger kernels).
fn run_qconv_of<B: Backend>(
    case: &ConvCase,
    cov: &mut Coverage,
    act: Activations,
) -> Result<(), TestCaseError> {
    let mut v = Values(case.seed ^ 0x5151);
    let xs = [case.n, case.c(), case.h, case.w];
    let zx = act.zero_of(case.seed, 20);
    let zy = act.zero_of(case.seed / 41, 15);
    let (lo, hi) = act.range();
    let x = v.ints(xs.iter().product(), lo, hi);
    let wq = v.i8s(case.weight_len(), -127, 127);
    let bias: Vec<i32> = v
        .i8s(case.oc(), -128, 127)
        .iter()
        .map(|b| *b as i32 * 37)
        .collect();
    let k = case.icg * case.kernel[0] * case.kernel[1];
    let sx = 0.02f32;
    let sw: Vec<f32> = (0..case.oc())
        .map(|o| 0.004 * (1.0 + (o % 3) as f32 * 0.37))
        .collect();
    // Typical |acc| ≈ 74·73·√K: map it to about ±60 output steps (int16: 256 times larger
    // inputs, about ±15,000 steps).
    let sy = sx * 0.004 * 90.0 * (k as f32).sqrt();
    let wshape = [case.oc(), case.icg, case.kernel[0], case.kernel[1]];
    let bias_scale: Vec<f32> = sw.iter().map(|s| sx * s).collect();
    let mut m = ModelBuilder::new(act.opset())
        .input("xq", act.data_type(), &dims(&xs))
        .init(scalar("sx", sx))
        .init(act.zero("zx", zx))
        .init(raw_tensor(
            "wq",
            &wshape,
            data_type::INT8,
            wq.iter().map(|v| *v as u8).collect(),
        ))
        .init_f32("sw", &[case.oc() as i64], &sw)
        .init(raw_tensor(
            "zw",
            &[case.oc()],
            data_type::INT8,
            vec![0; case.oc()],
        ))
        .init(TensorProto {
            name: "bq".into(),
            dims: vec![case.oc() as i64],
            data_type: data_type::INT32,
            int32_data: bias.clone(),
            ..Default::default()
        })
        .init_f32("sb", &[case.oc() as i64], &bias_scale)
        .init(raw_tensor(
            "zb",
            &[case.oc()],
            data_type::INT32,
            vec![0; 4 * case.oc()],
        ))
        .init(scalar("sy", sy))
        .init(act.zero("zy", zy))
        .node(
            "DequantizeLinear",
            "dqx",
            &["xq", "sx", "zx"],
            &["x"],
            vec![],
        )
        .node(
            "DequantizeLinear",
            "dqw",
            &["wq", "sw", "zw"],
            &["w"],
            vec![attr_int("axis", 0)],
        )
        .node(
            "DequantizeLinear",
            "dqb",
            &["bq", "sb", "zb"],
            &["b"],
            vec![attr_int("axis", 0)],
        )
        .node("Conv", "conv", &["x", "w", "b"], &["c"], case.attrs());
    let q_in = if case.relu {
        m = m.node("Relu", "relu", &["c"], &["r"], vec![]);
        "r"
    } else {
        "c"
    };
    let onnx = m
        .node("QuantizeLinear", "q", &[q_in, "sy", "zy"], &["y"], vec![])
        .output("y")
        .encode();
    let input = act.array(&xs, &x);
    let Some(actual) = pack_and_run::<B>(&onnx, &[input], case.expect(), cov)? else {
        return Ok(());
    };
    let x64: Vec<f64> = x.iter().map(|&v| (v - zx) as f64).collect();
    let w64: Vec<f64> = wq.iter().map(|&v| v as f64).collect();
    let b64: Vec<f64> = bias.iter().map(|&v| v as f64).collect();
    let (acc, _) = case.reference(&x64, &w64, Some(&b64));
    let [oh, ow] = case.out().unwrap_or([0, 0]);
    let plane = oh * ow;
    if actual.len() != acc.len() {
        return Err(TestCaseError::fail("wrong output length"));
    }
    for (i, (a, acc)) in actual.iter().zip(&acc).enumerate() {
        let o = i / plane.max(1) % case.oc();
        let real = sx as f64 * sw[o] as f64 / sy as f64;
        if let Some(want) = requantize_reference(*acc, real, zy, case.relu, (lo, hi)) {
            if *a as i32 != want {
                return Err(TestCaseError::fail(format!(
                    "element {i}: {a} instead of {want} (accumulator {acc})"
                )));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- int8 matrix product

#[derive(Clone, Debug)]
/// One int8 fully connected layer: `[m, k] × [k, n]`.
pub struct GemmCase {
    m: usize,
    k: usize,
    n: usize,
    seed: u64,
}

fn gemm_case() -> impl Strategy<Value = GemmCase> {
    (1usize..=4, 1usize..=70, 1usize..=40, any::<u64>()).prop_map(|(m, k, n, seed)| GemmCase {
        m,
        k,
        n,
        seed,
    })
}

fn run_qgemm<B: Backend>(case: &GemmCase, cov: &mut Coverage) -> Result<(), TestCaseError> {
    run_qgemm_of::<B>(case, cov, Activations::Int8)
}

fn run_qgemm16<B: Backend>(case: &GemmCase, cov: &mut Coverage) -> Result<(), TestCaseError> {
    run_qgemm_of::<B>(case, cov, Activations::Int16)
}

/// A DequantizeLinear → MatMul → QuantizeLinear case on `act` activations against exact integer
/// accumulation.
fn run_qgemm_of<B: Backend>(
    case: &GemmCase,
    cov: &mut Coverage,
    act: Activations,
) -> Result<(), TestCaseError> {
    let mut v = Values(case.seed ^ 0x6767);
    let (zx, zy) = (act.zero_of(case.seed, 10), act.zero_of(case.seed / 21, 8));
    let (lo, hi) = act.range();
    let x = v.ints(case.m * case.k, lo, hi);
    let wq = v.i8s(case.k * case.n, -127, 127);
    let (sx, sw) = (0.03f32, 0.005f32);
    let sy = sx * sw * 90.0 * (case.k as f32).sqrt();
    let onnx = ModelBuilder::new(act.opset())
        .input("xq", act.data_type(), &dims(&[case.m, case.k]))
        .init(scalar("sx", sx))
        .init(act.zero("zx", zx))
        .init(raw_tensor(
            "wq",
            &[case.k, case.n],
            data_type::INT8,
            wq.iter().map(|v| *v as u8).collect(),
        ))
        .init(scalar("sw", sw))
        .init(zero8("zw", 0))
        .init(scalar("sy", sy))
        .init(act.zero("zy", zy))
        .node(
            "DequantizeLinear",
            "dqx",
            &["xq", "sx", "zx"],
            &["x"],
            vec![],
        )
        .node(
            "DequantizeLinear",
            "dqw",
            &["wq", "sw", "zw"],
            &["w"],
            vec![],
        )
        .node("MatMul", "mm", &["x", "w"], &["c"], vec![])
        .node("QuantizeLinear", "q", &["c", "sy", "zy"], &["y"], vec![])
        .output("y")
        .encode();
    let xs = [case.m, case.k];
    let Some(actual) = pack_and_run::<B>(&onnx, &[act.array(&xs, &x)], true, cov)? else {
        return Ok(());
    };
    let real = sx as f64 * sw as f64 / sy as f64;
    for r in 0..case.m {
        for c in 0..case.n {
            let acc: i64 = (0..case.k)
                .map(|i| (x[r * case.k + i] as i64 - zx as i64) * wq[i * case.n + c] as i64)
                .sum();
            let Some(want) = requantize_reference(acc as f64, real, zy, false, (lo, hi)) else {
                continue;
            };
            let got = actual.get(r * case.n + c).copied().unwrap_or(f32::NAN);
            if got as i32 != want || got.is_nan() {
                return Err(TestCaseError::fail(format!(
                    "[{r}, {c}]: {got} instead of {want} ({} before rounding)",
                    acc as f64 * real
                )));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- transposed convolution

fn run_conv_transpose<B: Backend>(
    case: &ConvCase,
    cov: &mut Coverage,
) -> Result<(), TestCaseError> {
    let mut v = Values(case.seed ^ 0x7777);
    let [sh, sw] = case.stride;
    let [dh, dw] = case.dilation;
    let [kh, kw] = case.kernel;
    // output_padding must be below the stride or the dilation.
    let op = [
        (case.seed % 3) as usize % sh.max(dh),
        (case.seed / 3 % 3) as usize % sw.max(dw),
    ];
    let [pt, pl, pb, pr] = case.pads;
    let full = |n: usize, s: usize, k: usize, d: usize, o: usize| {
        (s * n.saturating_sub(1) + o + (k - 1) * d + 1) * (n > 0) as usize
    };
    let fh = full(case.h, sh, kh, dh, op[0]);
    let fw = full(case.w, sw, kw, dw, op[1]);
    // An empty output or input: refusing it at pack time or running it are both right.
    let empty = fh <= pt + pb || fw <= pl + pr || case.expect() == Expect::Either;
    let (oh, ow) = (fh.saturating_sub(pt + pb), fw.saturating_sub(pl + pr));
    let xs = [case.n, case.c(), case.h, case.w];
    let x = v.f32s(xs.iter().product());
    let w = v.f32s(case.c() * case.ocg * kh * kw);
    let b = v.f32s(case.oc());
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &dims(&xs))
        .init_f32("w", &i64s(&[case.c(), case.ocg, kh, kw]), &w)
        .init_f32("b", &[case.oc() as i64], &b)
        .node("ConvTranspose", "ct", &["x", "w", "b"], &["y"], {
            let mut a = case.attrs();
            a.push(attr_ints("output_padding", &i64s(&op)));
            a
        })
        .output("y")
        .encode();
    let expect = if empty { Expect::Either } else { Expect::Valid };
    let Some(actual) = pack_and_run::<B>(&onnx, &[f32_array(&xs, &x)], expect, cov)? else {
        return Ok(());
    };
    if empty {
        return if actual.is_empty() {
            Ok(())
        } else {
            Err(TestCaseError::fail("an empty output has elements"))
        };
    }
    let (c, oc) = (case.c(), case.oc());
    let mut y = vec![0f64; case.n * oc * oh * ow];
    let mut s = vec![0f64; y.len()];
    for n in 0..case.n {
        for o in 0..oc {
            for p in 0..oh * ow {
                y[(n * oc + o) * oh * ow + p] = b[o] as f64;
                s[(n * oc + o) * oh * ow + p] = (b[o] as f64).abs();
            }
        }
        for ci in 0..c {
            let g = ci / case.icg;
            for j in 0..case.ocg {
                let o = g * case.ocg + j;
                for iy in 0..case.h {
                    for ix in 0..case.w {
                        let xv = x[((n * c + ci) * case.h + iy) * case.w + ix] as f64;
                        for ky in 0..kh {
                            let oy = (iy * sh + ky * dh) as isize - pt as isize;
                            if oy < 0 || oy >= oh as isize {
                                continue;
                            }
                            for kx in 0..kw {
                                let ox = (ix * sw + kx * dw) as isize - pl as isize;
                                if ox < 0 || ox >= ow as isize {
                                    continue;
                                }
                                let wv = w[((ci * case.ocg + j) * kh + ky) * kw + kx] as f64;
                                let at = ((n * oc + o) * oh + oy as usize) * ow + ox as usize;
                                y[at] += xv * wv;
                                s[at] += (xv * wv).abs();
                            }
                        }
                    }
                }
            }
        }
    }
    close(&actual, &y, &s)
}

// ---------------------------------------------------------------- pooling

#[derive(Clone, Debug)]
/// One pooling geometry.
pub struct PoolCase {
    conv: ConvCase,
    max: bool,
    ceil: bool,
    count_include_pad: bool,
}

fn pool_case() -> impl Strategy<Value = PoolCase> {
    (conv_case(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(mut conv, max, ceil, count_include_pad)| {
            conv.group = 1;
            conv.icg = 1 + (conv.seed % 11) as usize;
            if !max {
                conv.dilation = [1, 1];
            }
            PoolCase {
                conv,
                max,
                ceil,
                count_include_pad,
            }
        },
    )
}

fn run_pool<B: Backend>(case: &PoolCase, cov: &mut Coverage) -> Result<(), TestCaseError> {
    let c = &case.conv;
    let mut v = Values(c.seed ^ 0x9090);
    let xs = [c.n, c.icg, c.h, c.w];
    let x = v.f32s(xs.iter().product());
    let [pt, pl, pb, pr] = c.pads;
    let [kh, kw] = c.kernel;
    let [sh, sw] = c.stride;
    let [dh, dw] = c.dilation;
    let out = |n, k, s, d, pads, lead| {
        let o = window_out(n, k, s, d, pads, case.ceil)?;
        // With ceil_mode, a last window that would start in the trailing padding is dropped.
        Some(if case.ceil && (o - 1) * s >= n + lead {
            o - 1
        } else {
            o
        })
    };
    let dims_out = out(c.h, kh, sh, dh, pt + pb, pt).zip(out(c.w, kw, sw, dw, pl + pr, pl));
    let mut attrs = vec![
        attr_ints("kernel_shape", &i64s(&c.kernel)),
        attr_ints("strides", &i64s(&c.stride)),
        attr_ints("pads", &i64s(&c.pads)),
        attr_int("ceil_mode", case.ceil as i64),
    ];
    let op = if case.max {
        attrs.push(attr_ints("dilations", &i64s(&c.dilation)));
        "MaxPool"
    } else {
        attrs.push(attr_int("count_include_pad", case.count_include_pad as i64));
        "AveragePool"
    };
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &dims(&xs))
        .node(op, "pool", &["x"], &["y"], attrs)
        .output("y")
        .encode();
    let expect = match dims_out {
        _ if c.h == 0 => Expect::Either,
        Some(_) => Expect::Valid,
        None => Expect::Invalid,
    };
    let Some(actual) = pack_and_run::<B>(&onnx, &[f32_array(&xs, &x)], expect, cov)? else {
        return Ok(());
    };
    if c.h == 0 {
        // Every window is padding: an empty plane pools to nothing worth defining.
        return Ok(());
    }
    let (oh, ow) = dims_out.unwrap_or((0, 0));
    let mut y = Vec::new();
    for plane in x.chunks(c.h * c.w) {
        for oy in 0..oh {
            for ox in 0..ow {
                // A window wholly in the padding gives the lowest float (onnxruntime's start).
                let lowest = f32::MIN as f64;
                let (mut best, mut sum, mut count, mut padded) = (lowest, 0.0, 0, 0);
                for ky in 0..kh {
                    let iy = (oy * sh + ky * dh) as isize - pt as isize;
                    for kx in 0..kw {
                        let ix = (ox * sw + kx * dw) as isize - pl as isize;
                        let in_padded = iy < (c.h + pb) as isize && ix < (c.w + pr) as isize;
                        padded += in_padded as usize;
                        if iy < 0 || ix < 0 || iy >= c.h as isize || ix >= c.w as isize {
                            continue;
                        }
                        let v = plane[iy as usize * c.w + ix as usize] as f64;
                        best = best.max(v);
                        sum += v;
                        count += 1;
                    }
                }
                y.push(if case.max {
                    best
                } else if case.count_include_pad {
                    sum / padded.max(1) as f64
                } else {
                    sum / count.max(1) as f64
                });
            }
        }
    }
    let scale = vec![1.0; y.len()];
    close(&actual, &y, &scale)
}

// ---------------------------------------------------------------- Resize

#[derive(Clone, Debug)]
/// One Resize: input plane, output plane, mode.
pub struct ResizeCase {
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    linear: bool,
    seed: u64,
}

fn resize_case() -> impl Strategy<Value = ResizeCase> {
    (
        1usize..=9,
        1usize..=9,
        1usize..=19,
        1usize..=19,
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|(h, w, oh, ow, linear, seed)| ResizeCase {
            h,
            w,
            oh,
            ow,
            linear,
            seed,
        })
}

fn run_resize<B: Backend>(case: &ResizeCase, cov: &mut Coverage) -> Result<(), TestCaseError> {
    let mut v = Values(case.seed);
    let xs = [1, 2, case.h, case.w];
    let x = v.f32s(xs.iter().product());
    let (mode, transform) = if case.linear {
        ("linear", "half_pixel")
    } else {
        ("nearest", "asymmetric")
    };
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &dims(&xs))
        .init_i64("sizes", &[4], &i64s(&[1, 2, case.oh, case.ow]))
        .node("Resize", "resize", &["x", "", "", "sizes"], &["y"], {
            let mut a = vec![
                attr_string("mode", mode),
                attr_string("coordinate_transformation_mode", transform),
            ];
            if !case.linear {
                a.push(attr_string("nearest_mode", "floor"));
            } else {
                a.push(attr_float("cubic_coeff_a", -0.75));
            }
            a
        })
        .output("y")
        .encode();
    let Some(actual) = pack_and_run::<B>(&onnx, &[f32_array(&xs, &x)], true, cov)? else {
        return Ok(());
    };
    let (sy, sx) = (
        case.oh as f64 / case.h as f64,
        case.ow as f64 / case.w as f64,
    );
    let mut y = Vec::new();
    for plane in x.chunks(case.h * case.w) {
        let at = |iy: usize, ix: usize| plane[iy * case.w + ix] as f64;
        for oy in 0..case.oh {
            for ox in 0..case.ow {
                if case.linear {
                    let src = |o: usize, s: f64, n: usize| {
                        let f = ((o as f64 + 0.5) / s - 0.5).clamp(0.0, (n - 1) as f64);
                        let i0 = f.floor() as usize;
                        (i0, (i0 + 1).min(n - 1), f - i0 as f64)
                    };
                    let (y0, y1, fy) = src(oy, sy, case.h);
                    let (x0, x1, fx) = src(ox, sx, case.w);
                    let top = at(y0, x0) * (1.0 - fx) + at(y0, x1) * fx;
                    let bottom = at(y1, x0) * (1.0 - fx) + at(y1, x1) * fx;
                    y.push(top * (1.0 - fy) + bottom * fy);
                } else {
                    let iy = ((oy as f64 / sy).floor() as usize).min(case.h - 1);
                    let ix = ((ox as f64 / sx).floor() as usize).min(case.w - 1);
                    y.push(at(iy, ix));
                }
            }
        }
    }
    let scale = vec![1.0; y.len()];
    close(&actual, &y, &scale)
}

// ---------------------------------------------------------------- strided copies

#[derive(Clone, Debug)]
/// A Transpose (a permutation) then a Slice of a random rank-1…5 tensor.
pub struct CopyCase {
    shape: Vec<usize>,
    perm: Vec<usize>,
    /// Per axis of the transposed tensor: start, end, step (ONNX semantics, negatives too).
    slices: Vec<(i64, i64, i64)>,
    seed: u64,
}

fn copy_case() -> impl Strategy<Value = CopyCase> {
    proptest::collection::vec(1usize..=6, 1..=5)
        .prop_flat_map(|shape| {
            let rank = shape.len();
            let perm = Just((0..rank).collect::<Vec<_>>()).prop_shuffle();
            let slices = proptest::collection::vec((-8i64..=8, -8i64..=8, -3i64..=3), rank);
            (Just(shape), perm, slices, any::<u64>())
        })
        .prop_map(|(shape, perm, slices, seed)| {
            // Mostly non-empty slices: an empty one flips its step, then takes the whole axis
            // (one case in eight keeps an empty slice, which must be refused or run cleanly).
            let slices = slices
                .into_iter()
                .zip(perm.iter().map(|&p| shape[p] as i64))
                .map(|((s, e, st), n)| {
                    let st = if st == 0 { 1 } else { st };
                    if seed % 8 == 0 || !slice_range(n, (s, e, st)).is_empty() {
                        (s, e, st)
                    } else if !slice_range(n, (s, e, -st)).is_empty() {
                        (s, e, -st)
                    } else {
                        (0, i64::MAX, st.abs())
                    }
                })
                .collect();
            CopyCase {
                shape,
                perm,
                slices,
                seed,
            }
        })
}

/// ONNX Slice's index range on one axis of length `n`.
fn slice_range(n: i64, (start, end, step): (i64, i64, i64)) -> Vec<usize> {
    let clamp = |v: i64, lo: i64, hi: i64| v.max(lo).min(hi);
    let norm = |v: i64| if v < 0 { v + n } else { v };
    let mut out = Vec::new();
    if step > 0 {
        let (s, e) = (clamp(norm(start), 0, n), clamp(norm(end), 0, n));
        let mut i = s;
        while i < e {
            out.push(i as usize);
            i += step;
        }
    } else {
        let (s, e) = (clamp(norm(start), -1, n - 1), clamp(norm(end), -1, n - 1));
        let mut i = s;
        while i > e {
            out.push(i as usize);
            i += step;
        }
    }
    out
}

fn run_copy<B: Backend>(case: &CopyCase, cov: &mut Coverage) -> Result<(), TestCaseError> {
    let mut v = Values(case.seed);
    let rank = case.shape.len();
    let x = v.f32s(case.shape.iter().product());
    let tshape: Vec<usize> = case.perm.iter().map(|&p| case.shape[p]).collect();
    let ranges: Vec<Vec<usize>> = tshape
        .iter()
        .zip(&case.slices)
        .map(|(&n, &s)| slice_range(n as i64, s))
        .collect();
    let valid = ranges.iter().all(|r| !r.is_empty());
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &dims(&case.shape))
        .init_i64(
            "starts",
            &[rank as i64],
            &case.slices.iter().map(|s| s.0).collect::<Vec<_>>(),
        )
        .init_i64(
            "ends",
            &[rank as i64],
            &case.slices.iter().map(|s| s.1).collect::<Vec<_>>(),
        )
        .init_i64(
            "axes",
            &[rank as i64],
            &(0..rank as i64).collect::<Vec<_>>(),
        )
        .init_i64(
            "steps",
            &[rank as i64],
            &case.slices.iter().map(|s| s.2).collect::<Vec<_>>(),
        )
        .node(
            "Transpose",
            "t",
            &["x"],
            &["xt"],
            vec![attr_ints("perm", &i64s(&case.perm))],
        )
        .node(
            "Slice",
            "s",
            &["xt", "starts", "ends", "axes", "steps"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode();
    // An empty slice is a valid ONNX result that Ferrite may refuse (zero-size tensors) or run.
    let result = pack_and_run::<B>(&onnx, &[f32_array(&case.shape, &x)], valid, cov);
    if !valid {
        return Ok(());
    }
    let Some(actual) = result? else {
        return Ok(());
    };
    // Strides of the input, in transposed axis order.
    let mut strides = vec![1usize; rank];
    for a in (0..rank.saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * case.shape[a + 1];
    }
    let tstrides: Vec<usize> = case.perm.iter().map(|&p| strides[p]).collect();
    let mut y = Vec::new();
    let total: usize = ranges.iter().map(|r| r.len()).product();
    for flat in 0..total {
        let (mut rest, mut offset) = (flat, 0);
        for a in (0..rank).rev() {
            let r = &ranges[a];
            offset += r[rest % r.len()] * tstrides[a];
            rest /= r.len();
        }
        y.push(x[offset] as f64);
    }
    let scale = vec![0.0; y.len()];
    close(&actual, &y, &scale)
}

#[derive(Clone, Debug)]
/// An Expand (broadcasting some axes of a random rank-1…4 tensor) then a Concat of the result
/// with itself and a second input along a random axis: the other strided copies.
pub struct ExpandConcatCase {
    shape: Vec<usize>,
    /// The expanded shape (each axis of `shape` kept, or grown from 1).
    target: Vec<usize>,
    axis: usize,
    /// The second Concat input's length along `axis`.
    other: usize,
    seed: u64,
}

fn expand_concat_case() -> impl Strategy<Value = ExpandConcatCase> {
    proptest::collection::vec((1usize..=5, 1usize..=4, any::<bool>()), 1..=4)
        .prop_flat_map(|axes| {
            let rank = axes.len();
            (Just(axes), 0..rank, 1usize..=3, any::<u64>())
        })
        .prop_map(|(axes, axis, other, seed)| {
            // A broadcast axis is 1 in the input and `grow` in the target.
            let shape = axes
                .iter()
                .map(|&(n, _, b)| if b { 1 } else { n })
                .collect();
            let target = axes
                .iter()
                .map(|&(n, g, b)| if b { g } else { n })
                .collect();
            ExpandConcatCase {
                shape,
                target,
                axis,
                other,
                seed,
            }
        })
}

/// Row-major strides of `shape`.
fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for a in (0..shape.len().saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * shape[a + 1];
    }
    strides
}

fn run_expand_concat<B: Backend>(
    case: &ExpandConcatCase,
    cov: &mut Coverage,
) -> Result<(), TestCaseError> {
    let mut v = Values(case.seed);
    let rank = case.shape.len();
    let x = v.f32s(case.shape.iter().product());
    let mut other_shape = case.target.clone();
    other_shape[case.axis] = case.other;
    let z = v.f32s(other_shape.iter().product());
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &dims(&case.shape))
        .input("z", data_type::FLOAT, &dims(&other_shape))
        .init_i64("target", &[rank as i64], &i64s(&case.target))
        .node("Expand", "e", &["x", "target"], &["xe"], vec![])
        .node(
            "Concat",
            "c",
            &["xe", "z", "xe"],
            &["y"],
            vec![attr_int("axis", case.axis as i64)],
        )
        .output("y")
        .encode();
    let inputs = [f32_array(&case.shape, &x), f32_array(&other_shape, &z)];
    let Some(actual) = pack_and_run::<B>(&onnx, &inputs, Expect::Valid, cov)? else {
        return Ok(());
    };
    let mut out_shape = case.target.clone();
    out_shape[case.axis] = 2 * case.target[case.axis] + case.other;
    let (xs, zs) = (strides_of(&case.shape), strides_of(&other_shape));
    let total: usize = out_shape.iter().product();
    let mut y = Vec::with_capacity(total);
    for flat in 0..total {
        let mut index = vec![0usize; rank];
        let mut rest = flat;
        for a in (0..rank).rev() {
            index[a] = rest % out_shape[a];
            rest /= out_shape[a];
        }
        let (t, along) = (case.target[case.axis], index[case.axis]);
        let from_z = along >= t && along < t + case.other;
        if from_z {
            index[case.axis] = along - t;
            let at: usize = index.iter().zip(&zs).map(|(i, s)| i * s).sum();
            y.push(z[at] as f64);
        } else {
            if along >= t {
                index[case.axis] = along - t - case.other;
            }
            // Broadcast axes read index 0 of the input.
            let at: usize = index
                .iter()
                .zip(&case.shape)
                .zip(&xs)
                .map(|((i, &n), s)| if n == 1 { 0 } else { i * s })
                .sum();
            y.push(x[at] as f64);
        }
    }
    let scale = vec![0.0; y.len()];
    close(&actual, &y, &scale)
}

// ---------------------------------------------------------------- the suite

pub(crate) fn runner(cases: u32, seed: u8) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    };
    TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]),
    )
}

fn family<S: Strategy>(
    name: &'static str,
    seed: u8,
    budget: Budget,
    strategy: S,
    coverage: &mut Coverage,
    failures: &mut Vec<String>,
    run: impl Fn(&S::Value, &mut Coverage) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let cov = std::cell::RefCell::new(Coverage::default());
    let outcome = runner(budget.cases, seed).run(&strategy, |case| {
        let mut c = cov.borrow_mut();
        *c.cases.entry(name).or_default() += 1;
        let before = c.ops.values().sum::<usize>();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&case, &mut c)))
            .unwrap_or_else(|p| {
                let what = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(TestCaseError::fail(format!("panicked: {what}")))
            });
        if result.is_ok() && c.ops.values().sum::<usize>() == before {
            *c.refused.entry(name).or_default() += 1;
        }
        result
    });
    let c = cov.into_inner();
    // Shrinking reruns cases: count each family's budget once.
    coverage.cases.insert(name, budget.cases);
    for (k, v) in c.refused {
        coverage.refused.insert(k, v.min(budget.cases));
    }
    for (k, v) in c.strategies {
        *coverage.strategies.entry(k).or_default() += v;
    }
    for (k, v) in c.ops {
        *coverage.ops.entry(k).or_default() += v;
    }
    if let Err(e) = outcome {
        failures.push(format!("{name}: {e}"));
    }
}

/// A runner's state: what was covered and what failed.
struct Suite {
    budget: Budget,
    coverage: Coverage,
    failures: Vec<String>,
}

impl Suite {
    fn new(budget: Budget) -> Suite {
        Suite {
            budget,
            coverage: Coverage::default(),
            failures: Vec::new(),
        }
    }

    fn run<S: Strategy>(
        &mut self,
        name: &'static str,
        seed: u8,
        strategy: S,
        run: impl Fn(&S::Value, &mut Coverage) -> Result<(), TestCaseError>,
    ) where
        S::Value: std::fmt::Debug,
    {
        let (cov, fails) = (&mut self.coverage, &mut self.failures);
        family(name, seed, self.budget, strategy, cov, fails, run);
    }

    /// The int8 families.
    fn integer<B: Backend>(&mut self) {
        self.run("qconv", 5, conv_case(), run_qconv::<B>);
        let pointwise_cases = conv_case().prop_map(pointwise);
        self.run("qconv-pointwise", 6, pointwise_cases, run_qconv::<B>);
        let depthwise_cases = conv_case().prop_map(depthwise);
        self.run("qconv-depthwise", 11, depthwise_cases, run_qconv::<B>);
        self.run("qgemm", 7, gemm_case(), run_qgemm::<B>);
        // int16 activations, int8 weights (TFLite's 16 × 8 scheme).
        self.run("qconv16", 21, conv_case(), run_qconv16::<B>);
        let depthwise_cases = conv_case().prop_map(depthwise);
        self.run("qconv16-depthwise", 22, depthwise_cases, run_qconv16::<B>);
        self.run("qgemm16", 23, gemm_case(), run_qgemm16::<B>);
    }

    fn finish(self) -> Result<Coverage, String> {
        if self.failures.is_empty() {
            Ok(self.coverage)
        } else {
            Err(self.failures.join("\n"))
        }
    }
}

/// Runs every family on backend `B` with `budget` cases each; returns what was covered, or
/// every family's minimal failing geometry.
pub fn run_all<B: Backend>(budget: Budget) -> Result<Coverage, String> {
    let mut suite = Suite::new(budget);
    suite.run("conv", 1, conv_case(), run_conv::<B>);
    suite.run(
        "conv-pointwise",
        2,
        conv_case().prop_map(pointwise),
        run_conv::<B>,
    );
    suite.run(
        "conv-depthwise",
        10,
        conv_case().prop_map(depthwise),
        run_conv::<B>,
    );
    suite.run("conv-transpose", 3, conv_case(), run_conv_transpose::<B>);
    suite.run("pool", 4, pool_case(), run_pool::<B>);
    suite.integer::<B>();
    suite.run("resize", 8, resize_case(), run_resize::<B>);
    suite.run("transpose-slice", 9, copy_case(), run_copy::<B>);
    suite.run(
        "expand-concat",
        12,
        expand_concat_case(),
        run_expand_concat::<B>,
    );
    suite.finish()
}

/// The int8 families only (for devices where each case is costly, as QEMU).
pub fn run_integer<B: Backend>(budget: Budget) -> Result<Coverage, String> {
    let mut suite = Suite::new(budget);
    suite.integer::<B>();
    suite.finish()
}
