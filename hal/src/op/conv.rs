//! Convolutions, float and integer (Conv, ConvTranspose, QConv, ConvInteger): their windows
//! and parameters. One module per family, as
//! [`super::Family`] lists them; the words' codec is `codec/conv.rs`.

use super::quantize::Requantize;
use crate::words::{WordReader, WordWriter};
use crate::Activation;

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
