//! `ferrite check`: whether a model lowers and fits a device, without writing anything.

use super::common::*;
use ferrite_core::Model;
use ferrite_hal::Plan;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack;
use ferrite_tools::host::runner::{self, DeviceSpec};
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn cmd_check(input: &Path, device: Option<&str>, plan: &PlanArgs) -> CliResult {
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
