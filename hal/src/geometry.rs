//! Shape rules shared by the planner, the verifier and the devices: output sizes of windows,
//! numpy broadcasting and batched-matmul geometry. All arithmetic is checked.

use crate::{Op, Shape, Step, TensorDesc, MAX_RANK};

/// `[outer, len, inner]` of `shape` around `axis`: the elements before the axis, along it and
/// after it. Every kernel that works along one axis (softmax, reductions, concatenation, split,
/// arg-max, cumulative sums) walks a tensor as `outer` blocks of `len` lanes `inner` apart.
#[inline]
pub fn lanes(shape: &Shape, axis: usize) -> [usize; 3] {
    [
        shape.product(0..axis),
        shape.dim(axis),
        shape.product(axis + 1..shape.rank()),
    ]
}

/// Output length of a convolution window along one axis, or `None` if the window does not fit.
pub fn conv_out(
    input: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pad_begin: usize,
    pad_end: usize,
) -> Option<usize> {
    let effective = kernel
        .checked_sub(1)?
        .checked_mul(dilation)?
        .checked_add(1)?;
    let padded = input.checked_add(pad_begin)?.checked_add(pad_end)?;
    let span = padded.checked_sub(effective)?;
    Some(span / stride.max(1) + 1)
}

/// Output length of a pooling window; with `ceil_mode` the last partial window counts, unless it
/// would start inside the end padding (the ONNX / PyTorch rule).
pub fn pool_out(
    input: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pad_begin: usize,
    pad_end: usize,
    ceil_mode: bool,
) -> Option<usize> {
    let floor = conv_out(input, kernel, stride, dilation, pad_begin, pad_end)?;
    if !ceil_mode {
        return Some(floor);
    }
    // conv_out succeeded, so none of these sums overflow.
    let effective = (kernel - 1) * dilation + 1;
    let span = input + pad_begin + pad_end - effective;
    let mut out = span.div_ceil(stride.max(1)) + 1;
    if (out - 1).saturating_mul(stride) >= input + pad_begin {
        out -= 1;
    }
    Some(out)
}

/// Output length of a transposed convolution along one axis.
pub fn conv_transpose_out(
    input: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pad_begin: usize,
    pad_end: usize,
    output_padding: usize,
) -> Option<usize> {
    let full = stride
        .checked_mul(input.checked_sub(1)?)?
        .checked_add(output_padding)?
        .checked_add(kernel.checked_sub(1)?.checked_mul(dilation)?)?
        .checked_add(1)?;
    full.checked_sub(pad_begin)?.checked_sub(pad_end)
}

/// The numpy broadcast of two shapes, or `None` if they are incompatible.
pub fn broadcast(a: &Shape, b: &Shape) -> Option<Shape> {
    let rank = a.rank().max(b.rank());
    let mut dims = [0usize; MAX_RANK];
    for (i, slot) in dims.iter_mut().enumerate().take(rank) {
        let da = dim_from_right(a, rank - 1 - i);
        let db = dim_from_right(b, rank - 1 - i);
        *slot = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Shape::new(dims.get(..rank)?)
}

fn dim_from_right(s: &Shape, from_right: usize) -> usize {
    let dims = s.dims_checked();
    match from_right
        .checked_add(1)
        .and_then(|k| dims.len().checked_sub(k))
    {
        Some(i) => dims.get(i).copied().unwrap_or(1),
        None => 1,
    }
}

/// Whether `input` broadcasts to exactly `output` (numpy rules, one direction).
pub fn broadcasts_to(input: &Shape, output: &Shape) -> bool {
    let (from, to) = (input.dims_checked(), output.dims_checked());
    // Aligned on the right, each input dimension is 1 or the output's.
    from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&a, &b)| a == 1 || a == b)
}

/// Strides (in elements) to read `input` while iterating over `output`, aligned to the output's
/// axes: 0 on broadcast axes. `input` must broadcast to `output`.
pub fn broadcast_strides(input: &Shape, output: &Shape) -> [usize; MAX_RANK] {
    let own = input.strides_checked();
    let mut strides = [0usize; MAX_RANK];
    let offset = output.rank().saturating_sub(input.rank());
    for (axis, (&dim, &stride)) in input.dims_checked().iter().zip(&own).enumerate() {
        if dim != 1 {
            if let Some(slot) = strides.get_mut(axis + offset) {
                *slot = stride;
            }
        }
    }
    strides
}

