//! Convolutions, float and integer (Conv, ConvTranspose, QConv, ConvInteger): their windows,
//! parameters and word encoding. One module per family, as [`super::Family`] lists them: `Op::encode` and
//! `Op::decode_selected` dispatch here by [`super::OpKind::family`].

use super::*;

/// Parameters of a 2-D window (convolution or pooling). 1-D ops use height 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Strides (height, width), each ≥ 1.
    pub stride: [usize; 2],
    /// Dilations (height, width), each ≥ 1.
    pub dilation: [usize; 2],
    /// Padding: top, left, bottom, right.
    pub pads: [usize; 4],
}

impl Window {
    pub(super) fn encode(&self, w: &mut WordWriter) {
        for v in self
            .kernel
            .iter()
            .chain(&self.stride)
            .chain(&self.dilation)
            .chain(&self.pads)
        {
            w.usize(*v);
        }
    }

    pub(super) fn decode(r: &mut WordReader<'_>) -> Option<Window> {
        let mut v = [0usize; 10];
        for slot in v.iter_mut() {
            *slot = r.usize()?;
        }
        let win = Window {
            kernel: [v[0], v[1]],
            stride: [v[2], v[3]],
            dilation: [v[4], v[5]],
            pads: [v[6], v[7], v[8], v[9]],
        };
        let positive = win.kernel.iter().chain(&win.stride).chain(&win.dilation);
        positive.clone().all(|&x| x >= 1).then_some(win)
    }
}

/// Convolution parameters. Weights are `[OC, IC/group, KH, KW]`, bias `[OC]` (optional input).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Conv {
    /// Kernel window.
    pub window: Window,
    /// Number of groups (≥ 1; equal to the channel count for depthwise).
    pub group: usize,
    /// Fused activation.
    pub activation: Activation,
}

/// Integer convolution: weights int8 `[OC, IC/group, KH, KW]` (zero point 0), bias int32 `[OC]`,
/// requantization `[C, 2]` int32 with `C` 1 or `OC`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QConv {
    /// Kernel window (padding reads the input zero point).
    pub window: Window,
    /// Number of groups.
    pub group: usize,
    /// Zero points and output clamp.
    pub requantize: Requantize,
}

impl QConv {
    /// A 1×1, stride-1, unpadded, ungrouped convolution: a matrix product over the plane.
    pub fn is_pointwise(&self) -> bool {
        let w = &self.window;
        w.kernel == [1, 1] && w.stride == [1, 1] && w.pads == [0; 4] && self.group <= 1
    }
}

/// Integer convolution to int32 (ONNX ConvInteger): `Σ (x − x_zero)·(w − w_zero[oc])`, padding
/// reading the input zero point (so it adds nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvInteger {
    /// Kernel window.
    pub window: Window,
    /// Number of groups.
    pub group: usize,
}

/// Transposed-convolution parameters. Weights are `[IC, OC/group, KH, KW]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConvTranspose {
    /// Kernel window; `pads` crop the full output.
    pub window: Window,
    /// Extra rows/columns added at the end of the output (height, width).
    pub output_padding: [usize; 2],
    /// Number of groups.
    pub group: usize,
    /// Fused activation.
    pub activation: Activation,
}

/// Appends the parameters of `op`, a conv op, as words.
pub(super) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::Conv(c) => {
            c.window.encode(w);
            w.usize(c.group);
            c.activation.encode(w);
        }
        Op::ConvTranspose(c) => {
            c.window.encode(w);
            w.usize(c.output_padding[0]);
            w.usize(c.output_padding[1]);
            w.usize(c.group);
            c.activation.encode(w);
        }
        Op::QConv(c) => {
            c.window.encode(w);
            w.usize(c.group);
            c.requantize.encode(w);
        }
        Op::ConvInteger(c) => {
            c.window.encode(w);
            w.usize(c.group);
        }
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(super) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::Conv if selects(OPS, OpKind::Conv) => Op::Conv(Conv {
            window: Window::decode(r)?,
            group: positive(r.usize()?)?,
            activation: Activation::decode(r)?,
        }),
        OpKind::ConvTranspose if selects(OPS, OpKind::ConvTranspose) => {
            Op::ConvTranspose(ConvTranspose {
                window: Window::decode(r)?,
                output_padding: [r.usize()?, r.usize()?],
                group: positive(r.usize()?)?,
                activation: Activation::decode(r)?,
            })
        }
        OpKind::QConv if selects(OPS, OpKind::QConv) => Op::QConv(QConv {
            window: Window::decode(r)?,
            group: positive(r.usize()?)?,
            requantize: Requantize::decode(r)?,
        }),
        OpKind::ConvInteger if selects(OPS, OpKind::ConvInteger) => Op::ConvInteger(ConvInteger {
            window: Window::decode(r)?,
            group: positive(r.usize()?)?,
        }),
        _ => return None,
    })
}
