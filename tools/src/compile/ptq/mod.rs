//! Post-training quantization: `ferrite pack --quantize int8 --calibration DIR`.
//!
//! 1. The float model is lowered and optimised as usual (batch norms folded, activations fused).
//! 2. Calibration runs the float plan on the CPU over every sample, with each activation that a
//!    quantizable op reads or writes made an extra output, to find its range (min/max; for
//!    percentile and entropy a second pass fills histograms).
//! 3. Weights become per-channel symmetric int8, activations get per-tensor asymmetric int8
//!    QuantizeLinear/DequantizeLinear pairs ([`rewrite`]), and the integer pass that also
//!    serves onnxruntime-quantized models turns Conv/Gemm into `QConv`/`QGemm`.
//!    With bias correction ([`Settings::bias_correction`]) each such op's bias also absorbs the
//!    expected error of its int8 weights, `(W − W_q)·E[x]`, from its input's per-channel means
//!    on the calibration data.
//! 4. The packed int8 model runs over the calibration samples once more, and each output is
//!    compared with the float model's: SQNR and largest error ([`QuantizationReport`]).
//!
//! Everything runs in-process on the CPU device; no Python is involved.

pub mod calibration;
pub mod ranges;
pub mod rewrite;

pub use calibration::InputSpec;
pub use ranges::Method;

use crate::compile::ir::{PlanGraph, TensorId};
use crate::compile::pack::{pack_plan, to_plan, PackOptions, Packed};
use crate::compile::passes::{remove_dead, PassStats};
use crate::host::npy::NpyArray;
use crate::PackError;
use ferrite_core::{Model, Session};
use ferrite_cpu::CpuDevice;
use ferrite_hal::DType;
use ranges::Observed;
use std::path::Path;

/// A phase of quantization, for progress reporting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Running the float model to find activation ranges.
    Ranges,
    /// Running it again to fill histograms (percentile, entropy).
    Histograms,
    /// Running the int8 model to measure its error.
    Report,
}

impl Stage {
    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Ranges => "calibrating ranges",
            Stage::Histograms => "calibrating histograms",
            Stage::Report => "measuring int8 error",
        }
    }
}

/// How to quantize: the calibration method, and whether to correct biases.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// How activation ranges are chosen.
    pub method: Method,
    /// Adds the expected error of the int8 weights to each quantized op's bias (empirical bias
    /// correction, as in Nagel et al., "Data-Free Quantization", 2019, with calibration means).
    pub bias_correction: bool,
}

impl From<Method> for Settings {
    fn from(method: Method) -> Settings {
        Settings {
            method,
            bias_correction: false,
        }
    }
}

/// Called with `(stage, samples done, samples in all)` as calibration proceeds.
pub type Progress<'a> = &'a mut dyn FnMut(Stage, usize, usize);

/// How one output of the int8 model compares with the float model on the calibration data.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputAccuracy {
    /// A float output.
    Float {
        /// Output name.
        name: String,
        /// Signal-to-quantization-noise ratio in dB (`inf` when identical).
        sqnr_db: f64,
        /// Largest absolute difference.
        max_abs_error: f64,
        /// Largest absolute float value, for scale.
        max_abs_reference: f64,
    },
    /// A non-float output (an index, say): the fraction of equal elements.
    Exact {
        /// Output name.
        name: String,
        /// Fraction of elements equal to the float model's.
        agreement: f64,
    },
}

/// What `--quantize` did and how close the result is.
#[derive(Clone, Debug)]
pub struct QuantizationReport {
    /// The calibration method.
    pub method: Method,
    /// Calibration samples used.
    pub samples: usize,
    /// Weight tensors made int8.
    pub weights: usize,
    /// Activations given int8 parameters.
    pub activations: usize,
    /// Biases corrected for the weights' quantization error (0 without bias correction).
    pub biases_corrected: usize,
    /// Per output, int8 against float on the calibration data.
    pub outputs: Vec<OutputAccuracy>,
}

impl QuantizationReport {
    /// The report as data (what `ferrite pack --quantize` prints, for programs).
    pub fn to_json(&self) -> serde_json::Value {
        let outputs: Vec<serde_json::Value> = self
            .outputs
            .iter()
            .map(|o| match o {
                OutputAccuracy::Float {
                    name,
                    sqnr_db,
                    max_abs_error,
                    max_abs_reference,
                } => serde_json::json!({
                    "name": name,
                    // JSON has no infinity: an identical output's SQNR is null.
                    "sqnr_db": sqnr_db.is_finite().then_some(*sqnr_db),
                    "max_abs_error": max_abs_error,
                    "max_abs_reference": max_abs_reference,
                }),
                OutputAccuracy::Exact { name, agreement } => {
                    serde_json::json!({"name": name, "agreement": agreement})
                }
            })
            .collect();
        serde_json::json!({
            "type": "int8",
            "method": self.method.to_string(),
            "samples": self.samples,
            "weights": self.weights,
            "activations": self.activations,
            "biases_corrected": self.biases_corrected,
            "outputs": outputs,
        })
    }
}

