//! The classic-ML ops of the `ai.onnx.ml` domain that skl2onnx writes for scikit-learn's linear
//! models and preprocessing, lowered onto the plan's ops: Scaler, Normalizer, Binarizer,
//! Imputer, ArrayFeatureExtractor, LinearRegressor, LinearClassifier, and ZipMap (whose
//! `seq(map)` output becomes the probability tensor itself, with a note).

use super::{Attrs, Lowerer, Reason};
use crate::ir::TensorId;
use crate::onnx::Node;
use crate::tensor::HostTensor;
use ferrite_hal::op::{
    ArgIndex, BinaryOp, CompareOp, Detect, Gemm, ReduceOp, TreeAggregate, TreeEnsemble,
    TREE_BRANCH_MODES, TREE_LEAF, TREE_MISSING_TRUE,
};
use ferrite_hal::{Activation, DType, Op};
use std::collections::HashMap;

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
        "Scaler" => scaler(lw, node),
        "Normalizer" => normalizer(lw, node),
        "Binarizer" => binarizer(lw, node),
        "Imputer" => imputer(lw, node),
        "ArrayFeatureExtractor" => array_feature_extractor(lw, node),
        "LinearRegressor" => linear(lw, node, false),
        "LinearClassifier" => linear(lw, node, true),
        "ZipMap" => zip_map(lw, node),
        "OneHotEncoder" => one_hot_encoder(lw, node),
        "LabelEncoder" => label_encoder(lw, node),
        "TreeEnsembleRegressor" => tree_regressor(lw, node),
        "TreeEnsemble" => tree_ensemble_v5(lw, node),
        "SVMRegressor" => svm_regressor(lw, node),
        "SVMClassifier" => svm_classifier(lw, node),
        "TreeEnsembleClassifier" => tree_classifier(lw, node),
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

/// The flat tables of a tree ensemble's attributes (`Op::TreeEnsemble`'s inputs 1–5), with
/// its votes read from the attributes prefixed `votes` (`target` or `class`).
struct Forest {
    nodes: Vec<i64>,
    thresholds: Vec<f32>,
    roots: Vec<i64>,
    targets: Vec<i64>,
    weights: Vec<f32>,
}

fn ints_of(node: &Node, name: &str) -> Result<Vec<i64>, Reason> {
    node.ints(name)?
        .ok_or_else(|| format!("{name} is required"))
}

impl Forest {
    fn read(node: &Node, votes: &str) -> Result<Forest, Reason> {
        if node.attr("nodes_values_as_tensor").is_some() {
            return Err(
                "double-precision thresholds (nodes_values_as_tensor) are not supported".into(),
            );
        }
        let tree_ids = ints_of(node, "nodes_treeids")?;
        let node_ids = ints_of(node, "nodes_nodeids")?;
        let features = ints_of(node, "nodes_featureids")?;
        let values = node
            .floats("nodes_values")?
            .ok_or("nodes_values is required")?;
        let modes = node
            .strings("nodes_modes")?
            .ok_or("nodes_modes is required")?;
        let true_ids = ints_of(node, "nodes_truenodeids")?;
        let false_ids = ints_of(node, "nodes_falsenodeids")?;
        let n = tree_ids.len();
        let missing = node
            .ints("nodes_missing_value_tracks_true")?
            .unwrap_or_else(|| vec![0; n]);
        let lengths = [
            node_ids.len(),
            features.len(),
            values.len(),
            modes.len(),
            true_ids.len(),
            false_ids.len(),
            missing.len(),
        ];
        if n == 0 || lengths.iter().any(|&l| l != n) {
            return Err("the nodes_* attributes must have one entry per node".into());
        }
        let mut position = HashMap::new();
        let mut roots = Vec::new();
        for (i, (&t, &id)) in tree_ids.iter().zip(&node_ids).enumerate() {
            if position.insert((t, id), i).is_some() {
                return Err(format!("node {id} of tree {t} is listed twice"));
            }
        }
        let mut trees: Vec<i64> = tree_ids.clone();
        trees.dedup();
        let mut seen = std::collections::HashSet::new();
        for &t in &trees {
            if seen.insert(t) {
                let root = position
                    .get(&(t, 0))
                    .ok_or(format!("tree {t} has no node 0"))?;
                roots.push(*root as i64);
            }
        }
        let child = |t: i64, id: i64| -> Result<i64, Reason> {
            position
                .get(&(t, id))
                .map(|&p| p as i64)
                .ok_or_else(|| format!("tree {t} has no node {id}"))
        };
        // Votes, grouped by their leaf (in vote order within a leaf).
        let vote_trees = ints_of(node, &format!("{votes}_treeids"))?;
        let vote_nodes = ints_of(node, &format!("{votes}_nodeids"))?;
        let vote_ids = ints_of(node, &format!("{votes}_ids"))?;
        let vote_weights = node
            .floats(&format!("{votes}_weights"))?
            .ok_or_else(|| format!("{votes}_weights is required"))?;
        let v = vote_trees.len();
        if [vote_nodes.len(), vote_ids.len(), vote_weights.len()]
            .iter()
            .any(|&l| l != v)
        {
            return Err(format!(
                "the {votes}_* attributes must have one entry per vote"
            ));
        }
        let mut by_leaf: Vec<Vec<usize>> = vec![Vec::new(); n];
        for k in 0..v {
            let at = position
                .get(&(vote_trees[k], vote_nodes[k]))
                .ok_or_else(|| {
                    format!(
                        "a vote names node {} of tree {}, which does not exist",
                        vote_nodes[k], vote_trees[k]
                    )
                })?;
            if modes[*at] != "LEAF" {
                return Err(format!(
                    "a vote names node {} of tree {}, which is not a leaf",
                    vote_nodes[k], vote_trees[k]
                ));
            }
            by_leaf[*at].push(k);
        }
        let (mut nodes, mut targets, mut weights) =
            (Vec::with_capacity(4 * n), Vec::new(), Vec::new());
        for i in 0..n {
            if modes[i] == "LEAF" {
                nodes.extend([
                    targets.len() as i64,
                    TREE_LEAF as i64,
                    by_leaf[i].len() as i64,
                    0,
                ]);
                for &k in &by_leaf[i] {
                    targets.push(vote_ids[k]);
                    weights.push(vote_weights[k]);
                }
                continue;
            }
            let mode = TREE_BRANCH_MODES
                .iter()
                .position(|m| *m == modes[i])
                .ok_or_else(|| format!("node mode '{}' is not known", modes[i]))?
                as i64;
            let mode = mode
                + if missing[i] != 0 {
                    TREE_MISSING_TRUE as i64
                } else {
                    0
                };
            let t = tree_ids[i];
            nodes.extend([
                features[i],
                mode,
                child(t, true_ids[i])?,
                child(t, false_ids[i])?,
            ]);
        }
        Ok(Forest {
            nodes,
            thresholds: values,
            roots,
            targets,
            weights,
        })
    }

