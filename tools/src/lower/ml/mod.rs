//! The classic-ML ops of the `ai.onnx.ml` domain that skl2onnx writes for scikit-learn's
//! models and preprocessing, lowered onto the plan's ops: one module per kind of model
//! (`preprocess`: scalers, encoders, ZipMap; `linear`; `trees`; `svm`), dispatched here.

mod linear;
mod preprocess;
mod svm;
mod trees;

use super::{Attrs, Lowerer, Reason};
use crate::ir::TensorId;
use crate::onnx::Node;
use crate::tensor::HostTensor;
use ferrite_hal::op::BinaryOp;
use ferrite_hal::{Activation, DType, Op};

/// The `ai.onnx.ml` op types lowered here.
pub(super) const OPS: &[&str] = &[
    "ArrayFeatureExtractor",
    "Binarizer",
    "Imputer",
    "LabelEncoder",
    "LinearClassifier",
    "LinearRegressor",
    "Normalizer",
    "OneHotEncoder",
    "Scaler",
    "SVMClassifier",
    "SVMRegressor",
    "TreeEnsemble",
    "TreeEnsembleClassifier",
    "TreeEnsembleRegressor",
    "ZipMap",
];

/// Lowers one `ai.onnx.ml` node.
pub(super) fn lower(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    match node.op_type.as_str() {
        "Scaler" => preprocess::scaler(lw, node),
        "Normalizer" => preprocess::normalizer(lw, node),
        "Binarizer" => preprocess::binarizer(lw, node),
        "Imputer" => preprocess::imputer(lw, node),
        "ArrayFeatureExtractor" => preprocess::array_feature_extractor(lw, node),
        "OneHotEncoder" => preprocess::one_hot_encoder(lw, node),
        "LabelEncoder" => preprocess::label_encoder(lw, node),
        "ZipMap" => preprocess::zip_map(lw, node),
        "LinearRegressor" => linear::linear(lw, node, false),
        "LinearClassifier" => linear::linear(lw, node, true),
        "TreeEnsembleRegressor" => trees::tree_regressor(lw, node),
        "TreeEnsembleClassifier" => trees::tree_classifier(lw, node),
        "TreeEnsemble" => trees::tree_ensemble_v5(lw, node),
        "SVMRegressor" => svm::svm_regressor(lw, node),
        "SVMClassifier" => svm::svm_classifier(lw, node),
        other => Err(format!(
            "op '{other}' of domain 'ai.onnx.ml' is not supported"
        )),
    }
}

pub(super) fn plain(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: Activation::None,
    }
}

/// The f32 input 0 as a matrix `[N, features]` (a vector is one row).
pub(super) fn features(lw: &mut Lowerer, node: &Node) -> Result<(TensorId, usize, usize), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    match lw.shape(x)[..] {
        [n, f] => Ok((x, n, f)),
        [f] => Ok((lw.temp_alias(node, "rows", x, vec![1, f]), 1, f)),
        ref s => Err(format!("the input has shape {s:?}, not [N, features]")),
    }
}

/// A per-feature parameter of `f` values (or one for all) as a `[values]` f32 constant.
pub(super) fn per_feature(
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

pub(super) fn ints_of(node: &Node, name: &str) -> Result<Vec<i64>, Reason> {
    node.ints(name)?
        .ok_or_else(|| format!("{name} is required"))
}

/// A float-tensor attribute's values (opset 5's `nodes_splits`, `leaf_weights`, ...).
pub(super) fn float_tensor(node: &Node, name: &str) -> Result<Vec<f32>, Reason> {
    node.tensor(name)?
        .map(|t| t.to_f32s())
        .ok_or_else(|| format!("{name} is required"))
}
