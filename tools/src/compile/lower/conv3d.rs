//! 3-D convolutions (`[N, C, D, H, W]`, issue 20 item 4) on the 2-D kernels every device has.
//!
//! - **Conv**: one 2-D convolution over the depth positions, the input's depth slices stacked
//!   into its channels ([`conv_3d`]).
//! - **ConvTranspose**: one 2-D transposed convolution per depth tap over every input plane (the
//!   depth moved into the batch), each tap's planes spread to the output depths they reach
//!   (`id · stride + tap · dilation`) and the taps summed, then the depth padding cropped
//!   ([`conv_transpose_3d`]).
//!
//! Both cost intermediates of a few times the output in the arena, the price of running 3-D
//! models without 3-D kernels.

use super::attrs::Attrs;
use super::lowerer::{Lowerer, Reason};
use super::window::{kernel_from, resolve_axes, window_out};
use crate::compile::ir::TensorId;
use crate::compile::onnx::Node;
use ferrite_hal::geometry::conv_transpose_out;
use ferrite_hal::op::{BinaryOp, Conv, ConvTranspose, PadMode, Window};
use ferrite_hal::{Activation, DType, Op, MAX_RANK};

/// A 3-D convolution (`x` `[N, C, D, H, W]`, constant weights `[M, C/g, kd, kh, kw]`) as one
/// 2-D convolution over the depth positions: `x` padded along D, its `kd` strided D-slices
/// stacked into the channels (grouped as `[g][kd][C/g]`), D moved into the batch
/// (`[N·D', g·kd·C/g, H, W]`), one Conv with the weights rearranged at pack time to
/// `[M, kd·C/g, kh, kw]` (bias and groups as they are), then D moved back. The stacked input is
/// `kd` times the input: the cost of running 3-D models on 2-D kernels.
pub(super) fn conv_3d(
    lw: &mut Lowerer,
    node: &Node,
    x: TensorId,
    w: TensorId,
    b: Option<TensorId>,
) -> Result<(), Reason> {
    let (xs, ws) = (lw.shape(x), lw.shape(w));
    let (&[n, c, d, h, wd], &[m, cg, kd, kh, kw]) = (&xs[..], &ws[..]) else {
        return Err("weight rank differs from input rank".into());
    };
    if lw.value(w).is_none() {
        return Err("3-D convolution weights must be a constant (computed at pack time)".into());
    }
    let group = usize::try_from(node.int("group", 1)?).unwrap_or(0);
    if group == 0 || cg * group != c || !m.is_multiple_of(group) {
        return Err(format!("group {group} does not divide the channels"));
    }
    let kernel = kernel_and_bias(lw, node, &ws, b, m)?;
    let (strides, dilations, pads) = resolve_axes(node, &[d, h, wd], &kernel, false)?;
    let padded = d
        .checked_add(pads[0])
        .and_then(|p| p.checked_add(pads[3]))
        .ok_or("the depth padding is too large")?;
    let span = (kd - 1).saturating_mul(dilations[0]).saturating_add(1);
    let out_d = padded
        .checked_sub(span)
        .map(|room| room / strides[0] + 1)
        .ok_or("the kernel is deeper than the padded input")?;
    // The largest intermediates: the padded input and the stacked depth slices.
    super::lowerer::bounded(&[n, c, padded, h, wd])?;
    super::lowerer::bounded(&[n, c, kd, out_d, h, wd])?;
    // D padded with zeros.
    let xp = if pads[0] + pads[3] > 0 {
        let (mut begins, mut ends) = ([0usize; MAX_RANK], [0usize; MAX_RANK]);
        begins[2] = pads[0];
        ends[2] = pads[3];
        let xp = lw.temp(node, "depth_padded", DType::F32, vec![n, c, padded, h, wd]);
        let pad = Op::Pad {
            mode: PadMode::Constant,
            begins,
            ends,
            value: 0.0,
        };
        lw.emit(node, pad, vec![Some(x)], vec![xp])?;
        xp
    } else {
        x
    };
    // Slice kz: the depth positions od·sd + kz·dd, viewed as [N, g, 1, C/g, D', H, W].
    let mut slices = Vec::with_capacity(kd);
    for kz in 0..kd {
        let mut starts = [0usize; MAX_RANK];
        let mut steps = [1isize; MAX_RANK];
        starts[2] = kz * dilations[0];
        steps[2] = strides[0].min(padded) as isize;
        let slice = lw.temp(
            node,
            &format!("depth{kz}"),
            DType::F32,
            vec![n, c, out_d, h, wd],
        );
        lw.emit(
            node,
            Op::Slice { starts, steps },
            vec![Some(xp)],
            vec![slice],
        )?;
        let view = vec![n, group, 1, cg, out_d, h, wd];
        slices.push(Some(lw.temp_alias(
            node,
            &format!("depth{kz}:view"),
            slice,
            view,
        )));
    }
    let stacked = lw.temp(
        node,
        "depths",
        DType::F32,
        vec![n, group, kd, cg, out_d, h, wd],
    );
    lw.emit(node, Op::Concat { axis: 2 }, slices, vec![stacked])?;
    let mut perm = [0usize; MAX_RANK];
    perm[..7].copy_from_slice(&[0, 4, 1, 2, 3, 5, 6]);
    let batched = lw.temp(
        node,
        "depth_batch",
        DType::F32,
        vec![n, out_d, group, kd, cg, h, wd],
    );
    lw.emit(
        node,
        Op::Transpose { perm },
        vec![Some(stacked)],
        vec![batched],
    )?;
    let planes = lw.temp_alias(
        node,
        "planes",
        batched,
        vec![n * out_d, group * kd * cg, h, wd],
    );
    // Weights [M, C/g, kd, kh, kw] → [M, kd, C/g, kh, kw] (folded at pack time).
    let mut perm = [0usize; MAX_RANK];
    perm[..5].copy_from_slice(&[0, 2, 1, 3, 4]);
    let w2 = lw.temp(node, "weights_2d", DType::F32, vec![m, kd, cg, kh, kw]);
    lw.emit(node, Op::Transpose { perm }, vec![Some(w)], vec![w2])?;
    let w2 = lw.temp_alias(node, "weights_2d:view", w2, vec![m, kd * cg, kh, kw]);
    let window = Window {
        kernel: [kh, kw],
        stride: [strides[1], strides[2]],
        dilation: [dilations[1], dilations[2]],
        pads: [pads[1], pads[2], pads[4], pads[5]],
    };
    let out_hw = window_out(&window, &[h, wd], None)?;
    let conv = Op::Conv(Conv {
        window,
        group,
        activation: Activation::None,
    });
    let y2 = lw.temp(
        node,
        "conv_2d",
        DType::F32,
        vec![n * out_d, m, out_hw[0], out_hw[1]],
    );
    lw.emit(node, conv, vec![Some(planes), Some(w2), b], vec![y2])?;
    let y2 = lw.temp_alias(
        node,
        "conv_2d:view",
        y2,
        vec![n, out_d, m, out_hw[0], out_hw[1]],
    );
    let y = lw.output(node, 0, DType::F32, vec![n, m, out_d, out_hw[0], out_hw[1]])?;
    let mut perm = [0usize; MAX_RANK];
    perm[..5].copy_from_slice(&[0, 2, 1, 3, 4]);
    lw.emit(node, Op::Transpose { perm }, vec![Some(y2)], vec![y])?;
    Ok(())
}

