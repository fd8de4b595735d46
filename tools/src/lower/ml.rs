//! The classic-ML ops of the `ai.onnx.ml` domain that skl2onnx writes for scikit-learn's linear
//! models and preprocessing, lowered onto the plan's ops: Scaler, Normalizer, Binarizer,
//! Imputer, ArrayFeatureExtractor, LinearRegressor, LinearClassifier, and ZipMap (whose
//! `seq(map)` output becomes the probability tensor itself, with a note).

use super::{Attrs, Lowerer, Reason};
use crate::ir::TensorId;
use crate::onnx::Node;
use crate::tensor::HostTensor;
use ferrite_hal::op::{ArgIndex, BinaryOp, Detect, Gemm, ReduceOp};
use ferrite_hal::{Activation, DType, Op};

/// The `ai.onnx.ml` op types lowered here.
pub(super) const OPS: &[&str] = &[
    "ArrayFeatureExtractor",
    "Binarizer",
    "Imputer",
    "LinearClassifier",
    "LinearRegressor",
    "Normalizer",
    "Scaler",
    "ZipMap",
];

/// Lowers one `ai.onnx.ml` node.
pub(super) fn lower(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    match node.op_type.as_str() {
        "Scaler" => scaler(lw, node),
        "Normalizer" => normalizer(lw, node),
        "Binarizer" => binarizer(lw, node),
        "Imputer" => imputer(lw, node),
        "ArrayFeatureExtractor" => array_feature_extractor(lw, node),
        "LinearRegressor" => linear(lw, node, false),
        "LinearClassifier" => linear(lw, node, true),
        "ZipMap" => zip_map(lw, node),
        other => Err(format!(
            "op '{other}' of domain 'ai.onnx.ml' is not supported"
        )),
    }
}

fn plain(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: Activation::None,
    }
}

/// The f32 input 0 as a matrix `[N, features]` (a vector is one row).
fn features(lw: &mut Lowerer, node: &Node) -> Result<(TensorId, usize, usize), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    match lw.shape(x)[..] {
        [n, f] => Ok((x, n, f)),
        [f] => Ok((lw.temp_alias(node, "rows", x, vec![1, f]), 1, f)),
        ref s => Err(format!("the input has shape {s:?}, not [N, features]")),
    }
}

/// A per-feature parameter of `f` values (or one for all) as a `[values]` f32 constant.
fn per_feature(
    lw: &mut Lowerer,
    node: &Node,
    what: &str,
    v: Vec<f32>,
    f: usize,
) -> Result<TensorId, Reason> {
    if v.len() != 1 && v.len() != f {
        return Err(format!("{what} has {} values for {f} features", v.len()));
    }
    Ok(lw.constant(node, what, HostTensor::float(vec![v.len()], v)))
}

/// Scaler: `(x − offset) · scale` per feature.
fn scaler(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    let offset = node.floats("offset")?.unwrap_or_else(|| vec![0.0]);
    let scale = node.floats("scale")?.unwrap_or_else(|| vec![1.0]);
    let (offset, scale) = (
        per_feature(lw, node, "offset", offset, f)?,
        per_feature(lw, node, "scale", scale, f)?,
    );
    let centred = lw.temp(node, "centred", DType::F32, vec![n, f]);
    lw.emit(
        node,
        plain(BinaryOp::Sub),
        vec![Some(x), Some(offset)],
        vec![centred],
    )?;
    let y = lw.output(node, 0, DType::F32, vec![n, f])?;
    lw.emit(
        node,
        plain(BinaryOp::Mul),
        vec![Some(centred), Some(scale)],
        vec![y],
    )
}

/// Normalizer: each row divided by its maximum (`MAX`), sum of magnitudes (`L1`) or Euclidean
/// norm (`L2`), as onnxruntime does (no guard against a zero row).
fn normalizer(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    let op = match node.string("norm", "MAX")?.as_str() {
        "MAX" => ReduceOp::Max,
        "L1" => ReduceOp::L1,
        "L2" => ReduceOp::L2,
        other => return Err(format!("norm '{other}' is not MAX, L1 or L2")),
    };
    let norm = lw.temp(node, "norm", DType::F32, vec![n, 1]);
    lw.emit(
        node,
        Op::Reduce { op, axes: 1 << 1 },
        vec![Some(x)],
        vec![norm],
    )?;
    let y = lw.output(node, 0, DType::F32, vec![n, f])?;
    lw.emit(
        node,
        plain(BinaryOp::Div),
        vec![Some(x), Some(norm)],
        vec![y],
    )
}

