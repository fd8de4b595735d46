//! 3-D pools and convolutions (issue 20, item 4), lowered onto 2-D ones, against their direct
//! definitions over random geometries: pools with every kernel, stride, dilation and padding per
//! axis, ceil mode, padding counted or not, max and average; convolutions and transposed
//! convolutions with groups, bias or none, and the same per-axis geometry (output padding and
//! requested output sizes for the transposed ones).

mod common;

use common::models::{f32_array, f32_values, run_packed, Rng};
use ferrite_tools::compile::onnx::build::{attr_int, attr_ints, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::data_type;
use ferrite_tools::compile::pack::{pack, PackOptions};

/// One axis of a pool: input length, kernel, stride, dilation, pads.
#[derive(Clone, Copy, Debug)]
struct Axis {
    len: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    begin: usize,
    end: usize,
}

impl Axis {
    fn span(&self) -> usize {
        (self.kernel - 1) * self.dilation + 1
    }
    /// ONNX's output length, ceil mode included (a last window starting in the end padding is
    /// dropped).
    fn out(&self, ceil: bool) -> usize {
        let room = self.len + self.begin + self.end - self.span();
        let mut out = if ceil {
            room.div_ceil(self.stride) + 1
        } else {
            room / self.stride + 1
        };
        if ceil && (out - 1) * self.stride >= self.len + self.begin {
            out -= 1;
        }
        out
    }
    /// The input indices of window `o` inside the input, and how many of its positions lie in
    /// the padded extent `[−begin, len + end)`.
    fn window(&self, o: usize) -> (Vec<usize>, usize) {
        let start = (o * self.stride) as isize - self.begin as isize;
        let positions = (0..self.kernel).map(|j| start + (j * self.dilation) as isize);
        let inside = positions
            .clone()
            .filter(|&i| i >= 0 && (i as usize) < self.len)
            .map(|i| i as usize)
            .collect();
        let padded = positions
            .filter(|&i| i < (self.len + self.end) as isize)
            .count();
        (inside, padded)
    }
}

/// The 3-D pool of `x` (`[1, channels, D, H, W]`) by its definition.
fn reference(
    x: &[f32],
    channels: usize,
    axes: [Axis; 3],
    ceil: bool,
    max: bool,
    count_pad: bool,
) -> Vec<f32> {
    let [ad, ah, aw] = axes;
    let (od, oh, ow) = (ad.out(ceil), ah.out(ceil), aw.out(ceil));
    let mut y = Vec::new();
    for c in 0..channels {
        for z in 0..od {
            for r in 0..oh {
                for q in 0..ow {
                    let ((zs, zp), (rs, rp), (qs, qp)) = (ad.window(z), ah.window(r), aw.window(q));
                    let mut values = Vec::new();
                    for &i in &zs {
                        for &j in &rs {
                            for &k in &qs {
                                values.push(x[((c * ad.len + i) * ah.len + j) * aw.len + k]);
                            }
                        }
                    }
                    y.push(if max {
                        values.iter().cloned().fold(f32::NEG_INFINITY, f32::max)
                    } else {
                        let count = if count_pad {
                            zp * rp * qp
                        } else {
                            values.len()
                        };
                        values.iter().sum::<f32>() / count as f32
                    });
                }
            }
        }
    }
    y
}

#[test]
fn random_3d_pools_match_the_definition() {
    let mut rng = Rng(0x9e37_79b9);
    let mut checked = 0;
    while checked < 120 {
        let axis = |rng: &mut Rng| {
            let kernel = 1 + rng.below(3);
            let dilation = 1 + rng.below(2);
            let span = (kernel - 1) * dilation + 1;
            Axis {
                len: span + rng.below(5),
                kernel,
                stride: 1 + rng.below(3),
                dilation,
                begin: rng.below(span.min(3)),
                end: rng.below(span.min(3)),
            }
        };
        let axes = [axis(&mut rng), axis(&mut rng), axis(&mut rng)];
        let (ceil, max, count_pad) = (rng.below(2) == 1, rng.below(2) == 1, rng.below(2) == 1);
        let channels = 1 + rng.below(3);
        let dims: Vec<usize> = [1, channels]
            .into_iter()
            .chain(axes.iter().map(|a| a.len))
            .collect();
        let x: Vec<f32> = (0..dims.iter().product::<usize>())
            .map(|_| rng.next() as f32 / u32::MAX as f32 * 8.0 - 4.0)
            .collect();
        let ints = |f: fn(&Axis) -> usize| axes.iter().map(|a| f(a) as i64).collect::<Vec<_>>();
        let pads: Vec<i64> = ints(|a| a.begin)
            .into_iter()
            .chain(ints(|a| a.end))
            .collect();
        let mut attrs = vec![
            attr_ints("kernel_shape", &ints(|a| a.kernel)),
            attr_ints("strides", &ints(|a| a.stride)),
            attr_ints("dilations", &ints(|a| a.dilation)),
            attr_ints("pads", &pads),
            attr_int("ceil_mode", ceil as i64),
        ];
        if !max {
            attrs.push(attr_int("count_include_pad", count_pad as i64));
        }
        let op = if max { "MaxPool" } else { "AveragePool" };
        let onnx = ModelBuilder::new(19)
            .input(
                "x",
                data_type::FLOAT,
                &dims.iter().map(|&d| D::N(d as i64)).collect::<Vec<_>>(),
            )
            .node(op, "pool", &["x"], &["y"], attrs)
            .output("y")
            .encode();
        let what = format!("{op} {axes:?} ceil {ceil}");
        let out = run_packed(
            &onnx,
            &PackOptions::default(),
            &[f32_array(&dims, &x)],
            &what,
        );
        let got = f32_values(&out[0]);
        let want = reference(&x, channels, axes, ceil, max, count_pad);
        let shape: Vec<usize> = [1, channels]
            .into_iter()
            .chain(axes.iter().map(|a| a.out(ceil)))
            .collect();
        assert_eq!(out[0].shape, shape, "{op} {axes:?} ceil {ceil}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // Max is exact; an average sums in another order (two passes).
            let tolerance = if max { 0.0 } else { 1e-5 * (1.0 + w.abs()) };
            assert!(
                (g - w).abs() <= tolerance,
                "{op} {axes:?} ceil {ceil} count_pad {count_pad}: element {i} is {g}, the definition {w}"
            );
        }
        checked += 1;
    }
}

/// The 3-D convolution of `x` (`[1, c, D, H, W]`) with `w` (`[m, c/g, kd, kh, kw]`) by its
/// definition.
#[allow(clippy::too_many_arguments)]
fn conv_reference(
    x: &[f32],
    c: usize,
    w: &[f32],
    m: usize,
    group: usize,
    bias: Option<&[f32]>,
    axes: [Axis; 3],
) -> Vec<f32> {
    let [ad, ah, aw] = axes;
    let (od, oh, ow) = (ad.out(false), ah.out(false), aw.out(false));
    let (cg, mg) = (c / group, m / group);
    let mut y = Vec::new();
    for o in 0..m {
        let g = o / mg;
        for z in 0..od {
            for r in 0..oh {
                for q in 0..ow {
                    let mut acc = bias.map_or(0.0, |b| b[o]);
                    for ci in 0..cg {
                        for kz in 0..ad.kernel {
                            for ky in 0..ah.kernel {
                                for kx in 0..aw.kernel {
                                    let pos = |a: &Axis, o: usize, k: usize| {
                                        (o * a.stride + k * a.dilation)
                                            .checked_sub(a.begin)
                                            .filter(|&i| i < a.len)
                                    };
                                    let (Some(i), Some(j), Some(l)) =
                                        (pos(&ad, z, kz), pos(&ah, r, ky), pos(&aw, q, kx))
                                    else {
                                        continue;
                                    };
                                    let xi =
                                        (((g * cg + ci) * ad.len + i) * ah.len + j) * aw.len + l;
                                    let wi = (((o * cg + ci) * ad.kernel + kz) * ah.kernel + ky)
                                        * aw.kernel
                                        + kx;
                                    acc += x[xi] * w[wi];
                                }
                            }
                        }
                    }
                    y.push(acc);
                }
            }
        }
    }
    y
}

/// A one-node model: `op` (Conv or ConvTranspose) on input `x` of `dims` with constant weights
/// `w` of `wdims`, a constant bias when given, and `attrs`.
fn convolution_model(
    op: &str,
    dims: &[usize],
    wdims: &[i64],
    w: &[f32],
    bias: Option<&[f32]>,
    attrs: Vec<ferrite_tools::compile::onnx::proto::AttributeProto>,
) -> Vec<u8> {
    let x_dims: Vec<D> = dims.iter().map(|&d| D::N(d as i64)).collect();
    let mut b = ModelBuilder::new(17)
        .input("x", data_type::FLOAT, &x_dims)
        .init_f32("w", wdims, w);
    let mut inputs = vec!["x", "w"];
    if let Some(bias) = bias {
        b = b.init_f32("b", &[bias.len() as i64], bias);
        inputs.push("b");
    }
    b.node(op, "op", &inputs, &["y"], attrs)
        .output("y")
        .encode()
}

/// `n` values drawn uniformly from [−1, 1].
fn uniform(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| rng.next() as f32 / u32::MAX as f32 * 2.0 - 1.0)
        .collect()
}

