//! Preprocessing and encoding: Scaler, Normalizer, Binarizer, Imputer, ArrayFeatureExtractor,
//! OneHotEncoder, LabelEncoder, and ZipMap.

use super::common::*;
use ferrite_hal::op::{CompareOp, Detect, ReduceOp};

/// Scaler: `(x − offset) · scale` per feature.
pub(super) fn scaler(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    let offset = node.floats("offset")?.unwrap_or_else(|| vec![0.0]);
    let scale = node.floats("scale")?.unwrap_or_else(|| vec![1.0]);
    let (offset, scale) = (
        per_feature(lw, node, "offset", offset, f)?,
        per_feature(lw, node, "scale", scale, f)?,
    );
    let centred = lw.temp(node, "centred", DType::F32, vec![n, f]);
    lw.emit(
        node,
        plain(BinaryOp::Sub),
        vec![Some(x), Some(offset)],
        vec![centred],
    )?;
    let y = lw.output(node, 0, DType::F32, vec![n, f])?;
    lw.emit(
        node,
        plain(BinaryOp::Mul),
        vec![Some(centred), Some(scale)],
        vec![y],
    )
}

/// Normalizer: each row divided by its maximum (`MAX`), sum of magnitudes (`L1`) or Euclidean
/// norm (`L2`), as onnxruntime does (no guard against a zero row).
pub(super) fn normalizer(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    let op = match node.string("norm", "MAX")?.as_str() {
        "MAX" => ReduceOp::Max,
        "L1" => ReduceOp::L1,
        "L2" => ReduceOp::L2,
        other => return Err(format!("norm '{other}' is not MAX, L1 or L2")),
    };
    let norm = lw.temp(node, "norm", DType::F32, vec![n, 1]);
    lw.emit(
        node,
        Op::Reduce { op, axes: 1 << 1 },
        vec![Some(x)],
        vec![norm],
    )?;
    let y = lw.output(node, 0, DType::F32, vec![n, f])?;
    lw.emit(
        node,
        plain(BinaryOp::Div),
        vec![Some(x), Some(norm)],
        vec![y],
    )
}

/// Binarizer: 1 where `x > threshold`, else 0.
pub(super) fn binarizer(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let shape = lw.shape(x);
    let t = node.float("threshold", 0.0)?;
    let t = lw.constant(node, "threshold", HostTensor::float(vec![], vec![t]));
    let above = lw.temp(node, "above", DType::Bool, shape.clone());
    let greater = Op::Compare(ferrite_hal::op::CompareOp::Greater);
    lw.emit(node, greater, vec![Some(x), Some(t)], vec![above])?;
    let y = lw.output(node, 0, DType::F32, shape)?;
    lw.emit(node, Op::Convert, vec![Some(above)], vec![y])
}

/// Imputer: NaN (or `replaced_value_float`) replaced by the feature's `imputed_value_floats`.
pub(super) fn imputer(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    let values = node
        .floats("imputed_value_floats")?
        .ok_or("only float imputation (imputed_value_floats) is supported")?;
    let values = per_feature(lw, node, "imputed_value_floats", values, f)?;
    let replaced = node.float("replaced_value_float", f32::NAN)?;
    let missing = lw.temp(node, "missing", DType::Bool, vec![n, f]);
    if replaced.is_nan() {
        let nan = Detect {
            nan: true,
            positive_infinity: false,
            negative_infinity: false,
        };
        lw.emit(node, Op::Classify(nan), vec![Some(x)], vec![missing])?;
    } else {
        let r = lw.constant(node, "replaced", HostTensor::float(vec![], vec![replaced]));
        let equal = Op::Compare(ferrite_hal::op::CompareOp::Equal);
        lw.emit(node, equal, vec![Some(x), Some(r)], vec![missing])?;
    }
    let y = lw.output(node, 0, DType::F32, vec![n, f])?;
    lw.emit(
        node,
        Op::Where,
        vec![Some(missing), Some(values), Some(x)],
        vec![y],
    )
}

