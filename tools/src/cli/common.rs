//! What the commands share: the plan options, reading models and inputs, and number formatting.

use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::{parse_input_shape, Constant, PackOptions};
use ferrite_tools::host::files;
use ferrite_tools::host::inputs;
use ferrite_tools::host::npy::{self, NpyArray};
use ferrite_tools::host::runner::{self, DeviceSpec};
use std::path::Path;
use std::process::ExitCode;

/// How an ONNX model's inputs are pinned down at pack time.
#[derive(clap::Args)]
pub(crate) struct PlanArgs {
    /// Fix an input's shape, NAME=1x3x96x96, or a symbolic dimension in every input,
    /// SYMBOL=N (repeatable). A leading symbolic dimension left over is taken as 1.
    #[arg(long = "input-shape", value_name = "NAME=DIMS")]
    pub(crate) input_shapes: Vec<String>,
    /// Refuse a symbolic leading (batch) dimension instead of taking it as 1.
    #[arg(long)]
    pub(crate) strict_shapes: bool,
    /// Freeze an input to a value known at pack time (e.g. a target shape or a sample
    /// rate): NAME=FILE.npy, or NAME=NUMBER for an input of one element (--constant sr=16000).
    #[arg(long = "constant", value_name = "NAME=FILE.npy|NUMBER")]
    pub(crate) constants: Vec<String>,
}

impl PlanArgs {
    pub(crate) fn options(&self) -> Result<PackOptions, String> {
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

pub(crate) type CliResult = Result<ExitCode, String>;

pub(crate) fn read(path: &Path) -> Result<Vec<u8>, String> {
    files::read_bounded(path, files::MODEL_LIMIT, "a model").map_err(|e| e.to_string())
}

pub(crate) fn device_spec(device: &str) -> Result<DeviceSpec, String> {
    DeviceSpec::parse(device).map_err(|e| e.to_string())
}

/// Whether the file `path` holding `bytes` is a packed model (by content; a file named `.frt`
/// is one too, so that a corrupt one reports its own error).
pub(crate) fn is_packed(path: &Path, bytes: &[u8]) -> bool {
    runner::is_frt(bytes)
        || path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("frt"))
}

/// The packed model of `bytes` (read from `path`): a `.frt` as is, an ONNX model packed in
/// memory with `options` (what it assumed on stderr).
pub(crate) fn load_bytes(
    path: &Path,
    bytes: &[u8],
    options: &PackOptions,
) -> Result<AlignedBytes, String> {
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
pub(crate) fn shapes_from_arrays(
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
pub(crate) fn parse_bytes(text: &str) -> Result<usize, String> {
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
pub(crate) fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

pub(crate) fn read_inputs(model: &Model<'_>, args: &[String]) -> Result<Vec<NpyArray>, String> {
    let ordered = inputs::order_inputs(model, args).map_err(|e| e.to_string())?;
    ordered
        .into_iter()
        .map(|(_, f)| npy::read(Path::new(&f)).map_err(|e| e.to_string()))
        .collect()
}

/// `1234567` as `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
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

pub(crate) fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}