/// The inputs of a plan, as calibration files must match them.
pub fn plan_inputs(g: &PlanGraph) -> Vec<InputSpec> {
    g.inputs
        .iter()
        .map(|&t| InputSpec {
            name: g.tensors[t].name.clone(),
            dtype: g.tensors[t].dtype,
            shape: g.tensors[t].shape.clone(),
        })
        .collect()
}

/// Packs `onnx_bytes` as an int8 model calibrated on the samples in `calibration_dir`.
pub fn quantize(
    onnx_bytes: &[u8],
    options: &PackOptions,
    calibration_dir: &Path,
    settings: impl Into<Settings>,
    progress: Progress<'_>,
) -> Result<(Packed, QuantizationReport), PackError> {
    let (plan, passes) = to_plan(onnx_bytes, options)?;
    let samples = calibration::load(calibration_dir, &plan_inputs(&plan))?;
    quantize_plan(plan, passes, &samples, settings, progress)
}

/// Packs `onnx_bytes` as an int8 model calibrated on samples given in memory (see
/// [`calibration::from_memory`]).
pub fn quantize_in_memory(
    onnx_bytes: &[u8],
    options: &PackOptions,
    entries: Vec<calibration::Entry>,
    settings: impl Into<Settings>,
    progress: Progress<'_>,
) -> Result<(Packed, QuantizationReport), PackError> {
    let (plan, passes) = to_plan(onnx_bytes, options)?;
    let samples = calibration::from_memory(entries, &plan_inputs(&plan))?;
    quantize_plan(plan, passes, &samples, settings, progress)
}

fn f32s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Runs a packed model on the CPU over every sample, handing each sample's outputs to `each`.
fn run_all(
    bytes: &[u8],
    samples: &[Vec<NpyArray>],
    stage: Stage,
    progress: &mut dyn FnMut(Stage, usize, usize),
    mut each: impl FnMut(usize, Vec<&[u8]>),
) -> Result<(), PackError> {
    let fail = |e: String| PackError::Write(format!("calibration run failed: {e}"));
    let aligned = crate::aligned::AlignedBytes::from(bytes);
    let model = Model::load(aligned.as_bytes()).map_err(|e| fail(e.to_string()))?;
    let mut arena = crate::host::runner::arena_for(&model);
    let mut session = Session::new(&model, CpuDevice::new(), arena.as_mut_bytes())
        .map_err(|e| fail(e.to_string()))?;
    progress(stage, 0, samples.len());
    for (k, sample) in samples.iter().enumerate() {
        for (i, input) in sample.iter().enumerate() {
            session
                .set_input(i, &input.bytes)
                .map_err(|e| fail(e.to_string()))?;
        }
        session.run().map_err(|e| fail(e.to_string()))?;
        let outputs = (0..model.output_count())
            .map(|i| session.output(i))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| fail(e.to_string()))?;
        each(k, outputs);
        progress(stage, k + 1, samples.len());
    }
    Ok(())
}

/// Where calibration reads a tensor: a model input (from the samples) or an output of the
/// observing model.
#[derive(Clone, Copy)]
enum Source {
    Input(usize),
    Output(usize),
}

