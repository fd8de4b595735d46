//! `ferrite`: pack ONNX models into `.frt` files and run, inspect and benchmark them.
//!
//! Every failure prints one line on stderr (`error: ...`) and exits non-zero; nothing panics on
//! bad input.

mod cli;

use clap::{Parser, Subcommand};
use cli::bench::{cmd_bench, BenchOutput};
use cli::check::cmd_check;
use cli::common::{parse_bytes, PlanArgs};
use cli::devices::cmd_devices;
use cli::inspect::cmd_inspect;
use cli::pack::{cmd_pack, Quantization};
use cli::run::cmd_run;
use std::path::PathBuf;
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