/// A 4-D `[N, C, H, W]` view of a rank-3 (`[N, C, L]` as `H = 1`) or rank-4 tensor.
pub fn nchw(shape: &Shape) -> Option<[usize; 4]> {
    match *shape.dims_checked() {
        [n, c, l] => Some([n, c, 1, l]),
        [n, c, h, w] => Some([n, c, h, w]),
        _ => None,
    }
}

/// How a batched matrix product maps onto plain `[M, K] x [K, N]` products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatMulGeometry {
    /// Rows of each product.
    pub m: usize,
    /// Inner dimension.
    pub k: usize,
    /// Columns of each product.
    pub n: usize,
    /// Broadcast batch shape.
    pub batch: Shape,
    /// Element strides of `A`'s matrices per batch axis (0 where broadcast).
    pub a_batch_strides: [usize; MAX_RANK],
    /// Element strides of `B`'s matrices per batch axis (0 where broadcast).
    pub b_batch_strides: [usize; MAX_RANK],
    /// The output shape (numpy `matmul` rules, 1-D operands promoted then squeezed).
    pub output: Shape,
}

impl MatMulGeometry {
    /// A placeholder for [`MatMulGeometry::build_in`] to fill: no batch, a 0 x 0 product.
    pub const EMPTY: MatMulGeometry = MatMulGeometry {
        m: 0,
        k: 0,
        n: 0,
        batch: Shape::SCALAR,
        a_batch_strides: [0; MAX_RANK],
        b_batch_strides: [0; MAX_RANK],
        output: Shape::SCALAR,
    };

    /// The geometry of `A x B`, or `None` if the shapes are incompatible.
    pub fn new(a: &Shape, b: &Shape) -> Option<MatMulGeometry> {
        let mut g = MatMulGeometry::EMPTY;
        g.build_in(a, b)?;
        Some(g)
    }

    /// [`MatMulGeometry::new`] written into `self` (`None`, `self` unspecified, if the shapes
    /// are incompatible): built in place, one batch axis at a time from the last (the batch
    /// shapes are never materialised), so that a microcontroller's frames hold one copy of the
    /// geometry (148 B), not one per frame it is returned through.
    pub fn build_in(&mut self, a: &Shape, b: &Shape) -> Option<()> {
        // `[.., m, k]` (a vector is one row) and `[.., k, n]` (a vector is one column).
        let (m, k, a_batch) = match *a.dims_checked() {
            [] => return None,
            [k] => (1, k, &[][..]),
            [ref batch @ .., m, k] => (m, k, batch),
        };
        let (k_b, n, b_batch) = match *b.dims_checked() {
            [] => return None,
            [k] => (k, 1, &[][..]),
            [ref batch @ .., k, n] => (k, n, batch),
        };
        if k != k_b {
            return None;
        }
        let rank = a_batch.len().max(b_batch.len());
        let g = self;
        (g.m, g.k, g.n) = (m, k, n);
        g.a_batch_strides = [0; MAX_RANK];
        g.b_batch_strides = [0; MAX_RANK];
        let mut out = [0usize; MAX_RANK];
        // Elements between consecutive matrices along the axis being walked.
        let (mut a_step, mut b_step) = (m.checked_mul(k)?, k.checked_mul(n)?);
        for axis in (0..rank).rev() {
            // Aligned on the right; an operand with fewer batch axes has 1s in front.
            let dim_of = |dims: &[usize]| match (axis + dims.len()).checked_sub(rank) {
                Some(i) => dims.get(i).copied(),
                None => Some(1),
            };
            let (da, db) = (dim_of(a_batch)?, dim_of(b_batch)?);
            *out.get_mut(axis)? = match (da, db) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                _ => return None,
            };
            // Stride 0 where an operand broadcasts.
            if da != 1 {
                *g.a_batch_strides.get_mut(axis)? = a_step;
                a_step = a_step.checked_mul(da)?;
            }
            if db != 1 {
                *g.b_batch_strides.get_mut(axis)? = b_step;
                b_step = b_step.checked_mul(db)?;
            }
        }
        g.batch = Shape::new(out.get(..rank)?)?;
        let mut out_rank = rank;
        if a.rank() > 1 {
            *out.get_mut(out_rank)? = m;
            out_rank += 1;
        }
        if b.rank() > 1 {
            *out.get_mut(out_rank)? = n;
            out_rank += 1;
        }
        g.output = Shape::new(out.get(..out_rank)?)?;
        Some(())
    }
}