/// A 3-D transposed convolution (`x` `[N, C, D, H, W]`, weights `[C, M/g, kd, kh, kw]`, an
/// optional bias `[M]`): per depth tap `kz`, one 2-D ConvTranspose of every input plane (the
/// depth in the batch, `[N·D, C, H, W]`) with the tap's weights `w[:, :, kz]`, giving each
/// plane's contribution to output depth `id · sd + kz · dd − pad`; the planes spread to those
/// depths (zeros between them for a stride), the taps summed, the depth padding cropped, the
/// depth moved back and the bias added. `output_shape`, `auto_pad` SAME and `output_padding`
/// act per axis as in 2-D.
pub(super) fn conv_transpose_3d(
    lw: &mut Lowerer,
    node: &Node,
    x: TensorId,
    w: TensorId,
    b: Option<TensorId>,
) -> Result<(), Reason> {
    let (xs, ws) = (lw.shape(x), lw.shape(w));
    let (&[n, c, d, h, wd], &[wc, mg, kd, kh, kw]) = (&xs[..], &ws[..]) else {
        return Err("weight rank differs from input rank".into());
    };
    if wc != c {
        return Err("weight shape does not match the input channels".into());
    }
    let group = usize::try_from(node.int("group", 1)?).unwrap_or(0);
    if group == 0 || !c.is_multiple_of(group) {
        return Err(format!("group {group} does not divide the channels"));
    }
    let m = mg.checked_mul(group).ok_or("too many output channels")?;
    let kernel = kernel_and_bias(lw, node, &ws, b, m)?;
    let spatial = [d, h, wd];
    let (strides, dilations, mut pads) = resolve_axes(node, &spatial, &kernel, true)?;
    let mut output_padding = output_padding(node, 3)?;
    requested_size(
        node,
        &spatial,
        &kernel,
        &strides,
        &dilations,
        &mut pads,
        &mut output_padding,
    )?;
    let mut out = [0usize; 3];
    for axis in 0..3 {
        out[axis] = conv_transpose_out(
            spatial[axis],
            kernel[axis],
            strides[axis],
            dilations[axis],
            pads[axis],
            pads[axis + 3],
            output_padding[axis],
        )
        .ok_or("ConvTranspose padding exceeds its output")?;
    }
    let [od, oh, ow] = out;
    let plane = m
        .checked_mul(oh)
        .and_then(|v| v.checked_mul(ow))
        .ok_or("ConvTranspose output size overflows")?;
    // The depths the taps reach before the crop: up to the padding plus the output.
    let reach = pads[0]
        .checked_add(od)
        .ok_or("ConvTranspose output size overflows")?;
    let spread = d
        .checked_mul(strides[0])
        .ok_or("ConvTranspose output size overflows")?;
    // The largest intermediates: every tap's planes and their spread, placed, summed.
    super::lowerer::bounded(&[n, d, m, oh, ow])?;
    super::lowerer::bounded(&[n, spread.max(reach), plane])?;
    super::lowerer::bounded(&[
        n,
        kd.saturating_mul(dilations[0]).saturating_add(spread),
        plane,
    ])?;

    // The depth into the batch: [N, D, C, H, W] viewed as [N·D, C, H, W].
    let mut perm = [0usize; MAX_RANK];
    perm[..5].copy_from_slice(&[0, 2, 1, 3, 4]);
    let xt = lw.temp(node, "depth_batch", DType::F32, vec![n, d, c, h, wd]);
    lw.emit(node, Op::Transpose { perm }, vec![Some(x)], vec![xt])?;
    let planes = lw.temp_alias(node, "planes", xt, vec![n * d, c, h, wd]);
    let window = Window {
        kernel: [kh, kw],
        stride: [strides[1], strides[2]],
        dilation: [dilations[1], dilations[2]],
        pads: [pads[1], pads[2], pads[4], pads[5]],
    };
    let mut sum: Option<TensorId> = None;
    for kz in 0..kd {
        // The tap's weights, w[:, :, kz] as [C, M/g, kh, kw] (folded when constant).
        let mut starts = [0usize; MAX_RANK];
        starts[2] = kz;
        let tap = lw.temp(
            node,
            &format!("tap{kz}"),
            DType::F32,
            vec![c, mg, 1, kh, kw],
        );
        let slice = Op::Slice {
            starts,
            steps: [1; MAX_RANK],
        };
        lw.emit(node, slice, vec![Some(w)], vec![tap])?;
        let tap = lw.temp_alias(node, &format!("tap{kz}:view"), tap, vec![c, mg, kh, kw]);
        let op = Op::ConvTranspose(ConvTranspose {
            window,
            output_padding: [output_padding[1], output_padding[2]],
            group,
            activation: Activation::None,
        });
        let y2 = lw.temp(
            node,
            &format!("tap{kz}:planes"),
            DType::F32,
            vec![n * d, m, oh, ow],
        );
        lw.emit(node, op, vec![Some(planes), Some(tap), None], vec![y2])?;
        let placement = DepthPlacement {
            n,
            d,
            stride: strides[0],
            dilation: dilations[0],
            reach,
            spread,
            plane,
        };
        let placed = place_tap(lw, node, kz, y2, &placement)?;
        sum = Some(match sum {
            None => placed,
            Some(acc) => {
                let total = lw.temp(
                    node,
                    &format!("taps{kz}"),
                    DType::F32,
                    vec![n, reach, plane],
                );
                let add = Op::Binary {
                    op: BinaryOp::Add,
                    activation: Activation::None,
                };
                lw.emit(node, add, vec![Some(acc), Some(placed)], vec![total])?;
                total
            }
        });
    }
    let sum = sum.ok_or("a kernel of depth 0")?;
    depth_back(lw, node, sum, pads[0], [n, m, od, oh, ow], perm, b)
}

