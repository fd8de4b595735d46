//! The dimensions of a convolution or pooling call, shared by every kernel that runs one.

/// Dimensions of one convolution call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvDims {
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub oc: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
}

impl ConvDims {
    /// The dimensions of a convolution from its input `[N, C, H, W]` (or `[N, C, L]`) and output.
    pub fn of(x: &ferrite_hal::Shape, y: &ferrite_hal::Shape) -> Option<ConvDims> {
        let [n, c, h, w] = ferrite_hal::geometry::nchw(x)?;
        let [_, oc, oh, ow] = ferrite_hal::geometry::nchw(y)?;
        Some(ConvDims {
            n,
            c,
            h,
            w,
            oc,
            oh,
            ow,
        })
    }
}

/// Input and output sizes of a pooling call: `[n, c, h, w]` in, `[oh, ow]` out.
#[derive(Clone, Copy, Debug)]
pub struct PoolDims {
    /// Input `[N, C, H, W]`.
    pub input: [usize; 4],
    /// Output `[OH, OW]`.
    pub output: [usize; 2],
}