/// Most `f32` elements of im2col scratch a convolution uses (128 KiB): columns are unfolded a
/// tile of output positions at a time, so scratch stays bounded whatever the image size.
pub const CONV_SCRATCH_BUDGET: usize = 32 * 1024;

/// Output positions per im2col tile for a convolution whose columns have `k` rows
/// (`in_channels_per_group × kernel area`) over `plane` output positions: the whole plane when it
/// fits the budget, else the largest multiple of 32 that does (at least 32), so that SIMD
/// micro-kernels see whole blocks.
pub fn conv_tile_columns(k: usize, plane: usize) -> usize {
    let fit = CONV_SCRATCH_BUDGET / k.max(1);
    if plane <= fit {
        plane
    } else {
        (fit / 32 * 32).max(32).min(plane)
    }
}

/// The phase planes of a depthwise convolution's zero-padded input: the padded plane split by
/// row and column position modulo the stride, so that every tap reads one phase plane at a
/// constant shift. Returns `[phases, phase height, phase width]` (one phase for stride 1).
pub fn depthwise_phases(w: &crate::op::Window, out_h: usize, out_w: usize) -> Option<[usize; 3]> {
    let span = |out: usize, axis: usize| {
        out.checked_sub(1)?
            .checked_mul(w.stride[axis])?
            .checked_add((w.kernel[axis] - 1).checked_mul(w.dilation[axis])?)?
            .checked_add(1)
    };
    let (padded_h, padded_w) = (span(out_h, 0)?, span(out_w, 1)?);
    let [sh, sw] = w.stride;
    if sh == 0 || sw == 0 {
        return None;
    }
    Some([
        sh.checked_mul(sw)?,
        padded_h.div_ceil(sh),
        padded_w.div_ceil(sw),
    ])
}

/// Scratch of [`Depthwise::Padded`]: the phase planes plus an output plane at the phase width.
fn depthwise_padded_scratch(conv: &crate::op::Conv, out_h: usize, out_w: usize) -> Option<usize> {
    let [phases, qh, qw] = depthwise_phases(&conv.window, out_h, out_w)?;
    phases.checked_mul(qh)?.checked_add(out_h)?.checked_mul(qw)
}

/// How a depthwise convolution runs, decided from its parameters alone (so the planner, the
/// verifier and the kernels agree on its scratch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depthwise {
    /// Strided with a large plane: row by row, straight from the input (no scratch).
    Direct,
    /// Stride 1, output as wide as the input ("same" padding across), small plane: every tap is
    /// one pass over the unpadded plane, with a 0/1 mask per kernel column zeroing the
    /// contributions that would wrap into the next row. Scratch: `kernel width × plane`.
    Masked,
    /// Otherwise: each input plane is copied zero-padded and split into stride × stride phase
    /// planes, so every tap is one pass over one phase at a constant shift. Scratch: the phase
    /// planes + an output plane at the phase width ([`depthwise_phases`]).
    Padded,
}

/// Largest masked-depthwise scratch (`kernel width × output plane`), in `f32` elements.
pub const DEPTHWISE_MASK_BUDGET: usize = 16 * 1024;

/// Largest scratch of a strided depthwise convolution's phase planes, in `f32` elements; past it
/// the direct strategy (no scratch) runs.
pub const DEPTHWISE_STRIDED_BUDGET: usize = 32 * 1024;

