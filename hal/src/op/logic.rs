//! Comparisons, boolean logic, selection and NaN/Inf tests: their parameters. One module per family, as
//! [`super::Family`] lists them; the words' codec is `codec/logic.rs`.

/// An elementwise comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// `a == b`
    Equal,
    /// `a < b`
    Less,
    /// `a <= b`
    LessOrEqual,
    /// `a > b`
    Greater,
    /// `a >= b`
    GreaterOrEqual,
}

/// Elementwise boolean logic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogicalOp {
    /// Both.
    And,
    /// Either.
    Or,
    /// Exactly one.
    Xor,
}

/// Which special float values [`crate::Op::Classify`] reports as true.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Detect {
    /// NaN.
    pub nan: bool,
    /// +∞.
    pub positive_infinity: bool,
    /// −∞.
    pub negative_infinity: bool,
}
