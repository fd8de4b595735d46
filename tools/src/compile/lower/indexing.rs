//! Broadcasting and data-dependent indexing: Expand, Tile, GatherElements, ScatterElements
//! (and the older Scatter), GatherND, ScatterND, TopK and CumSum. Shape-like inputs (target
//! shapes, repeats, k, axes) must be constants; index tensors may be run-time data, which the
//! kernels check.

use super::attrs::Attrs;
use super::lowerer::{bounded, normalize_axis, Lowerer, Reason};
use super::window::hal_shape;
use crate::compile::ir::TensorId;
use crate::compile::onnx::Node;
use ferrite_hal::geometry::broadcast;
use ferrite_hal::op::Reduction;
use ferrite_hal::{DType, Op};

/// Expand: the input broadcast to the target shape (numpy rules: either side may be 1).
pub(super) fn expand(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let target = lw
        .const_ints(node, 1, "the Expand shape")?
        .ok_or("shape is required")?;
    if target.iter().any(|&d| d < 0) {
        return Err("negative dimension in the target shape".into());
    }
    let target: Vec<usize> = target.iter().map(|&d| d as usize).collect();
    bounded(&target)?;
    let out = broadcast(&hal_shape(&lw.shape(x))?, &hal_shape(&target)?)
        .ok_or("the input does not broadcast to the target shape")?;
    let out = out.dims().to_vec();
    if out == lw.shape(x) {
        return lw.alias_output(node, 0, x, out);
    }
    let y = lw.output(node, 0, lw.dtype(x), out)?;
    lw.emit(node, Op::Expand, vec![Some(x)], vec![y])
}

/// Tile: `x` viewed as `[1, d0, 1, d1, ...]`, expanded to `[r0, d0, r1, d1, ...]` and viewed as
/// `[r0·d0, r1·d1, ...]`.
pub(super) fn tile(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let shape = lw.shape(x);
    let repeats = lw
        .const_ints(node, 1, "the Tile repeats")?
        .ok_or("repeats is required")?;
    if repeats.len() != shape.len() {
        return Err(format!(
            "{} repeats for an input of rank {}",
            repeats.len(),
            shape.len()
        ));
    }
    if repeats.iter().any(|&r| r < 0) {
        return Err("negative repeat".into());
    }
    if 2 * shape.len() > ferrite_hal::MAX_RANK {
        return Err(format!(
            "Tile supports inputs up to rank {}",
            ferrite_hal::MAX_RANK / 2
        ));
    }
    let interleaved: Vec<usize> = shape.iter().flat_map(|&d| [1, d]).collect();
    let expanded: Vec<usize> = shape
        .iter()
        .zip(&repeats)
        .flat_map(|(&d, &r)| [r as usize, d])
        .collect();
    let out: Vec<usize> = shape
        .iter()
        .zip(&repeats)
        .map(|(&d, &r)| d * r as usize)
        .collect();
    bounded(&expanded)?;
    let view = lw.temp_alias(node, "interleaved", x, interleaved);
    let big = lw.temp(node, "expanded", lw.dtype(x), expanded);
    lw.emit(node, Op::Expand, vec![Some(view)], vec![big])?;
    lw.alias_output(node, 0, big, out)
}

/// Requires an int32/int64 index tensor.
fn index_input(lw: &Lowerer, node: &Node, i: usize) -> Result<ferrite_hal::DType, Reason> {
    let t = lw.input(node, i)?;
    match lw.dtype(t) {
        d @ (DType::I32 | DType::I64) => Ok(d),
        d => Err(format!("indices are {d}, not int32 or int64")),
    }
}

/// The `reduction` attribute of a scatter whose updates and data are `up` and `data`:
/// reductions compute in f32.
fn reduction(lw: &Lowerer, node: &Node, data: TensorId, up: TensorId) -> Result<Reduction, Reason> {
    if lw.dtype(up) != lw.dtype(data) {
        return Err("updates and data have different types".into());
    }
    let r = scatter_reduction(node)?;
    if r != Reduction::None && lw.dtype(data) != DType::F32 {
        return Err(format!(
            "type {} is not supported for scatter reductions",
            lw.dtype(data)
        ));
    }
    Ok(r)
}

