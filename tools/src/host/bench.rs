//! `ferrite bench`'s figures, measured once and rendered two ways: the text the CLI prints and
//! the JSON of `--json` (which the Python package returns as a dict). One function measures, so
//! every front end reports the same numbers.
//!
//! On a host device (`cpu`, `vulkan`, `cuda`) it times repeated runs (median, p90, min, mean,
//! and the device's own timestamps where it has them); on an emulated Cortex-M (`qemu-m0|m4|m7|
//! m33`) it counts instructions per inference (exact; QEMU is not cycle-accurate, so no
//! latency), flash and RAM, and on `qemu-m4` also builds and measures the firmware a user would
//! flash for this model alone.

use crate::compile::pack::op_label;
use crate::host::error::RunError;
use crate::host::npy::NpyArray;
use crate::host::qemu::{self, Board};
use crate::host::runner::{self, DeviceSpec};
use ferrite_core::Model;
use ferrite_hal::Plan;
use serde_json::{json, Value};
use std::fmt::{self, Write as _};

/// What to measure, besides the model and its inputs.
#[derive(Clone, Copy, Debug)]
pub struct BenchRequest<'a> {
    /// The model as the report names it (its path, usually).
    pub label: &'a str,
    /// The device's name, as `ferrite devices` lists it.
    pub device: &'a str,
    /// Timed runs (at most 3 on QEMU: every run executes the same instructions).
    pub runs: usize,
    /// Also measure each step (time on a host device, instructions on QEMU).
    pub profile: bool,
    /// Threads for the CPU device's big kernels (1: one thread; other devices take only 1).
    pub threads: usize,
}

/// A measurement: the same figures as text and as JSON.
#[derive(Clone, Debug)]
pub struct BenchReport {
    json: Value,
    text: String,
    steps: Vec<StepFigure>,
    unit: Unit,
}

/// What a per-step figure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Median microseconds (a host device).
    Microseconds,
    /// Instructions (QEMU).
    Instructions,
}

/// One step's figure from `--profile`.
#[derive(Clone, Debug, PartialEq)]
pub struct StepFigure {
    /// The op, with its variant (`Conv+Relu`).
    pub op: String,
    /// The node's name.
    pub name: String,
    /// Its multiply-accumulates (convolutions and matrix products).
    pub macs: Option<u64>,
    /// Microseconds or instructions (see [`BenchReport::unit`]).
    pub value: f64,
}

impl BenchReport {
    /// The figures as `ferrite bench --json` prints them.
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// The per-step figures (empty without `profile`).
    pub fn steps(&self) -> &[StepFigure] {
        &self.steps
    }

    /// What the per-step figures count.
    pub fn unit(&self) -> Unit {
        self.unit
    }

    /// The profile in Chrome's trace-event format (Perfetto and `chrome://tracing` open it):
    /// one complete event per step, back to back, with its MACs; on QEMU one instruction is
    /// shown as one microsecond.
    pub fn trace(&self) -> Value {
        let mut at = 0.0;
        let events: Vec<Value> = self
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let event = json!({
                    "name": s.op,
                    "cat": "step",
                    "ph": "X",
                    "ts": at,
                    "dur": s.value,
                    "pid": 1,
                    "tid": 1,
                    "args": {
                        "step": i,
                        "node": s.name,
                        "macs": s.macs,
                        self.unit_key(): s.value,
                    },
                });
                at += s.value;
                event
            })
            .collect();
        json!({
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {
                "model": self.json["model"],
                "device": self.json["device"],
                "unit": match self.unit {
                    Unit::Microseconds => "median microseconds per step",
                    Unit::Instructions => "instructions per step (shown as microseconds)",
                },
            },
        })
    }

    /// The profile as CSV: `step,op,name,macs,` then `median_us` or `instructions`.
    pub fn csv(&self) -> String {
        let quote = |t: &str| format!("\"{}\"", t.replace('"', "\"\""));
        let mut out = format!("step,op,name,macs,{}\n", self.unit_key());
        for (i, s) in self.steps.iter().enumerate() {
            let value = match self.unit {
                Unit::Microseconds => format!("{:.3}", s.value),
                Unit::Instructions => format!("{:.0}", s.value),
            };
            let _ = writeln!(
                out,
                "{i},{},{},{},{value}",
                quote(&s.op),
                quote(&s.name),
                s.macs.map(|m| m.to_string()).unwrap_or_default(),
            );
        }
        out
    }

    fn unit_key(&self) -> &'static str {
        match self.unit {
            Unit::Microseconds => "median_us",
            Unit::Instructions => "instructions",
        }
    }
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Measures the packed model `bytes` (16-byte aligned; `model` is it loaded) on `inputs`.
pub fn bench(
    bytes: &[u8],
    model: &Model<'_>,
    inputs: &[NpyArray],
    request: BenchRequest<'_>,
) -> Result<BenchReport, RunError> {
    if request.runs == 0 {
        return Err(RunError::Input("runs must be at least 1".into()));
    }
    match DeviceSpec::parse(request.device)?.with_threads(request.threads)? {
        DeviceSpec::Qemu(board) => bench_qemu(board, bytes, model, inputs, request),
        spec => bench_host(spec, model, inputs, request),
    }
}