    /// Emits the ensemble on `x` (`[N, features]`) into a new `[N, targets]` tensor.
    fn emit(
        self,
        lw: &mut Lowerer,
        node: &Node,
        x: TensorId,
        n: usize,
        features: usize,
        op: TreeEnsemble,
    ) -> Result<TensorId, Reason> {
        if let Some(bad) = self
            .targets
            .iter()
            .find(|&&t| t < 0 || t as usize >= op.targets)
        {
            return Err(format!(
                "a vote goes to target {bad}, past the {} targets",
                op.targets
            ));
        }
        if let Some(bad) = self
            .nodes
            .chunks(4)
            .find(|r| r[1] != TREE_LEAF as i64 && (r[0] < 0 || r[0] as usize >= features))
        {
            return Err(format!(
                "a node tests feature {}, past the {features} features",
                bad[0]
            ));
        }
        let int = |v: Vec<i64>| -> Result<HostTensor, Reason> {
            if v.iter().any(|&i| i32::try_from(i).is_err()) {
                return Err("the ensemble is too large for 32-bit node tables".into());
            }
            Ok(HostTensor::int(DType::I32, vec![v.len()], v))
        };
        let mut table = int(self.nodes)?;
        table.shape = vec![table.shape[0] / 4, 4];
        let tables = [
            lw.constant(node, "tree_nodes", table),
            lw.constant(
                node,
                "tree_thresholds",
                HostTensor::float(vec![self.thresholds.len()], self.thresholds),
            ),
            lw.constant(node, "tree_roots", int(self.roots)?),
            lw.constant(node, "tree_vote_targets", int(self.targets)?),
            lw.constant(
                node,
                "tree_vote_weights",
                HostTensor::float(vec![self.weights.len()], self.weights),
            ),
        ];
        let y = lw.temp(node, "votes", DType::F32, vec![n, op.targets]);
        let mut inputs = vec![Some(x)];
        inputs.extend(tables.map(Some));
        lw.emit(node, Op::TreeEnsemble(op), inputs, vec![y])?;
        Ok(y)
    }
}

/// `base_values` added to `scores` (`[N, k]`) when the attribute has `k` values (or one), else
/// `scores` as they are.
fn add_base(
    lw: &mut Lowerer,
    node: &Node,
    scores: TensorId,
    n: usize,
    k: usize,
) -> Result<TensorId, Reason> {
    let Some(base) = node.floats("base_values")?.filter(|b| !b.is_empty()) else {
        return Ok(scores);
    };
    if base.len() != k && base.len() != 1 {
        return Err(format!("{} base_values for {k} outputs", base.len()));
    }
    let b = lw.constant(
        node,
        "base_values",
        HostTensor::float(vec![base.len()], base),
    );
    let y = lw.temp(node, "based", DType::F32, vec![n, k]);
    lw.emit(
        node,
        plain(BinaryOp::Add),
        vec![Some(scores), Some(b)],
        vec![y],
    )?;
    Ok(y)
}