/// The `reduction` attribute's value.
fn scatter_reduction(node: &Node) -> Result<Reduction, Reason> {
    Ok(match node.string("reduction", "none")?.as_str() {
        "none" => Reduction::None,
        "add" => Reduction::Add,
        "mul" => Reduction::Mul,
        "max" => Reduction::Max,
        "min" => Reduction::Min,
        other => return Err(format!("reduction '{other}' is unknown")),
    })
}

/// GatherElements.
pub(super) fn gather_elements(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (data, idx) = (lw.input(node, 0)?, lw.input(node, 1)?);
    index_input(lw, node, 1)?;
    let (ds, is) = (lw.shape(data), lw.shape(idx));
    if ds.len() != is.len() || ds.is_empty() {
        return Err("data and indices must have one rank (at least 1)".into());
    }
    let axis = normalize_axis(node.int("axis", 0)?, ds.len())?;
    if (0..ds.len()).any(|d| d != axis && is[d] > ds[d]) {
        return Err("indices are larger than the data off the gather axis".into());
    }
    let y = lw.output(node, 0, lw.dtype(data), is)?;
    let op = Op::GatherElements { axis };
    lw.emit(node, op, vec![Some(data), Some(idx)], vec![y])
}

/// ScatterElements (and Scatter, its older name without reductions).
pub(super) fn scatter_elements(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (data, idx, up) = (lw.input(node, 0)?, lw.input(node, 1)?, lw.input(node, 2)?);
    index_input(lw, node, 1)?;
    let (ds, is) = (lw.shape(data), lw.shape(idx));
    if ds.len() != is.len() || ds.is_empty() || lw.shape(up) != is {
        return Err(
            "data, indices and updates must have one rank; updates the indices' shape".into(),
        );
    }
    let axis = normalize_axis(node.int("axis", 0)?, ds.len())?;
    if (0..ds.len()).any(|d| d != axis && is[d] > ds[d]) {
        return Err("indices are larger than the data off the scatter axis".into());
    }
    let reduction = reduction(lw, node, data, up)?;
    let y = lw.output(node, 0, lw.dtype(data), ds)?;
    let op = Op::ScatterElements { axis, reduction };
    lw.emit(node, op, vec![Some(data), Some(idx), Some(up)], vec![y])
}

/// The tuple length of GatherND/ScatterND indices, checked against the data.
fn nd_depth(ds: &[usize], is: &[usize], batch_dims: usize) -> Result<usize, Reason> {
    let q = *is.last().ok_or("indices must have rank 1 or more")?;
    if batch_dims >= is.len() || batch_dims + q > ds.len() || q == 0 {
        return Err(format!(
            "index tuples of {q} (batch_dims {batch_dims}) do not fit data of rank {}",
            ds.len()
        ));
    }
    if ds[..batch_dims] != is[..batch_dims] {
        return Err("batch dims of data and indices differ".into());
    }
    Ok(q)
}

/// GatherND.
pub(super) fn gather_nd(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (data, idx) = (lw.input(node, 0)?, lw.input(node, 1)?);
    index_input(lw, node, 1)?;
    let (ds, is) = (lw.shape(data), lw.shape(idx));
    let batch_dims = node.int("batch_dims", 0)?;
    if batch_dims < 0 {
        return Err(format!("batch_dims {batch_dims} is negative"));
    }
    let b = batch_dims as usize;
    let q = nd_depth(&ds, &is, b)?;
    let mut out: Vec<usize> = is[..is.len() - 1].to_vec();
    out.extend_from_slice(&ds[b + q..]);
    let y = lw.output(node, 0, lw.dtype(data), out)?;
    let op = Op::GatherNd { batch_dims: b };
    lw.emit(node, op, vec![Some(data), Some(idx)], vec![y])
}

