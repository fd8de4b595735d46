//! Lowering of the convolution family: Conv and ConvTranspose (1-D and 2-D; 3-D in `conv3d.rs`).

use super::attrs::Attrs;
use super::lowerer::{Lowerer, Reason};
use super::window::{conv_geometry, kernel_from, resolve_axes, spatial_dims, window_of};
use crate::compile::onnx::Node;
use ferrite_hal::geometry::conv_transpose_out;
use ferrite_hal::op::{Conv, ConvTranspose};
use ferrite_hal::{Activation, DType, Op};

pub(super) fn conv(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let w = lw.input(node, 1)?;
    let b = lw.optional_input(node, 2);
    lw.require_f32(&[x, w])?;
    if lw.shape(x).len() == 5 {
        return super::conv3d::conv_3d(lw, node, x, w, b);
    }
    let (window, group, out_shape) = conv_geometry(lw, node, x, w, "Conv")?;
    if let Some(b) = b {
        lw.require_f32(&[b])?;
        if lw.shape(b) != [out_shape[1]] {
            return Err("bias shape differs from the output channels".into());
        }
    }
    let y = lw.output(node, 0, DType::F32, out_shape)?;
    let op = Op::Conv(Conv {
        window,
        group,
        activation: Activation::None,
    });
    lw.emit(node, op, vec![Some(x), Some(w), b], vec![y])?;
    Ok(())
}

pub(super) fn conv_transpose(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let w = lw.input(node, 1)?;
    let b = lw.optional_input(node, 2);
    lw.require_f32(&[x, w])?;
    let xs = lw.shape(x);
    let ws = lw.shape(w);
    if xs.len() == 5 {
        return super::conv3d::conv_transpose_3d(lw, node, x, w, b);
    }
    let spatial = spatial_dims(&xs, "ConvTranspose")?;
    let n = spatial.len();
    if ws.len() != xs.len() || ws[0] != xs[1] {
        return Err("weight shape does not match the input channels".into());
    }
    let group = node.int("group", 1)?;
    if group < 1 || !xs[1].is_multiple_of(group as usize) {
        return Err(format!("group {group} does not divide the channels"));
    }
    let kernel = kernel_from(node, &ws)?;
    if kernel != ws[2..] {
        return Err("kernel_shape differs from the weight's shape".into());
    }
    let oc = ws[1] * group as usize;
    let mut output_padding = super::conv3d::output_padding(node, n)?;
    let (strides, dilations, mut pads) = resolve_axes(node, &spatial, &kernel, true)?;
    super::conv3d::requested_size(
        node,
        &spatial,
        &kernel,
        &strides,
        &dilations,
        &mut pads,
        &mut output_padding,
    )?;
    let window = window_of(&kernel, &strides, &dilations, &pads);
    let op_pad = if n == 1 {
        [0, output_padding[0]]
    } else {
        [output_padding[0], output_padding[1]]
    };
    let dims: Vec<usize> = if n == 1 {
        vec![1, spatial[0]]
    } else {
        spatial.clone()
    };
    let mut out_spatial = Vec::new();
    for a in 0..2 {
        out_spatial.push(
            conv_transpose_out(
                dims[a],
                window.kernel[a],
                window.stride[a],
                window.dilation[a],
                window.pads[a],
                window.pads[a + 2],
                op_pad[a],
            )
            .ok_or("ConvTranspose padding exceeds its output")?,
        );
    }
    if n == 1 {
        out_spatial.remove(0);
    }
    if let Some(b) = b {
        lw.require_f32(&[b])?;
        if lw.shape(b) != [oc] {
            return Err("bias shape differs from the output channels".into());
        }
    }
    let mut out_shape = vec![xs[0], oc];
    out_shape.extend(out_spatial);
    let y = lw.output(node, 0, DType::F32, out_shape)?;
    let op = Op::ConvTranspose(ConvTranspose {
        window,
        output_padding: op_pad,
        group: group as usize,
        activation: Activation::None,
    });
    lw.emit(node, op, vec![Some(x), Some(w), b], vec![y])?;
    Ok(())
}