/// TreeEnsembleRegressor: the aggregated votes plus `base_values`.
fn tree_regressor(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    if node.string("post_transform", "NONE")? != "NONE" {
        return Err("a regressor's post_transform must be NONE".into());
    }
    let aggregate = match node.string("aggregate_function", "SUM")?.as_str() {
        "SUM" => TreeAggregate::Sum,
        "AVERAGE" => TreeAggregate::Average,
        "MIN" => TreeAggregate::Min,
        "MAX" => TreeAggregate::Max,
        other => return Err(format!("aggregate_function '{other}' is not known")),
    };
    let targets = node.int("n_targets", 1)?;
    let targets = usize::try_from(targets)
        .ok()
        .filter(|&t| t >= 1)
        .ok_or("n_targets must be positive")?;
    let forest = Forest::read(node, "target")?;
    let op = TreeEnsemble { targets, aggregate };
    let votes = forest.emit(lw, node, x, n, f, op)?;
    let y = add_base(lw, node, votes, n, targets)?;
    let shape = lw.shape(y);
    lw.alias_output(node, 0, y, shape)
}

/// TreeEnsembleClassifier, as onnxruntime scores it: with several classes, the summed votes
/// plus `base_values`, transformed (NONE, LOGISTIC, SOFTMAX), and the label of the highest; a
/// binary classifier voting for one class (skl2onnx's form) scores `s` and gives `[1 − s, s]`
/// (votes all positive: forests; label by `s > 0.5`) or `[σ(−s), σ(s)]` / `[−s, s]` (mixed
/// votes: boosting, with LOGISTIC or not; label by `s > 0`).
fn tree_classifier(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    if node.strings("classlabels_strings")?.is_some() {
        return Err(
            "string class labels are not supported (string tensors); train with integer labels"
                .into(),
        );
    }
    let labels = ints_of(node, "classlabels_int64s")?;
    let post = node.string("post_transform", "NONE")?;
    if !matches!(post.as_str(), "NONE" | "LOGISTIC" | "SOFTMAX") {
        return Err(format!("post_transform '{post}' is not supported"));
    }
    let forest = Forest::read(node, "class")?;
    let mut ids = forest.targets.clone();
    ids.sort_unstable();
    ids.dedup();
    let all_positive = forest.weights.iter().all(|&w| w >= 0.0);
    let sum = |targets| TreeEnsemble {
        targets,
        aggregate: TreeAggregate::Sum,
    };
    if labels.len() == 2 {
        if ids != [0] {
            return Err("a binary classifier must vote for class 0 only (skl2onnx's form)".into());
        }
        let base = node.floats("base_values")?.unwrap_or_default();
        if base.len() > 1 {
            return Err("a binary classifier with two base_values is not supported".into());
        }
        let votes = forest.emit(lw, node, x, n, f, sum(1))?;
        let s = add_base(lw, node, votes, n, 1)?;
        let scalar = |lw: &mut Lowerer, what: &str, v: HostTensor| lw.constant(node, what, v);
        let (negative, positive) = if all_positive {
            let one = scalar(lw, "one", HostTensor::float(vec![], vec![1.0]));
            let rest = lw.temp(node, "one_minus", DType::F32, vec![n, 1]);
            lw.emit(
                node,
                plain(BinaryOp::Sub),
                vec![Some(one), Some(s)],
                vec![rest],
            )?;
            (rest, s)
        } else if post == "LOGISTIC" {
            let p = lw.temp(node, "logistic", DType::F32, vec![n, 1]);
            lw.emit(node, Op::Unary(Activation::Sigmoid), vec![Some(s)], vec![p])?;
            let one = scalar(lw, "one", HostTensor::float(vec![], vec![1.0]));
            let q = lw.temp(node, "complement", DType::F32, vec![n, 1]);
            lw.emit(
                node,
                plain(BinaryOp::Sub),
                vec![Some(one), Some(p)],
                vec![q],
            )?;
            (q, p)
        } else {
            let q = lw.temp(node, "negated", DType::F32, vec![n, 1]);
            lw.emit(node, Op::Unary(Activation::Neg), vec![Some(s)], vec![q])?;
            (q, s)
        };
        let z = lw.output(node, 1, DType::F32, vec![n, 2])?;
        lw.emit(
            node,
            Op::Concat { axis: 1 },
            vec![Some(negative), Some(positive)],
            vec![z],
        )?;
        let cut = scalar(
            lw,
            "cut",
            HostTensor::float(vec![], vec![if all_positive { 0.5 } else { 0.0 }]),
        );
        let wins = lw.temp(node, "positive_wins", DType::Bool, vec![n, 1]);
        lw.emit(
            node,
            Op::Compare(CompareOp::Greater),
            vec![Some(s), Some(cut)],
            vec![wins],
        )?;
        let label = |lw: &mut Lowerer, what: &str, v: i64| {
            lw.constant(node, what, HostTensor::int(DType::I64, vec![], vec![v]))
        };
        let (l0, l1) = (
            label(lw, "negative_label", labels[0]),
            label(lw, "positive_label", labels[1]),
        );
        let picked = lw.temp(node, "label", DType::I64, vec![n, 1]);
        lw.emit(
            node,
            Op::Where,
            vec![Some(wins), Some(l1), Some(l0)],
            vec![picked],
        )?;
        return lw.alias_output(node, 0, picked, vec![n]);
    }
    let k = labels.len();
    if k < 2 {
        return Err("a classifier needs at least two classes".into());
    }
    let votes = forest.emit(lw, node, x, n, f, sum(k))?;
    let scores = add_base(lw, node, votes, n, k)?;
    let z = lw.output(node, 1, DType::F32, vec![n, k])?;
    match post.as_str() {
        "SOFTMAX" => lw.emit(node, Op::Softmax { axis: 1 }, vec![Some(scores)], vec![z])?,
        "LOGISTIC" => lw.emit(
            node,
            Op::Unary(Activation::Sigmoid),
            vec![Some(scores)],
            vec![z],
        )?,
        _ => lw.emit(node, Op::Copy, vec![Some(scores)], vec![z])?,
    }
    let best = Op::ArgMax(ArgIndex {
        axis: 1,
        last: false,
    });
    if labels.iter().enumerate().all(|(i, &l)| l == i as i64) {
        let y = lw.output(node, 0, DType::I64, vec![n])?;
        return lw.emit(node, best, vec![Some(scores)], vec![y]);
    }
    let index = lw.temp(node, "best", DType::I64, vec![n]);
    lw.emit(node, best, vec![Some(scores)], vec![index])?;
    let table = lw.constant(node, "labels", HostTensor::int(DType::I64, vec![k], labels));
    let y = lw.output(node, 0, DType::I64, vec![n])?;
    lw.emit(
        node,
        Op::Gather { axis: 0 },
        vec![Some(table), Some(index)],
        vec![y],
    )
}

