//! `ferrite`: pack ONNX models into `.frt` files and run, inspect and benchmark them.
//!
//! Every failure prints one line on stderr (`error: ...`) and exits non-zero; nothing panics on
//! bad input.

use clap::{Parser, Subcommand};
use ferrite_core::Model;
use ferrite_hal::{Location, Plan};
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::{self, op_label, parse_input_shape, Constant, PackOptions};
use ferrite_tools::compile::ptq;
use ferrite_tools::host::error::RunError;
use ferrite_tools::host::files;
use ferrite_tools::host::inputs;
use ferrite_tools::host::npy::{self, NpyArray};
use ferrite_tools::host::plan_view;
use ferrite_tools::host::runner::{self, DeviceSpec};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ferrite",
    version,
    about = "Ferrite: ONNX inference for microcontrollers and edge GPUs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Pack an ONNX model into a .frt file and print what the device will need.
    Pack {
        /// The ONNX model.
        input: PathBuf,
        /// Where to write the .frt file.
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        plan: PlanArgs,
        /// Quantize weights (per-channel symmetric) and activations (per-tensor asymmetric):
        /// `int8`. Needs --calibration.
        #[arg(long, value_name = "TYPE")]
        quantize: Option<String>,
        /// Folder of .npy input samples for --quantize (one input: *.npy, each a sample or a
        /// batch along a new first axis; several inputs: one subfolder per sample with NAME.npy).
        #[arg(long, value_name = "DIR")]
        calibration: Option<PathBuf>,
        /// How activation ranges are chosen: minmax, percentile[=P] (default 99.99) or entropy.
        #[arg(long, value_name = "METHOD", default_value = "minmax")]
        calibration_method: String,
        /// With --quantize: add the expected error of the int8 weights (their rounding error
        /// times the input's per-channel means on the calibration samples) to each bias.
        #[arg(long)]
        bias_correction: bool,
        /// Also write source code embedding the model: `rust` writes NAME.rs next to OUT.frt,
        /// NAME being OUT's stem as a Rust module name (the model as an aligned static in flash,
        /// `ARENA_BYTES` for the arena); `c` writes ID.h and
        /// ID.c beside it, ID being OUT's stem as a C identifier (the model as an aligned
        /// `const uint8_t ID_model[]`, `#define`s of the arena, the inputs' and outputs' shapes,
        /// types, scales and zero points).
        #[arg(long, value_name = "LANG")]
        emit: Option<String>,
        /// Refuse the model if its arena needs more than this many bytes (the board's RAM
        /// budget for the arena): 65536, 64K or 64KiB, 1M (K = 1024 bytes).
        #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
        max_arena: Option<usize>,
        /// Leave tensor and op names out of the .frt (they sit in flash for nothing); they go
        /// to OUT.names.json, which `inspect` reads when it lies next to the model.
        #[arg(long)]
        strip_names: bool,
    },
    /// List everything in an ONNX model that Ferrite cannot run yet (exit 1 if anything).
    Check {
        /// The ONNX model.
        input: PathBuf,
        /// Also list the ops this device cannot run (cpu, vulkan, cuda, qemu-m0|m4|m7|m33),
        /// from its kernel list, before any run.
        #[arg(long)]
        device: Option<String>,
        #[command(flatten)]
        plan: PlanArgs,
    },
    /// Run a model (.frt, or .onnx packed in memory) on .npy inputs.
    Run {
        /// The model.
        model: PathBuf,
        /// Inputs in graph-input order, or NAME=FILE.npy (none for a model without inputs).
        #[arg(long = "input", num_args = 1..)]
        inputs: Vec<String>,
        /// Device to run on: cpu, vulkan or vulkan:N, cuda or cuda:N, qemu-m0, qemu-m4, qemu-m7, qemu-m33
        /// (`ferrite devices` lists what this machine has).
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Directory for `output_<i>.npy` (created if missing).
        #[arg(long = "out-dir")]
        out_dir: PathBuf,
        /// Threads for the cpu device's big kernels (matrix products, convolutions); outputs
        /// are identical whatever the count.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Also print each output: its values, or the top 5 of a score vector.
        #[arg(long)]
        print: bool,
        #[command(flatten)]
        plan: PlanArgs,
    },
    /// Show a packed model's ops, tensors and arena plan.
    Inspect {
        /// The .frt model.
        model: PathBuf,
        /// Print JSON (names in full).
        #[arg(long)]
        json: bool,
        /// Also draw the memory plan as an SVG: step across, arena offset down, one rectangle
        /// per tensor lifetime (names on hover).
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
    },
    /// Time repeated inferences.
    Bench {
        /// The model.
        model: PathBuf,
        /// Device to run on: cpu, vulkan or vulkan:N, cuda or cuda:N, qemu-m0, qemu-m4, qemu-m7, qemu-m33
        /// (`ferrite devices` lists what this machine has).
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Timed runs (on qemu-*, at most 3: every run executes the same instructions).
        #[arg(long, default_value_t = 200)]
        runs: usize,
        /// Threads for the cpu device's big kernels (matrix products, convolutions).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Inputs (default: deterministic random data).
        #[arg(long = "input", num_args = 1..)]
        inputs: Vec<String>,
        /// Also measure each op: time on cpu and vulkan, instructions on qemu-* (cuda replays
        /// its plan as one graph and has no per-op figures).
        #[arg(long)]
        profile: bool,
        /// With --profile: also write the per-op profile in Chrome's trace-event format
        /// (opens in Perfetto), with each op's MACs.
        #[arg(long, value_name = "FILE.json", requires = "profile")]
        trace: Option<PathBuf>,
        /// With --profile: print the per-op profile as CSV instead of the table.
        #[arg(long, requires = "profile", conflicts_with = "json")]
        csv: bool,
        #[command(flatten)]
        plan: PlanArgs,
    },
    /// List the devices this machine can run on.
    Devices,
}