/// ArrayFeatureExtractor: the listed columns (last axis) of the input, as onnxruntime shapes
/// them (a vector input gives one row); the indices may be computed at run time (skl2onnx
/// picks class labels by the arg-max this way), each then checked by the Gather.
pub(super) fn array_feature_extractor(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let idx = lw.input(node, 1)?;
    let s = lw.shape(x);
    let width = *s.last().ok_or("the input is a scalar")? as i64;
    let n: usize = lw.shape(idx).iter().product();
    let idx = match lw.value(idx).map(|v| v.to_i64s()) {
        Some(columns) => {
            if let Some(bad) = columns.iter().find(|&&c| c < 0 || c >= width) {
                return Err(format!("column {bad} is out of range for {width} columns"));
            }
            lw.constant(
                node,
                "columns",
                HostTensor::int(DType::I64, vec![n], columns),
            )
        }
        None if matches!(lw.dtype(idx), DType::I64 | DType::I32) => {
            lw.temp_alias(node, "columns", idx, vec![n])
        }
        None => return Err("the column indices must be int64".into()),
    };
    let axis = s.len() - 1;
    let mut out = s.clone();
    out[axis] = n;
    if s.len() == 1 {
        let picked = lw.temp(node, "picked", lw.dtype(x), vec![n]);
        lw.emit(
            node,
            Op::Gather { axis },
            vec![Some(x), Some(idx)],
            vec![picked],
        )?;
        return lw.alias_output(node, 0, picked, vec![1, n]);
    }
    let y = lw.output(node, 0, lw.dtype(x), out)?;
    lw.emit(node, Op::Gather { axis }, vec![Some(x), Some(idx)], vec![y])
}

/// ZipMap: Ferrite has no sequence or map values, so its output is the probability tensor it
/// reads, `[N, classes]` in label order — what a C or Python caller indexes anyway.
pub(super) fn zip_map(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let output = node.outputs.first().cloned().unwrap_or_default();
    lw.graph.notes.push(format!(
        "ZipMap '{}': output '{output}' is the [N, classes] probability tensor in label order, not a sequence of maps",
        node.label()
    ));
    let shape = lw.shape(x);
    lw.alias_output(node, 0, x, shape)
}

/// OneHotEncoder (integer categories): `[..., categories]` of 1.0 where the value (truncated to
/// an integer, as onnxruntime does for floats) equals the category. With `zeros=0` onnxruntime
/// fails on an unknown value; Ferrite gives its row all zeros, and says so in a note.
pub(super) fn one_hot_encoder(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let mut x = lw.input(node, 0)?;
    if node.strings("cats_strings")?.is_some() {
        return Err(
            "string categories are not supported (string tensors); encode them as integers".into(),
        );
    }
    let cats = ints_of(node, "cats_int64s")?;
    let shape = lw.shape(x);
    match lw.dtype(x) {
        DType::I64 => {}
        DType::F32 | DType::I32 => {
            let as_int = lw.temp(node, "as_int64", DType::I64, shape.clone());
            lw.emit(node, Op::Convert, vec![Some(x)], vec![as_int])?;
            x = as_int;
        }
        other => return Err(format!("type {other} is not supported for OneHotEncoder")),
    }
    if node.int("zeros", 1)? == 0 {
        lw.graph.notes.push(format!(
            "OneHotEncoder '{}': a value outside its {} categories gives a row of zeros (onnxruntime: an error)",
            node.label(),
            cats.len()
        ));
    }
    let mut column = shape.clone();
    column.push(1);
    let column = lw.temp_alias(node, "column", x, column);
    let k = cats.len();
    let cats = lw.constant(
        node,
        "categories",
        HostTensor::int(DType::I64, vec![k], cats),
    );
    let mut out = shape;
    out.push(k);
    let hit = lw.temp(node, "is_category", DType::Bool, out.clone());
    lw.emit(
        node,
        Op::Compare(CompareOp::Equal),
        vec![Some(column), Some(cats)],
        vec![hit],
    )?;
    let y = lw.output(node, 0, DType::F32, out)?;
    lw.emit(node, Op::Convert, vec![Some(hit)], vec![y])
}

