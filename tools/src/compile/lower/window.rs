//! The geometry of windowed ops' lowering: `auto_pad` resolved per spatial axis, kernel sizes
//! from the weights, output sizes, a convolution's window and group, and shapes as hal's.

use super::attrs::Attrs;
use super::lowerer::{Lowerer, Reason};
use crate::compile::ir::TensorId;
use crate::compile::onnx::Node;
use ferrite_hal::geometry::{conv_out, pool_out};
use ferrite_hal::op::Window;
use ferrite_hal::Shape;

pub(super) fn hal_shape(dims: &[usize]) -> Result<Shape, Reason> {
    Shape::new(dims).ok_or_else(|| format!("rank {} exceeds {}", dims.len(), ferrite_hal::MAX_RANK))
}

/// Per spatial axis of `input` (any number): the strides, the dilations, and the pads (all
/// begins, then all ends) of `node`, `auto_pad` resolved.
#[allow(clippy::type_complexity)]
pub(super) fn resolve_axes(
    node: &Node,
    input: &[usize],
    kernel: &[usize],
    transpose: bool,
) -> Result<(Vec<usize>, Vec<usize>, Vec<usize>), Reason> {
    let n = input.len();
    let positive = |name: &str| -> Result<Vec<usize>, Reason> {
        let v = node.ints(name)?.unwrap_or_else(|| vec![1; n]);
        if v.len() != n || v.iter().any(|&x| x < 1) {
            return Err(format!("attribute '{name}' must have {n} positive values"));
        }
        Ok(v.into_iter().map(|x| x as usize).collect())
    };
    let strides = positive("strides")?;
    let dilations = positive("dilations")?;
    if kernel.len() != n || kernel.contains(&0) {
        return Err("kernel_shape does not match the input rank".into());
    }
    let auto_pad = node.string("auto_pad", "NOTSET")?;
    let mut pads = vec![0usize; 2 * n];
    match auto_pad.as_str() {
        "NOTSET" | "" => {
            if let Some(p) = node.ints("pads")? {
                if p.len() != 2 * n || p.iter().any(|&x| x < 0) {
                    return Err(
                        "attribute 'pads' must have 2 non-negative values per spatial axis".into(),
                    );
                }
                pads = p.into_iter().map(|x| x as usize).collect();
            }
        }
        "VALID" => {}
        // ConvTranspose derives SAME padding from its output size later.
        "SAME_UPPER" | "SAME_LOWER" if transpose => {}
        "SAME_UPPER" | "SAME_LOWER" => {
            for axis in 0..n {
                let eff = (kernel[axis] - 1)
                    .saturating_mul(dilations[axis])
                    .saturating_add(1);
                let out = input[axis].div_ceil(strides[axis]);
                let total = ((out.max(1) - 1)
                    .saturating_mul(strides[axis])
                    .saturating_add(eff))
                .saturating_sub(input[axis]);
                let small = total / 2;
                let (begin, end) = if auto_pad == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                pads[axis] = begin;
                pads[n + axis] = end;
            }
        }
        other => return Err(format!("auto_pad '{other}' is not supported")),
    }
    Ok((strides, dilations, pads))
}

pub(super) fn kernel_from(node: &Node, weight_shape: &[usize]) -> Result<Vec<usize>, Reason> {
    match node.ints("kernel_shape")? {
        Some(k) => {
            if k.iter().any(|&v| v < 1) {
                return Err("kernel_shape must be positive".into());
            }
            Ok(k.into_iter().map(|v| v as usize).collect())
        }
        None => Ok(weight_shape.get(2..).unwrap_or(&[]).to_vec()),
    }
}

/// Output spatial shape [oh, ow] of a window (height 1 for 1-D).
pub(super) fn window_out(
    win: &Window,
    spatial: &[usize],
    ceil: Option<bool>,
) -> Result<Vec<usize>, Reason> {
    let dims: Vec<usize> = if spatial.len() == 1 {
        vec![1, spatial[0]]
    } else {
        spatial.to_vec()
    };
    let mut out = Vec::new();
    for (axis, &len) in dims.iter().enumerate().take(2) {
        let (k, s, d, b, e) = (
            win.kernel[axis],
            win.stride[axis],
            win.dilation[axis],
            win.pads[axis],
            win.pads[axis + 2],
        );
        let o = match ceil {
            None => conv_out(len, k, s, d, b, e),
            Some(c) => pool_out(len, k, s, d, b, e, c),
        };
        out.push(o.ok_or("the window is larger than the padded input")?);
    }
    Ok(if spatial.len() == 1 {
        vec![out[1]]
    } else {
        out
    })
}

/// The window, group count and output shape of a convolution node (Conv, ConvInteger) reading
/// `x` with weights `w`.
pub(super) fn conv_geometry(
    lw: &Lowerer,
    node: &Node,
    x: TensorId,
    w: TensorId,
    what: &str,
) -> Result<(Window, usize, Vec<usize>), Reason> {
    let xs = lw.shape(x);
    let ws = lw.shape(w);
    let spatial = spatial_dims(&xs, what)?;
    if ws.len() != xs.len() {
        return Err("weight rank differs from input rank".into());
    }
    let group = node.int("group", 1)?;
    if group < 1
        || !xs[1].is_multiple_of(group as usize)
        || !ws[0].is_multiple_of(group as usize)
        || ws[1] * group as usize != xs[1]
    {
        return Err(format!("group {group} does not divide the channels"));
    }
    let kernel = kernel_from(node, &ws)?;
    if kernel != ws[2..] {
        return Err("kernel_shape differs from the weight's shape".into());
    }
    let window = resolve_window(node, &spatial, &kernel, false)?;
    let out_spatial = window_out(&window, &spatial, None)?;
    let mut out_shape = vec![xs[0], ws[0]];
    out_shape.extend(out_spatial);
    Ok((window, group as usize, out_shape))
}

/// Resolves strides, dilations and (auto_)pads into a 2-D window (1-D as height 1).
pub(super) fn resolve_window(
    node: &Node,
    input: &[usize],
    kernel: &[usize],
    transpose: bool,
) -> Result<Window, Reason> {
    let (strides, dilations, pads) = resolve_axes(node, input, kernel, transpose)?;
    Ok(window_of(kernel, &strides, &dilations, &pads))
}

/// Spatial dims of an NCHW / NCL tensor, refusing other ranks.
pub(super) fn spatial_dims(shape: &[usize], what: &str) -> Result<Vec<usize>, Reason> {
    match shape.len() {
        3 | 4 => Ok(shape[2..].to_vec()),
        5 => Err(format!(
            "3-D {what} (rank 5) is not built yet (3-D Conv, ConvTranspose and the pools are)"
        )),
        r => Err(format!(
            "{what} supports 1-D, 2-D and (Conv and the pools) 3-D inputs, not rank {r}"
        )),
    }
}

/// The 2-D window of one or two spatial axes (1-D as height 1) from per-axis values (`pads`:
/// all begins, then all ends).
pub(super) fn window_of(
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[usize],
) -> Window {
    if kernel.len() == 1 {
        Window {
            kernel: [1, kernel[0]],
            stride: [1, strides[0]],
            dilation: [1, dilations[0]],
            pads: [0, pads[0], 0, pads[1]],
        }
    } else {
        Window {
            kernel: [kernel[0], kernel[1]],
            stride: [strides[0], strides[1]],
            dilation: [dilations[0], dilations[1]],
            pads: [pads[0], pads[1], pads[2], pads[3]],
        }
    }
}
