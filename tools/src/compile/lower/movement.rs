//! Lowering of shape and data-movement ops: views (Reshape, Flatten, Squeeze, Unsqueeze,
//! Identity, Dropout), Transpose, Concat, Split, Slice, Pad, Gather and the reductions.

use super::attrs::Attrs;
use super::lowerer::{normalize_axis, Lowerer, Reason};
use crate::compile::ir::TensorId;
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;
use ferrite_hal::op::{BinaryOp, PadMode, ReduceOp};
use ferrite_hal::Activation;
use ferrite_hal::{DType, Op, MAX_RANK};

fn axes_list(axes: &[i64], rank: usize) -> Result<Vec<usize>, Reason> {
    let mut out = Vec::new();
    for &a in axes {
        let a = normalize_axis(a, rank)?;
        if out.contains(&a) {
            return Err(format!("axis {a} is repeated"));
        }
        out.push(a);
    }
    Ok(out)
}

pub(super) fn reshape(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let target = lw
        .const_ints(node, 1, "the Reshape target shape")?
        .ok_or("the target shape input is required")?;
    let allow_zero = node.int("allowzero", 0)? != 0;
    let src = lw.shape(x);
    let total: usize = src.iter().product();
    let mut shape = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        shape.push(match d {
            0 if !allow_zero => *src
                .get(i)
                .ok_or("a 0 in the target copies a dimension the input lacks")?,
            -1 => {
                if infer.replace(i).is_some() {
                    return Err("more than one -1 in the target shape".into());
                }
                1
            }
            d if d < 0 => return Err(format!("invalid dimension {d} in the target shape")),
            d => d as usize,
        });
    }
    if let Some(i) = infer {
        let known = super::lowerer::bounded(&shape)?;
        if known == 0 || !total.is_multiple_of(known) {
            return Err(format!("cannot infer -1: {total} elements into {target:?}"));
        }
        shape[i] = total / known;
    }
    lw.alias_output(node, 0, x, shape)
}

pub(super) fn flatten(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let s = lw.shape(x);
    let r = s.len() as i64;
    let axis = node.int("axis", 1)?;
    let axis = if axis < 0 { axis + r } else { axis };
    if !(0..=r).contains(&axis) {
        return Err(format!("axis {axis} out of range"));
    }
    let a = axis as usize;
    lw.alias_output(
        node,
        0,
        x,
        vec![s[..a].iter().product(), s[a..].iter().product()],
    )
}

pub(super) fn squeeze(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let s = lw.shape(x);
    let axes = if lw.opset() >= 13 {
        lw.const_ints(node, 1, "Squeeze axes")?
    } else {
        node.ints("axes")?
    };
    let axes = match axes {
        Some(a) => axes_list(&a, s.len())?,
        None => (0..s.len()).filter(|&i| s[i] == 1).collect(),
    };
    if axes.iter().any(|&a| s[a] != 1) {
        return Err("cannot squeeze an axis whose size is not 1".into());
    }
    let out = s
        .iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(i))
        .map(|(_, d)| *d)
        .collect();
    lw.alias_output(node, 0, x, out)
}

pub(super) fn unsqueeze(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let s = lw.shape(x);
    let axes = if lw.opset() >= 13 {
        lw.const_ints(node, 1, "Unsqueeze axes")?
    } else {
        node.ints("axes")?
    }
    .ok_or("axes are required")?;
    let rank = s.len() + axes.len();
    let axes = axes_list(&axes, rank)?;
    let mut src = s.iter();
    let out = (0..rank)
        .map(|i| {
            if axes.contains(&i) {
                1
            } else {
                *src.next().unwrap_or(&1)
            }
        })
        .collect();
    lw.alias_output(node, 0, x, out)
}

pub(super) fn identity(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let s = lw.shape(x);
    lw.alias_output(node, 0, x, s)
}