/// Timed runs on a host device.
fn bench_host(
    spec: DeviceSpec,
    model: &Model<'_>,
    inputs: &[NpyArray],
    request: BenchRequest<'_>,
) -> Result<BenchReport, RunError> {
    let BenchRequest {
        label,
        device: name,
        runs,
        profile,
        threads,
    } = request;
    let device = if threads > 1 {
        format!("{name} ({threads} threads)")
    } else {
        name.to_string()
    };
    let stats = runner::bench(model, inputs, runs, spec)?;
    let steps = if profile {
        runner::profile(model, inputs, runs, spec)?
    } else {
        Vec::new()
    };
    let json = json!({
        "model": label,
        "device": name,
        "threads": threads,
        "runs": stats.runs,
        "median_us": stats.median_us,
        "p90_us": stats.p90_us,
        "min_us": stats.min_us,
        "mean_us": stats.mean_us,
        "device_median_us": stats.device_median_us,
        "host_overhead_us": stats.host_overhead_us,
        "arena_bytes": model.arena_bytes(),
        "weights_bytes": model.weights_bytes(),
        "simd": ferrite_cpu::CpuDevice::simd(),
        "ops": steps.iter().map(|(op, name, us)| json!({"op": op, "name": name, "median_us": us})).collect::<Vec<_>>(),
    });
    let mut text = format!(
        "{label} on {device}: median {:.1} us, p90 {:.1} us, min {:.1} us over {} runs (arena {} B)\n",
        stats.median_us,
        stats.p90_us,
        stats.min_us,
        stats.runs,
        model.arena_bytes()
    );
    if let (Some(device_us), Some(overhead)) = (stats.device_median_us, stats.host_overhead_us) {
        let _ = writeln!(
            text,
            "  device time (timestamps): median {device_us:.1} us; host overhead per run (wall - device): median {overhead:.1} us"
        );
    }
    let total: f64 = steps.iter().map(|s| s.2).sum();
    for (i, (op, name, us)) in steps.iter().enumerate() {
        let _ = writeln!(
            text,
            "  #{i:<3} {op:<22} {name:<28} {us:>9.1} us  {:>5.1}%",
            100.0 * us / total.max(1e-9)
        );
    }
    let steps = figures(model, steps.into_iter());
    Ok(BenchReport {
        json,
        text,
        steps,
        unit: Unit::Microseconds,
    })
}

/// The per-model firmware's figures (`boards/template` built around the model).
struct ModelFirmware {
    flash_bytes: u64,
    runtime_flash_bytes: u64,
    model_bytes: u64,
    ram_bytes: u64,
    static_ram_bytes: u64,
    inference_stack_bytes: u64,
    stack_bytes: u64,
    instructions: u64,
}

impl ModelFirmware {
    fn of(run: &qemu::QemuRun, model: &Model<'_>) -> ModelFirmware {
        let flash = run.firmware.flash_bytes;
        // The arena is a static of this firmware: it is in its static RAM already.
        ModelFirmware {
            flash_bytes: flash,
            runtime_flash_bytes: flash.saturating_sub(model.file_bytes() as u64),
            model_bytes: model.file_bytes() as u64,
            ram_bytes: run.firmware.static_ram_bytes + run.inference_stack_bytes,
            static_ram_bytes: run.firmware.static_ram_bytes,
            inference_stack_bytes: run.inference_stack_bytes,
            stack_bytes: run.stack_bytes,
            instructions: run.instructions.first().copied().unwrap_or(0),
        }
    }

    fn json(&self) -> Value {
        json!({
            "flash_bytes": self.flash_bytes,
            "runtime_flash_bytes": self.runtime_flash_bytes,
            "model_bytes": self.model_bytes,
            "ram_bytes": self.ram_bytes,
            "static_ram_bytes": self.static_ram_bytes,
            "inference_stack_bytes": self.inference_stack_bytes,
            "stack_bytes": self.stack_bytes,
            "instructions_per_inference": self.instructions,
        })
    }
}