/// Every value of `got` within a few f32 roundings of the definition's `want`.
fn assert_near(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()) * 8.0,
            "{what}: element {i} is {g}, the definition {w}"
        );
    }
}

#[test]
fn random_3d_convolutions_match_the_definition() {
    let mut rng = Rng(0x2545_f491);
    for case in 0..60 {
        let axis = |rng: &mut Rng| {
            let kernel = 1 + rng.below(3);
            let dilation = 1 + rng.below(2);
            let span = (kernel - 1) * dilation + 1;
            Axis {
                len: span + rng.below(4),
                kernel,
                stride: 1 + rng.below(2),
                dilation,
                begin: rng.below(3),
                end: rng.below(3),
            }
        };
        let axes = [axis(&mut rng), axis(&mut rng), axis(&mut rng)];
        let group = 1 + rng.below(2);
        let (c, m) = (group * (1 + rng.below(2)), group * (1 + rng.below(3)));
        let with_bias = rng.below(2) == 1;
        let mut value = |n: usize| uniform(&mut rng, n);
        let dims: Vec<usize> = [1, c]
            .into_iter()
            .chain(axes.iter().map(|a| a.len))
            .collect();
        let x = value(dims.iter().product());
        let wdims: Vec<i64> = [m, c / group]
            .into_iter()
            .chain(axes.iter().map(|a| a.kernel))
            .map(|d| d as i64)
            .collect();
        let w = value(wdims.iter().product::<i64>() as usize);
        let b = value(m);
        let ints = |f: fn(&Axis) -> usize| axes.iter().map(|a| f(a) as i64).collect::<Vec<_>>();
        let pads: Vec<i64> = ints(|a| a.begin)
            .into_iter()
            .chain(ints(|a| a.end))
            .collect();
        let attrs = vec![
            attr_ints("strides", &ints(|a| a.stride)),
            attr_ints("dilations", &ints(|a| a.dilation)),
            attr_ints("pads", &pads),
            attr_int("group", group as i64),
        ];
        let onnx = convolution_model(
            "Conv",
            &dims,
            &wdims,
            &w,
            with_bias.then_some(&b[..]),
            attrs,
        );
        let what = format!("case {case}: c {c} m {m} group {group} bias {with_bias} {axes:?}");
        let out = run_packed(
            &onnx,
            &PackOptions::default(),
            &[f32_array(&dims, &x)],
            &what,
        );
        let shape: Vec<usize> = [1, m]
            .into_iter()
            .chain(axes.iter().map(|a| a.out(false)))
            .collect();
        assert_eq!(out[0].shape, shape, "{what}");
        let want = conv_reference(&x, c, &w, m, group, with_bias.then_some(&b[..]), axes);
        assert_near(&f32_values(&out[0]), &want, &what);
    }
}