/// Dropout at inference: the identity, and a mask of all true when asked for. Training mode
/// with a non-zero ratio drops at random, which a deterministic runtime does not do.
pub(super) fn dropout(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let training = lw
        .const_ints(node, 2, "training_mode")?
        .is_some_and(|v| v.first().is_some_and(|&t| t != 0));
    let ratio = match lw.opset() >= 12 {
        true => lw.const_scalar(node, 1, "ratio")?.unwrap_or(0.5),
        false => node.float("ratio", 0.5)?,
    };
    if training && ratio != 0.0 {
        return Err(format!(
            "training_mode=1 with ratio {ratio} drops at random (inference only)"
        ));
    }
    if node.outputs.get(1).is_some_and(|o| !o.is_empty()) {
        let x = lw.input(node, 0)?;
        let shape = lw.shape(x);
        let n = super::lowerer::bounded(&shape)?;
        lw.const_output(
            node,
            1,
            crate::compile::tensor::HostTensor::int(ferrite_hal::DType::Bool, shape, vec![1; n]),
        );
    }
    identity(lw, node)
}

pub(super) fn transpose(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let s = lw.shape(x);
    let rank = s.len();
    let perm: Vec<usize> = match node.ints("perm")? {
        Some(p) => {
            let p = axes_list(&p, rank.max(1))?;
            if p.len() != rank {
                return Err("perm is not a permutation of the axes".into());
            }
            p
        }
        None => (0..rank).rev().collect(),
    };
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return lw.alias_output(node, 0, x, s);
    }
    let out = perm.iter().map(|&p| s[p]).collect();
    let y = lw.output(node, 0, lw.dtype(x), out)?;
    let mut p = [0usize; MAX_RANK];
    p[..rank].copy_from_slice(&perm);
    lw.emit(node, Op::Transpose { perm: p }, vec![Some(x)], vec![y])?;
    Ok(())
}

pub(super) fn concat(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let inputs: Vec<usize> = (0..node.inputs.len())
        .map(|i| lw.input(node, i))
        .collect::<Result<_, _>>()?;
    let first = *inputs.first().ok_or("Concat needs inputs")?;
    let s0 = lw.shape(first);
    let axis = normalize_axis(
        node.int("axis", if lw.opset() < 4 { 1 } else { i64::MIN })?,
        s0.len(),
    )
    .map_err(|_| "axis is missing or out of range".to_string())?;
    let mut out = s0.clone();
    out[axis] = 0;
    for &t in &inputs {
        let s = lw.shape(t);
        if lw.dtype(t) != lw.dtype(first) || s.len() != s0.len() {
            return Err("inputs differ in type or rank".into());
        }
        if (0..s.len()).any(|a| a != axis && s[a] != s0[a]) {
            return Err("inputs differ off the concatenation axis".into());
        }
        out[axis] += s[axis];
    }
    let y = lw.output(node, 0, lw.dtype(first), out)?;
    lw.emit(
        node,
        Op::Concat { axis },
        inputs.into_iter().map(Some).collect(),
        vec![y],
    )?;
    Ok(())
}

pub(super) fn split(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let s = lw.shape(x);
    let axis = normalize_axis(node.int("axis", 0)?, s.len())?;
    let n = node.outputs.len();
    let dim = s[axis];
    let sizes: Vec<usize> = match if lw.opset() >= 13 {
        lw.const_ints(node, 1, "Split sizes")?
    } else {
        node.ints("split")?
    } {
        Some(v) => {
            if v.len() != n || v.iter().any(|&x| x < 0) {
                return Err("split sizes do not match the outputs".into());
            }
            v.into_iter().map(|x| x as usize).collect()
        }
        None => {
            let parts = node.int("num_outputs", n as i64)?.max(1) as usize;
            if parts != n {
                return Err("num_outputs differs from the number of outputs".into());
            }
            let chunk = dim.div_ceil(parts);
            (0..parts)
                .map(|i| chunk.min(dim.saturating_sub(i * chunk)))
                .collect()
        }
    };
    if sizes.iter().try_fold(0usize, |a, &b| a.checked_add(b)) != Some(dim) {
        return Err("split sizes do not add up to the axis length".into());
    }
    let mut outputs = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let mut shape = s.clone();
        shape[axis] = len;
        outputs.push(lw.output(node, i, lw.dtype(x), shape)?);
    }
    lw.emit(node, Op::Split { axis }, vec![Some(x)], outputs)?;
    Ok(())
}

