//! Calibration data for `--quantize`: a folder of `.npy` input samples, checked against the model.
//!
//! A model with one input reads every `*.npy` file of the folder (sorted by name). A file holds one
//! sample in the input's shape, or a batch of samples stacked along the first axis when the
//! input's batch dimension is 1 (`[N, 1, 8, 8]` for an input `[1, 1, 8, 8]`; `[N, 1, 1, 8, 8]`
//! works too). A model with several inputs reads one subfolder
//! per sample (sorted by name), each holding `NAME.npy` for every input NAME. Other files are
//! ignored; a folder with no sample is an error, as is a file of the wrong dtype or shape.

use crate::host::npy::{self, NpyArray};
use crate::PackError;
use ferrite_hal::DType;
use std::path::{Path, PathBuf};

/// A model input, as calibration needs it.
#[derive(Clone, Debug)]
pub struct InputSpec {
    /// Name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: Vec<usize>,
}

/// Most samples read from one folder: calibration needs hundreds, not millions, and every sample
/// is kept in memory.
pub const MAX_SAMPLES: usize = 100_000;

fn error(message: String) -> PackError {
    PackError::Calibration(message)
}

/// The entries of `dir` sorted by name, keeping those `keep` accepts.
fn sorted_entries(dir: &Path, keep: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>, PackError> {
    let read = std::fs::read_dir(dir).map_err(|e| error(format!("{}: {e}", dir.display())))?;
    let mut paths = Vec::new();
    for entry in read {
        let path = entry
            .map_err(|e| error(format!("{}: {e}", dir.display())))?
            .path();
        if keep(&path) {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths)
}

fn is_npy(path: &Path) -> bool {
    path.is_file()
        && path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
}

/// Splits `array` (`shown` says where it came from) into samples of `input`'s shape.
fn samples_of(array: NpyArray, input: &InputSpec, shown: &str) -> Result<Vec<Vec<u8>>, PackError> {
    if array.dtype != input.dtype {
        return Err(error(format!(
            "{shown}: holds {}, input '{}' is {}",
            array.dtype, input.name, input.dtype
        )));
    }
    if array.shape == input.shape {
        return Ok(vec![array.bytes]);
    }
    let batched = match (input.shape.first(), array.shape.split_first()) {
        (Some(1), Some((_, rest))) if rest == &input.shape[1..] => true,
        (_, Some((_, rest))) => rest == &input.shape[..],
        _ => false,
    };
    if !batched {
        return Err(error(format!(
            "{shown}: has shape {:?}; input '{}' needs {:?} (or a batch of them along a new first axis)",
            array.shape, input.name, input.shape
        )));
    }
    let sample_bytes = input.shape.iter().product::<usize>() * input.dtype.size();
    if sample_bytes == 0 {
        return Err(error(format!("{shown}: input '{}' is empty", input.name)));
    }
    Ok(array
        .bytes
        .chunks_exact(sample_bytes)
        .map(<[u8]>::to_vec)
        .collect())
}

/// Refuses a folder past [`MAX_SAMPLES`].
fn check_count(dir: &Path, count: usize) -> Result<(), PackError> {
    if count > MAX_SAMPLES {
        return Err(error(format!(
            "{}: more than {MAX_SAMPLES} samples",
            dir.display()
        )));
    }
    Ok(())
}

fn read_samples(file: &Path, input: &InputSpec) -> Result<Vec<Vec<u8>>, PackError> {
    let array = npy::read(file).map_err(|e| error(e.to_string()))?;
    samples_of(array, input, &file.display().to_string())
}

/// Reads the calibration samples in `dir` for a model with `inputs`: one `Vec` per sample
/// holding each input's bytes, in input order.
pub fn load(dir: &Path, inputs: &[InputSpec]) -> Result<Vec<Vec<NpyArray>>, PackError> {
    if !dir.is_dir() {
        return Err(error(format!("{} is not a folder", dir.display())));
    }
    let array = |input: &InputSpec, bytes: Vec<u8>| NpyArray {
        dtype: input.dtype,
        shape: input.shape.clone(),
        bytes,
    };
    let mut samples = Vec::new();
    match inputs {
        [] => return Err(error("the model has no inputs to calibrate".into())),
        [input] => {
            let files = sorted_entries(dir, is_npy)?;
            for file in &files {
                for bytes in read_samples(file, input)? {
                    samples.push(vec![array(input, bytes)]);
                }
                check_count(dir, samples.len())?;
            }
            if samples.is_empty() {
                return Err(error(format!(
                    "{} holds no .npy sample for input '{}'",
                    dir.display(),
                    input.name
                )));
            }
        }
        _ => {
            let folders = sorted_entries(dir, |p| p.is_dir())?;
            for folder in &folders {
                let mut per_input = Vec::new();
                for input in inputs {
                    let file = folder.join(format!("{}.npy", input.name));
                    if !file.is_file() {
                        return Err(error(format!(
                            "{}: missing (one NAME.npy per model input in each sample folder)",
                            file.display()
                        )));
                    }
                    per_input.push(read_samples(&file, input)?);
                }
                let count = per_input[0].len();
                if per_input.iter().any(|s| s.len() != count) {
                    return Err(error(format!(
                        "{}: the inputs hold different numbers of samples",
                        folder.display()
                    )));
                }
                for k in 0..count {
                    samples.push(
                        inputs
                            .iter()
                            .zip(&mut per_input)
                            .map(|(input, s)| array(input, std::mem::take(&mut s[k])))
                            .collect(),
                    );
                }
                check_count(dir, samples.len())?;
            }
            if samples.is_empty() {
                return Err(error(format!(
                    "{} holds no sample folder (the model has {} inputs: one folder per sample with NAME.npy for each)",
                    dir.display(),
                    inputs.len()
                )));
            }
        }
    }
    Ok(samples)
}

/// One calibration entry given in memory: an array per model input, named or (all unnamed) in
/// input order, each one sample of the input's shape or a batch of them along a new first
/// axis, as a file of the folder form holds.
pub type Entry = Vec<(Option<String>, NpyArray)>;

/// The samples of calibration entries given in memory (the Python package's `calibration=`),
/// checked as [`load`] checks a folder's: one `Vec` per sample holding each input's bytes, in
/// input order.
pub fn from_memory(
    entries: Vec<Entry>,
    inputs: &[InputSpec],
) -> Result<Vec<Vec<NpyArray>>, PackError> {
    if inputs.is_empty() {
        return Err(error("the model has no inputs to calibrate".into()));
    }
    let names = || {
        inputs
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut samples = Vec::new();
    for (k, entry) in entries.into_iter().enumerate() {
        let mut by_input: Vec<Option<NpyArray>> = vec![None; inputs.len()];
        let count = entry.len();
        for (position, (name, array)) in entry.into_iter().enumerate() {
            let i = match &name {
                Some(name) => inputs.iter().position(|i| &i.name == name).ok_or_else(|| {
                    error(format!(
                        "entry {k}: the model has no input '{name}' (inputs: {})",
                        names()
                    ))
                })?,
                None if count == inputs.len() => position,
                None => {
                    return Err(error(format!(
                        "entry {k}: {count} array(s) for {} input(s) ({}); name them",
                        inputs.len(),
                        names()
                    )))
                }
            };
            if by_input[i].replace(array).is_some() {
                return Err(error(format!(
                    "entry {k}: input '{}' is given twice",
                    inputs[i].name
                )));
            }
        }
        let mut per_input = Vec::with_capacity(inputs.len());
        for (input, array) in inputs.iter().zip(by_input) {
            let array = array
                .ok_or_else(|| error(format!("entry {k}: input '{}' is missing", input.name)))?;
            per_input.push(samples_of(array, input, &format!("entry {k}"))?);
        }
        let batch = per_input.first().map_or(0, Vec::len);
        if per_input.iter().any(|s| s.len() != batch) {
            return Err(error(format!(
                "entry {k}: the inputs hold different numbers of samples"
            )));
        }
        for b in 0..batch {
            samples.push(
                inputs
                    .iter()
                    .zip(&mut per_input)
                    .map(|(input, s)| NpyArray {
                        dtype: input.dtype,
                        shape: input.shape.clone(),
                        bytes: std::mem::take(&mut s[b]),
                    })
                    .collect(),
            );
        }
        if samples.len() > MAX_SAMPLES {
            return Err(error(format!("more than {MAX_SAMPLES} samples")));
        }
    }
    if samples.is_empty() {
        return Err(error("no calibration sample was given".into()));
    }
    Ok(samples)
}