/// The strategy for a depthwise convolution with this output size.
pub fn depthwise_strategy(conv: &crate::op::Conv, out_h: usize, out_w: usize) -> Depthwise {
    let w = &conv.window;
    if w.stride != [1, 1] {
        return match depthwise_padded_scratch(conv, out_h, out_w) {
            Some(n) if n <= DEPTHWISE_STRIDED_BUDGET => Depthwise::Padded,
            _ => Depthwise::Direct,
        };
    }
    let same_width =
        (w.kernel[1] - 1).checked_mul(w.dilation[1]) == w.pads[1].checked_add(w.pads[3]);
    let masks = out_h
        .checked_mul(out_w)
        .and_then(|p| p.checked_mul(w.kernel[1]));
    match masks {
        Some(m) if same_width && m <= DEPTHWISE_MASK_BUDGET => Depthwise::Masked,
        _ => Depthwise::Padded,
    }
}

/// Scratch (in `f32` elements) that a convolution needs: none for a pointwise one (1×1 kernel,
/// stride 1, no padding); for a depthwise one (one input channel per group, several groups)
/// what its [`Depthwise`] strategy says; otherwise one tile of im2col columns,
/// `in_channels_per_group × kernel area × conv_tile_columns(..)`.
///
/// The planner reserves exactly this much, the verifier checks it, and the CPU kernels rely on it.
pub fn conv_scratch_elements(
    conv: &crate::op::Conv,
    in_channels_per_group: usize,
    out_h: usize,
    out_w: usize,
) -> Option<usize> {
    let w = &conv.window;
    let depthwise = in_channels_per_group == 1 && conv.group > 1;
    let pointwise = w.kernel == [1, 1] && w.stride == [1, 1] && w.pads == [0; 4];
    // Depthwise first: a 1×1 depthwise convolution is depthwise to the kernels too.
    if depthwise {
        return match depthwise_strategy(conv, out_h, out_w) {
            Depthwise::Direct => Some(0),
            Depthwise::Masked => out_h.checked_mul(out_w)?.checked_mul(w.kernel[1]),
            Depthwise::Padded => depthwise_padded_scratch(conv, out_h, out_w),
        };
    }
    if pointwise {
        return Some(0);
    }
    let k = in_channels_per_group
        .checked_mul(w.kernel[0])?
        .checked_mul(w.kernel[1])?;
    let plane = out_h.checked_mul(out_w)?;
    k.checked_mul(conv_tile_columns(k, plane))
}

/// Arena scratch of an integer convolution, in `f32` elements (4 bytes each), for kernels that
/// unfold the input: four int16 columns of `in_channels_per_group × kernel area` values and as
/// many u32 input offsets for a regular or pointwise convolution, or one channel's zero-point-padded plane (int8) for a
/// depthwise one, covering every input position its `out_h × out_w` outputs read.
///
/// The planner reserves exactly this much and the verifier checks it; a kernel that needs no
/// scratch (the portable ones) ignores it.
pub fn qconv_scratch_elements(
    conv: &crate::op::QConv,
    in_channels_per_group: usize,
    out_h: usize,
    out_w: usize,
) -> Option<usize> {
    let w = &conv.window;
    if in_channels_per_group == 1 && conv.group > 1 {
        let span = |out: usize, axis: usize| {
            out.checked_sub(1)?
                .checked_mul(w.stride[axis])?
                .checked_add(
                    w.kernel[axis]
                        .checked_sub(1)?
                        .checked_mul(w.dilation[axis])?,
                )?
                .checked_add(1)
        };
        return Some(span(out_h, 0)?.checked_mul(span(out_w, 1)?)?.div_ceil(4));
    }
    // Four columns of k int16 values (k rounded up to even so each column is word-aligned),
    // then k u32 offsets of the window's values.
    let k = in_channels_per_group
        .checked_mul(w.kernel[0])?
        .checked_mul(w.kernel[1])?;
    let columns = k.checked_add(1)? & !1;
    columns.checked_mul(2)?.checked_add(k)
}