/// The support vectors `[S, features]` of an SVM node and its kernel matrix `K(x, sv)`,
/// `[N, S]`: LINEAR `x·sv`, POLY `(γ x·sv + c₀)^d`, SIGMOID `tanh(γ x·sv + c₀)` (one Gemm, its
/// activation fused), RBF `exp(−γ‖x − sv‖²)` as `exp(2γ x·sv − γ‖sv‖² − γ‖x‖²)` (a Gemm with
/// the support vectors' norms as its bias, the rows' norms subtracted).
fn svm_kernel(
    lw: &mut Lowerer,
    node: &Node,
    x: TensorId,
    n: usize,
    f: usize,
    supports: usize,
) -> Result<TensorId, Reason> {
    let sv = node
        .floats("support_vectors")?
        .ok_or("support_vectors are required")?;
    if sv.len() != supports * f {
        return Err(format!(
            "{} support vector values for {supports} vectors of {f} features",
            sv.len()
        ));
    }
    let params = node.floats("kernel_params")?.unwrap_or_default();
    let (gamma, coef0, degree) = (
        params.first().copied().unwrap_or(0.0),
        params.get(1).copied().unwrap_or(0.0),
        params.get(2).copied().unwrap_or(3.0),
    );
    let transposed = (0..f * supports)
        .map(|i| sv[(i % supports) * f + i / supports])
        .collect();
    let w = lw.constant(
        node,
        "support_vectors",
        HostTensor::float(vec![f, supports], transposed),
    );
    let gemm = |alpha, activation| {
        Op::Gemm(Gemm {
            alpha,
            beta: 1.0,
            activation,
        })
    };
    let kernel = node.string("kernel_type", "LINEAR")?;
    let scalar = |lw: &mut Lowerer, what: &str, v: f32| {
        lw.constant(node, what, HostTensor::float(vec![], vec![v]))
    };
    let k = lw.temp(node, "kernel", DType::F32, vec![n, supports]);
    match kernel.as_str() {
        "LINEAR" => lw.emit(
            node,
            gemm(1.0, Activation::None),
            vec![Some(x), Some(w)],
            vec![k],
        )?,
        "SIGMOID" | "POLY" => {
            let c = scalar(lw, "coef0", coef0);
            let act = if kernel == "SIGMOID" {
                Activation::Tanh
            } else {
                Activation::None
            };
            if kernel == "SIGMOID" {
                lw.emit(
                    node,
                    gemm(gamma, act),
                    vec![Some(x), Some(w), Some(c)],
                    vec![k],
                )?;
            } else {
                let base = lw.temp(node, "poly_base", DType::F32, vec![n, supports]);
                lw.emit(
                    node,
                    gemm(gamma, act),
                    vec![Some(x), Some(w), Some(c)],
                    vec![base],
                )?;
                let d = scalar(lw, "degree", degree);
                lw.emit(
                    node,
                    plain(BinaryOp::Pow),
                    vec![Some(base), Some(d)],
                    vec![k],
                )?;
            }
        }
        "RBF" => {
            let norms = (0..supports)
                .map(|j| -gamma * sv[j * f..(j + 1) * f].iter().map(|v| v * v).sum::<f32>())
                .collect();
            let c = lw.constant(
                node,
                "support_norms",
                HostTensor::float(vec![supports], norms),
            );
            let t = lw.temp(node, "rbf_cross", DType::F32, vec![n, supports]);
            lw.emit(
                node,
                gemm(2.0 * gamma, Activation::None),
                vec![Some(x), Some(w), Some(c)],
                vec![t],
            )?;
            let xx = lw.temp(node, "row_norms", DType::F32, vec![n, 1]);
            lw.emit(
                node,
                Op::Reduce {
                    op: ReduceOp::SumSquare,
                    axes: 1 << 1,
                },
                vec![Some(x)],
                vec![xx],
            )?;
            let g = scalar(lw, "gamma", gamma);
            let scaled = lw.temp(node, "scaled_row_norms", DType::F32, vec![n, 1]);
            lw.emit(
                node,
                plain(BinaryOp::Mul),
                vec![Some(xx), Some(g)],
                vec![scaled],
            )?;
            let arg = lw.temp(node, "rbf_exponent", DType::F32, vec![n, supports]);
            lw.emit(
                node,
                plain(BinaryOp::Sub),
                vec![Some(t), Some(scaled)],
                vec![arg],
            )?;
            lw.emit(node, Op::Unary(Activation::Exp), vec![Some(arg)], vec![k])?;
        }
        other => return Err(format!("kernel_type '{other}' is not known")),
    }
    Ok(k)
}