/// Quantizes an optimised float plan with the given calibration samples (in input order).
pub fn quantize_plan(
    mut plan: PlanGraph,
    mut passes: PassStats,
    samples: &[Vec<NpyArray>],
    settings: impl Into<Settings>,
    progress: Progress<'_>,
) -> Result<(Packed, QuantizationReport), PackError> {
    let Settings {
        method,
        bias_correction,
    } = settings.into();
    let targets = rewrite::activations_to_quantize(&mut plan);
    // Bias correction needs the per-channel mean of each quantizable op's input.
    let corrected: Vec<(usize, TensorId, usize, (usize, usize))> = if bias_correction {
        rewrite::quantizable_ops(&plan)
            .into_iter()
            .filter_map(|(i, w)| {
                let x = plan.ops[i].inputs[0]?;
                let target = targets.iter().position(|&t| t == plan.root(x))?;
                Some((
                    i,
                    w,
                    target,
                    rewrite::input_channels(&plan.tensors[x].shape),
                ))
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut channel_sums: Vec<(Vec<f64>, usize)> = corrected
        .iter()
        .map(|&(_, _, _, (channels, _))| (vec![0.0; channels], 0))
        .collect();
    let mut observer = plan.clone();
    let sources: Vec<Source> = targets
        .iter()
        .map(|&t| match plan.inputs.iter().position(|&i| i == t) {
            Some(i) => Source::Input(i),
            None => Source::Output(match observer.outputs.iter().position(|&o| o == t) {
                Some(k) => k,
                None => {
                    observer.outputs.push(t);
                    observer.outputs.len() - 1
                }
            }),
        })
        .collect();
    let float_outputs = plan.outputs.len();
    let observing = pack_plan(observer, passes)?;

    let mut observed = vec![Observed::default(); targets.len()];
    let mut reference: Vec<Vec<Vec<u8>>> = Vec::with_capacity(samples.len());
    let values = |sample: &[NpyArray], outputs: &[&[u8]], source: Source| match source {
        Source::Input(i) => f32s(&sample[i].bytes).collect::<Vec<_>>(),
        Source::Output(k) => f32s(outputs[k]).collect(),
    };
    run_all(
        &observing.bytes,
        samples,
        Stage::Ranges,
        progress,
        |k, outputs| {
            for (o, &source) in observed.iter_mut().zip(&sources) {
                o.observe_range(values(&samples[k], &outputs, source));
            }
            for ((sums, count), &(_, _, target, (channels, inner))) in
                channel_sums.iter_mut().zip(&corrected)
            {
                let xs = values(&samples[k], &outputs, sources[target]);
                for (j, v) in xs.iter().enumerate() {
                    sums[(j / inner) % channels] += *v as f64;
                }
                *count += xs.len() / channels;
            }
            reference.push(
                outputs[..float_outputs]
                    .iter()
                    .map(|b| b.to_vec())
                    .collect(),
            );
        },
    )?;
    if method.needs_histogram() {
        run_all(
            &observing.bytes,
            samples,
            Stage::Histograms,
            progress,
            |k, outputs| {
                for (o, &source) in observed.iter_mut().zip(&sources) {
                    o.observe_histogram(values(&samples[k], &outputs, source));
                }
            },
        )?;
    }

    let weights = rewrite::quantize_weights(&mut plan);
    let mut biases_corrected = 0;
    for ((sums, count), &(i, float_w, ..)) in channel_sums.iter().zip(&corrected) {
        let means: Vec<f64> = sums.iter().map(|s| s / (*count).max(1) as f64).collect();
        biases_corrected += usize::from(rewrite::correct_bias(&mut plan, i, float_w, &means));
    }
    for (&t, o) in targets.iter().zip(&observed) {
        let (lo, hi) = o.range(method);
        rewrite::insert_quantize_dequantize(&mut plan, t, lo, hi);
    }
    passes.integer_ops = crate::compile::quantize::fuse_integer_ops(&mut plan);
    passes.dead_ops_removed += remove_dead(&mut plan);
    let outputs = output_descriptions(&plan);
    let packed = pack_plan(plan, passes)?;

    let mut accuracy: Vec<Accumulator> = outputs
        .iter()
        .map(|(name, dtype)| Accumulator::new(name.clone(), *dtype))
        .collect();
    run_all(
        &packed.bytes,
        samples,
        Stage::Report,
        progress,
        |k, outputs| {
            for ((acc, reference), actual) in accuracy.iter_mut().zip(&reference[k]).zip(&outputs) {
                acc.add(reference, actual);
            }
        },
    )?;
    let report = QuantizationReport {
        method,
        samples: samples.len(),
        weights,
        activations: targets.len(),
        biases_corrected,
        outputs: accuracy.into_iter().map(Accumulator::finish).collect(),
    };
    Ok((packed, report))
}

fn output_descriptions(g: &PlanGraph) -> Vec<(String, DType)> {
    g.outputs
        .iter()
        .map(|&t: &TensorId| (g.tensors[t].name.clone(), g.tensors[t].dtype))
        .collect()
}

/// Sums for one output's error statistics.
struct Accumulator {
    name: String,
    dtype: DType,
    signal: f64,
    noise: f64,
    max_error: f64,
    max_reference: f64,
    equal: usize,
    total: usize,
}

impl Accumulator {
    fn new(name: String, dtype: DType) -> Self {
        Accumulator {
            name,
            dtype,
            signal: 0.0,
            noise: 0.0,
            max_error: 0.0,
            max_reference: 0.0,
            equal: 0,
            total: 0,
        }
    }

    fn add(&mut self, reference: &[u8], actual: &[u8]) {
        if self.dtype == DType::F32 {
            for (r, a) in f32s(reference).zip(f32s(actual)) {
                let (r, a) = (r as f64, a as f64);
                self.signal += r * r;
                self.noise += (r - a) * (r - a);
                self.max_error = self.max_error.max((r - a).abs());
                self.max_reference = self.max_reference.max(r.abs());
            }
        } else {
            let size = self.dtype.size();
            for (r, a) in reference.chunks_exact(size).zip(actual.chunks_exact(size)) {
                self.equal += usize::from(r == a);
                self.total += 1;
            }
        }
    }

    fn finish(self) -> OutputAccuracy {
        if self.dtype == DType::F32 {
            let sqnr_db = if self.noise == 0.0 {
                f64::INFINITY
            } else {
                10.0 * (self.signal / self.noise).log10()
            };
            OutputAccuracy::Float {
                name: self.name,
                sqnr_db,
                max_abs_error: self.max_error,
                max_abs_reference: self.max_reference,
            }
        } else {
            OutputAccuracy::Exact {
                name: self.name,
                agreement: self.equal as f64 / self.total.max(1) as f64,
            }
        }
    }
}
