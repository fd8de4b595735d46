//! Resize (opsets 10–19) and Upsample: every mode becomes one [`Op::Resample`] step per resized
//! axis, with a tap table computed here, at pack time, exactly as the ONNX reference
//! (`onnx.reference.ops.op_resize`) computes its coefficients — in f64, then stored as f32.

use super::attrs::Attrs;
use super::lowerer::{normalize_axis, Lowerer, Reason};
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;
use ferrite_hal::{DType, Op};

/// How a fractional source position picks one input position (mode `nearest`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Nearest {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

/// The interpolation filter.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Filter {
    Nearest(Nearest),
    Linear,
    Cubic(f64),
}

/// How an output index maps to a source coordinate.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Coordinates {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// Everything that decides one axis's taps.
#[derive(Clone, Copy, Debug)]
struct Settings {
    filter: Filter,
    coordinates: Coordinates,
    antialias: bool,
    exclude_outside: bool,
}

/// Per output position: source indices and weights (`taps` each), or `None` where the position
/// lies outside the input (tf_crop_and_resize: the extrapolation value).
type Rows = Vec<Option<Vec<(i64, f64)>>>;

/// The reference's `_interpolate_1d_along_axis`, as a table.
fn axis_taps(s: &Settings, in_len: usize, out_len: usize, scale: f64, roi: (f64, f64)) -> Rows {
    let input_width = in_len as f64;
    let output_width = scale * input_width;
    let mut rows = Vec::with_capacity(out_len);
    for j in 0..out_len {
        let y = j as f64;
        let x_ori = match s.coordinates {
            Coordinates::AlignCorners => {
                if output_width == 1.0 {
                    0.0
                } else {
                    y * (input_width - 1.0) / (output_width - 1.0)
                }
            }
            Coordinates::Asymmetric => y / scale,
            Coordinates::TfCropAndResize => {
                let x = if output_width == 1.0 {
                    (roi.1 - roi.0) * (input_width - 1.0) / 2.0
                } else {
                    y * (roi.1 - roi.0) * (input_width - 1.0) / (output_width - 1.0)
                };
                x + roi.0 * (input_width - 1.0)
            }
            Coordinates::PytorchHalfPixel => {
                if output_width == 1.0 {
                    -0.5
                } else {
                    (y + 0.5) / scale - 0.5
                }
            }
            Coordinates::HalfPixel => (y + 0.5) / scale - 0.5,
            Coordinates::HalfPixelSymmetric => {
                let adjustment = out_len as f64 / output_width;
                let offset = input_width / 2.0 * (1.0 - adjustment);
                offset + (y + 0.5) / scale - 0.5
            }
        };
        if s.coordinates == Coordinates::TfCropAndResize
            && (x_ori < 0.0 || x_ori > input_width - 1.0)
        {
            rows.push(None);
            continue;
        }
        let floor = x_ori.floor();
        let ratio = if x_ori == floor { 1.0 } else { x_ori - floor };
        let mut coeffs = coefficients(s, ratio, scale);
        let n = coeffs.len() as i64;
        let pad = (n + 1) / 2;
        // `floor(x_ori + pad)` and its fraction, without the addition's rounding (3 + 4e-16
        // plus 1 rounds to 4.0, which would move the taps one position left).
        let p = floor + pad as f64;
        let frac = x_ori - floor;
        let offset = if n % 2 == 0 {
            if frac == 0.0 {
                -(n / 2)
            } else {
                -(n / 2) + 1
            }
        } else {
            let base = -((n - 1) / 2);
            if frac <= 0.5 {
                base
            } else {
                base + 1
            }
        };
        let start = p as i64 + offset - pad;
        if s.exclude_outside {
            for (k, c) in coeffs.iter_mut().enumerate() {
                let i = start + k as i64;
                if i < 0 || i >= in_len as i64 {
                    *c = 0.0;
                }
            }
            let sum: f64 = coeffs.iter().sum();
            let sum = if sum == 0.0 { 1.0 } else { sum };
            coeffs.iter_mut().for_each(|c| *c /= sum);
        }
        // Edge padding is clamping; taps that land on one index merge, zero weights drop.
        let mut taps: Vec<(i64, f64)> = Vec::new();
        for (k, &c) in coeffs.iter().enumerate() {
            let i = (start + k as i64).clamp(0, in_len as i64 - 1);
            match taps.iter_mut().find(|t| t.0 == i) {
                Some(t) => t.1 += c,
                None => taps.push((i, c)),
            }
        }
        taps.retain(|t| t.1 != 0.0);
        if taps.is_empty() {
            taps.push((start.clamp(0, in_len as i64 - 1), 0.0));
        }
        rows.push(Some(taps));
    }
    rows
}

