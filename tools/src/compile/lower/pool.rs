//! Lowering of the pooling family: max, average and Lp pooling (1-D to 3-D) and global pooling.

use super::attrs::Attrs;
use super::lowerer::{Lowerer, Reason};
use super::window::{resolve_axes, resolve_window, spatial_dims, window_out};
use crate::compile::ir::TensorId;
use crate::compile::onnx::build::attr_ints;
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;
use ferrite_hal::op::{BinaryOp, Pool, ReduceOp};
use ferrite_hal::{Activation, DType, Op};

/// A pooling node's input (f32, or 8-bit integers for MaxPool), its shape, spatial dims and
/// `kernel_shape`.
type PoolInput = (TensorId, Vec<usize>, Vec<usize>, Vec<usize>);

fn pool_input(lw: &Lowerer, node: &Node) -> Result<PoolInput, Reason> {
    let x = lw.input(node, 0)?;
    // A maximum commutes with any monotone encoding: MaxPool runs on int8 and uint8 as they are.
    let integer_max = node.op_type == "MaxPool" && matches!(lw.dtype(x), DType::I8 | DType::U8);
    if !integer_max {
        lw.require_f32(&[x])?;
    }
    let xs = lw.shape(x);
    let spatial = spatial_dims(&xs, &node.op_type)?;
    let kernel = node
        .ints("kernel_shape")?
        .ok_or("kernel_shape is required")?
        .into_iter()
        .map(|k| k.max(0) as usize)
        .collect::<Vec<_>>();
    Ok((x, xs, spatial, kernel))
}

/// A 3-D pool (a rank-5 input), max, average or Lp, as two 2-D pools of the same kind: over
/// (H, W) on the view `[N, C·D, H, W]`, then over D with a `(kd, 1)` window on the view
/// `[N, C, D, H'·W']`. A box window is separable: its maximum is the maximum over D of the
/// maxima over (H, W), its sum (of `|x|^p`) the sum of the sums, and the elements an average
/// counts (with or without the padding, in ceil mode too) the product of the counts per axis.
/// `None` when the input is not rank 5.
fn pool_3d(lw: &mut Lowerer, node: &Node) -> Result<Option<()>, Reason> {
    let x = lw.input(node, 0)?;
    let &[n, c, d, h, w] = &lw.shape(x)[..] else {
        return Ok(None);
    };
    let kernel: Vec<usize> = node
        .ints("kernel_shape")?
        .ok_or("kernel_shape is required")?
        .into_iter()
        .map(|k| k.max(0) as usize)
        .collect();
    let (strides, dilations, pads) = resolve_axes(node, &[d, h, w], &kernel, false)?;
    let to_i64 = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let geometry = ["kernel_shape", "strides", "dilations", "pads", "auto_pad"];
    let kept: Vec<_> = node
        .attrs
        .iter()
        .filter(|a| !geometry.contains(&a.name.as_str()))
        .cloned()
        .collect();
    let label = node.label();
    let step = |what: &str,
                input: String,
                output: String,
                k: [usize; 2],
                s: [usize; 2],
                dl: [usize; 2],
                p: [usize; 4]| {
        let mut attrs = kept.clone();
        attrs.push(attr_ints("kernel_shape", &to_i64(&k)));
        attrs.push(attr_ints("strides", &to_i64(&s)));
        attrs.push(attr_ints("dilations", &to_i64(&dl)));
        attrs.push(attr_ints("pads", &to_i64(&p)));
        Node {
            name: format!("{label}/{what}"),
            op_type: node.op_type.clone(),
            domain: node.domain.clone(),
            inputs: vec![input],
            outputs: vec![output],
            attrs,
        }
    };
    let (planes, planes_pooled) = (format!("{label}:planes"), format!("{label}:planes_pooled"));
    let view = lw.temp_alias(node, "planes", x, vec![n, c * d, h, w]);
    lw.names.insert(planes.clone(), view);
    let hw = step(
        "hw",
        planes,
        planes_pooled.clone(),
        [kernel[1], kernel[2]],
        [strides[1], strides[2]],
        [dilations[1], dilations[2]],
        [pads[1], pads[2], pads[4], pads[5]],
    );
    // The Indices output (refused by the 2-D lowering) stays on the first step.
    let hw = Node {
        outputs: [
            hw.outputs.clone(),
            node.outputs.iter().skip(1).cloned().collect(),
        ]
        .concat(),
        ..hw
    };
    lw.lower_op(&hw)?;
    let pooled = lw
        .lookup(&planes_pooled)
        .ok_or("the (H, W) pool was not lowered")?;
    let &[_, _, h2, w2] = &lw.shape(pooled)[..] else {
        return Err("the (H, W) pool has an unexpected shape".into());
    };
    let (columns, depth_pooled) = (format!("{label}:columns"), format!("{label}:depth_pooled"));
    let view = lw.temp_alias(node, "columns", pooled, vec![n, c, d, h2 * w2]);
    lw.names.insert(columns.clone(), view);
    let depth = step(
        "d",
        columns,
        depth_pooled.clone(),
        [kernel[0], 1],
        [strides[0], 1],
        [dilations[0], 1],
        [pads[0], 0, pads[3], 0],
    );
    lw.lower_op(&depth)?;
    let out = lw
        .lookup(&depth_pooled)
        .ok_or("the D pool was not lowered")?;
    let d2 = lw.shape(out)[2];
    lw.alias_output(node, 0, out, vec![n, c, d2, h2, w2])?;
    Ok(Some(()))
}