/// SVMRegressor: `Σ coefficient · K(x, sv) + ρ` (a linear model when it has no support
/// vectors), `±1` by its sign when `one_class`.
fn svm_regressor(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    if node.string("post_transform", "NONE")? != "NONE" {
        return Err("a regressor's post_transform must be NONE".into());
    }
    let coefficients = node
        .floats("coefficients")?
        .ok_or("coefficients are required")?;
    let rho = node.floats("rho")?.unwrap_or_else(|| vec![0.0]);
    let supports = node.int("n_supports", 0)? as usize;
    let (k, width) = if supports == 0 {
        (x, f)
    } else {
        (svm_kernel(lw, node, x, n, f, supports)?, supports)
    };
    if coefficients.len() != width || rho.len() != 1 {
        return Err(format!(
            "{} coefficients and {} rho for {width} inputs",
            coefficients.len(),
            rho.len()
        ));
    }
    let w = lw.constant(
        node,
        "coefficients",
        HostTensor::float(vec![width, 1], coefficients),
    );
    let b = lw.constant(node, "rho", HostTensor::float(vec![1], rho));
    let gemm = Op::Gemm(Gemm {
        alpha: 1.0,
        beta: 1.0,
        activation: Activation::None,
    });
    if node.int("one_class", 0)? == 0 {
        let y = lw.output(node, 0, DType::F32, vec![n, 1])?;
        return lw.emit(node, gemm, vec![Some(k), Some(w), Some(b)], vec![y]);
    }
    let score = lw.temp(node, "score", DType::F32, vec![n, 1]);
    lw.emit(node, gemm, vec![Some(k), Some(w), Some(b)], vec![score])?;
    let zero = lw.constant(node, "zero", HostTensor::float(vec![], vec![0.0]));
    let inside = lw.temp(node, "inside", DType::Bool, vec![n, 1]);
    lw.emit(
        node,
        Op::Compare(CompareOp::Greater),
        vec![Some(score), Some(zero)],
        vec![inside],
    )?;
    let (one, minus) = (
        lw.constant(node, "one", HostTensor::float(vec![], vec![1.0])),
        lw.constant(node, "minus_one", HostTensor::float(vec![], vec![-1.0])),
    );
    let y = lw.output(node, 0, DType::F32, vec![n, 1])?;
    lw.emit(
        node,
        Op::Where,
        vec![Some(inside), Some(one), Some(minus)],
        vec![y],
    )
}

