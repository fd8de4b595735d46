//! Reductions, arg-extremes, top-k, running sums and determinants: their parameters. One module per family, as
//! [`super::Family`] lists them; the words' codec is `codec/reduce.rs`.

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
