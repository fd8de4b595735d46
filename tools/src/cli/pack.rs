//! `ferrite pack`: an ONNX model packed into a `.frt` file (optionally quantized), with its report.

use super::common::*;
use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack;
use ferrite_tools::compile::ptq;
use ferrite_tools::host::files;
use ferrite_tools::host::runner;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `--quantize` and its calibration options, checked.
pub(crate) struct Quantization {
    pub(crate) calibration: PathBuf,
    pub(crate) settings: ptq::Settings,
}

impl Quantization {
    pub(crate) fn from_args(
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
pub(crate) fn calibration_progress() -> impl FnMut(ptq::Stage, usize, usize) {
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

pub(crate) fn print_quantization(report: &ptq::QuantizationReport) {
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

pub(crate) fn cmd_pack(
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