/// Where one tap's planes land along the output depth (see [`place_tap`]).
struct DepthPlacement {
    /// Batch.
    n: usize,
    /// Input depth.
    d: usize,
    /// Depth stride.
    stride: usize,
    /// Depth dilation.
    dilation: usize,
    /// The depths the taps reach before the crop.
    reach: usize,
    /// The strided input's depth (`d · stride`).
    spread: usize,
    /// One output plane's elements (`M · OH · OW`).
    plane: usize,
}

/// Tap `kz`'s planes `y2` (`[N·D, M, OH, OW]`) placed along the output depth: input depth `id`
/// lands at `id·stride + kz·dilation`, zeros between the planes for a stride, shifted by the
/// tap's offset and cut or padded to the depths reached: `[N, reach, plane]`.
fn place_tap(
    lw: &mut Lowerer,
    node: &Node,
    kz: usize,
    y2: TensorId,
    p: &DepthPlacement,
) -> Result<TensorId, Reason> {
    // Input depth id lands at id·sd + kz·dd: zeros between the planes for a stride.
    let spaced = if p.stride > 1 {
        let view = lw.temp_alias(
            node,
            &format!("tap{kz}:rows"),
            y2,
            vec![p.n, p.d, 1, p.plane],
        );
        let mut ends = [0usize; MAX_RANK];
        ends[2] = p.stride - 1;
        let strided = lw.temp(
            node,
            &format!("tap{kz}:strided"),
            DType::F32,
            vec![p.n, p.d, p.stride, p.plane],
        );
        lw.emit(
            node,
            zero_pad([0; MAX_RANK], ends),
            vec![Some(view)],
            vec![strided],
        )?;
        strided
    } else {
        y2
    };
    let spaced = lw.temp_alias(
        node,
        &format!("tap{kz}:spread"),
        spaced,
        vec![p.n, p.spread, p.plane],
    );
    // Shifted by the tap's depth offset and cut or padded to the depths reached.
    let shift = kz * p.dilation;
    let mut begins = [0usize; MAX_RANK];
    let mut ends = [0usize; MAX_RANK];
    begins[1] = shift;
    ends[1] = p.reach.saturating_sub(shift + p.spread);
    let length = shift + p.spread + ends[1];
    let placed = if shift > 0 || ends[1] > 0 {
        let padded = lw.temp(
            node,
            &format!("tap{kz}:shifted"),
            DType::F32,
            vec![p.n, length, p.plane],
        );
        lw.emit(
            node,
            zero_pad(begins, ends),
            vec![Some(spaced)],
            vec![padded],
        )?;
        padded
    } else {
        spaced
    };
    let placed = if length > p.reach {
        let cut = lw.temp(
            node,
            &format!("tap{kz}:placed"),
            DType::F32,
            vec![p.n, p.reach, p.plane],
        );
        let slice = Op::Slice {
            starts: [0; MAX_RANK],
            steps: [1; MAX_RANK],
        };
        lw.emit(node, slice, vec![Some(placed)], vec![cut])?;
        cut
    } else {
        placed
    };
    Ok(placed)
}