/// How an ONNX model's inputs are pinned down at pack time.
#[derive(clap::Args)]
struct PlanArgs {
    /// Fix an input's shape, NAME=1x3x96x96, or a symbolic dimension in every input,
    /// SYMBOL=N (repeatable). A leading symbolic dimension left over is taken as 1.
    #[arg(long = "input-shape", value_name = "NAME=DIMS")]
    input_shapes: Vec<String>,
    /// Refuse a symbolic leading (batch) dimension instead of taking it as 1.
    #[arg(long)]
    strict_shapes: bool,
    /// Freeze an input to a value known at pack time (e.g. a target shape or a sample
    /// rate): NAME=FILE.npy, or NAME=NUMBER for an input of one element (--constant sr=16000).
    #[arg(long = "constant", value_name = "NAME=FILE.npy|NUMBER")]
    constants: Vec<String>,
}

impl PlanArgs {
    fn options(&self) -> Result<PackOptions, String> {
        let input_shapes = self
            .input_shapes
            .iter()
            .map(|s| parse_input_shape(s))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        let mut constants = Vec::new();
        for arg in &self.constants {
            let (name, text) = arg.split_once('=').ok_or_else(|| {
                format!("bad --constant '{arg}': expected NAME=FILE.npy or NAME=NUMBER")
            })?;
            let value = Constant::parse(text, |file| {
                let a = npy::read(Path::new(file)).map_err(|e| e.to_string())?;
                ferrite_tools::compile::tensor::HostTensor::from_le_bytes(
                    a.dtype, a.shape, &a.bytes,
                )
                .ok_or_else(|| format!("{file}: the array is too large"))
            })?;
            constants.push((name.to_string(), value));
        }
        Ok(PackOptions {
            input_shapes,
            strict_shapes: self.strict_shapes,
            constants,
        })
    }
}

type CliResult = Result<ExitCode, String>;

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`ferrite devices | head -1`) instead of panicking on a failed print.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Pack {
            input,
            output,
            plan,
            quantize,
            calibration,
            calibration_method,
            bias_correction,
            emit,
            max_arena,
            strip_names,
        } => cmd_pack(
            &input,
            &output,
            &plan,
            Quantization::from_args(quantize, calibration, &calibration_method, bias_correction),
            emit,
            max_arena,
            strip_names,
        ),
        Command::Check {
            input,
            device,
            plan,
        } => cmd_check(&input, device.as_deref(), &plan),
        Command::Run {
            model,
            inputs,
            device,
            out_dir,
            threads,
            print,
            plan,
        } => cmd_run(&model, &inputs, (&device, threads), &out_dir, print, &plan),
        Command::Inspect { model, json, plot } => cmd_inspect(&model, json, plot.as_deref()),
        Command::Bench {
            model,
            device,
            runs,
            threads,
            json,
            inputs,
            profile,
            trace,
            csv,
            plan,
        } => cmd_bench(
            &model,
            (&device, threads),
            runs,
            BenchOutput {
                json,
                csv,
                trace: trace.as_deref(),
            },
            &inputs,
            profile,
            &plan,
        ),
        Command::Devices => cmd_devices(),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    files::read_bounded(path, files::MODEL_LIMIT, "a model").map_err(|e| e.to_string())
}