/// Arena scratch of an integer addition of `elements` outputs of type `dtype`, in `f32`
/// elements: for 8-bit types, two 256-entry int32 tables of each input's rescaled values (by
/// byte), once the tensor is large enough for the lookups to pay for the tables; none for
/// int16 ones (computed per element).
pub fn qadd_scratch_elements(elements: usize, dtype: crate::DType) -> usize {
    let byte = matches!(dtype, crate::DType::I8 | crate::DType::U8);
    if byte && elements >= 1024 {
        512
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    /// `broadcasts_to` is "broadcasting the two gives the output", on every pair of shapes of
    /// rank 0 to 3 with dimensions 0 to 3.
    #[test]
    fn broadcasts_to_agrees_with_broadcast() {
        use super::{broadcast, broadcasts_to, Shape};
        let scalar = Shape::new(&[]).unwrap();
        let mut shapes = [scalar; 85];
        let mut count = 1;
        for rank in 1..=3usize {
            for code in 0..4usize.pow(rank as u32) {
                let mut dims = [0usize; 3];
                for (a, d) in dims.iter_mut().enumerate().take(rank) {
                    *d = code / 4usize.pow(a as u32) % 4;
                }
                shapes[count] = Shape::new(&dims[..rank]).unwrap();
                count += 1;
            }
        }
        assert_eq!(count, shapes.len());
        for a in &shapes {
            for b in &shapes {
                let expected = a.rank() <= b.rank() && broadcast(a, b) == Some(*b);
                assert_eq!(
                    broadcasts_to(a, b),
                    expected,
                    "{:?} -> {:?}",
                    a.dims(),
                    b.dims()
                );
            }
        }
    }

    /// [`MatMulGeometry::new`] by its definition: the batch shapes materialised and broadcast,
    /// each operand's strides its own row-major ones (0 where it broadcasts) times its matrix.
    fn matmul_by_definition(a: &Shape, b: &Shape) -> Option<MatMulGeometry> {
        let (ad, bd) = (a.dims(), b.dims());
        let (m, k, a_batch) = match ad.len() {
            0 => return None,
            1 => (1, ad[0], Shape::new(&[]).unwrap()),
            r => (ad[r - 2], ad[r - 1], Shape::new(&ad[..r - 2]).unwrap()),
        };
        let (k_b, n, b_batch) = match bd.len() {
            0 => return None,
            1 => (bd[0], 1, Shape::new(&[]).unwrap()),
            r => (bd[r - 2], bd[r - 1], Shape::new(&bd[..r - 2]).unwrap()),
        };
        if k != k_b {
            return None;
        }
        let batch = broadcast(&a_batch, &b_batch)?;
        let mut a_batch_strides = broadcast_strides(&a_batch, &batch);
        let mut b_batch_strides = broadcast_strides(&b_batch, &batch);
        a_batch_strides.iter_mut().for_each(|s| *s *= m * k);
        b_batch_strides.iter_mut().for_each(|s| *s *= k * n);
        let mut out = [0usize; MAX_RANK];
        out[..batch.rank()].copy_from_slice(batch.dims());
        let mut rank = batch.rank();
        if ad.len() > 1 {
            out[rank] = m;
            rank += 1;
        }
        if bd.len() > 1 {
            out[rank] = n;
            rank += 1;
        }
        Some(MatMulGeometry {
            m,
            k,
            n,
            batch,
            a_batch_strides,
            b_batch_strides,
            output: Shape::new(&out[..rank]).unwrap(),
        })
    }

    /// The geometry built in place is the definition's, on every pair of shapes of rank 1 to 4
    /// with dimensions 0 to 3 (incompatible pairs included).
    #[test]
    fn matmul_geometry_matches_its_definition() {
        let scalar = Shape::new(&[]).unwrap();
        let mut shapes = [scalar; 340];
        let mut count = 0;
        for rank in 1..=4usize {
            for code in 0..4usize.pow(rank as u32) {
                let mut dims = [0usize; 4];
                for (a, d) in dims.iter_mut().enumerate().take(rank) {
                    *d = code / 4usize.pow(a as u32) % 4;
                }
                shapes[count] = Shape::new(&dims[..rank]).unwrap();
                count += 1;
            }
        }
        assert_eq!(count, shapes.len());
        let mut valid = 0;
        for a in &shapes {
            for b in &shapes {
                let expected = matmul_by_definition(a, b);
                valid += usize::from(expected.is_some());
                assert_eq!(MatMulGeometry::new(a, b), expected, "{:?} x {:?}", a, b);
            }
        }
        assert!(valid > 1000, "only {valid} compatible pairs");
        assert_eq!(MatMulGeometry::new(&scalar, &shapes[0]), None);
    }

    /// Runs `copy` on `src` into a destination of `len` elements (reference semantics).
    fn apply(copy: &StridedCopy, src: &[i32], len: usize) -> [i32; 8] {
        let mut dst = [-1; 8];
        assert!(len <= 8);
        let count = copy.dims.elements().unwrap();
        for i in 0..count {
            let (mut rest, mut s, mut d) = (i, copy.src_base, copy.dst_base);
            for axis in (0..copy.dims.rank()).rev() {
                let c = rest % copy.dims.dim_checked(axis);
                rest /= copy.dims.dim_checked(axis);
                s += c as isize * copy.src_strides[axis];
                d += c * copy.dst_strides[axis];
            }
            dst[d] = src[s as usize];
        }
        dst
    }

    fn shape(dims: &[usize]) -> Shape {
        Shape::new(dims).unwrap()
    }

    #[test]
    fn strided_copies_move_data_as_the_ops_do() {
        let x = [0, 1, 2, 3, 4, 5]; // [[0, 1, 2], [3, 4, 5]]
        let mut perm = [0usize; MAX_RANK];
        perm[..2].copy_from_slice(&[1, 0]);
        let t = StridedCopy::transpose(&shape(&[2, 3]), &shape(&[3, 2]), &perm);
        assert_eq!(apply(&t, &x, 6)[..6], [0, 3, 1, 4, 2, 5]);
        // x[:, ::-2] starting at column 2: [[2, 0], [5, 3]].
        let (mut starts, mut steps) = ([0usize; MAX_RANK], [1isize; MAX_RANK]);
        starts[1] = 2;
        steps[1] = -2;
        let s = StridedCopy::slice(&shape(&[2, 3]), &shape(&[2, 2]), &starts, &steps);
        assert_eq!(apply(&s, &x, 4)[..4], [2, 0, 5, 3]);
        let e = StridedCopy::expand(&shape(&[3]), &shape(&[2, 3]));
        assert_eq!(apply(&e, &x, 6)[..6], [0, 1, 2, 0, 1, 2]);
        // The second input of a concat along axis 1: [2, 1] into [2, 4] at column 3.
        let c = StridedCopy::concat_part(&shape(&[2, 1]), &shape(&[2, 4]), 1, 3);
        assert_eq!(apply(&c, &[7, 8], 8), [-1, -1, -1, 7, -1, -1, -1, 8]);
        // The second output of a split along axis 1: columns 1..3 of x.
        let p = StridedCopy::split_part(&shape(&[2, 3]), &shape(&[2, 2]), 1, 1);
        assert_eq!(apply(&p, &x, 4)[..4], [1, 2, 4, 5]);
    }

    use super::*;

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn windows() {
        assert_eq!(conv_out(5, 3, 1, 1, 1, 1), Some(5));
        assert_eq!(conv_out(5, 3, 2, 1, 0, 0), Some(2));
        assert_eq!(conv_out(2, 5, 1, 1, 0, 0), None);
        assert_eq!(pool_out(5, 2, 2, 1, 0, 0, false), Some(2));
        assert_eq!(pool_out(5, 2, 2, 1, 0, 0, true), Some(3));
        assert_eq!(conv_transpose_out(3, 3, 2, 1, 0, 0, 1), Some(8));
    }

    #[test]
    fn broadcasting() {
        assert_eq!(broadcast(&s(&[2, 1, 4]), &s(&[3, 1])), Some(s(&[2, 3, 4])));
        assert_eq!(broadcast(&s(&[2]), &s(&[3])), None);
        assert_eq!(
            &broadcast_strides(&s(&[3, 1]), &s(&[2, 3, 4]))[..3],
            &[0, 1, 0]
        );
    }

    #[test]
    fn matmul() {
        let g = MatMulGeometry::new(&s(&[2, 1, 3, 4]), &s(&[5, 4, 6])).unwrap();
        assert_eq!(g.output, s(&[2, 5, 3, 6]));
        assert_eq!((g.m, g.k, g.n), (3, 4, 6));
        let v = MatMulGeometry::new(&s(&[4]), &s(&[4, 6])).unwrap();
        assert_eq!(v.output, s(&[6]));
    }
}

/// Data movement as one strided copy: for every index `c` of `dims`, destination element
/// `dst_base + Σ c·dst_strides` receives source element `src_base + Σ c·src_strides`. GPU
/// devices run Transpose, Slice, Expand, and each part of a Concat or Split as one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StridedCopy {
    /// The index space walked (the destination part's shape).
    pub dims: Shape,
    /// Source element strides per axis (negative for reversed slices).
    pub src_strides: [isize; MAX_RANK],
    /// First source element.
    pub src_base: isize,
    /// Destination element strides per axis.
    pub dst_strides: [usize; MAX_RANK],
    /// First destination element.
    pub dst_base: usize,
}