pub(super) fn slice(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let s = lw.shape(x);
    let rank = s.len();
    let (starts, ends, axes, steps) = if lw.opset() < 10 {
        (
            node.ints("starts")?.ok_or("starts are required")?,
            node.ints("ends")?.ok_or("ends are required")?,
            node.ints("axes")?,
            None,
        )
    } else {
        (
            lw.const_ints(node, 1, "Slice starts")?
                .ok_or("starts are required")?,
            lw.const_ints(node, 2, "Slice ends")?
                .ok_or("ends are required")?,
            lw.const_ints(node, 3, "Slice axes")?,
            lw.const_ints(node, 4, "Slice steps")?,
        )
    };
    let axes = match axes {
        Some(a) => axes_list(&a, rank)?,
        None if starts.len() <= rank => (0..starts.len()).collect(),
        None => return Err("more starts than axes".into()),
    };
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err("starts, ends, axes and steps differ in length".into());
    }
    let mut first = [0usize; MAX_RANK];
    let mut step = [1isize; MAX_RANK];
    let mut out = s.clone();
    for (i, &axis) in axes.iter().enumerate() {
        let d = s[axis] as i64;
        let st = steps[i];
        if st == 0 {
            return Err("slice step 0".into());
        }
        let clamp = |v: i64, lo: i64, hi: i64| v.max(lo).min(hi);
        let mut b = starts[i];
        let mut e = ends[i];
        if b < 0 {
            b = b.saturating_add(d);
        }
        if e < 0 {
            e = e.saturating_add(d);
        }
        let (b, e) = if st > 0 {
            (clamp(b, 0, d), clamp(e, 0, d))
        } else {
            (clamp(b, 0, d - 1), clamp(e, -1, d - 1))
        };
        let span = e - b;
        let count = if (st > 0 && span > 0) || (st < 0 && span < 0) {
            span.unsigned_abs().div_ceil(st.unsigned_abs())
        } else {
            0
        };
        out[axis] = count as usize;
        if count > 0 {
            first[axis] = b as usize;
            // A step longer than the axis reads one element; clamp it so it fits the encoding.
            step[axis] = st.clamp(-d.max(1), d.max(1)) as isize;
        }
    }
    let y = lw.output(node, 0, lw.dtype(x), out)?;
    lw.emit(
        node,
        Op::Slice {
            starts: first,
            steps: step,
        },
        vec![Some(x)],
        vec![y],
    )?;
    Ok(())
}