/// The taps' sum (`[N, reach, plane]`) with the depth padding cropped, the depth moved back
/// after the channels (`perm`) and the bias added: the node's output `[N, M, OD, OH, OW]`.
fn depth_back(
    lw: &mut Lowerer,
    node: &Node,
    sum: TensorId,
    pad: usize,
    [n, m, od, oh, ow]: [usize; 5],
    perm: [usize; MAX_RANK],
    b: Option<TensorId>,
) -> Result<(), Reason> {
    let plane = m * oh * ow;
    // The depth padding cropped: output depth od is reached depth od + pad.
    let cropped = if pad > 0 {
        let mut starts = [0usize; MAX_RANK];
        starts[1] = pad;
        let cropped = lw.temp(node, "cropped", DType::F32, vec![n, od, plane]);
        let slice = Op::Slice {
            starts,
            steps: [1; MAX_RANK],
        };
        lw.emit(node, slice, vec![Some(sum)], vec![cropped])?;
        cropped
    } else {
        sum
    };
    // The depth back after the channels, then the bias.
    let cropped = lw.temp_alias(node, "depth_major", cropped, vec![n, od, m, oh, ow]);
    let shape = vec![n, m, od, oh, ow];
    let moved = match b {
        Some(_) => lw.temp(node, "depth_back", DType::F32, shape.clone()),
        None => lw.output(node, 0, DType::F32, shape.clone())?,
    };
    lw.emit(
        node,
        Op::Transpose { perm },
        vec![Some(cropped)],
        vec![moved],
    )?;
    if let Some(b) = b {
        let bias = lw.temp_alias(node, "bias:view", b, vec![m, 1, 1, 1]);
        let y = lw.output(node, 0, DType::F32, shape)?;
        let add = Op::Binary {
            op: BinaryOp::Add,
            activation: Activation::None,
        };
        lw.emit(node, add, vec![Some(moved), Some(bias)], vec![y])?;
    }
    Ok(())
}