fn signed(strides: [usize; MAX_RANK]) -> [isize; MAX_RANK] {
    strides.map(|s| s as isize)
}

impl StridedCopy {
    /// `out = transpose(x, perm)`.
    pub fn transpose(x: &Shape, out: &Shape, perm: &[usize; MAX_RANK]) -> StridedCopy {
        let strides = x.strides_checked();
        let mut src_strides = [0isize; MAX_RANK];
        for (axis, s) in src_strides.iter_mut().enumerate().take(x.rank()) {
            *s = strides.get(perm[axis]).copied().unwrap_or(0) as isize;
        }
        StridedCopy {
            dims: *out,
            src_strides,
            src_base: 0,
            dst_strides: out.strides_checked(),
            dst_base: 0,
        }
    }

    /// `out = x[starts[a] + i·steps[a], ...]`.
    pub fn slice(
        x: &Shape,
        out: &Shape,
        starts: &[usize; MAX_RANK],
        steps: &[isize; MAX_RANK],
    ) -> StridedCopy {
        let strides = x.strides_checked();
        let (mut src_strides, mut src_base) = ([0isize; MAX_RANK], 0isize);
        for axis in 0..x.rank() {
            src_strides[axis] = strides[axis] as isize * steps[axis];
            src_base += (starts[axis] * strides[axis]) as isize;
        }
        StridedCopy {
            dims: *out,
            src_strides,
            src_base,
            dst_strides: out.strides_checked(),
            dst_base: 0,
        }
    }

