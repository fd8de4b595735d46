//! A model's inputs as the user gives them: arrays matched to inputs by name or position, and
//! checked against each input's dtype and shape before anything runs.

use crate::host::error::RunError;
use crate::host::npy::NpyArray;
use ferrite_core::Model;
use std::path::Path;

/// One array offered as a model input, as [`match_feeds`] checks it.
#[derive(Clone, Copy, Debug)]
pub struct Feed<'a> {
    /// The input it is for.
    pub name: &'a str,
    /// Its element type.
    pub dtype: ferrite_hal::DType,
    /// Its shape.
    pub shape: &'a [usize],
}

/// Matches named arrays to the model's inputs: each feed's input index, in the feeds' order.
/// An unknown, repeated or missing name, or an array of another dtype or shape than its
/// input's, is an error naming the input.
pub fn match_feeds(model: &Model<'_>, feeds: &[Feed<'_>]) -> Result<Vec<usize>, RunError> {
    let names: Vec<&str> = (0..model.input_count())
        .filter_map(|i| model.input(i).map(|t| t.name))
        .collect();
    let listed = || names.join(", ");
    let mut given = vec![false; names.len()];
    let mut order = Vec::with_capacity(feeds.len());
    for feed in feeds {
        let Some(i) = names.iter().position(|n| *n == feed.name) else {
            return Err(RunError::Input(format!(
                "the model has no input '{}' (inputs: {})",
                feed.name,
                listed()
            )));
        };
        if std::mem::replace(&mut given[i], true) {
            return Err(RunError::Input(format!(
                "input '{}' is given twice",
                feed.name
            )));
        }
        let info = model
            .input(i)
            .ok_or_else(|| RunError::Input(format!("no input #{i}")))?;
        if feed.dtype != info.desc.dtype {
            return Err(RunError::Input(format!(
                "input '{}' is {}, the array is {}",
                feed.name, info.desc.dtype, feed.dtype
            )));
        }
        if feed.shape != info.desc.shape.dims() {
            return Err(RunError::Input(format!(
                "input '{}' has shape {:?}, the array has {:?}",
                feed.name,
                info.desc.shape.dims(),
                feed.shape
            )));
        }
        order.push(i);
    }
    let missing: Vec<&str> = names
        .iter()
        .zip(&given)
        .filter(|(_, g)| !**g)
        .map(|(n, _)| *n)
        .collect();
    if !missing.is_empty() {
        return Err(RunError::Input(format!(
            "missing input(s): {} (inputs: {})",
            missing.join(", "),
            listed()
        )));
    }
    Ok(order)
}

/// Checks that `inputs` match the model's inputs in count, dtype and shape.
pub fn check_inputs(model: &Model<'_>, inputs: &[NpyArray]) -> Result<(), RunError> {
    if inputs.len() != model.input_count() {
        return Err(RunError::Input(format!(
            "the model has {} input(s), {} were given",
            model.input_count(),
            inputs.len()
        )));
    }
    for (i, array) in inputs.iter().enumerate() {
        let info = model
            .input(i)
            .ok_or_else(|| RunError::Input(format!("no input #{i}")))?;
        if array.dtype != info.desc.dtype {
            return Err(RunError::Input(format!(
                "input '{}' is {}, the file holds {}",
                info.name, info.desc.dtype, array.dtype
            )));
        }
        if array.shape != info.desc.shape.dims() {
            return Err(RunError::Input(format!(
                "input '{}' has shape {:?}, the file holds {:?}",
                info.name,
                info.desc.shape.dims(),
                array.shape
            )));
        }
    }
    Ok(())
}

/// Matches `NAME=FILE` arguments (or plain files in graph-input order) to input positions.
pub fn order_inputs(model: &Model<'_>, args: &[String]) -> Result<Vec<(usize, String)>, RunError> {
    let names: Vec<&str> = (0..model.input_count())
        .filter_map(|i| model.input(i).map(|t| t.name))
        .collect();
    match_input_args(&names, args)
}

/// Matches `--input` arguments to the inputs `names`: `NAME=FILE` by name, plain files in
/// order; each input once. An unknown name, a repeated or missing input, or too many files is
/// an error that names the inputs.
pub fn match_input_args(names: &[&str], args: &[String]) -> Result<Vec<(usize, String)>, RunError> {
    let listed = || {
        if names.is_empty() {
            "the model has no inputs".to_string()
        } else {
            format!("inputs: {}", names.join(", "))
        }
    };
    let mut slots: Vec<Option<String>> = vec![None; names.len()];
    let mut next = 0;
    for arg in args {
        let named = names.iter().position(|n| {
            arg.strip_prefix(n)
                .is_some_and(|rest| rest.starts_with('='))
        });
        let (k, file) = match named {
            Some(k) => (k, arg[names[k].len() + 1..].to_string()),
            None => {
                // `c=a.npy` names an input that does not exist (unless it is a file's path).
                if let Some((name, _)) = arg.split_once('=') {
                    if !Path::new(arg).exists() {
                        return Err(RunError::Input(format!(
                            "--input {arg}: the model has no input '{name}' ({})",
                            listed()
                        )));
                    }
                }
                while slots.get(next).is_some_and(Option::is_some) {
                    next += 1;
                }
                if next >= names.len() {
                    return Err(RunError::Input(format!(
                        "--input {arg}: more input files than the model's {} input(s) ({})",
                        names.len(),
                        listed()
                    )));
                }
                (next, arg.clone())
            }
        };
        if slots[k].replace(file).is_some() {
            return Err(RunError::Input(format!(
                "input '{}' is given twice",
                names[k]
            )));
        }
    }
    let missing: Vec<&str> = names
        .iter()
        .zip(&slots)
        .filter(|(_, s)| s.is_none())
        .map(|(n, _)| *n)
        .collect();
    if !missing.is_empty() {
        return Err(RunError::Input(format!(
            "missing input(s): {} ({}; --input NAME=FILE.npy)",
            missing.join(", "),
            listed()
        )));
    }
    Ok(slots
        .into_iter()
        .enumerate()
        .filter_map(|(k, s)| Some((k, s?)))
        .collect())
}