/// Most keys a LabelEncoder is planned for (one Equal and one Where step per key).
const MAX_LABEL_KEYS: usize = 1024;

/// LabelEncoder with integer or float keys and values (`*_int64s` / `*_floats`, or opset 4's
/// `*_tensor`): a chain of `Where(x == key, value, ·)` from the default, so every key maps to
/// its value and any other input to the default.
pub(super) fn label_encoder(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    if node.strings("keys_strings")?.is_some() || node.strings("values_strings")?.is_some() {
        return Err("string keys or values are not supported (string tensors)".into());
    }
    let keys = match (
        node.ints("keys_int64s")?,
        node.floats("keys_floats")?,
        node.tensor("keys_tensor")?,
    ) {
        (Some(k), _, _) => HostTensor::int(DType::I64, vec![k.len()], k),
        (_, Some(k), _) => HostTensor::float(vec![k.len()], k),
        (_, _, Some(t)) => t,
        _ => return Err("keys are required (keys_int64s, keys_floats or keys_tensor)".into()),
    };
    let (values, default) = match (
        node.ints("values_int64s")?,
        node.floats("values_floats")?,
        node.tensor("values_tensor")?,
    ) {
        (Some(v), _, _) => (
            HostTensor::int(DType::I64, vec![v.len()], v),
            HostTensor::int(DType::I64, vec![], vec![node.int("default_int64", -1)?]),
        ),
        (_, Some(v), _) => (
            HostTensor::float(vec![v.len()], v),
            HostTensor::float(vec![], vec![node.float("default_float", -0.0)?]),
        ),
        (_, _, Some(t)) => {
            // ONNX's defaults: −1 for integer values, −0.0 for floats.
            let default = match node.tensor("default_tensor")? {
                Some(d) => d,
                None if t.dtype == DType::F32 => HostTensor::float(vec![], vec![-0.0]),
                None => HostTensor::int(t.dtype, vec![], vec![-1]),
            };
            (t, default)
        }
        _ => {
            return Err(
                "values are required (values_int64s, values_floats or values_tensor)".into(),
            )
        }
    };
    let k = keys.len();
    if values.len() != k || k == 0 || k > MAX_LABEL_KEYS || default.len() != 1 {
        return Err(format!(
            "{k} keys, {} values and {} default values (one to {MAX_LABEL_KEYS} keys, one value each)",
            values.len(),
            default.len()
        ));
    }
    if lw.dtype(x) != keys.dtype {
        return Err(format!(
            "the input is {}, the keys {}",
            lw.dtype(x),
            keys.dtype
        ));
    }
    let shape = lw.shape(x);
    let out_type = values.dtype;
    let scalar_of = |t: &HostTensor, i: usize| -> HostTensor {
        if t.dtype == DType::F32 {
            HostTensor::float(vec![], vec![t.to_f32s()[i]])
        } else {
            HostTensor::int(t.dtype, vec![], vec![t.to_i64s()[i]])
        }
    };
    let mut mapped = lw.constant(
        node,
        "default",
        HostTensor {
            shape: vec![],
            ..default
        },
    );
    for i in 0..k {
        let key = lw.constant(node, &format!("key{i}"), scalar_of(&keys, i));
        let value = lw.constant(node, &format!("value{i}"), scalar_of(&values, i));
        let hit = lw.temp(node, &format!("is_key{i}"), DType::Bool, shape.clone());
        lw.emit(
            node,
            Op::Compare(CompareOp::Equal),
            vec![Some(x), Some(key)],
            vec![hit],
        )?;
        let y = if i + 1 == k {
            lw.output(node, 0, out_type, shape.clone())?
        } else {
            lw.temp(node, &format!("mapped{i}"), out_type, shape.clone())
        };
        lw.emit(
            node,
            Op::Where,
            vec![Some(hit), Some(value), Some(mapped)],
            vec![y],
        )?;
        mapped = y;
    }
    Ok(())
}