    /// `out = x` broadcast to `out`'s shape (numpy rules: stride 0 on broadcast axes).
    pub fn expand(x: &Shape, out: &Shape) -> StridedCopy {
        StridedCopy {
            dims: *out,
            src_strides: signed(broadcast_strides(x, out)),
            src_base: 0,
            dst_strides: out.strides_checked(),
            dst_base: 0,
        }
    }

    /// One input of a Concat: `part` lands in `out` at `offset` along `axis`.
    pub fn concat_part(part: &Shape, out: &Shape, axis: usize, offset: usize) -> StridedCopy {
        let dst_strides = out.strides_checked();
        StridedCopy {
            dims: *part,
            src_strides: signed(part.strides_checked()),
            src_base: 0,
            dst_strides,
            dst_base: offset * dst_strides.get(axis).copied().unwrap_or(0),
        }
    }

    /// One output of a Split: `part` is taken from `x` at `offset` along `axis`.
    pub fn split_part(x: &Shape, part: &Shape, axis: usize, offset: usize) -> StridedCopy {
        let src_strides = signed(x.strides_checked());
        StridedCopy {
            dims: *part,
            src_strides,
            src_base: offset as isize * src_strides.get(axis).copied().unwrap_or(0),
            dst_strides: part.strides_checked(),
            dst_base: 0,
        }
    }