/// The reference's coefficient functions for one output position.
fn coefficients(s: &Settings, ratio: f64, scale: f64) -> Vec<f64> {
    match s.filter {
        Filter::Nearest(mode) => {
            if ratio.fract() == 0.0 {
                return vec![0.0, 1.0];
            }
            let upper = match mode {
                Nearest::RoundPreferFloor => ratio > 0.5,
                Nearest::RoundPreferCeil => ratio >= 0.5,
                Nearest::Floor => false,
                Nearest::Ceil => true,
            };
            if upper {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        }
        Filter::Linear if s.antialias => {
            let scale = scale.min(1.0);
            let start = (-1.0 / scale).floor() as i64 + 1;
            let footprint = 2 - 2 * start;
            let coeffs: Vec<f64> = (start..start + footprint)
                .map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0))
                .collect();
            normalised(coeffs)
        }
        Filter::Linear => vec![1.0 - ratio, ratio],
        Filter::Cubic(a) if s.antialias => {
            let scale = scale.min(1.0);
            let cubic = |x: f64| {
                let x = x.abs();
                let (x2, x3) = (x * x, x * x * x);
                if x <= 1.0 {
                    (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                } else if x < 2.0 {
                    a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                } else {
                    0.0
                }
            };
            let start = (-2.0 / scale).floor() as i64 + 1;
            let end = 2 - start;
            normalised(
                (start..end)
                    .map(|i| cubic(scale * (i as f64 - ratio)))
                    .collect(),
            )
        }
        Filter::Cubic(a) => {
            let r = ratio;
            let q = 1.0 - r;
            vec![
                ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                ((a * (q + 1.0) - 5.0 * a) * (q + 1.0) + 8.0 * a) * (q + 1.0) - 4.0 * a,
            ]
        }
    }
}

fn normalised(coeffs: Vec<f64>) -> Vec<f64> {
    let sum: f64 = coeffs.iter().sum();
    coeffs.into_iter().map(|c| c / sum).collect()
}