/// Instructions, flash and RAM on an emulated Cortex-M.
fn bench_qemu(
    board: Board,
    bytes: &[u8],
    model: &Model<'_>,
    inputs: &[NpyArray],
    request: BenchRequest<'_>,
) -> Result<BenchReport, RunError> {
    let BenchRequest { label, profile, .. } = request;
    let runs = request.runs.min(3);
    let result = qemu::run(board, bytes, model, inputs, runs)?;
    // Per-step counts come from a second, marked run (the markers add a few instructions per
    // step, which the unmarked run above does not have).
    let steps: Vec<(String, String, u64)> = if profile {
        let marked = qemu::run_profiled(board, bytes, model, inputs)?;
        marked
            .step_instructions
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let op = model.step(i).map(|s| op_label(&s.op)).unwrap_or_default();
                (op, model.op_name(i).unwrap_or("").to_string(), n)
            })
            .collect()
    } else {
        Vec::new()
    };
    let instructions = result.instructions.iter().copied().max().unwrap_or(0);
    let deterministic = result.instructions.windows(2).all(|w| w[0] == w[1]);
    let fw = result.firmware;
    // A firmware that embeds its model already counts it in its own flash.
    let model_flash = if board.embeds_model() {
        0
    } else {
        model.file_bytes() as u64
    };
    let flash = fw.flash_bytes + model_flash;
    // What an application needs: the arena, static RAM and the stack inference itself uses.
    let ram = model.arena_bytes() as u64 + fw.static_ram_bytes + result.inference_stack_bytes;
    // The firmware a user would flash for this model alone (Cortex-M4F): built when needed.
    let per_model = (board == Board::M4).then(|| {
        let elf = crate::host::firmware::model_firmware(bytes, model)?;
        let run =
            qemu::run_firmware(board, &elf, bytes, model, inputs, 1).map_err(|e| e.to_string())?;
        if run.outputs != result.outputs {
            return Err(
                "the per-model firmware's outputs differ from the every-kernel firmware's"
                    .to_string(),
            );
        }
        Ok(ModelFirmware::of(&run, model))
    });
    let json = json!({
        "model": label,
        "device": board.device_name(),
        "core": board.describe(),
        "runs": runs,
        "instructions_per_inference": instructions,
        "instructions_per_run": result.instructions,
        "deterministic": deterministic,
        "flash_bytes": flash,
        "firmware_flash_bytes": fw.flash_bytes,
        "model_bytes": model.file_bytes(),
        "ram_bytes": ram,
        "arena_bytes": model.arena_bytes(),
        "static_ram_bytes": fw.static_ram_bytes,
        "stack_bytes": result.stack_bytes,
        "inference_stack_bytes": result.inference_stack_bytes,
        "weights_bytes": model.weights_bytes(),
        "ops": steps.iter().map(|(op, name, n)| json!({"op": op, "name": name, "instructions": n})).collect::<Vec<_>>(),
        "model_firmware": match &per_model {
            Some(Ok(m)) => m.json(),
            Some(Err(e)) => json!({"error": e}),
            None => Value::Null,
        },
    });
    let mut text = format!(
        "{label} on {} ({}): {instructions} instructions per inference{}\n",
        board.device_name(),
        board.describe(),
        if deterministic { "" } else { " (runs differ!)" }
    );
    if request.runs > runs {
        let _ = writeln!(
            text,
            "  {runs} runs of the {} asked for: every run executes the same instructions",
            request.runs
        );
    }
    let _ = writeln!(
        text,
        "  flash {flash} B = firmware {} B + model {model_flash} B;  RAM {ram} B = arena {} B + static {} B + inference stack {} B (whole firmware's stack {} B)",
        fw.flash_bytes,
        model.arena_bytes(),
        fw.static_ram_bytes,
        result.inference_stack_bytes,
        result.stack_bytes
    );
    match &per_model {
        Some(Ok(m)) => {
            let _ = writeln!(
                text,
                "  this model's own firmware (only its kernels): flash {} B = runtime {} B + model {} B;  RAM {} B = static {} B (arena included) + inference stack {} B;  {} instructions per inference",
                m.flash_bytes, m.runtime_flash_bytes, m.model_bytes, m.ram_bytes, m.static_ram_bytes, m.inference_stack_bytes, m.instructions
            );
        }
        Some(Err(e)) => {
            let _ = writeln!(text, "  this model's own firmware: not measured: {e}");
        }
        None => {}
    }
    let total: u64 = steps.iter().map(|s| s.2).sum();
    for (i, (op, name, n)) in steps.iter().enumerate() {
        let _ = writeln!(
            text,
            "  #{i:<3} {op:<22} {name:<28} {n:>11} instr.  {:>5.1}%",
            100.0 * *n as f64 / total.max(1) as f64
        );
    }
    let steps = figures(
        model,
        steps.into_iter().map(|(op, name, n)| (op, name, n as f64)),
    );
    Ok(BenchReport {
        json,
        text,
        steps,
        unit: Unit::Instructions,
    })
}

/// Per-step figures with each step's MACs.
fn figures(
    model: &Model<'_>,
    steps: impl Iterator<Item = (String, String, f64)>,
) -> Vec<StepFigure> {
    steps
        .enumerate()
        .map(|(i, (op, name, value))| StepFigure {
            op,
            name,
            macs: crate::host::plan_view::macs(model, i),
            value,
        })
        .collect()
}