/// ScatterND.
pub(super) fn scatter_nd(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (data, idx, up) = (lw.input(node, 0)?, lw.input(node, 1)?, lw.input(node, 2)?);
    index_input(lw, node, 1)?;
    let (ds, is, us) = (lw.shape(data), lw.shape(idx), lw.shape(up));
    let q = nd_depth(&ds, &is, 0)?;
    let mut want: Vec<usize> = is[..is.len() - 1].to_vec();
    want.extend_from_slice(&ds[q..]);
    if us != want {
        return Err(format!("updates are {us:?}, not {want:?}"));
    }
    let reduction = reduction(lw, node, data, up)?;
    let y = lw.output(node, 0, lw.dtype(data), ds)?;
    let op = Op::ScatterNd { reduction };
    lw.emit(node, op, vec![Some(data), Some(idx), Some(up)], vec![y])
}

/// TopK, with `k` from the constant input (opset 10+) or the attribute.
pub(super) fn top_k(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let dtype = lw.dtype(x);
    if dtype != DType::F32 && !dtype.is_integer() {
        return Err(format!("type {dtype} is not supported for TopK"));
    }
    let shape = lw.shape(x);
    let axis = normalize_axis(node.int("axis", -1)?, shape.len())?;
    let k = if lw.opset() >= 10 {
        match lw.const_ints(node, 1, "k")?.as_deref() {
            Some([k]) => *k,
            _ => return Err("k must be one value".into()),
        }
    } else {
        node.int("k", -1)?
    };
    if k < 0 || k as usize > shape[axis] {
        return Err(format!("k {k} is outside 0..={}", shape[axis]));
    }
    let largest = node.int("largest", 1)? != 0;
    let mut out = shape;
    out[axis] = k as usize;
    let values = lw.output(node, 0, dtype, out.clone())?;
    let indices = lw.output(node, 1, DType::I64, out)?;
    let op = Op::TopK { axis, largest };
    lw.emit(node, op, vec![Some(x)], vec![values, indices])
}

/// CumSum, with the axis from its constant input.
pub(super) fn cum_sum(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let dtype = lw.dtype(x);
    if !matches!(dtype, DType::F32 | DType::I32 | DType::I64) {
        return Err(format!("type {dtype} is not supported for CumSum"));
    }
    let shape = lw.shape(x);
    let axis = match lw.const_ints(node, 1, "the CumSum axis")?.as_deref() {
        Some([a]) => normalize_axis(*a, shape.len())?,
        _ => return Err("axis must be one value".into()),
    };
    let op = Op::CumSum {
        axis,
        exclusive: node.int("exclusive", 0)? != 0,
        reverse: node.int("reverse", 0)? != 0,
    };
    let y = lw.output(node, 0, dtype, shape)?;
    lw.emit(node, op, vec![Some(x)], vec![y])
}

/// NonZero of a constant: the indices of its non-zero elements, `[rank, count]` int64, folded
/// at pack time. On run-time data the count is data-dependent and the node is refused.
pub(super) fn non_zero(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let Some(v) = lw.value(x) else {
        return Err(format!("NonZero: {}", super::lowerer::DATA_DEPENDENT));
    };
    let shape = v.shape.clone();
    let strides: Vec<usize> = (0..shape.len())
        .map(|d| shape[d + 1..].iter().product())
        .collect();
    let hits: Vec<usize> = match &v.data {
        crate::compile::tensor::Data::Float(f) => (0..f.len()).filter(|&i| f[i] != 0.0).collect(),
        crate::compile::tensor::Data::Int(n) => (0..n.len()).filter(|&i| n[i] != 0).collect(),
    };
    let mut out = Vec::with_capacity(shape.len() * hits.len());
    for d in 0..shape.len() {
        out.extend(
            hits.iter()
                .map(|&i| ((i / strides[d]) % shape[d].max(1)) as i64),
        );
    }
    let value =
        crate::compile::tensor::HostTensor::int(DType::I64, vec![shape.len(), hits.len()], out);
    lw.const_output(node, 0, value);
    Ok(())
}