/// SVMClassifier (libsvm's one-against-one, no probabilities), as onnxruntime scores it: a
/// decision `f` per pair of classes (one Gemm of the kernel matrix with the pairs' coefficients,
/// laid out at pack time), a vote per pair (to the first class when `f > 0`), the label of the
/// most votes (the first on a tie); scores `[−f, f]` with two classes, else the pairs' `f`.
fn svm_classifier(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    if node.strings("classlabels_strings")?.is_some() {
        return Err(
            "string class labels are not supported (string tensors); train with integer labels"
                .into(),
        );
    }
    if node.floats("prob_a")?.is_some_and(|p| !p.is_empty()) {
        return Err("probability estimates (prob_a, prob_b) are not supported; train with probability=False".into());
    }
    if node.string("post_transform", "NONE")? != "NONE" {
        return Err("an SVM classifier's post_transform must be NONE".into());
    }
    let labels = ints_of(node, "classlabels_ints")?;
    let per_class = ints_of(node, "vectors_per_class")?;
    let k = labels.len();
    if k < 2 || per_class.len() != k || per_class.iter().any(|&c| c < 0) {
        return Err("vectors_per_class must give one count per class".into());
    }
    let supports: usize = per_class.iter().map(|&c| c as usize).sum();
    let coefficients = node
        .floats("coefficients")?
        .ok_or("coefficients are required")?;
    let rho = node.floats("rho")?.ok_or("rho is required")?;
    let pairs = k * (k - 1) / 2;
    if supports == 0 || coefficients.len() != (k - 1) * supports || rho.len() != pairs {
        return Err(format!(
            "{} coefficients and {} rho for {k} classes of {supports} support vectors",
            coefficients.len(),
            rho.len()
        ));
    }
    let kernel = svm_kernel(lw, node, x, n, f, supports)?;
    // W [supports, pairs]: pair (i, j) weighs class i's vectors by row j − 1 of the
    // coefficients and class j's by row i. D [pairs, k]: +1 for i, −1 for j (the vote moves
    // from j to i when f > 0); the j's one vote each is the base.
    let start: Vec<usize> = per_class
        .iter()
        .scan(0usize, |acc, &c| {
            let s = *acc;
            *acc += c as usize;
            Some(s)
        })
        .collect();
    let (mut w, mut d, mut base) = (
        vec![0.0f32; supports * pairs],
        vec![0.0f32; pairs * k],
        vec![0.0f32; k],
    );
    let mut p = 0;
    for i in 0..k - 1 {
        for j in i + 1..k {
            for (class, row) in [(i, j - 1), (j, i)] {
                for m in start[class]..start[class] + per_class[class] as usize {
                    w[m * pairs + p] = coefficients[row * supports + m];
                }
            }
            d[p * k + i] = 1.0;
            d[p * k + j] = -1.0;
            base[j] += 1.0;
            p += 1;
        }
    }
    let gemm = Op::Gemm(Gemm {
        alpha: 1.0,
        beta: 1.0,
        activation: Activation::None,
    });
    let w = lw.constant(
        node,
        "pair_coefficients",
        HostTensor::float(vec![supports, pairs], w),
    );
    let r = lw.constant(node, "rho", HostTensor::float(vec![pairs], rho));
    let decisions = lw.temp(node, "decisions", DType::F32, vec![n, pairs]);
    lw.emit(
        node,
        gemm,
        vec![Some(kernel), Some(w), Some(r)],
        vec![decisions],
    )?;
    let zero = lw.constant(node, "zero", HostTensor::float(vec![], vec![0.0]));
    let first_wins = lw.temp(node, "first_wins", DType::Bool, vec![n, pairs]);
    lw.emit(
        node,
        Op::Compare(CompareOp::Greater),
        vec![Some(decisions), Some(zero)],
        vec![first_wins],
    )?;
    let wins = lw.temp(node, "wins", DType::F32, vec![n, pairs]);
    lw.emit(node, Op::Convert, vec![Some(first_wins)], vec![wins])?;
    let d = lw.constant(node, "pair_votes", HostTensor::float(vec![pairs, k], d));
    let base = lw.constant(node, "base_votes", HostTensor::float(vec![k], base));
    let votes = lw.temp(node, "votes", DType::F32, vec![n, k]);
    lw.emit(
        node,
        gemm,
        vec![Some(wins), Some(d), Some(base)],
        vec![votes],
    )?;
    let best = Op::ArgMax(ArgIndex {
        axis: 1,
        last: false,
    });
    let index = lw.temp(node, "most_votes", DType::I64, vec![n]);
    lw.emit(node, best, vec![Some(votes)], vec![index])?;
    let table = lw.constant(node, "labels", HostTensor::int(DType::I64, vec![k], labels));
    let y = lw.output(node, 0, DType::I64, vec![n])?;
    lw.emit(
        node,
        Op::Gather { axis: 0 },
        vec![Some(table), Some(index)],
        vec![y],
    )?;
    if k > 2 {
        return lw.alias_output(node, 1, decisions, vec![n, pairs]);
    }
    let negated = lw.temp(node, "negated", DType::F32, vec![n, 1]);
    lw.emit(
        node,
        Op::Unary(Activation::Neg),
        vec![Some(decisions)],
        vec![negated],
    )?;
    let z = lw.output(node, 1, DType::F32, vec![n, 2])?;
    lw.emit(
        node,
        Op::Concat { axis: 1 },
        vec![Some(negated), Some(decisions)],
        vec![z],
    )
}

/// OneHotEncoder (integer categories): `[..., categories]` of 1.0 where the value (truncated to
/// an integer, as onnxruntime does for floats) equals the category. With `zeros=0` onnxruntime
/// fails on an unknown value; Ferrite gives its row all zeros, and says so in a note.
fn one_hot_encoder(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let mut x = lw.input(node, 0)?;
    if node.strings("cats_strings")?.is_some() {
        return Err(
            "string categories are not supported (string tensors); encode them as integers".into(),
        );
    }
    let cats = ints_of(node, "cats_int64s")?;
    let shape = lw.shape(x);
    match lw.dtype(x) {
        DType::I64 => {}
        DType::F32 | DType::I32 => {
            let as_int = lw.temp(node, "as_int64", DType::I64, shape.clone());
            lw.emit(node, Op::Convert, vec![Some(x)], vec![as_int])?;
            x = as_int;
        }
        other => return Err(format!("type {other} is not supported for OneHotEncoder")),
    }
    if node.int("zeros", 1)? == 0 {
        lw.graph.notes.push(format!(
            "OneHotEncoder '{}': a value outside its {} categories gives a row of zeros (onnxruntime: an error)",
            node.label(),
            cats.len()
        ));
    }
    let mut column = shape.clone();
    column.push(1);
    let column = lw.temp_alias(node, "column", x, column);
    let k = cats.len();
    let cats = lw.constant(
        node,
        "categories",
        HostTensor::int(DType::I64, vec![k], cats),
    );
    let mut out = shape;
    out.push(k);
    let hit = lw.temp(node, "is_category", DType::Bool, out.clone());
    lw.emit(
        node,
        Op::Compare(CompareOp::Equal),
        vec![Some(column), Some(cats)],
        vec![hit],
    )?;
    let y = lw.output(node, 0, DType::F32, out)?;
    lw.emit(node, Op::Convert, vec![Some(hit)], vec![y])
}

/// Most keys a LabelEncoder is planned for (one Equal and one Where step per key).
const MAX_LABEL_KEYS: usize = 1024;

