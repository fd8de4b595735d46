//! Reductions, arg-extremes, top-k, running sums and determinants: their parameters and word
//! encoding. One module per family, as [`super::Family`] lists them: `Op::encode` and
//! `Op::decode_selected` dispatch here by [`super::OpKind::family`].

use super::*;

/// Where ArgMax / ArgMin look and which of equal extremes they report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgIndex {
    /// Axis, in `0..rank`.
    pub axis: usize,
    /// Report the last of equal extremes (ONNX `select_last_index`), else the first.
    pub last: bool,
}

/// Reduction function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Arithmetic mean.
    Mean,
    /// Sum.
    Sum,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Product.
    Prod,
    /// `Σ |x|`.
    L1,
    /// `sqrt(Σ x²)`.
    L2,
    /// `ln Σ x`.
    LogSum,
    /// `Σ x²`.
    SumSquare,
}

/// How a [`TreeEnsemble`] combines its trees' votes for one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeAggregate {
    /// The sum of the votes.
    Sum,
    /// The sum divided by the number of trees.
    Average,
    /// The smallest vote (0 when there is none).
    Min,
    /// The largest vote (0 when there is none).
    Max,
}

/// A tree ensemble's parameters (its tables are inputs; see `Op::TreeEnsemble`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeEnsemble {
    /// Targets (regression outputs or classes) the votes go to.
    pub targets: usize,
    /// How the votes combine.
    pub aggregate: TreeAggregate,
}

/// A node table's mode of a leaf.
pub const TREE_LEAF: i32 = 6;
/// The branch modes, by code 0..6: `x ≤ t`, `x < t`, `x ≥ t`, `x > t`, `x = t`, `x ≠ t`.
pub const TREE_BRANCH_MODES: [&str; 6] = [
    "BRANCH_LEQ",
    "BRANCH_LT",
    "BRANCH_GTE",
    "BRANCH_GT",
    "BRANCH_EQ",
    "BRANCH_NEQ",
];
/// Added to a branch's mode: a missing value (NaN) takes the true branch.
pub const TREE_MISSING_TRUE: i32 = 8;

/// Appends the parameters of `op`, a reduce op, as words.
pub(super) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::ArgMax(a) | Op::ArgMin(a) => {
            w.usize(a.axis);
            w.bool(a.last);
        }
        Op::TopK { axis, largest } => {
            w.usize(*axis);
            w.bool(*largest);
        }
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => {
            w.usize(*axis);
            w.bool(*exclusive);
            w.bool(*reverse);
        }
        Op::Reduce { op, axes } => {
            w.u32(*op as u32);
            w.u32(*axes);
        }
        Op::TreeEnsemble(t) => {
            w.usize(t.targets);
            w.u32(t.aggregate as u32);
        }
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(super) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::ArgMax | OpKind::ArgMin
            if selects(OPS, OpKind::ArgMax) || selects(OPS, OpKind::ArgMin) =>
        {
            let a = ArgIndex {
                axis: r.usize()?,
                last: r.bool()?,
            };
            if kind == OpKind::ArgMax {
                Op::ArgMax(a)
            } else {
                Op::ArgMin(a)
            }
        }
        OpKind::Det if selects(OPS, OpKind::Det) => Op::Det,
        OpKind::TreeEnsemble if selects(OPS, OpKind::TreeEnsemble) => {
            Op::TreeEnsemble(TreeEnsemble {
                targets: r.usize().filter(|&t| t >= 1)?,
                aggregate: match r.u32()? {
                    0 => TreeAggregate::Sum,
                    1 => TreeAggregate::Average,
                    2 => TreeAggregate::Min,
                    3 => TreeAggregate::Max,
                    _ => return None,
                },
            })
        }
        OpKind::TopK if selects(OPS, OpKind::TopK) => Op::TopK {
            axis: r.usize()?,
            largest: r.bool()?,
        },
        OpKind::CumSum if selects(OPS, OpKind::CumSum) => Op::CumSum {
            axis: r.usize()?,
            exclusive: r.bool()?,
            reverse: r.bool()?,
        },
        OpKind::Reduce if selects(OPS, OpKind::Reduce) => Op::Reduce {
            op: match r.u32()? {
                0 => ReduceOp::Mean,
                1 => ReduceOp::Sum,
                2 => ReduceOp::Max,
                3 => ReduceOp::Min,
                4 => ReduceOp::Prod,
                5 => ReduceOp::L1,
                6 => ReduceOp::L2,
                7 => ReduceOp::LogSum,
                8 => ReduceOp::SumSquare,
                _ => return None,
            },
            axes: r.u32()?,
        },
        _ => return None,
    })
}