/// Binarizer: 1 where `x > threshold`, else 0.
fn binarizer(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let shape = lw.shape(x);
    let t = node.float("threshold", 0.0)?;
    let t = lw.constant(node, "threshold", HostTensor::float(vec![], vec![t]));
    let above = lw.temp(node, "above", DType::Bool, shape.clone());
    let greater = Op::Compare(ferrite_hal::op::CompareOp::Greater);
    lw.emit(node, greater, vec![Some(x), Some(t)], vec![above])?;
    let y = lw.output(node, 0, DType::F32, shape)?;
    lw.emit(node, Op::Convert, vec![Some(above)], vec![y])
}

/// Imputer: NaN (or `replaced_value_float`) replaced by the feature's `imputed_value_floats`.
fn imputer(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    let values = node
        .floats("imputed_value_floats")?
        .ok_or("only float imputation (imputed_value_floats) is supported")?;
    let values = per_feature(lw, node, "imputed_value_floats", values, f)?;
    let replaced = node.float("replaced_value_float", f32::NAN)?;
    let missing = lw.temp(node, "missing", DType::Bool, vec![n, f]);
    if replaced.is_nan() {
        let nan = Detect {
            nan: true,
            positive_infinity: false,
            negative_infinity: false,
        };
        lw.emit(node, Op::Classify(nan), vec![Some(x)], vec![missing])?;
    } else {
        let r = lw.constant(node, "replaced", HostTensor::float(vec![], vec![replaced]));
        let equal = Op::Compare(ferrite_hal::op::CompareOp::Equal);
        lw.emit(node, equal, vec![Some(x), Some(r)], vec![missing])?;
    }
    let y = lw.output(node, 0, DType::F32, vec![n, f])?;
    lw.emit(
        node,
        Op::Where,
        vec![Some(missing), Some(values), Some(x)],
        vec![y],
    )
}

/// ArrayFeatureExtractor: the listed columns (last axis) of the input, as onnxruntime shapes
/// them (a vector input gives one row); the indices may be computed at run time (skl2onnx
/// picks class labels by the arg-max this way), each then checked by the Gather.
fn array_feature_extractor(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let idx = lw.input(node, 1)?;
    let s = lw.shape(x);
    let width = *s.last().ok_or("the input is a scalar")? as i64;
    let n: usize = lw.shape(idx).iter().product();
    let idx = match lw.value(idx).map(|v| v.to_i64s()) {
        Some(columns) => {
            if let Some(bad) = columns.iter().find(|&&c| c < 0 || c >= width) {
                return Err(format!("column {bad} is out of range for {width} columns"));
            }
            lw.constant(
                node,
                "columns",
                HostTensor::int(DType::I64, vec![n], columns),
            )
        }
        None if matches!(lw.dtype(idx), DType::I64 | DType::I32) => {
            lw.temp_alias(node, "columns", idx, vec![n])
        }
        None => return Err("the column indices must be int64".into()),
    };
    let axis = s.len() - 1;
    let mut out = s.clone();
    out[axis] = n;
    if s.len() == 1 {
        let picked = lw.temp(node, "picked", lw.dtype(x), vec![n]);
        lw.emit(
            node,
            Op::Gather { axis },
            vec![Some(x), Some(idx)],
            vec![picked],
        )?;
        return lw.alias_output(node, 0, picked, vec![1, n]);
    }
    let y = lw.output(node, 0, lw.dtype(x), out)?;
    lw.emit(node, Op::Gather { axis }, vec![Some(x), Some(idx)], vec![y])
}