pub(super) fn pad(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let mut x = lw.input(node, 0)?;
    let mut s = lw.shape(x);
    let rank = s.len();
    // Wrap is planned as one constant-index Gather per padded axis.
    let (mode, wrap) = match node.string("mode", "constant")?.as_str() {
        "constant" => (PadMode::Constant, false),
        "reflect" => (PadMode::Reflect, false),
        "edge" => (PadMode::Edge, false),
        "wrap" => (PadMode::Constant, true),
        other => return Err(format!("pad mode '{other}' is not supported")),
    };
    // A constant_value computed at run time: pad with zeros, then a Where on the (constant)
    // mask of the input's region puts the value in the border.
    let runtime_value = match lw.optional_input(node, 2) {
        Some(v) if lw.opset() >= 11 && lw.value(v).is_none() => Some(v),
        _ => None,
    };
    let (pads, value, axes) = if lw.opset() < 11 {
        (
            node.ints("pads")?.ok_or("pads are required")?,
            node.float("value", 0.0)?,
            None,
        )
    } else {
        let value = match runtime_value {
            Some(_) => 0.0,
            None => lw
                .const_scalar(node, 2, "Pad constant_value")?
                .unwrap_or(0.0),
        };
        (
            lw.const_ints(node, 1, "Pad pads")?
                .ok_or("pads are required")?,
            value,
            lw.const_ints(node, 3, "Pad axes")?,
        )
    };
    let axes = match axes {
        Some(a) => axes_list(&a, rank)?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err("pads must have two values per axis".into());
    }
    let limit = crate::compile::tensor::MAX_CONSTANT_ELEMENTS as i64;
    if pads.iter().any(|&p| p.abs() > limit) {
        return Err("pads are too large".into());
    }
    // Negative pads crop: a Slice first, then the padding on what is left.
    let mut crop = [[0usize; 2]; MAX_RANK];
    for (i, &a) in axes.iter().enumerate() {
        crop[a] = [
            (-pads[i]).max(0) as usize,
            (-pads[i + axes.len()]).max(0) as usize,
        ];
    }
    if crop.iter().any(|c| c[0] + c[1] > 0) {
        let mut starts = [0usize; MAX_RANK];
        let mut cropped = s.clone();
        for a in 0..rank {
            let [b, e] = crop[a];
            if b + e > s[a] {
                return Err(format!(
                    "pads crop {} elements from an axis of {}",
                    b + e,
                    s[a]
                ));
            }
            starts[a] = b;
            cropped[a] = s[a] - b - e;
        }
        let y = lw.temp(node, "cropped", lw.dtype(x), cropped.clone());
        let step = Op::Slice {
            starts,
            steps: [1; MAX_RANK],
        };
        lw.emit(node, step, vec![Some(x)], vec![y])?;
        (x, s) = (y, cropped);
    }
    let mut begins = [0usize; MAX_RANK];
    let mut ends = [0usize; MAX_RANK];
    let mut out = s.clone();
    for (i, &a) in axes.iter().enumerate() {
        begins[a] = pads[i].max(0) as usize;
        ends[a] = pads[i + axes.len()].max(0) as usize;
        out[a] += begins[a] + ends[a];
        let padded = begins[a] + ends[a] > 0;
        if mode == PadMode::Reflect && padded && (begins[a] >= s[a] || ends[a] >= s[a]) {
            return Err("reflect padding must be smaller than the axis".into());
        }
        if (mode == PadMode::Edge || wrap) && padded && s[a] == 0 {
            return Err("edge or wrap padding of an empty axis".into());
        }
    }
    if wrap {
        return wrap_pad(lw, node, x, &s, &begins, &ends);
    }
    let step = Op::Pad {
        mode,
        begins,
        ends,
        value,
    };
    let Some(fill) = runtime_value else {
        let y = lw.output(node, 0, lw.dtype(x), out)?;
        return lw.emit(node, step, vec![Some(x)], vec![y]);
    };
    if mode != PadMode::Constant {
        return Err("constant_value is only read by mode 'constant'".into());
    }
    let dtype = lw.dtype(x);
    if lw.dtype(fill) != dtype {
        return Err(format!(
            "Pad constant_value is {}, the input {dtype}",
            lw.dtype(fill)
        ));
    }
    if lw.shape(fill).iter().product::<usize>() != 1 {
        return Err("Pad constant_value must be a scalar".into());
    }
    let fill = if lw.shape(fill).is_empty() {
        fill
    } else {
        lw.temp_alias(node, "fill", fill, vec![])
    };
    let count: usize = s.iter().product();
    let inside = lw.constant(
        node,
        "inside",
        HostTensor::int(DType::Bool, s.clone(), vec![1; count]),
    );
    // Folded at pack time: true where the output holds the input.
    let mask = lw.temp(node, "mask", DType::Bool, out.clone());
    lw.emit(node, step, vec![Some(inside)], vec![mask])?;
    let padded = lw.temp(node, "zero_padded", dtype, out.clone());
    lw.emit(node, step, vec![Some(x)], vec![padded])?;
    let y = lw.output(node, 0, dtype, out)?;
    lw.emit(
        node,
        Op::Where,
        vec![Some(mask), Some(padded), Some(fill)],
        vec![y],
    )
}

/// CenterCropPad: each listed axis cropped or zero-padded to its target size, centred (an odd
/// difference leaves the extra element at the end, as ONNX's reference does): a Slice for the
/// axes that shrink, then a Pad for those that grow.
pub(super) fn center_crop_pad(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let s = lw.shape(x);
    let rank = s.len();
    let target = lw
        .const_ints(node, 1, "CenterCropPad shape")?
        .ok_or("shape is required")?;
    let axes = match node.ints("axes")? {
        Some(a) => axes_list(&a, rank)?,
        None => (0..rank).collect(),
    };
    if target.len() != axes.len() {
        return Err(format!(
            "shape has {} values for {} axes",
            target.len(),
            axes.len()
        ));
    }
    let limit = crate::compile::tensor::MAX_CONSTANT_ELEMENTS as i64;
    let (mut starts, mut cropped) = ([0usize; MAX_RANK], s.clone());
    let (mut begins, mut ends, mut out) = ([0usize; MAX_RANK], [0usize; MAX_RANK], s.clone());
    for (&a, &t) in axes.iter().zip(&target) {
        if !(0..=limit).contains(&t) {
            return Err(format!("target size {t} is out of range"));
        }
        let (n, t) = (s[a], t as usize);
        if t < n {
            starts[a] = (n - t) / 2;
            cropped[a] = t;
        } else {
            begins[a] = (t - n) / 2;
            ends[a] = t - n - begins[a];
        }
        out[a] = t;
    }
    let dtype = lw.dtype(x);
    let grows = begins.iter().chain(&ends).any(|&p| p > 0);
    let mut y = x;
    if cropped != s {
        y = if grows {
            lw.temp(node, "cropped", dtype, cropped.clone())
        } else {
            lw.output(node, 0, dtype, cropped.clone())?
        };
        let step = Op::Slice {
            starts,
            steps: [1; MAX_RANK],
        };
        lw.emit(node, step, vec![Some(x)], vec![y])?;
    }
    if grows {
        let padded = lw.output(node, 0, dtype, out)?;
        let step = Op::Pad {
            mode: PadMode::Constant,
            begins,
            ends,
            value: 0.0,
        };
        lw.emit(node, step, vec![Some(y)], vec![padded])?;
    } else if cropped == s {
        lw.alias_output(node, 0, x, s)?;
    }
    Ok(())
}

