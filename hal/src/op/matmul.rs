//! Matrix products, float and integer (Gemm, MatMul, QGemm, MatMulInteger): their parameters. One module per family, as
//! [`super::Family`] lists them; the words' codec is `codec/matmul.rs`.

use crate::Activation;

/// `Y = alpha * A x B + beta * C`, `A: [M, K]`, `B: [K, N]`, `C` broadcastable to `[M, N]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of `C`.
    pub beta: f32,
    /// Fused activation.
    pub activation: Activation,
}

/// A discrete Fourier transform of length `length` along `axis` (a DFT is the product with the
/// Fourier matrix, hence this family). Inputs: the signal (last dimension 1 for real, 2 for
/// complex values), the twiddle table `[length, 2]` (`cos, −sin` of `2πk/length`, computed at
/// pack time), and for STFT an optional window `[length]`. Output: the transform's bins
/// (`length`, or `length/2 + 1` when `onesided` and forward), complex (last dimension 2) — or,
/// inverse and `onesided` (an inverse real FFT), `length` real values (last dimension 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dft {
    /// The transformed axis of the signal.
    pub axis: usize,
    /// The transform's length: the signal is zero-padded or truncated to it (STFT: the frame
    /// length).
    pub length: usize,
    /// STFT: samples between frames, which the output has as the axis after the batch; 0 for a
    /// DFT of the whole signal.
    pub frame_step: usize,
    /// The inverse transform (scaled by `1/length`).
    pub inverse: bool,
    /// Forward: only the first `length/2 + 1` bins (real input); inverse: the input is such a
    /// one-sided spectrum and the output real.
    pub onesided: bool,
}

/// How a QGemm's weights `B` are laid out, as their shape says: `[N, K]`, one row of weights per
/// output ([`QGemmWeights::Rows`]); or `[N/4, K/4, 4, 4]` ([`QGemmWeights::Blocked`]): per block
/// of four outputs and per four values of `K`, the four outputs' weight words side by side, so
/// one load fetches a word of each — how the DSP kernels multiply them. `ferrite pack` writes
/// the blocked form whenever `N` is a multiple of four and `K` of eight (the same bytes,
/// reordered): the kernels then take eight values of `K` at a time with no remainder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QGemmWeights {
    /// `[N, K]`.
    Rows,
    /// `[N/4, K/4, 4, 4]`, `K/4` even.
    Blocked,
}

impl QGemmWeights {
    /// The layout, `N` and `K` of QGemm weights of shape `b`; `None` for any other shape.
    pub fn of(b: &crate::Shape) -> Option<(QGemmWeights, usize, usize)> {
        match *b.dims_checked() {
            [n, k] => Some((QGemmWeights::Rows, n, k)),
            [blocks, groups, 4, 4] if groups % 2 == 0 => Some((
                QGemmWeights::Blocked,
                blocks.checked_mul(4)?,
                groups.checked_mul(4)?,
            )),
            _ => None,
        }
    }
}

/// Longest transform a plan may ask for.
pub const MAX_DFT_LENGTH: usize = 1 << 20;
