//! `ferrite run`: one inference on a device, inputs and outputs as `.npy` files.

use super::common::*;
use ferrite_core::Model;
use ferrite_tools::host::error::RunError;
use ferrite_tools::host::npy;
use ferrite_tools::host::runner;
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn cmd_run(
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