/// Wrap padding: along each padded axis, output index `j` reads input index `(j − begin) mod
/// n` (numpy's `wrap`, any pad size): a Gather with constant indices per axis.
fn wrap_pad(
    lw: &mut Lowerer,
    node: &Node,
    mut x: TensorId,
    s: &[usize],
    begins: &[usize; MAX_RANK],
    ends: &[usize; MAX_RANK],
) -> Result<(), Reason> {
    let padded: Vec<usize> = (0..s.len()).filter(|&a| begins[a] + ends[a] > 0).collect();
    let mut shape = s.to_vec();
    for (k, &a) in padded.iter().enumerate() {
        let (n, len) = (s[a] as i64, s[a] + begins[a] + ends[a]);
        let indices: Vec<i64> = (0..len as i64)
            .map(|j| (j - begins[a] as i64).rem_euclid(n))
            .collect();
        let idx = lw.constant(
            node,
            &format!("wrap{a}"),
            HostTensor::int(DType::I64, vec![len], indices),
        );
        shape[a] = len;
        let y = if k + 1 == padded.len() {
            lw.output(node, 0, lw.dtype(x), shape.clone())?
        } else {
            lw.temp(node, &format!("wrapped{a}"), lw.dtype(x), shape.clone())
        };
        lw.emit(
            node,
            Op::Gather { axis: a },
            vec![Some(x), Some(idx)],
            vec![y],
        )?;
        x = y;
    }
    if padded.is_empty() {
        lw.alias_output(node, 0, x, shape)?;
    }
    Ok(())
}

pub(super) fn gather(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let idx = lw.input(node, 1)?;
    let s = lw.shape(x);
    let axis = normalize_axis(node.int("axis", 0)?, s.len())?;
    if !matches!(
        lw.dtype(idx),
        ferrite_hal::DType::I32 | ferrite_hal::DType::I64
    ) {
        return Err("indices must be int32 or int64".into());
    }
    if let Some(v) = lw.value(idx) {
        let d = s[axis] as i64;
        if let Some(bad) = v.to_i64s().into_iter().find(|&i| i < -d || i >= d) {
            return Err(format!("index {bad} is out of range for an axis of {d}"));
        }
    }
    let mut out = s[..axis].to_vec();
    out.extend(lw.shape(idx));
    out.extend(&s[axis + 1..]);
    let y = lw.output(node, 0, lw.dtype(x), out)?;
    lw.emit(node, Op::Gather { axis }, vec![Some(x), Some(idx)], vec![y])?;
    Ok(())
}