    /// The strided copies a data-movement step runs as, in order, each with its source and
    /// destination tensor: one for Transpose, Slice and Expand, one per input of a Concat and
    /// per output of a Split. `Ok(false)` for any other op.
    pub fn of_step(
        step: &Step<'_>,
        each: &mut dyn FnMut(TensorDesc, TensorDesc, StridedCopy) -> Result<(), &'static str>,
    ) -> Result<bool, &'static str> {
        let x = step.inputs.get(0).ok_or("missing input")?;
        let out = step.outputs.get(0).ok_or("missing output")?;
        match step.op {
            Op::Transpose { perm } => each(x, out, Self::transpose(&x.shape, &out.shape, &perm))?,
            Op::Slice { starts, steps } => {
                each(x, out, Self::slice(&x.shape, &out.shape, &starts, &steps))?
            }
            Op::Expand => each(x, out, Self::expand(&x.shape, &out.shape))?,
            Op::Concat { axis } => {
                let mut offset = 0;
                for part in step.inputs.iter() {
                    let part = part.ok_or("missing concat input")?;
                    each(
                        part,
                        out,
                        Self::concat_part(&part.shape, &out.shape, axis, offset),
                    )?;
                    offset += part.shape.dim_checked(axis);
                }
            }
            Op::Split { axis } => {
                let mut offset = 0;
                for part in step.outputs.iter() {
                    let part = part.ok_or("missing split output")?;
                    each(
                        x,
                        part,
                        Self::split_part(&x.shape, &part.shape, axis, offset),
                    )?;
                    offset += part.shape.dim_checked(axis);
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The layout of a [`crate::op::Dft`] step, derived from the op and its signal's shape: the
/// one rule the planner, the verifier and the kernels share.
///
/// The signal is viewed as `[outer, signal, inner, complex_in]` around the transformed axis
/// (the last dimension is 1 for real values, 2 for complex ones); the output as `[outer,
/// frames, bins, inner, complex_out]`, its shape [`DftGeometry::out_shape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DftGeometry {
    /// Product of the dimensions before the axis.
    pub outer: usize,
    /// The signal's length along the axis.
    pub signal: usize,
    /// Product of the dimensions between the axis and the last.
    pub inner: usize,
    /// 1 (real) or 2 (complex) input values per element.
    pub complex_in: usize,
    /// Frames (STFT), 1 for a DFT.
    pub frames: usize,
    /// Samples read per frame (the rest of the transform's length is zeros).
    pub frame_length: usize,
    /// Output bins per frame.
    pub bins: usize,
    /// 1 (real, an inverse one-sided transform) or 2 (complex) output values per element.
    pub complex_out: usize,
    /// The output's shape.
    pub out_shape: Shape,
}

impl DftGeometry {
    /// The geometry of `op` on a signal of shape `x`, or `None` when the shapes do not fit
    /// (axis out of range, last dimension not 1 or 2, an STFT frame longer than the signal, a
    /// complex input to a one-sided forward transform, ...).
    pub fn new(op: &crate::op::Dft, x: &Shape) -> Option<DftGeometry> {
        let dims = x.dims_checked();
        let r = dims.len();
        let complex_in = *dims.last()?;
        let n = op.length;
        if r < 2 || op.axis + 1 >= r || !(1..=2).contains(&complex_in) || n == 0 {
            return None;
        }
        let signal = *dims.get(op.axis)?;
        let outer = x.product(0..op.axis);
        let inner = x.product(op.axis + 1..r - 1);
        let stft = op.frame_step > 0;
        let (frames, frame_length) = if stft {
            if op.axis != 1 || r != 3 || signal < n || op.inverse {
                return None;
            }
            ((signal - n) / op.frame_step + 1, n)
        } else if op.inverse && op.onesided {
            // An inverse real transform reads the one-sided half spectrum.
            (1, signal.min(n / 2 + 1))
        } else {
            (1, signal.min(n))
        };
        if op.onesided && !op.inverse && complex_in != 1 {
            return None;
        }
        let (bins, complex_out) = match (op.inverse, op.onesided) {
            (false, true) => (n / 2 + 1, 2),
            (true, true) => (n, 1),
            _ => (n, 2),
        };
        let mut out = [0usize; MAX_RANK];
        let rank = if stft {
            out[..4].copy_from_slice(&[*dims.first()?, frames, bins, complex_out]);
            4
        } else {
            out.get_mut(..r)?.copy_from_slice(dims);
            *out.get_mut(op.axis)? = bins;
            *out.get_mut(r - 1)? = complex_out;
            r
        };
        Some(DftGeometry {
            outer,
            signal,
            inner,
            complex_in,
            frames,
            frame_length,
            bins,
            complex_out,
            out_shape: Shape::new(out.get(..rank)?)?,
        })
    }
}
