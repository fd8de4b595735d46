//! Tree ensembles (ONNX-ML TreeEnsembleRegressor / TreeEnsembleClassifier): each row walks
//! every tree from its root to a leaf, and the leaf's votes are aggregated per target. The
//! trees are flat tables (`Op::TreeEnsemble`: 20 bytes per node, 8 per vote), and every index
//! in them is checked as it is followed, so a corrupt table is an error, never a wild read or
//! an endless walk.

use crate::CpuError;
use ferrite_hal::op::{TreeAggregate, TreeEnsemble, TREE_LEAF, TREE_MISSING_TRUE};

/// The tables of a tree ensemble.
pub struct Tables<'a> {
    /// `[nodes, 4]`: feature, mode, true child, false child (leaf: first vote, leaf, count, 0).
    pub nodes: &'a [i32],
    /// One per node.
    pub thresholds: &'a [f32],
    /// Each tree's root node.
    pub roots: &'a [i32],
    /// Each vote's target.
    pub targets: &'a [i32],
    /// Each vote's weight.
    pub weights: &'a [f32],
}

/// Index `i` as a position below `len`, or a corrupt-table error.
#[inline(always)]
fn index(i: i32, len: usize) -> Result<usize, CpuError> {
    usize::try_from(i)
        .ok()
        .filter(|&i| i < len)
        .ok_or(CpuError::CorruptPlan)
}

/// The leaf row `x` reaches in the tree rooted at `root`: its first vote and vote count.
fn leaf(x: &[f32], t: &Tables<'_>, root: i32) -> Result<(usize, usize), CpuError> {
    let count = t.thresholds.len();
    let mut node = index(root, count)?;
    // A walk visits each node at most once; more steps mean a cycle in a corrupt table.
    for _ in 0..=count {
        let row = t
            .nodes
            .get(4 * node..4 * node + 4)
            .ok_or(CpuError::CorruptPlan)?;
        let mode = row[1];
        if mode == TREE_LEAF {
            let first = index(row[0], t.targets.len() + 1)?;
            let votes = usize::try_from(row[2]).map_err(|_| CpuError::CorruptPlan)?;
            if first + votes > t.targets.len() {
                return Err(CpuError::CorruptPlan);
            }
            return Ok((first, votes));
        }
        let v = *x
            .get(index(row[0], x.len())?)
            .ok_or(CpuError::CorruptPlan)?;
        let threshold = t.thresholds[node];
        let taken = match mode & !TREE_MISSING_TRUE {
            0 => v <= threshold,
            1 => v < threshold,
            2 => v >= threshold,
            3 => v > threshold,
            4 => v == threshold,
            5 => v != threshold,
            _ => return Err(CpuError::CorruptPlan),
        } || (mode & TREE_MISSING_TRUE != 0 && v.is_nan());
        node = index(if taken { row[2] } else { row[3] }, count)?;
    }
    Err(CpuError::CorruptPlan)
}

/// Writes each row's aggregated votes, `[rows, targets]`, into `y`; `x` is `[rows, features]`.
pub fn tree_ensemble(
    op: &TreeEnsemble,
    features: usize,
    x: &[f32],
    t: &Tables<'_>,
    y: &mut [f32],
) -> Result<(), CpuError> {
    let n = op.targets;
    if features == 0
        || t.targets.len() != t.weights.len()
        || t.nodes.len() != 4 * t.thresholds.len()
    {
        return Err(CpuError::CorruptPlan);
    }
    if n == 0 {
        // No targets: an empty output.
        return Ok(());
    }
    let extreme = matches!(op.aggregate, TreeAggregate::Min | TreeAggregate::Max);
    for (row, out) in x.chunks_exact(features).zip(y.chunks_exact_mut(n)) {
        // Min and max start from "no vote" (NaN), which becomes 0 if it stays.
        out.fill(if extreme { f32::NAN } else { 0.0 });
        for &root in t.roots {
            let (first, votes) = leaf(row, t, root)?;
            let range = first..first + votes;
            let (Some(targets), Some(weights)) =
                (t.targets.get(range.clone()), t.weights.get(range))
            else {
                return Err(CpuError::CorruptPlan);
            };
            for (&target, &w) in targets.iter().zip(weights) {
                let slot = out
                    .get_mut(index(target, n)?)
                    .ok_or(CpuError::CorruptPlan)?;
                *slot = match op.aggregate {
                    TreeAggregate::Sum | TreeAggregate::Average => *slot + w,
                    TreeAggregate::Min if slot.is_nan() || w < *slot => w,
                    TreeAggregate::Max if slot.is_nan() || w > *slot => w,
                    _ => *slot,
                };
            }
        }
        match op.aggregate {
            TreeAggregate::Average => {
                let trees = t.roots.len() as f32;
                out.iter_mut().for_each(|v| *v /= trees);
            }
            TreeAggregate::Min | TreeAggregate::Max => {
                out.iter_mut().filter(|v| v.is_nan()).for_each(|v| *v = 0.0);
            }
            TreeAggregate::Sum => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One stump (x0 ≤ 1 → vote 10 to target 0, else vote 20 to target 1) and one leaf-only
    /// tree (vote 1 to target 0), summed; then a cycle is an error, not a hang.
    #[test]
    fn trees_walk_vote_and_refuse_cycles() {
        let nodes = [
            0, 0, 1, 2, 0, TREE_LEAF, 1, 0, 1, TREE_LEAF, 1, 0, 2, TREE_LEAF, 1, 0,
        ];
        let t = Tables {
            nodes: &nodes,
            thresholds: &[1.0, 0.0, 0.0, 0.0],
            roots: &[0, 3],
            targets: &[0, 1, 0],
            weights: &[10.0, 20.0, 1.0],
        };
        let op = TreeEnsemble {
            targets: 2,
            aggregate: TreeAggregate::Sum,
        };
        let mut y = [0.0f32; 4];
        tree_ensemble(&op, 1, &[0.5, 3.0], &t, &mut y).unwrap();
        assert_eq!(y, [11.0, 0.0, 1.0, 20.0]);
        let cyclic = [0, 0, 0, 0];
        let bad = Tables {
            nodes: &cyclic,
            thresholds: &[1.0],
            roots: &[0],
            targets: &[],
            weights: &[],
        };
        assert!(tree_ensemble(&op, 1, &[0.5], &bad, &mut y[..2]).is_err());
    }
}
