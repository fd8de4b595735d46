//! Gathers and scatters by index tensors: their parameters. One module per family, as
//! [`super::Family`] lists them; the words' codec is `codec/indexing.rs`.

/// How a scatter combines an update with the value already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// The update replaces it.
    None,
    /// Sum.
    Add,
    /// Product.
    Mul,
    /// The larger.
    Max,
    /// The smaller.
    Min,
}

impl Reduction {
    /// The reduction with file-format code `code`.
    pub fn from_code(code: u32) -> Option<Reduction> {
        Some(match code {
            0 => Reduction::None,
            1 => Reduction::Add,
            2 => Reduction::Mul,
            3 => Reduction::Max,
            4 => Reduction::Min,
            _ => return None,
        })
    }
}
