//! `ferrite bench`: timed runs on a device, with a per-step profile where the device has one.

use super::common::*;
use ferrite_core::Model;
use ferrite_tools::host::files;
use ferrite_tools::host::runner;
use std::path::Path;
use std::process::ExitCode;

/// How `bench` reports: JSON or CSV on stdout instead of the text, and a trace file.
pub(crate) struct BenchOutput<'a> {
    pub(crate) json: bool,
    pub(crate) csv: bool,
    pub(crate) trace: Option<&'a Path>,
}

pub(crate) fn cmd_bench(
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