/// Reads the attributes of a Resize (or Upsample) node.
fn settings(lw: &Lowerer, node: &Node) -> Result<Settings, Reason> {
    let legacy = node.op_type == "Upsample" || lw.opset() < 11;
    let mode = node.string("mode", "nearest")?;
    let nearest = match node.string("nearest_mode", "round_prefer_floor")?.as_str() {
        _ if legacy => Nearest::Floor,
        "round_prefer_floor" => Nearest::RoundPreferFloor,
        "round_prefer_ceil" => Nearest::RoundPreferCeil,
        "floor" => Nearest::Floor,
        "ceil" => Nearest::Ceil,
        other => return Err(format!("nearest_mode '{other}' is not a Resize mode")),
    };
    let filter = match mode.as_str() {
        "nearest" => Filter::Nearest(nearest),
        "linear" | "bilinear" | "trilinear" => Filter::Linear,
        "cubic" | "bicubic" => Filter::Cubic(node.float("cubic_coeff_a", -0.75)? as f64),
        other => return Err(format!("mode '{other}' is not a Resize mode")),
    };
    let default = if legacy { "asymmetric" } else { "half_pixel" };
    let coordinates = match node
        .string("coordinate_transformation_mode", default)?
        .as_str()
    {
        "half_pixel" => Coordinates::HalfPixel,
        "half_pixel_symmetric" => Coordinates::HalfPixelSymmetric,
        "pytorch_half_pixel" => Coordinates::PytorchHalfPixel,
        "align_corners" => Coordinates::AlignCorners,
        "asymmetric" => Coordinates::Asymmetric,
        "tf_crop_and_resize" => Coordinates::TfCropAndResize,
        other => {
            return Err(format!(
                "coordinate_transformation_mode '{other}' is not a Resize mode"
            ))
        }
    };
    let antialias = node.int("antialias", 0)? != 0;
    if antialias && matches!(filter, Filter::Nearest(_)) {
        return Err("antialias applies to linear and cubic modes only".into());
    }
    Ok(Settings {
        filter,
        coordinates,
        antialias,
        exclude_outside: node.int("exclude_outside", 0)? != 0,
    })
}

/// Float values of optional input `i` (a constant); `None` when absent or empty.
fn const_floats(
    lw: &Lowerer,
    node: &Node,
    i: usize,
    what: &str,
) -> Result<Option<Vec<f64>>, Reason> {
    match lw.optional_input(node, i) {
        None => Ok(None),
        Some(t) => match lw.value(t) {
            Some(v) if v.is_empty() => Ok(None),
            Some(v) => Ok(Some(v.to_f32s().into_iter().map(f64::from).collect())),
            None => Err(format!("{what} must be a constant (computed at pack time)")),
        },
    }
}