/// LabelEncoder with integer or float keys and values (`*_int64s` / `*_floats`, or opset 4's
/// `*_tensor`): a chain of `Where(x == key, value, ·)` from the default, so every key maps to
/// its value and any other input to the default.
fn label_encoder(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    if node.strings("keys_strings")?.is_some() || node.strings("values_strings")?.is_some() {
        return Err("string keys or values are not supported (string tensors)".into());
    }
    let keys = match (
        node.ints("keys_int64s")?,
        node.floats("keys_floats")?,
        node.tensor("keys_tensor")?,
    ) {
        (Some(k), _, _) => HostTensor::int(DType::I64, vec![k.len()], k),
        (_, Some(k), _) => HostTensor::float(vec![k.len()], k),
        (_, _, Some(t)) => t,
        _ => return Err("keys are required (keys_int64s, keys_floats or keys_tensor)".into()),
    };
    let (values, default) = match (
        node.ints("values_int64s")?,
        node.floats("values_floats")?,
        node.tensor("values_tensor")?,
    ) {
        (Some(v), _, _) => (
            HostTensor::int(DType::I64, vec![v.len()], v),
            HostTensor::int(DType::I64, vec![], vec![node.int("default_int64", -1)?]),
        ),
        (_, Some(v), _) => (
            HostTensor::float(vec![v.len()], v),
            HostTensor::float(vec![], vec![node.float("default_float", -0.0)?]),
        ),
        (_, _, Some(t)) => {
            // ONNX's defaults: −1 for integer values, −0.0 for floats.
            let default = match node.tensor("default_tensor")? {
                Some(d) => d,
                None if t.dtype == DType::F32 => HostTensor::float(vec![], vec![-0.0]),
                None => HostTensor::int(t.dtype, vec![], vec![-1]),
            };
            (t, default)
        }
        _ => {
            return Err(
                "values are required (values_int64s, values_floats or values_tensor)".into(),
            )
        }
    };
    let k = keys.len();
    if values.len() != k || k == 0 || k > MAX_LABEL_KEYS || default.len() != 1 {
        return Err(format!(
            "{k} keys, {} values and {} default values (one to {MAX_LABEL_KEYS} keys, one value each)",
            values.len(),
            default.len()
        ));
    }
    if lw.dtype(x) != keys.dtype {
        return Err(format!(
            "the input is {}, the keys {}",
            lw.dtype(x),
            keys.dtype
        ));
    }
    let shape = lw.shape(x);
    let out_type = values.dtype;
    let scalar_of = |t: &HostTensor, i: usize| -> HostTensor {
        if t.dtype == DType::F32 {
            HostTensor::float(vec![], vec![t.to_f32s()[i]])
        } else {
            HostTensor::int(t.dtype, vec![], vec![t.to_i64s()[i]])
        }
    };
    let mut mapped = lw.constant(
        node,
        "default",
        HostTensor {
            shape: vec![],
            ..default
        },
    );
    for i in 0..k {
        let key = lw.constant(node, &format!("key{i}"), scalar_of(&keys, i));
        let value = lw.constant(node, &format!("value{i}"), scalar_of(&values, i));
        let hit = lw.temp(node, &format!("is_key{i}"), DType::Bool, shape.clone());
        lw.emit(
            node,
            Op::Compare(CompareOp::Equal),
            vec![Some(x), Some(key)],
            vec![hit],
        )?;
        let y = if i + 1 == k {
            lw.output(node, 0, out_type, shape.clone())?
        } else {
            lw.temp(node, &format!("mapped{i}"), out_type, shape.clone())
        };
        lw.emit(
            node,
            Op::Where,
            vec![Some(hit), Some(value), Some(mapped)],
            vec![y],
        )?;
        mapped = y;
    }
    Ok(())
}

/// A float-tensor attribute's values (opset 5's `nodes_splits`, `leaf_weights`, ...).
fn float_tensor(node: &Node, name: &str) -> Result<Vec<f32>, Reason> {
    node.tensor(name)?
        .map(|t| t.to_f32s())
        .ok_or_else(|| format!("{name} is required"))
}

