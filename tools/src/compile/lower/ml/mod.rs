//! The classic-ML ops of the `ai.onnx.ml` domain that skl2onnx writes for scikit-learn's
//! models and preprocessing, lowered onto the plan's ops: one module per kind of model
//! (`preprocess`: scalers, encoders, ZipMap; `linear`; `trees`; `svm`), dispatched here.

mod common;
mod linear;
mod preprocess;
mod svm;
mod trees;

use super::lowerer::{Lowerer, Reason};
use crate::compile::onnx::Node;

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