/// The kernel of a 3-D convolution node with weights of shape `ws` (`kernel_shape` must agree
/// with them, the depth at most 255), after checking its optional bias `b` is `m` floats.
fn kernel_and_bias(
    lw: &Lowerer,
    node: &Node,
    ws: &[usize],
    b: Option<TensorId>,
    m: usize,
) -> Result<Vec<usize>, Reason> {
    let kernel = kernel_from(node, ws)?;
    if kernel != ws[2..] {
        return Err("kernel_shape differs from the weight's shape".into());
    }
    if kernel.first().is_some_and(|&kd| kd > 255) {
        return Err("a kernel deeper than 255 is not supported".into());
    }
    if let Some(b) = b {
        lw.require_f32(&[b])?;
        if lw.shape(b) != [m] {
            return Err("bias shape differs from the output channels".into());
        }
    }
    Ok(kernel)
}

/// ConvTranspose's `output_padding` for `n` spatial axes (zeros when absent).
pub(super) fn output_padding(node: &Node, n: usize) -> Result<Vec<usize>, Reason> {
    match node.ints("output_padding")? {
        Some(p) if p.len() == n && p.iter().all(|&v| v >= 0) => {
            Ok(p.into_iter().map(|v| v as usize).collect())
        }
        Some(_) => Err("output_padding must have one non-negative value per axis".into()),
        None => Ok(vec![0; n]),
    }
}

/// A Pad step adding zeros: `begins` and `ends` elements per axis.
fn zero_pad(begins: [usize; MAX_RANK], ends: [usize; MAX_RANK]) -> Op {
    Op::Pad {
        mode: PadMode::Constant,
        begins,
        ends,
        value: 0.0,
    }
}

/// The pads and output padding that give ConvTranspose's requested output size
/// (`output_shape`, or `auto_pad` SAME: the input times the stride), per axis, as ONNX defines
/// them: the full size `s·(i − 1) + output_padding + (k − 1)·d + 1` cut to the request, the cut
/// split between the two ends (the larger half at the end for SAME_UPPER), or the output
/// padding grown when the request is larger.
pub(super) fn requested_size(
    node: &Node,
    spatial: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &mut [usize],
    output_padding: &mut [usize],
) -> Result<(), Reason> {
    let n = spatial.len();
    let auto_pad = node.string("auto_pad", "NOTSET")?;
    let target: Vec<usize> = match node.ints("output_shape")? {
        Some(o) => o
            .iter()
            .rev()
            .take(n)
            .rev()
            .map(|&v| v.max(0) as usize)
            .collect(),
        None if auto_pad.starts_with("SAME") => spatial
            .iter()
            .zip(strides)
            .map(|(i, s)| i.saturating_mul(*s))
            .collect(),
        None => return Ok(()),
    };
    if target.len() != n {
        return Err("output_shape must give every spatial dimension".into());
    }
    for axis in 0..n {
        let full = strides[axis]
            .checked_mul(
                spatial[axis]
                    .checked_sub(1)
                    .ok_or("ConvTranspose of an empty input")?,
            )
            .and_then(|v| v.checked_add(output_padding[axis]))
            .and_then(|v| v.checked_add((kernel[axis] - 1).checked_mul(dilations[axis])?))
            .and_then(|v| v.checked_add(1))
            .ok_or("ConvTranspose output size overflows")?;
        if full < target[axis] {
            output_padding[axis] += target[axis] - full;
            continue;
        }
        let total = full - target[axis];
        let (begin, end) = if auto_pad == "SAME_UPPER" {
            (total / 2, total - total / 2)
        } else {
            (total - total / 2, total / 2)
        };
        pads[axis] = begin;
        pads[axis + n] = end;
    }
    Ok(())
}