/// LinearRegressor (`X·Cᵀ + b`, outputs `[N, targets]`) and LinearClassifier (scores `X·Cᵀ + b`
/// after `post_transform`, and the label of the highest score).
fn linear(lw: &mut Lowerer, node: &Node, classifier: bool) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    let coefficients = node
        .floats("coefficients")?
        .ok_or("coefficients are required")?;
    if f == 0 || coefficients.len() % f != 0 || coefficients.is_empty() {
        return Err(format!(
            "{} coefficients for {f} features",
            coefficients.len()
        ));
    }
    let rows = coefficients.len() / f;
    let intercepts = node
        .floats("intercepts")?
        .unwrap_or_else(|| vec![0.0; rows]);
    if intercepts.len() != rows && intercepts.len() != 1 {
        return Err(format!(
            "{} intercepts for {rows} outputs",
            intercepts.len()
        ));
    }
    if !classifier && node.int("targets", 1)? as usize != rows {
        return Err(format!(
            "targets {} for {rows} coefficient rows",
            node.int("targets", 1)?
        ));
    }
    let activation = match node.string("post_transform", "NONE")?.as_str() {
        "NONE" | "SOFTMAX" => Activation::None,
        "LOGISTIC" if classifier => Activation::Sigmoid,
        other => return Err(format!("post_transform '{other}' is not supported")),
    };
    // Cᵀ, [features, rows], for the product.
    let transposed = (0..f * rows)
        .map(|i| coefficients[(i % rows) * f + i / rows])
        .collect();
    let w = lw.constant(
        node,
        "coefficients",
        HostTensor::float(vec![f, rows], transposed),
    );
    let b = lw.constant(
        node,
        "intercepts",
        HostTensor::float(vec![intercepts.len()], intercepts),
    );
    let gemm = Op::Gemm(Gemm {
        alpha: 1.0,
        beta: 1.0,
        activation,
    });
    if !classifier {
        let y = lw.output(node, 0, DType::F32, vec![n, rows])?;
        return lw.emit(node, gemm, vec![Some(x), Some(w), Some(b)], vec![y]);
    }
    if node.strings("classlabels_strings")?.is_some() {
        return Err(
            "string class labels are not supported (string tensors); train with integer labels"
                .into(),
        );
    }
    let labels = node
        .ints("classlabels_ints")?
        .ok_or("classlabels_ints are required")?;
    if labels.len() != rows {
        return Err(format!(
            "{} class labels for {rows} score rows (a single-score binary classifier is not supported)",
            labels.len()
        ));
    }
    let softmax = node.string("post_transform", "NONE")? == "SOFTMAX";
    let scores = if softmax {
        let raw = lw.temp(node, "raw_scores", DType::F32, vec![n, rows]);
        lw.emit(node, gemm, vec![Some(x), Some(w), Some(b)], vec![raw])?;
        let z = lw.output(node, 1, DType::F32, vec![n, rows])?;
        lw.emit(node, Op::Softmax { axis: 1 }, vec![Some(raw)], vec![z])?;
        z
    } else {
        let z = lw.output(node, 1, DType::F32, vec![n, rows])?;
        lw.emit(node, gemm, vec![Some(x), Some(w), Some(b)], vec![z])?;
        z
    };
    let best = ArgIndex {
        axis: 1,
        last: false,
    };
    let identity = labels.iter().enumerate().all(|(i, &l)| l == i as i64);
    if identity {
        let y = lw.output(node, 0, DType::I64, vec![n])?;
        return lw.emit(node, Op::ArgMax(best), vec![Some(scores)], vec![y]);
    }
    let index = lw.temp(node, "best", DType::I64, vec![n]);
    lw.emit(node, Op::ArgMax(best), vec![Some(scores)], vec![index])?;
    let table = lw.constant(
        node,
        "labels",
        HostTensor::int(DType::I64, vec![rows], labels),
    );
    let y = lw.output(node, 0, DType::I64, vec![n])?;
    lw.emit(
        node,
        Op::Gather { axis: 0 },
        vec![Some(table), Some(index)],
        vec![y],
    )
}

/// ZipMap: Ferrite has no sequence or map values, so its output is the probability tensor it
/// reads, `[N, classes]` in label order — what a C or Python caller indexes anyway.
fn zip_map(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let output = node.outputs.first().cloned().unwrap_or_default();
    lw.graph.notes.push(format!(
        "ZipMap '{}': output '{output}' is the [N, classes] probability tensor in label order, not a sequence of maps",
        node.label()
    ));
    let shape = lw.shape(x);
    lw.alias_output(node, 0, x, shape)
}