pub(super) fn reduce(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let mut x = lw.input(node, 0)?;
    // The maximum (any) and minimum (all) of bools: reduced as 0.0 / 1.0, cast back.
    let boolean =
        lw.dtype(x) == DType::Bool && matches!(node.op_type.as_str(), "ReduceMax" | "ReduceMin");
    if boolean {
        let as_f32 = lw.temp(node, "as_f32", DType::F32, lw.shape(x));
        lw.emit(node, Op::Convert, vec![Some(x)], vec![as_f32])?;
        x = as_f32;
    }
    lw.require_f32(&[x])?;
    let s = lw.shape(x);
    let op = match node.op_type.as_str() {
        "ReduceMean" => Some(ReduceOp::Mean),
        "ReduceSum" => Some(ReduceOp::Sum),
        "ReduceMax" => Some(ReduceOp::Max),
        "ReduceMin" => Some(ReduceOp::Min),
        "ReduceProd" => Some(ReduceOp::Prod),
        "ReduceL1" => Some(ReduceOp::L1),
        "ReduceL2" => Some(ReduceOp::L2),
        "ReduceLogSum" => Some(ReduceOp::LogSum),
        "ReduceSumSquare" => Some(ReduceOp::SumSquare),
        // ReduceLogSumExp: composed below.
        _ => None,
    };
    let axes_as_input = if op == Some(ReduceOp::Sum) {
        lw.opset() >= 13
    } else {
        lw.opset() >= 18
    };
    let axes = if axes_as_input {
        lw.const_ints(node, 1, "reduction axes")?
    } else {
        node.ints("axes")?
    };
    let keep = node.int("keepdims", 1)? != 0;
    let axes = match axes {
        Some(a) if !a.is_empty() => axes_list(&a, s.len())?,
        _ if node.int("noop_with_empty_axes", 0)? != 0 => return identity(lw, node),
        _ => (0..s.len()).collect(),
    };
    let mask = axes.iter().fold(0u32, |m, &a| m | 1 << a);
    let kept: Vec<usize> = s
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect();
    let out: Vec<usize> = s
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keep) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(d),
        })
        .collect();
    let Some(op) = op else {
        return log_sum_exp(lw, node, x, mask, kept, out);
    };
    if boolean {
        let reduced = lw.temp(node, "reduced", DType::F32, out.clone());
        lw.emit(
            node,
            Op::Reduce { op, axes: mask },
            vec![Some(x)],
            vec![reduced],
        )?;
        let y = lw.output(node, 0, DType::Bool, out)?;
        return lw.emit(node, Op::Convert, vec![Some(reduced)], vec![y]);
    }
    let y = lw.output(node, 0, lw.dtype(x), out)?;
    lw.emit(node, Op::Reduce { op, axes: mask }, vec![Some(x)], vec![y])?;
    Ok(())
}

/// ReduceLogSumExp without overflow: `m + ln Σ e^(x − m)` with `m` the maximum over the axes
/// (kept as 1s in `kept`), as Reduce, Binary and Unary steps.
fn log_sum_exp(
    lw: &mut Lowerer,
    node: &Node,
    x: TensorId,
    axes: u32,
    kept: Vec<usize>,
    out: Vec<usize>,
) -> Result<(), Reason> {
    let f32 = ferrite_hal::DType::F32;
    let reduce = |op| Op::Reduce { op, axes };
    let binary = |op| Op::Binary {
        op,
        activation: Activation::None,
    };
    let max = lw.temp(node, "max", f32, kept.clone());
    lw.emit(node, reduce(ReduceOp::Max), vec![Some(x)], vec![max])?;
    let shifted = lw.temp(node, "shifted", f32, lw.shape(x));
    lw.emit(
        node,
        binary(BinaryOp::Sub),
        vec![Some(x), Some(max)],
        vec![shifted],
    )?;
    let exp = lw.temp(node, "exp", f32, lw.shape(x));
    lw.emit(
        node,
        Op::Unary(Activation::Exp),
        vec![Some(shifted)],
        vec![exp],
    )?;
    let sum = lw.temp(node, "sum", f32, kept.clone());
    lw.emit(node, reduce(ReduceOp::LogSum), vec![Some(exp)], vec![sum])?;
    let y = lw.temp(node, "log_sum_exp", f32, kept);
    lw.emit(
        node,
        binary(BinaryOp::Add),
        vec![Some(sum), Some(max)],
        vec![y],
    )?;
    lw.alias_output(node, 0, y, out)
}

pub(super) fn trilu(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let shape = lw.shape(x);
    if shape.len() < 2 {
        return Err("the input must have rank 2 or more".into());
    }
    let k = match lw.const_ints(node, 1, "k")? {
        Some(v) if v.len() == 1 => v[0],
        Some(_) => return Err("k must be one value".into()),
        None => 0,
    };
    // Offsets beyond the matrix act like the nearest one that keeps all or nothing.
    let k = k.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
    let upper = node.int("upper", 1)? != 0;
    let y = lw.output(node, 0, lw.dtype(x), shape)?;
    lw.emit(node, Op::Trilu { upper, k }, vec![Some(x)], vec![y])
}