/// TreeEnsemble (ai.onnx.ml opset 5): leaves in arrays of their own, one vote each, and
/// set-membership branches, which become a chain of equality tests (`x = a` or `x = b` ...)
/// sharing the branch's targets. Planned as the same `TreeEnsemble` step as the opset-3 ops.
fn tree_ensemble_v5(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    let splits = float_tensor(node, "nodes_splits")?;
    let modes: Vec<i64> = node
        .tensor("nodes_modes")?
        .map(|t| t.to_i64s())
        .ok_or("nodes_modes is required")?;
    let features_of = ints_of(node, "nodes_featureids")?;
    let (true_ids, false_ids) = (
        ints_of(node, "nodes_truenodeids")?,
        ints_of(node, "nodes_falsenodeids")?,
    );
    let (true_leafs, false_leafs) = (
        ints_of(node, "nodes_trueleafs")?,
        ints_of(node, "nodes_falseleafs")?,
    );
    let leaf_targets = ints_of(node, "leaf_targetids")?;
    let leaf_weights = float_tensor(node, "leaf_weights")?;
    let roots = ints_of(node, "tree_roots")?;
    let m = splits.len();
    let missing = node
        .ints("nodes_missing_value_tracks_true")?
        .unwrap_or_else(|| vec![0; m]);
    let lengths = [
        modes.len(),
        features_of.len(),
        true_ids.len(),
        false_ids.len(),
        true_leafs.len(),
        false_leafs.len(),
        missing.len(),
    ];
    if lengths.iter().any(|&l| l != m) || leaf_targets.len() != leaf_weights.len() {
        return Err(
            "the nodes_* and leaf_* attributes must have one entry per node and leaf".into(),
        );
    }
    let mut members = node
        .tensor("membership_values")?
        .map(|t| t.to_f32s())
        .unwrap_or_default()
        .into_iter();
    // Extra equality nodes for set membership go after the branches; leaves after them.
    let mut extra: Vec<[i64; 4]> = Vec::new();
    let mut extra_thresholds = Vec::new();
    let mut rows: Vec<[i64; 4]> = Vec::with_capacity(m);
    let mut thresholds = Vec::with_capacity(m);
    // Child references are fixed up once the node count is known (leaves: −1 − leaf).
    let child = |leaf: i64, id: i64| -> i64 {
        if leaf != 0 {
            -1 - id
        } else {
            id
        }
    };
    for i in 0..m {
        let flag = if missing[i] != 0 {
            TREE_MISSING_TRUE as i64
        } else {
            0
        };
        let (yes, no) = (
            child(true_leafs[i], true_ids[i]),
            child(false_leafs[i], false_ids[i]),
        );
        match modes[i] {
            0..=5 => {
                rows.push([features_of[i], modes[i] + flag, yes, no]);
                thresholds.push(splits[i]);
            }
            6 => {
                let set: Vec<f32> = members.by_ref().take_while(|v| !v.is_nan()).collect();
                if set.is_empty() {
                    return Err("a set-membership node has no members".into());
                }
                // x = set[0] ? yes : (x = set[1] ? yes : ... : no), the first test in place,
                // the others appended (set[1]'s test at `base`).
                let eq = 4 + flag;
                let base = (m + extra.len()) as i64;
                let first_false = if set.len() > 1 { base } else { no };
                rows.push([features_of[i], eq, yes, first_false]);
                thresholds.push(set[0]);
                for (k, &v) in set.iter().enumerate().skip(1) {
                    let no_k = if k + 1 < set.len() {
                        base + k as i64
                    } else {
                        no
                    };
                    extra.push([features_of[i], eq, yes, no_k]);
                    extra_thresholds.push(v);
                }
            }
            other => return Err(format!("node mode {other} is not known")),
        }
    }
    let branches = rows.len() + extra.len();
    rows.extend(extra);
    thresholds.extend(extra_thresholds);
    let resolve = |c: i64| -> Result<i64, Reason> {
        if c < 0 {
            let leaf = -1 - c;
            if leaf as usize >= leaf_targets.len() {
                return Err(format!("leaf {leaf} does not exist"));
            }
            Ok(branches as i64 + leaf)
        } else if (c as usize) < branches {
            Ok(c)
        } else {
            Err(format!("node {c} does not exist"))
        }
    };
    let mut nodes = Vec::with_capacity(4 * (branches + leaf_targets.len()));
    for r in &rows {
        nodes.extend([r[0], r[1], resolve(r[2])?, resolve(r[3])?]);
    }
    for l in 0..leaf_targets.len() {
        nodes.extend([l as i64, TREE_LEAF as i64, 1, 0]);
        thresholds.push(0.0);
    }
    let mut tree_roots = Vec::with_capacity(roots.len());
    for &r in &roots {
        let i = usize::try_from(r)
            .ok()
            .filter(|&i| i < m)
            .ok_or(format!("root {r} does not exist"))?;
        // A tree that is one leaf: both branches name the same leaf.
        let single = true_leafs[i] != 0 && false_leafs[i] != 0 && true_ids[i] == false_ids[i];
        tree_roots.push(if single {
            resolve(child(1, true_ids[i]))?
        } else {
            r
        });
    }
    let aggregate = match node.int("aggregate_function", 1)? {
        0 => TreeAggregate::Average,
        1 => TreeAggregate::Sum,
        code => {
            return Err(format!(
                "aggregate_function {code} (MIN or MAX) is not supported in opset 5's TreeEnsemble"
            ))
        }
    };
    let targets = usize::try_from(node.int("n_targets", 1)?)
        .ok()
        .filter(|&t| t >= 1)
        .ok_or("n_targets must be positive")?;
    let forest = Forest {
        nodes,
        thresholds,
        roots: tree_roots,
        targets: leaf_targets,
        weights: leaf_weights,
    };
    let votes = forest.emit(lw, node, x, n, f, TreeEnsemble { targets, aggregate })?;
    let transform = match node.int("post_transform", 0)? {
        0 => None,
        1 => Some(Op::Softmax { axis: 1 }),
        2 => Some(Op::Unary(Activation::Sigmoid)),
        code => return Err(format!("post_transform {code} is not supported")),
    };
    match transform {
        Some(op) => {
            let y = lw.output(node, 0, DType::F32, vec![n, targets])?;
            lw.emit(node, op, vec![Some(votes)], vec![y])
        }
        None => lw.alias_output(node, 0, votes, vec![n, targets]),
    }
}
