//! LinearRegressor and LinearClassifier.

use super::common::*;
use ferrite_hal::op::Gemm;

/// LinearRegressor (`X·Cᵀ + b`, outputs `[N, targets]`) and LinearClassifier (scores `X·Cᵀ + b`
/// after `post_transform`, and the label of the highest score).
pub(super) fn linear(lw: &mut Lowerer, node: &Node, classifier: bool) -> Result<(), Reason> {
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
    let w = transposed_constant(lw, node, "coefficients", &coefficients, rows, f);
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
    label_of_highest(lw, node, scores, n, labels)
}