pub(super) fn pool(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    if let Some(()) = pool_3d(lw, node)? {
        return Ok(());
    }
    let (x, xs, spatial, kernel) = pool_input(lw, node)?;
    let is_max = node.op_type == "MaxPool";
    if is_max && node.outputs.get(1).is_some_and(|o| !o.is_empty()) {
        return Err(
            "the Indices output of MaxPool is not supported (it serves MaxUnpool; export the pool without return_indices)"
                .into(),
        );
    }
    if node.int("storage_order", 0)? != 0 {
        return Err("storage_order=1 is not supported".into());
    }
    let window = resolve_window(node, &spatial, &kernel, false)?;
    let p = Pool {
        window,
        ceil_mode: node.int("ceil_mode", 0)? != 0,
        count_include_pad: node.int("count_include_pad", 0)? != 0,
    };
    for axis in 0..2 {
        let span = p.window.kernel[axis].saturating_mul(p.window.dilation[axis]);
        if p.window.pads[axis] >= span || p.window.pads[axis + 2] >= span {
            return Err("pads must be smaller than the pooling window".into());
        }
    }
    let out_spatial = window_out(&p.window, &spatial, Some(p.ceil_mode))?;
    let mut out_shape = xs[..2].to_vec();
    out_shape.extend(out_spatial);
    let dtype = lw.dtype(x);
    let y = lw.output(node, 0, dtype, out_shape)?;
    // A window that is exactly the (unpadded) input is a global pool: one contiguous pass
    // (float only: the reduction is an f32 kernel).
    let whole = if spatial.len() == 1 {
        [1, spatial[0]]
    } else {
        [spatial[0], spatial[1]]
    };
    let global = p.window.kernel == whole
        && p.window.pads == [0; 4]
        && p.window.dilation == [1, 1]
        && dtype == DType::F32;
    let op = match (global, is_max) {
        (true, false) => Op::GlobalAvgPool,
        (true, true) => Op::Reduce {
            op: ReduceOp::Max,
            axes: (2..xs.len()).fold(0u32, |m, a| m | 1 << a),
        },
        (false, true) => Op::MaxPool(p),
        (false, false) => Op::AvgPool(p),
    };
    lw.emit(node, op, vec![Some(x)], vec![y])?;
    Ok(())
}

/// LpPool: `(Σ_window |x|^p)^(1/p)` as `|x|^p`, an average pool counting the padding (zeros
/// contribute nothing), a multiplication by the window size and a `1/p` power.
pub(super) fn lp_pool(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    if let Some(()) = pool_3d(lw, node)? {
        return Ok(());
    }
    let (x, xs, spatial, kernel) = pool_input(lw, node)?;
    let p = node.int("p", 2)?;
    if p < 1 {
        return Err(format!("p {p} must be at least 1"));
    }
    let window = resolve_window(node, &spatial, &kernel, false)?;
    let pool = Pool {
        window,
        ceil_mode: node.int("ceil_mode", 0)? != 0,
        count_include_pad: true,
    };
    let out_spatial = window_out(&pool.window, &spatial, Some(pool.ceil_mode))?;
    let mut out_shape = xs[..2].to_vec();
    out_shape.extend(out_spatial);
    let plain = |op| Op::Binary {
        op,
        activation: Activation::None,
    };
    let scalar = |lw: &mut Lowerer, what: &str, v: f32| {
        lw.constant(node, what, HostTensor::float(vec![], vec![v]))
    };
    let magnitude = lw.temp(node, "magnitude", DType::F32, xs.clone());
    lw.emit(
        node,
        Op::Unary(Activation::Abs),
        vec![Some(x)],
        vec![magnitude],
    )?;
    let exponent = scalar(lw, "p", p as f32);
    let powered = lw.temp(node, "powered", DType::F32, xs);
    let inputs = vec![Some(magnitude), Some(exponent)];
    lw.emit(node, plain(BinaryOp::Pow), inputs, vec![powered])?;
    let mean = lw.temp(node, "mean", DType::F32, out_shape.clone());
    lw.emit(node, Op::AvgPool(pool), vec![Some(powered)], vec![mean])?;
    let count = scalar(lw, "count", (kernel.iter().product::<usize>()) as f32);
    let sum = lw.temp(node, "sum", DType::F32, out_shape.clone());
    lw.emit(
        node,
        plain(BinaryOp::Mul),
        vec![Some(mean), Some(count)],
        vec![sum],
    )?;
    let root = scalar(lw, "inverse_p", 1.0 / p as f32);
    let y = lw.output(node, 0, DType::F32, out_shape)?;
    lw.emit(
        node,
        plain(BinaryOp::Pow),
        vec![Some(sum), Some(root)],
        vec![y],
    )
}

/// GlobalAveragePool (its own op) and GlobalMaxPool (a max reduction over the spatial axes).
pub(super) fn global_pool(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let xs = lw.shape(x);
    if xs.len() < 3 {
        return Err("input must have spatial dimensions".into());
    }
    let mut out = xs[..2].to_vec();
    out.extend(std::iter::repeat_n(1, xs.len() - 2));
    let op = if node.op_type == "GlobalMaxPool" {
        let axes = (2..xs.len()).fold(0u32, |m, a| m | 1 << a);
        Op::Reduce {
            op: ReduceOp::Max,
            axes,
        }
    } else {
        Op::GlobalAvgPool
    };
    let y = lw.output(node, 0, DType::F32, out)?;
    lw.emit(node, op, vec![Some(x)], vec![y])
}