fn device_spec(device: &str) -> Result<DeviceSpec, String> {
    DeviceSpec::parse(device).map_err(|e| e.to_string())
}

fn cmd_devices() -> CliResult {
    println!(
        "cpu        host CPU, Rust kernels (float and int8), SIMD build: {}",
        ferrite_cpu::CpuDevice::simd()
    );
    #[cfg(feature = "vulkan")]
    match ferrite_vulkan::VulkanDevice::list() {
        Ok(list) if list.is_empty() => {
            println!("vulkan     none: the Vulkan loader reports no device")
        }
        Ok(list) => {
            for d in list {
                println!(
                    "vulkan:{:<3} {} ({}), driver {}, Vulkan {}, {} MiB device memory, storage buffers up to {} MiB{}",
                    d.index,
                    d.name,
                    d.kind,
                    d.driver,
                    d.api_version,
                    d.memory_bytes >> 20,
                    d.max_storage_buffer_bytes >> 20,
                    if d.has_compute { "" } else { ", no compute queue" }
                );
            }
        }
        Err(e) => println!("vulkan     unavailable: {e}"),
    }
    #[cfg(not(feature = "vulkan"))]
    println!("vulkan     not built in (feature `vulkan`)");
    match ferrite_cuda::devices() {
        Ok(list) => {
            for d in list {
                println!(
                    "cuda:{:<5} {}, compute capability {}.{}, {} MiB",
                    d.index,
                    d.name,
                    d.compute_capability.0,
                    d.compute_capability.1,
                    d.memory_bytes >> 20
                );
            }
        }
        Err(e) => println!("cuda       unavailable: {e}"),
    }
    for board in ferrite_tools::host::qemu::Board::ALL {
        match board.unavailable() {
            None => println!(
                "{:<10} Ferrite firmware on {}{}",
                board.device_name(),
                board.describe(),
                if board.embeds_model() {
                    " (runs the digits demo model, embedded in flash)"
                } else {
                    ""
                }
            ),
            Some(why) => println!("{:<10} unavailable: {why}", board.device_name()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--quantize` and its calibration options, checked.
struct Quantization {
    calibration: PathBuf,
    settings: ptq::Settings,
}

impl Quantization {
    fn from_args(
        quantize: Option<String>,
        calibration: Option<PathBuf>,
        method: &str,
        bias_correction: bool,
    ) -> Result<Option<Quantization>, String> {
        let Some(kind) = quantize else {
            if calibration.is_some() {
                return Err("--calibration needs --quantize int8".into());
            }
            if bias_correction {
                return Err("--bias-correction needs --quantize int8".into());
            }
            return Ok(None);
        };
        if kind != "int8" {
            return Err(format!("--quantize {kind}: the only type is `int8`"));
        }
        let calibration = calibration
            .ok_or("--quantize int8 needs --calibration DIR (a folder of .npy input samples)")?;
        let method = ptq::Method::parse(method).ok_or_else(|| {
            format!(
                "--calibration-method {method}: use minmax, percentile, percentile=P (50 < P <= 100) or entropy"
            )
        })?;
        Ok(Some(Quantization {
            calibration,
            settings: ptq::Settings {
                method,
                bias_correction,
            },
        }))
    }
}

/// A progress bar on stderr for calibration (hidden when stderr is not a terminal).
fn calibration_progress() -> impl FnMut(ptq::Stage, usize, usize) {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("  {msg:24} [{bar:30}] {pos}/{len} samples")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    move |stage, done, total| {
        if done == 0 {
            bar.reset();
            bar.set_length(total as u64);
            bar.set_message(stage.label());
        }
        bar.set_position(done as u64);
        if done == total && stage == ptq::Stage::Report {
            bar.finish_and_clear();
        }
    }
}

fn print_quantization(report: &ptq::QuantizationReport) {
    println!(
        "  quantized:    int8: {} (per channel), {}, calibrated on {} ({})",
        count(report.weights, "weight tensor"),
        count(report.activations, "activation"),
        count(report.samples, "sample"),
        report.method
    );
    if report.biases_corrected > 0 {
        println!(
            "  bias correction: {} biases absorb their int8 weights' expected error",
            report.biases_corrected
        );
    }
    println!("  int8 vs float on the calibration samples:");
    for output in &report.outputs {
        match output {
            ptq::OutputAccuracy::Float {
                name,
                sqnr_db,
                max_abs_error,
                max_abs_reference,
            } => println!(
                "    {name}: SQNR {sqnr_db:.1} dB, largest error {max_abs_error:.3e} (largest value {max_abs_reference:.3e})"
            ),
            ptq::OutputAccuracy::Exact { name, agreement } => {
                println!("    {name}: {:.2} % of elements equal", agreement * 100.0)
            }
        }
    }
}

fn cmd_pack(
    input: &Path,
    output: &Path,
    plan: &PlanArgs,
    quantization: Result<Option<Quantization>, String>,
    emit: Option<String>,
    max_arena: Option<usize>,
    strip_names: bool,
) -> CliResult {
    let quantization = quantization?;
    let (emit_rust, emit_c) = match emit.as_deref() {
        None => (false, false),
        Some("rust") => (true, false),
        Some("c") => (false, true),
        Some(other) => return Err(format!("--emit {other}: the languages are `rust` and `c`")),
    };
    let opts = plan.options()?;
    // Refuse an output over the input before any work (it is checked again when written).
    files::check_not_input(output, &[input]).map_err(|e| e.to_string())?;
    let folder = output.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(folder) = folder.filter(|f| !f.is_dir()) {
        return Err(format!(
            "-o {}: the folder {} does not exist",
            output.display(),
            folder.display()
        ));
    }
    // `--emit rust`: OUT's stem as a Rust module name (`my-model.v2.frt` -> `my_model_v2.rs`).
    let rust_module = output.with_file_name(format!(
        "{}.rs",
        ferrite_tools::compile::emit::c_identifier(
            &output.file_stem().unwrap_or_default().to_string_lossy()
        )
        .to_ascii_lowercase()
    ));
    if emit_rust {
        files::check_not_input(&rust_module, &[input]).map_err(|e| e.to_string())?;
    }
    // `--emit c`: the C identifier the files and symbols take, and the two files beside OUT.
    let c_files = emit_c.then(|| {
        let id = ferrite_tools::compile::emit::c_identifier(
            &output.file_stem().unwrap_or_default().to_string_lossy(),
        );
        let dir = output.parent().unwrap_or(Path::new(""));
        let paths = [dir.join(format!("{id}.h")), dir.join(format!("{id}.c"))];
        (id, paths)
    });
    for path in c_files.iter().flat_map(|(_, paths)| paths) {
        files::check_not_input(path, &[input]).map_err(|e| e.to_string())?;
    }
    let names_file = ferrite_tools::compile::strip::side_file(output);
    if strip_names {
        files::check_not_input(&names_file, &[input]).map_err(|e| e.to_string())?;
    }
    let onnx = read(input)?;
    if runner::is_frt(&onnx) {
        return Err(format!(
            "{} is already packed (a .frt file): run, inspect or bench it as it is",
            input.display()
        ));
    }
    let (mut packed, quantization_report) = match &quantization {
        None => (pack::pack(&onnx, &opts).map_err(|e| e.to_string())?, None),
        Some(q) => {
            let mut progress = calibration_progress();
            let (packed, report) =
                ptq::quantize(&onnx, &opts, &q.calibration, q.settings, &mut progress)
                    .map_err(|e| e.to_string())?;
            (packed, Some(report))
        }
    };
    if let Some(limit) = max_arena {
        if packed.report.arena_bytes > limit {
            return Err(format!(
                "the arena needs {} bytes, more than --max-arena {limit} bytes",
                packed.report.arena_bytes
            ));
        }
    }
    let named_bytes = packed.bytes.len();
    if strip_names {
        let (stripped, names) =
            ferrite_tools::compile::strip::strip_names(&packed.bytes).map_err(|e| e.to_string())?;
        let json =
            serde_json::to_vec_pretty(&names.to_json(&stripped)).map_err(|e| e.to_string())?;
        files::write_atomic(&names_file, &json, &[input]).map_err(|e| e.to_string())?;
        packed.report.file_bytes = stripped.len();
        packed.bytes = stripped;
    }
    files::write_atomic(output, &packed.bytes, &[input]).map_err(|e| e.to_string())?;
    if emit_rust {
        let module = rust_module;
        let aligned = AlignedBytes::from(&packed.bytes[..]);
        let model = Model::load(aligned.as_bytes()).map_err(|e| e.to_string())?;
        let name = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let text = ferrite_tools::compile::emit::rust_module(&model, &name(output), &name(input));
        files::write_atomic(&module, text.as_bytes(), &[input, output])
            .map_err(|e| e.to_string())?;
        println!(
            "rust module {} (includes {})",
            module.display(),
            name(output)
        );
    }
    if let Some((id, [h_path, c_path])) = &c_files {
        let aligned = AlignedBytes::from(&packed.bytes[..]);
        let model = Model::load(aligned.as_bytes()).map_err(|e| e.to_string())?;
        let source = input
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (header, code) = ferrite_tools::compile::emit::c_module(&model, id, &source);
        for (path, text) in [(h_path, header), (c_path, code)] {
            files::write_atomic(path, text.as_bytes(), &[input, output])
                .map_err(|e| e.to_string())?;
        }
        println!(
            "c header {} and source {} ({id}_model)",
            h_path.display(),
            c_path.display()
        );
    }
    let r = &packed.report;
    let ops: Vec<String> = r.ops.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    println!("packed {} -> {}", input.display(), output.display());
    if ops.is_empty() {
        println!("  ops:          none (the outputs are inputs or constants)");
    } else {
        println!(
            "  ops:          {} ({})",
            packed.graph.ops.len(),
            ops.join(", ")
        );
    }
    println!("  weights:      {} bytes", r.weights_bytes);
    println!(
        "  arena:        {} bytes (lower bound {}, {:.3}x)",
        r.arena_bytes,
        r.arena_lower_bound,
        ratio(r.arena_bytes, r.arena_lower_bound)
    );
    if strip_names {
        println!(
            "  file:         {} bytes ({} bytes of names stripped, kept in {})",
            r.file_bytes,
            named_bytes - r.file_bytes,
            names_file.display()
        );
    } else {
        println!("  file:         {} bytes", r.file_bytes);
    }
    if !r.conv_strategies.is_empty() {
        let kinds: Vec<String> = r
            .conv_strategies
            .iter()
            .map(|(k, n)| format!("{k} x{n}"))
            .collect();
        println!(
            "  convolutions: {} (largest scratch {} bytes, in the arena)",
            kinds.join(", "),
            r.scratch_bytes
        );
    }
    let p = &r.passes;
    println!(
        "  passes:       {} batch norms folded, {} MatMul+Add -> Gemm, {} GELUs -> Gelu, {} activations fused, {} QDQ patterns -> integer ops, {} dead ops removed",
        p.batch_norms_folded, p.matmul_add_fused, p.gelus_fused, p.activations_fused, p.integer_ops, p.dead_ops_removed
    );
    if let Some(report) = &quantization_report {
        print_quantization(report);
    }
    for note in &r.notes {
        println!("  note:         {note}");
    }
    Ok(ExitCode::SUCCESS)
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

fn cmd_check(input: &Path, device: Option<&str>, plan: &PlanArgs) -> CliResult {
    let spec = device.map(device_spec).transpose()?;
    let opts = plan.options()?;
    let onnx = read(input)?;
    let report = pack::check(&onnx, &opts).map_err(|e| e.to_string())?;
    if !report.items.is_empty() {
        println!(
            "{}: {} node(s) cannot run on Ferrite",
            input.display(),
            report.items.len()
        );
        for (op, nodes) in report.grouped() {
            println!("  {op} ({} node(s))", nodes.len());
            for (node, reason) in nodes {
                println!("    {node}: {reason}");
            }
        }
        return Ok(ExitCode::FAILURE);
    }
    let Some((spec, device)) = spec.zip(device) else {
        println!("{}: every node is supported", input.display());
        return Ok(ExitCode::SUCCESS);
    };
    // The device's kernels, against the packed plan (what its session would refuse).
    let packed = pack::pack(&onnx, &opts).map_err(|e| e.to_string())?;
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
    let missing = runner::unsupported_steps(&model, spec).map_err(|e| e.to_string())?;
    if let DeviceSpec::Qemu(board) = spec {
        if board.embeds_model() {
            println!(
                "note: the {device} firmware embeds the digits demo model in flash and runs only that one"
            );
        }
    }
    if missing.is_empty() {
        println!(
            "{}: every node is supported, and {device} runs every op of the packed plan",
            input.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}: every node is supported, but {device} cannot run {} of the packed plan's {} steps:",
        input.display(),
        missing.len(),
        model.len()
    );
    for (step, op) in &missing {
        println!(
            "  #{step:<3} {op:<24} {}",
            model.op_name(*step).unwrap_or("")
        );
    }
    Ok(ExitCode::FAILURE)
}

/// Whether the file `path` holding `bytes` is a packed model (by content; a file named `.frt`
/// is one too, so that a corrupt one reports its own error).
fn is_packed(path: &Path, bytes: &[u8]) -> bool {
    runner::is_frt(bytes)
        || path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("frt"))
}

/// The packed model of `bytes` (read from `path`): a `.frt` as is, an ONNX model packed in
/// memory with `options` (what it assumed on stderr).
fn load_bytes(path: &Path, bytes: &[u8], options: &PackOptions) -> Result<AlignedBytes, String> {
    if is_packed(path, bytes) {
        return Ok(AlignedBytes::from(bytes));
    }
    let (packed, notes) =
        runner::load_model_from_bytes(bytes, options).map_err(|e| e.to_string())?;
    for note in &notes {
        eprintln!("note: {note}");
    }
    Ok(packed)
}

/// For an ONNX model run on given arrays: each input without `--input-shape` takes its array's
/// shape (so a model with symbolic dimensions runs on what it is given).
fn shapes_from_arrays(
    onnx: &[u8],
    options: &mut PackOptions,
    args: &[String],
) -> Result<(), String> {
    let graph = ferrite_tools::compile::onnx::import(onnx).map_err(|e| e.to_string())?;
    let names: Vec<&str> = graph
        .inputs
        .iter()
        .map(|i| i.name.as_str())
        .filter(|n| !options.constants.iter().any(|(c, _)| c == n))
        .collect();
    for (k, file) in inputs::match_input_args(&names, args).map_err(|e| e.to_string())? {
        let name = names[k];
        if !options.input_shapes.iter().any(|(n, _)| n == name) {
            let array = npy::read(Path::new(&file)).map_err(|e| e.to_string())?;
            options.input_shapes.push((name.to_string(), array.shape));
        }
    }
    Ok(())
}

/// `--max-arena`'s value: bytes, or with a unit, `64K`/`64KiB`/`64KB`, `1M` (K = 1024).
fn parse_bytes(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let scale: usize = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "'{text}': a number of bytes, or with K, M or G (1024-based)"
            ))
        }
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("'{text}': a number of bytes, or with K, M or G (1024-based)"))
}

/// `n thing` or `n things`.
fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

fn read_inputs(model: &Model<'_>, args: &[String]) -> Result<Vec<NpyArray>, String> {
    let ordered = inputs::order_inputs(model, args).map_err(|e| e.to_string())?;
    ordered
        .into_iter()
        .map(|(_, f)| npy::read(Path::new(&f)).map_err(|e| e.to_string()))
        .collect()
}

fn cmd_run(
    model_path: &Path,
    inputs: &[String],
    (device, threads): (&str, usize),
    out_dir: &Path,
    print: bool,
    plan: &PlanArgs,
) -> CliResult {
    let spec = device_spec(device)?
        .with_threads(threads)
        .map_err(|e| e.to_string())?;
    if out_dir.exists() && !out_dir.is_dir() {
        return Err(format!(
            "--out-dir {}: exists and is not a folder",
            out_dir.display()
        ));
    }
    let raw = read(model_path)?;
    let mut options = plan.options()?;
    if !is_packed(model_path, &raw) {
        shapes_from_arrays(&raw, &mut options, inputs)?;
    }
    let bytes = load_bytes(model_path, &raw, &options)?;
    let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
    let arrays = read_inputs(&model, inputs)?;
    let outputs =
        runner::run(bytes.as_bytes(), &arrays, spec).map_err(|e: RunError| e.to_string())?;
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    for (i, out) in outputs.iter().enumerate() {
        let path = out_dir.join(format!("output_{i}.npy"));
        // The given inputs, as files (`NAME=FILE` or `FILE`): never overwritten by an output.
        let input_paths: Vec<&Path> = inputs
            .iter()
            .flat_map(|a| [Some(a.as_str()), a.split_once('=').map(|(_, f)| f)])
            .flatten()
            .map(Path::new)
            .collect();
        npy::write_excluding(&path, out, &input_paths).map_err(|e| e.to_string())?;
        let name = model.output(i).map(|t| t.name).unwrap_or("");
        println!("{}  {name} {} {:?}", path.display(), out.dtype, out.shape);
        if print {
            println!("    {}", npy::describe_values(out));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The names `inspect` shows: the file's own, else those of a `--strip-names` side file that
/// belongs to this model, else `#INDEX`.
struct ShownNames {
    side: Option<ferrite_tools::compile::strip::Names>,
}

impl ShownNames {
    fn for_model(model_path: &Path, bytes: &[u8]) -> ShownNames {
        let side = std::fs::read(ferrite_tools::compile::strip::side_file(model_path))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .and_then(|json| ferrite_tools::compile::strip::Names::from_json(&json, bytes));
        ShownNames { side }
    }

    fn tensor(&self, index: usize, stored: &str) -> String {
        self.pick(stored, |n| n.tensors.get(index))
            .unwrap_or_else(|| format!("#{index}"))
    }

    fn op(&self, index: usize, stored: &str) -> String {
        self.pick(stored, |n| n.ops.get(index)).unwrap_or_default()
    }

    /// The stored name, else the side file's (when non-empty).
    fn pick(
        &self,
        stored: &str,
        side: impl Fn(&ferrite_tools::compile::strip::Names) -> Option<&String>,
    ) -> Option<String> {
        if !stored.is_empty() {
            return Some(stored.to_string());
        }
        self.side
            .as_ref()
            .and_then(side)
            .filter(|n| !n.is_empty())
            .cloned()
    }
}

fn cmd_inspect(model_path: &Path, as_json: bool, plot: Option<&Path>) -> CliResult {
    let raw = read(model_path)?;
    if !is_packed(model_path, &raw) && ferrite_tools::compile::onnx::import(&raw).is_ok() {
        return Err(format!(
            "{path} is an ONNX model, not a packed one: `ferrite pack {path} -o MODEL.frt` packs it (`ferrite check {path}` lists what Ferrite cannot run)",
            path = model_path.display()
        ));
    }
    let bytes = AlignedBytes::from(&raw[..]);
    let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
    let names = ShownNames::for_model(model_path, bytes.as_bytes());
    let describe = |index: usize| {
        model.tensor_info(index).map(|t| json!({"name": names.tensor(index, t.name), "index": index, "dtype": t.desc.dtype.name(), "shape": t.desc.shape.dims()}))
    };
    // An input's or output's scale and zero point, when the model is quantized at its border.
    let with_quantization = |mut t: serde_json::Value, q: Option<ferrite_core::Quantization>| {
        if let Some(q) = q {
            t["scale"] = json!(q.scale);
            t["zero_point"] = json!(q.zero_point);
        }
        t
    };
    let inputs: Vec<_> = (0..model.input_count())
        .filter_map(|i| {
            Some(with_quantization(
                describe(model.input_tensor(i)?)?,
                model.input_quantization(i),
            ))
        })
        .collect();
    let outputs: Vec<_> = (0..model.output_count())
        .filter_map(|i| {
            Some(with_quantization(
                describe(model.output_tensor(i)?)?,
                model.output_quantization(i),
            ))
        })
        .collect();
    let mut ops = Vec::new();
    for i in 0..model.len() {
        let Some(step) = model.step(i) else { continue };
        let tensors = |list: ferrite_hal::TensorList<'_>| -> Vec<serde_json::Value> {
            (0..list.len())
                .map(|k| {
                    list.index(k)
                        .and_then(|t| Some((t as usize, model.tensor_info(t as usize)?)))
                        .map(|(t, info)| json!(names.tensor(t, info.name)))
                        .unwrap_or(json!(null))
                })
                .collect()
        };
        let output = step.outputs.get(0);
        ops.push(json!({
            "index": i,
            "op": op_label(&step.op),
            "output_dtype": output.map(|d| d.dtype.name()),
            "output_shape": output.map(|d| d.shape.dims().to_vec()),
            "macs": plan_view::macs(&model, i),
            "name": names.op(i, model.op_name(i).unwrap_or("")),
            "inputs": tensors(step.inputs),
            "outputs": tensors(step.outputs),
            "scratch_bytes": step.scratch.map(|s| s.bytes).unwrap_or(0),
        }));
    }
    let mut arena = Vec::new();
    for t in 0..model.tensor_count() {
        if let Some(info) = model.tensor_info(t) {
            if let Location::Arena(offset) = info.desc.location {
                arena.push(json!({"name": names.tensor(t, info.name), "offset": offset, "bytes": info.desc.bytes, "dtype": info.desc.dtype.name(), "shape": info.desc.shape.dims()}));
            }
        }
    }
    let plan = plan_view::lifetimes(&model, |t, stored| names.tensor(t, stored));
    if let Some(path) = plot {
        let title = model_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let svg = plan_view::svg(&model, &plan, &title);
        files::write_atomic(path, svg.as_bytes(), &[model_path]).map_err(|e| e.to_string())?;
    }
    let plan_json: Vec<serde_json::Value> = plan
        .iter()
        .map(|r| json!({"name": r.name, "aliases": r.aliases, "offset": r.offset, "bytes": r.bytes, "first_step": r.first, "last_step": r.last, "scratch": r.scratch}))
        .collect();
    let doc = json!({
        "file_bytes": model.file_bytes(),
        "weights_bytes": model.weights_bytes(),
        "arena_bytes": model.arena_bytes(),
        "arena_lower_bound": model.arena_lower_bound(),
        "ops": ops,
        "inputs": inputs,
        "outputs": outputs,
        "arena_tensors": arena,
        "arena_plan": plan_json,
    });
    if as_json {
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", model_path.display());
    println!(
        "  file {} bytes, weights {} bytes",
        model.file_bytes(),
        model.weights_bytes()
    );
    println!(
        "  arena {} bytes, lower bound {} bytes ({:.3}x)",
        model.arena_bytes(),
        model.arena_lower_bound(),
        ratio(model.arena_bytes(), model.arena_lower_bound())
    );
    for (label, list) in [("input", &doc["inputs"]), ("output", &doc["outputs"])] {
        for t in list.as_array().into_iter().flatten() {
            let quantization = match (t["scale"].as_f64(), t["zero_point"].as_i64()) {
                (Some(scale), Some(zero)) => format!("  scale {}, zero point {zero}", scale as f32),
                _ => String::new(),
            };
            println!(
                "  {label}  {} {} {}{quantization}",
                t["name"].as_str().unwrap_or(""),
                t["dtype"].as_str().unwrap_or(""),
                t["shape"]
            );
        }
    }
    println!("  ops ({}):", model.len());
    println!(
        "    {:<4} {:<22} {:<26} {:>12}  name",
        "#", "op", "output", "MACs"
    );
    for op in &ops {
        let shape: Vec<String> = op["output_shape"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| d.to_string())
            .collect();
        let output = format!(
            "{} [{}]",
            op["output_dtype"].as_str().unwrap_or(""),
            shape.join(",")
        );
        let macs = op["macs"]
            .as_u64()
            .map_or_else(|| "-".to_string(), thousands);
        let scratch = match op["scratch_bytes"].as_u64() {
            Some(0) | None => String::new(),
            Some(s) => format!("  (scratch {s} B)"),
        };
        println!(
            "    {:<4} {:<22} {:<26} {:>12}  {}{scratch}",
            op["index"].as_u64().unwrap_or(0),
            op["op"].as_str().unwrap_or(""),
            output,
            macs,
            plan_view::shorten(op["name"].as_str().unwrap_or(""), 48)
        );
    }
    let total: u64 = ops.iter().filter_map(|o| o["macs"].as_u64()).sum();
    if total > 0 {
        println!("    {:>67}  in all", thousands(total));
    }
    println!("  arena plan (offset, bytes, the steps each region is live in):");
    for r in &plan {
        let also = r.aliases_note();
        println!(
            "    [{:>8} .. {:>8}) {:>8} B  steps {:>3}-{:<3}  {}{also}",
            r.offset,
            r.offset + r.bytes,
            r.bytes,
            r.first,
            r.last,
            plan_view::shorten(&r.name, 48)
        );
    }
    if let Some(path) = plot {
        println!("  plan drawn in {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// How `bench` reports: JSON or CSV on stdout instead of the text, and a trace file.
struct BenchOutput<'a> {
    json: bool,
    csv: bool,
    trace: Option<&'a Path>,
}

fn cmd_bench(
    model_path: &Path,
    (device, threads): (&str, usize),
    runs: usize,
    output: BenchOutput<'_>,
    inputs: &[String],
    profile: bool,
    plan: &PlanArgs,
) -> CliResult {
    device_spec(device)?
        .with_threads(threads)
        .map_err(|e| e.to_string())?;
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let raw = read(model_path)?;
    let mut options = plan.options()?;
    if !is_packed(model_path, &raw) && !inputs.is_empty() {
        shapes_from_arrays(&raw, &mut options, inputs)?;
    }
    let bytes = load_bytes(model_path, &raw, &options)?;
    let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
    let arrays = if inputs.is_empty() {
        runner::synthetic_inputs(&model)
    } else {
        read_inputs(&model, inputs)?
    };
    let label = model_path.display().to_string();
    let request = ferrite_tools::host::bench::BenchRequest {
        label: &label,
        device,
        runs,
        profile,
        threads,
    };
    let report = ferrite_tools::host::bench::bench(bytes.as_bytes(), &model, &arrays, request)
        .map_err(|e| e.to_string())?;
    if let Some(path) = output.trace {
        let trace = serde_json::to_vec_pretty(&report.trace()).map_err(|e| e.to_string())?;
        files::write_atomic(path, &trace, &[model_path]).map_err(|e| e.to_string())?;
    }
    if output.json {
        println!("{}", report.json());
    } else if output.csv {
        print!("{}", report.csv());
    } else {
        print!("{report}");
        if let Some(path) = output.trace {
            println!(
                "  trace written to {} (open it in Perfetto)",
                path.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
