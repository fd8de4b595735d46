//! Tree ensembles: TreeEnsembleRegressor, TreeEnsembleClassifier (ai.onnx.ml opset 3) and
//! TreeEnsemble (opset 5), as flat tables for one `TreeEnsemble` step.

use super::common::*;
use ferrite_hal::op::{
    CompareOp, TreeAggregate, TreeEnsemble, TREE_BRANCH_MODES, TREE_LEAF, TREE_MISSING_TRUE,
};
use std::collections::HashMap;

/// The flat tables of a tree ensemble's attributes (`Op::TreeEnsemble`'s inputs 1–5), with
/// its votes read from the attributes prefixed `votes` (`target` or `class`).
struct Forest {
    nodes: Vec<i64>,
    thresholds: Vec<f32>,
    roots: Vec<i64>,
    targets: Vec<i64>,
    weights: Vec<f32>,
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
        // One root (node 0) per tree, in the order the trees first appear.
        let mut seen = std::collections::HashSet::new();
        for &t in &tree_ids {
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
pub(super) fn tree_regressor(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
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
pub(super) fn tree_classifier(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
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
    label_of_highest(lw, node, scores, n, labels)
}

/// TreeEnsemble (ai.onnx.ml opset 5): leaves in arrays of their own, one vote each, and
/// set-membership branches, which become a chain of equality tests (`x = a` or `x = b` ...)
/// sharing the branch's targets. Planned as the same `TreeEnsemble` step as the opset-3 ops.
pub(super) fn tree_ensemble_v5(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
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