/// One axis of a transposed convolution: input length, kernel, stride, dilation, pads and output
/// padding.
#[derive(Clone, Copy, Debug)]
struct UpAxis {
    len: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    begin: usize,
    end: usize,
    extra: usize,
}

impl UpAxis {
    /// ONNX's output length: `s·(i − 1) + output_padding + (k − 1)·d + 1 − pads`.
    fn out(&self) -> usize {
        self.stride * (self.len - 1) + self.extra + (self.kernel - 1) * self.dilation + 1
            - self.begin
            - self.end
    }
}

/// The 3-D transposed convolution of `x` (`[1, c, D, H, W]`) with `w` (`[c, m/g, kd, kh, kw]`)
/// by its definition: input position `i` and tap `k` feed output `i·s + k·d − begin`.
#[allow(clippy::too_many_arguments)]
fn conv_transpose_reference(
    x: &[f32],
    c: usize,
    w: &[f32],
    m: usize,
    group: usize,
    bias: Option<&[f32]>,
    axes: [UpAxis; 3],
) -> Vec<f32> {
    let [ad, ah, aw] = axes;
    let (od, oh, ow) = (ad.out(), ah.out(), aw.out());
    let (cg, mg) = (c / group, m / group);
    let mut y = vec![0.0f32; m * od * oh * ow];
    for (o, plane) in y.chunks_mut(od * oh * ow).enumerate() {
        plane.fill(bias.map_or(0.0, |b| b[o]));
    }
    let place = |a: &UpAxis, i: usize, k: usize, out: usize| {
        (i * a.stride + k * a.dilation)
            .checked_sub(a.begin)
            .filter(|&p| p < out)
    };
    for ci in 0..c {
        let g = ci / cg;
        for mo in 0..mg {
            let o = g * mg + mo;
            for i in 0..ad.len {
                for j in 0..ah.len {
                    for l in 0..aw.len {
                        let xv = x[((ci * ad.len + i) * ah.len + j) * aw.len + l];
                        for kz in 0..ad.kernel {
                            for ky in 0..ah.kernel {
                                for kx in 0..aw.kernel {
                                    let (Some(z), Some(r), Some(q)) = (
                                        place(&ad, i, kz, od),
                                        place(&ah, j, ky, oh),
                                        place(&aw, l, kx, ow),
                                    ) else {
                                        continue;
                                    };
                                    let wi = (((ci * mg + mo) * ad.kernel + kz) * ah.kernel + ky)
                                        * aw.kernel
                                        + kx;
                                    y[((o * od + z) * oh + r) * ow + q] += xv * w[wi];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    y
}

/// Random 3-D ConvTranspose geometries — kernels, strides, dilations, pads and output padding
/// per axis, groups, bias or none, pads given or derived from `output_shape` — against the
/// definition.
#[test]
fn random_3d_transposed_convolutions_match_the_definition() {
    let mut rng = Rng(0x5eed_3d7c);
    for case in 0..60 {
        let axis = |rng: &mut Rng| {
            let kernel = 1 + rng.below(3);
            let dilation = 1 + rng.below(2);
            let stride = 1 + rng.below(3);
            let span = (kernel - 1) * dilation + 1;
            let begin = rng.below(span.min(3));
            UpAxis {
                len: 1 + rng.below(3),
                kernel,
                stride,
                dilation,
                begin,
                end: rng.below(span - begin).min(2),
                // Output padding must stay below the stride or the dilation (ONNX).
                extra: rng.below(stride.max(dilation)),
            }
        };
        let axes = [axis(&mut rng), axis(&mut rng), axis(&mut rng)];
        let group = 1 + rng.below(2);
        let (c, m) = (group * (1 + rng.below(2)), group * (1 + rng.below(2)));
        let with_bias = rng.below(2) == 1;
        let by_output_shape = rng.below(3) == 0;
        let mut value = |n: usize| uniform(&mut rng, n);
        let dims: Vec<usize> = [1, c]
            .into_iter()
            .chain(axes.iter().map(|a| a.len))
            .collect();
        let x = value(dims.iter().product());
        let wdims: Vec<i64> = [c, m / group]
            .into_iter()
            .chain(axes.iter().map(|a| a.kernel))
            .map(|d| d as i64)
            .collect();
        let w = value(wdims.iter().product::<i64>() as usize);
        let b = value(m);
        let ints = |f: fn(&UpAxis) -> usize| axes.iter().map(|a| f(a) as i64).collect::<Vec<_>>();
        let mut attrs = vec![
            attr_ints("strides", &ints(|a| a.stride)),
            attr_ints("dilations", &ints(|a| a.dilation)),
            attr_int("group", group as i64),
        ];
        if by_output_shape {
            // The output size requested, the pads derived (NOTSET: the larger half first).
            attrs.push(attr_ints("output_shape", &ints(|a| a.out())));
            attrs.push(attr_ints("output_padding", &ints(|a| a.extra)));
        } else {
            let pads: Vec<i64> = ints(|a| a.begin)
                .into_iter()
                .chain(ints(|a| a.end))
                .collect();
            attrs.push(attr_ints("pads", &pads));
            attrs.push(attr_ints("output_padding", &ints(|a| a.extra)));
        }
        let onnx = convolution_model(
            "ConvTranspose",
            &dims,
            &wdims,
            &w,
            with_bias.then_some(&b[..]),
            attrs,
        );
        // With `output_shape`, ONNX splits the cut itself: the reference uses that split.
        let axes = if by_output_shape {
            axes.map(|a| {
                let total = a.begin + a.end;
                UpAxis {
                    begin: total - total / 2,
                    end: total / 2,
                    ..a
                }
            })
        } else {
            axes
        };
        let what = format!(
            "case {case}: c {c} m {m} group {group} bias {with_bias} output_shape {by_output_shape} {axes:?}"
        );
        let out = run_packed(
            &onnx,
            &PackOptions::default(),
            &[f32_array(&dims, &x)],
            &what,
        );
        let shape: Vec<usize> = [1, m]
            .into_iter()
            .chain(axes.iter().map(|a| a.out()))
            .collect();
        assert_eq!(out[0].shape, shape, "{what}");
        let want = conv_transpose_reference(&x, c, &w, m, group, with_bias.then_some(&b[..]), axes);
        assert_near(&f32_values(&out[0]), &want, &what);
    }
}

/// Extreme geometry on 3-D convolutions, transposed convolutions and pools — pads, dilations,
/// strides and output padding near the top of the integer range, a kernel deeper than the
/// input — is refused with an error, never a panic or an overflow; a convolution's stride longer
/// than the input is valid ONNX (one output along that axis).
#[test]
fn extreme_3d_geometry_is_refused_or_exact() {
    let huge = i64::MAX / 2;
    let cases: [(&str, &str, i64, bool); 10] = [
        ("pads", "Conv", i64::MAX, false),
        ("dilations", "Conv", huge, false),
        ("strides", "Conv", huge, true),
        ("pads", "ConvTranspose", i64::MAX, false),
        ("dilations", "ConvTranspose", huge, false),
        ("strides", "ConvTranspose", huge, false),
        ("output_padding", "ConvTranspose", huge, false),
        ("pads", "MaxPool", i64::MAX, false),
        ("dilations", "AveragePool", huge, false),
        ("kernel_shape", "MaxPool", 64, false),
    ];
    for (attr, op, value, valid) in cases {
        let values = if attr == "pads" {
            vec![value; 6]
        } else {
            vec![value; 3]
        };
        let mut attrs = vec![attr_ints(attr, &values)];
        let convolution = op.starts_with("Conv");
        if !convolution && attr != "kernel_shape" {
            attrs.push(attr_ints("kernel_shape", &[2, 2, 2]));
        }
        let dims = [D::N(1), D::N(2), D::N(4), D::N(4), D::N(4)];
        let mut b = ModelBuilder::new(17).input("x", data_type::FLOAT, &dims);
        let inputs: &[&str] = if convolution {
            b = b.init_f32("w", &[2, 2, 2, 2, 2], &[0.5; 32]);
            &["x", "w"]
        } else {
            &["x"]
        };
        let onnx = b.node(op, "op", inputs, &["y"], attrs).output("y").encode();
        if !valid {
            let result = pack(&onnx, &PackOptions::default());
            assert!(result.is_err(), "{op} with {attr} {value} packed");
            continue;
        }
        // One output position per axis: the window at the origin, all ones times 0.5 over
        // 2 channels × 2×2×2 taps.
        let out = run_packed(
            &onnx,
            &PackOptions::default(),
            &[f32_array(&[1, 2, 4, 4, 4], &[1.0; 128])],
            op,
        );
        assert_eq!(out[0].shape, [1, 2, 1, 1, 1]);
        assert_eq!(f32_values(&out[0]), [8.0, 8.0]);
    }
}