/// Resize and Upsample.
pub(super) fn resize(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let shape = lw.shape(x);
    let rank = shape.len();
    let s = settings(lw, node)?;
    // Where the scales, sizes and roi come from, by op and opset.
    let (roi, scales, sizes) = if node.op_type == "Upsample" && lw.opset() < 9 {
        let scales = node
            .floats("scales")?
            .ok_or("scales is required")?
            .into_iter()
            .map(f64::from)
            .collect();
        (None, Some(scales), None)
    } else if node.op_type == "Upsample" || lw.opset() < 11 {
        (None, const_floats(lw, node, 1, "scales")?, None)
    } else {
        let sizes = match lw.optional_input(node, 3) {
            None => None,
            Some(_) => lw.const_ints(node, 3, "sizes")?.filter(|v| !v.is_empty()),
        };
        (
            const_floats(lw, node, 1, "roi")?,
            const_floats(lw, node, 2, "scales")?,
            sizes,
        )
    };
    let axes: Vec<usize> = match node.ints("axes")? {
        Some(a) => a
            .iter()
            .map(|&d| normalize_axis(d, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    let mut unique = axes.clone();
    unique.sort_unstable();
    unique.dedup();
    if unique.len() != axes.len() {
        return Err("axes repeat".into());
    }
    let n = axes.len();
    // Scales and output sizes for every axis (1 and the input's size off `axes`).
    let mut scale = vec![1.0f64; rank];
    let mut out: Vec<usize> = shape.clone();
    match (&scales, &sizes) {
        (Some(_), Some(_)) => return Err("give scales or sizes, not both".into()),
        (None, None) => return Err("scales or sizes is required".into()),
        (Some(sc), None) => {
            if sc.len() != n {
                return Err(format!("{} scales for {n} axes", sc.len()));
            }
            for (&a, &v) in axes.iter().zip(sc) {
                if !(v > 0.0 && v.is_finite()) {
                    return Err(format!("scale {v} is not positive"));
                }
                scale[a] = v;
                out[a] = (v * shape[a] as f64) as usize;
            }
        }
        (None, Some(sz)) => {
            if sz.len() != n {
                return Err(format!("{} sizes for {n} axes", sz.len()));
            }
            if sz.iter().any(|&v| v < 0) {
                return Err("negative size".into());
            }
            for (&a, &v) in axes.iter().zip(sz) {
                if shape[a] == 0 {
                    return Err("cannot resize an empty axis".into());
                }
                scale[a] = v as f64 / shape[a] as f64;
                out[a] = v as usize;
            }
            let policy = node.string("keep_aspect_ratio_policy", "stretch")?;
            let common = match policy.as_str() {
                "stretch" => None,
                "not_larger" => axes.iter().map(|&a| scale[a]).reduce(f64::min),
                "not_smaller" => axes.iter().map(|&a| scale[a]).reduce(f64::max),
                other => return Err(format!("keep_aspect_ratio_policy '{other}' is unknown")),
            };
            if let Some(c) = common {
                for &a in &axes {
                    scale[a] = c;
                    out[a] = (c * shape[a] as f64 + 0.5) as usize;
                }
            }
        }
    }
    let roi_of = |a: usize| -> Result<(f64, f64), Reason> {
        match &roi {
            Some(r) if s.coordinates == Coordinates::TfCropAndResize => {
                if r.len() != 2 * n {
                    return Err(format!("roi has {} values for {n} axes", r.len()));
                }
                let k = axes.iter().position(|&b| b == a).unwrap_or(0);
                Ok((r[k], r[n + k]))
            }
            _ => Ok((0.0, 1.0)),
        }
    };
    if s.coordinates == Coordinates::TfCropAndResize && roi.is_none() {
        return Err("tf_crop_and_resize needs roi".into());
    }
    let extrapolation = node.float("extrapolation_value", 0.0)?;
    let mut current = x;
    let mut current_shape = shape.clone();
    let resized: Vec<usize> = axes
        .iter()
        .copied()
        .filter(|&a| {
            let r = roi_of(a).unwrap_or((0.0, 1.0));
            !((scale[a] - 1.0).abs() < 1e-9 && out[a] == shape[a] && r == (0.0, 1.0))
        })
        .collect();
    if resized.is_empty() {
        return lw.alias_output(node, 0, x, shape);
    }
    for (step, &a) in resized.iter().enumerate() {
        if shape[a] == 0 {
            return Err("cannot resize an empty axis".into());
        }
        let rows = axis_taps(&s, shape[a], out[a], scale[a], roi_of(a)?);
        let taps = rows
            .iter()
            .map(|r| r.as_ref().map_or(1, Vec::len))
            .max()
            .unwrap_or(1);
        let mut indices = Vec::with_capacity(out[a] * taps);
        let mut weights = Vec::with_capacity(out[a] * taps);
        for row in &rows {
            match row {
                None => {
                    indices.extend(std::iter::repeat_n(-1i64, taps));
                    weights.extend(std::iter::repeat_n(0.0f32, taps));
                }
                Some(t) => {
                    for k in 0..taps {
                        let (i, w) = t.get(k).copied().unwrap_or((t[0].0, 0.0));
                        indices.push(i);
                        weights.push(w as f32);
                    }
                }
            }
        }
        let table = vec![out[a], taps];
        let what = format!("axis{a}");
        let idx = lw.constant(
            node,
            &format!("{what}_indices"),
            HostTensor::int(DType::I32, table.clone(), indices),
        );
        let w = lw.constant(
            node,
            &format!("{what}_weights"),
            HostTensor::float(table, weights),
        );
        current_shape[a] = out[a];
        let y = if step + 1 == resized.len() {
            lw.output(node, 0, DType::F32, current_shape.clone())?
        } else {
            lw.temp(node, &what, DType::F32, current_shape.clone())
        };
        let op = Op::Resample {
            axis: a,
            extrapolation,
        };
        lw.emit(node, op, vec![Some(current), Some(idx), Some(w)], vec![y])?;
        current = y;
    }
    Ok(())
}
