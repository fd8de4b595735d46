//! Ops lowered as compositions of existing steps, so they run on every device that has those
//! steps: LayerNormalization, InstanceNormalization, GroupNormalization, LpNormalization,
//! DepthToSpace and SpaceToDepth.
//!
//! Normalisations are `(x − mean) · 1/sqrt(var + ε)` over their axes with Reduce, Binary and
//! Unary steps (the mean and variance in f32, as the ONNX reference computes them with
//! `stash_type` float), then the scale and bias broadcast; the rearrangements are a reshape, a
//! Transpose and a reshape.

use super::attrs::Attrs;
use super::lowerer::{normalize_axis, Lowerer, Reason};
use super::window::hal_shape;
use crate::compile::ir::TensorId;
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;
use ferrite_hal::geometry::broadcast;
use ferrite_hal::op::{BinaryOp, ReduceOp};
use ferrite_hal::{Activation, DType, Op, MAX_RANK};

/// Emits the steps of one node's composition, naming temporaries after it.
struct Steps<'a, 'n> {
    lw: &'a mut Lowerer,
    node: &'n Node,
    count: usize,
}

impl<'a, 'n> Steps<'a, 'n> {
    fn new(lw: &'a mut Lowerer, node: &'n Node) -> Self {
        Steps { lw, node, count: 0 }
    }

    /// A new f32 tensor of `shape`: output `output` of the node when given, else a temporary.
    fn tensor(
        &mut self,
        what: &str,
        shape: Vec<usize>,
        output: Option<usize>,
    ) -> Result<TensorId, Reason> {
        match output {
            Some(i) => self.lw.output(self.node, i, DType::F32, shape),
            None => {
                self.count += 1;
                let name = format!("{what}{}", self.count);
                Ok(self.lw.temp(self.node, &name, DType::F32, shape))
            }
        }
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        a: TensorId,
        b: TensorId,
        output: Option<usize>,
    ) -> Result<TensorId, Reason> {
        let shape = broadcast(
            &hal_shape(&self.lw.shape(a))?,
            &hal_shape(&self.lw.shape(b))?,
        )
        .ok_or("operand shapes do not broadcast")?;
        let y = self.tensor("binary", shape.dims().to_vec(), output)?;
        let step = Op::Binary {
            op,
            activation: Activation::None,
        };
        self.lw
            .emit(self.node, step, vec![Some(a), Some(b)], vec![y])?;
        Ok(y)
    }

    fn unary(
        &mut self,
        act: Activation,
        x: TensorId,
        output: Option<usize>,
    ) -> Result<TensorId, Reason> {
        let y = self.tensor("unary", self.lw.shape(x), output)?;
        self.lw
            .emit(self.node, Op::Unary(act), vec![Some(x)], vec![y])?;
        Ok(y)
    }

    /// Reduces the axes in mask `axes`, keeping them as 1s.
    fn reduce(
        &mut self,
        op: ReduceOp,
        x: TensorId,
        axes: u32,
        output: Option<usize>,
    ) -> Result<TensorId, Reason> {
        let shape = self
            .lw
            .shape(x)
            .iter()
            .enumerate()
            .map(|(i, &d)| if axes & (1 << i) != 0 { 1 } else { d })
            .collect();
        let y = self.tensor("reduce", shape, output)?;
        self.lw
            .emit(self.node, Op::Reduce { op, axes }, vec![Some(x)], vec![y])?;
        Ok(y)
    }

    fn scalar(&mut self, what: &str, v: f32) -> TensorId {
        self.lw
            .constant(self.node, what, HostTensor::float(vec![], vec![v]))
    }

    /// `x` viewed under `shape` (same element count).
    fn view(&mut self, x: TensorId, shape: Vec<usize>) -> TensorId {
        self.count += 1;
        let name = format!("view{}", self.count);
        self.lw.temp_alias(self.node, &name, x, shape)
    }

    fn transpose(&mut self, x: TensorId, perm: &[usize]) -> Result<TensorId, Reason> {
        let s = self.lw.shape(x);
        let out = perm.iter().map(|&p| s[p]).collect();
        let y = self.tensor("transposed", out, None)?;
        let mut p = [0usize; MAX_RANK];
        p[..perm.len()].copy_from_slice(perm);
        let dtype = self.lw.dtype(x);
        self.lw.graph.tensors[y].dtype = dtype;
        self.lw
            .emit(self.node, Op::Transpose { perm: p }, vec![Some(x)], vec![y])?;
        Ok(y)
    }

    /// `(x − mean) / sqrt(var + epsilon)` over mask `axes`; returns `(normalised, mean,
    /// 1/std)`, writing the mean and 1/std to node outputs `mean_out` / `inv_out` when given.
    fn normalize(
        &mut self,
        x: TensorId,
        axes: u32,
        epsilon: f32,
        mean_out: Option<usize>,
        inv_out: Option<usize>,
    ) -> Result<(TensorId, TensorId, TensorId), Reason> {
        let mean = self.reduce(ReduceOp::Mean, x, axes, mean_out)?;
        let centred = self.binary(BinaryOp::Sub, x, mean, None)?;
        let square = self.binary(BinaryOp::Mul, centred, centred, None)?;
        let var = self.reduce(ReduceOp::Mean, square, axes, None)?;
        let eps = self.scalar("epsilon", epsilon);
        let shifted = self.binary(BinaryOp::Add, var, eps, None)?;
        let std = self.unary(Activation::Sqrt, shifted, None)?;
        let inv = self.unary(Activation::Reciprocal, std, inv_out)?;
        let normalised = self.binary(BinaryOp::Mul, centred, inv, None)?;
        Ok((normalised, mean, inv))
    }
}

/// Whether output `i` of `node` is requested.
fn wants(node: &Node, i: usize) -> bool {
    node.outputs.get(i).is_some_and(|o| !o.is_empty())
}

/// The mask of axes `from..rank`.
fn axes_from(from: usize, rank: usize) -> u32 {
    (from..rank).fold(0, |m, a| m | 1 << a)
}

pub(super) fn layer_norm(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let scale = lw.input(node, 1)?;
    let bias = lw.optional_input(node, 2);
    lw.require_f32(&[x, scale])?;
    if let Some(b) = bias {
        lw.require_f32(&[b])?;
    }
    if node.int("stash_type", 1)? != 1 {
        return Err("stash_type other than 1 (float) is not supported".into());
    }
    let rank = lw.shape(x).len();
    let axis = normalize_axis(node.int("axis", -1)?, rank)?;
    let epsilon = node.float("epsilon", 1e-5)?;
    let mut s = Steps::new(lw, node);
    let (mean_out, inv_out) = (wants(node, 1).then_some(1), wants(node, 2).then_some(2));
    let (normalised, ..) = s.normalize(x, axes_from(axis, rank), epsilon, mean_out, inv_out)?;
    match bias {
        Some(b) => {
            let scaled = s.binary(BinaryOp::Mul, normalised, scale, None)?;
            s.binary(BinaryOp::Add, scaled, b, Some(0))?;
        }
        None => {
            s.binary(BinaryOp::Mul, normalised, scale, Some(0))?;
        }
    }
    Ok(())
}

/// `t [C]` viewed as `[C, 1, …]` for an input of rank `rank` (broadcasting over the positions).
fn per_channel(s: &mut Steps<'_, '_>, t: TensorId, rank: usize) -> TensorId {
    let mut shape = vec![s.lw.shape(t).iter().product()];
    shape.extend(std::iter::repeat_n(1, rank.saturating_sub(2)));
    s.view(t, shape)
}

pub(super) fn instance_norm(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let scale = lw.input(node, 1)?;
    let bias = lw.input(node, 2)?;
    lw.require_f32(&[x, scale, bias])?;
    let shape = lw.shape(x);
    if shape.len() < 3 {
        return Err("the input must be [N, C, D1, …]".into());
    }
    let channels = shape[1];
    for t in [scale, bias] {
        if lw.shape(t).iter().product::<usize>() != channels {
            return Err(format!(
                "'{}' must have one value per channel ({channels})",
                lw.name(t)
            ));
        }
    }
    let epsilon = node.float("epsilon", 1e-5)?;
    let mut s = Steps::new(lw, node);
    let (normalised, ..) = s.normalize(x, axes_from(2, shape.len()), epsilon, None, None)?;
    let (scale, bias) = (
        per_channel(&mut s, scale, shape.len()),
        per_channel(&mut s, bias, shape.len()),
    );
    let scaled = s.binary(BinaryOp::Mul, normalised, scale, None)?;
    s.binary(BinaryOp::Add, scaled, bias, Some(0))?;
    Ok(())
}

pub(super) fn group_norm(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let scale = lw.input(node, 1)?;
    let bias = lw.input(node, 2)?;
    lw.require_f32(&[x, scale, bias])?;
    let shape = lw.shape(x);
    if shape.len() < 3 {
        return Err("the input must be [N, C, D1, …]".into());
    }
    let (n, channels) = (shape[0], shape[1]);
    let groups = node.int("num_groups", 0)?;
    if groups < 1 || channels % groups as usize != 0 {
        return Err(format!(
            "num_groups {groups} does not divide the {channels} channels"
        ));
    }
    let groups = groups as usize;
    let epsilon = node.float("epsilon", 1e-5)?;
    let count = |t: TensorId, lw: &Lowerer| lw.shape(t).iter().product::<usize>();
    // Opset 18 gives one scale per group (deprecated); opset 21 one per channel.
    let per_group = count(scale, lw) == groups && groups != channels;
    for t in [scale, bias] {
        let c = count(t, lw);
        if c != channels && !(per_group && c == groups) {
            return Err(format!(
                "'{}' has {c} values: one per channel ({channels}) is needed",
                lw.name(t)
            ));
        }
    }
    let rest: usize = shape[1..].iter().product::<usize>() / groups;
    let mut s = Steps::new(lw, node);
    let grouped = s.view(x, vec![n, groups, rest]);
    let (normalised, ..) = s.normalize(grouped, 1 << 2, epsilon, None, None)?;
    if per_group {
        let (scale, bias) = (
            s.view(scale, vec![groups, 1]),
            s.view(bias, vec![groups, 1]),
        );
        let scaled = s.binary(BinaryOp::Mul, normalised, scale, None)?;
        let y = s.binary(BinaryOp::Add, scaled, bias, None)?;
        return s.lw.alias_output(node, 0, y, shape);
    }
    let back = s.view(normalised, shape.clone());
    let (scale, bias) = (
        per_channel(&mut s, scale, shape.len()),
        per_channel(&mut s, bias, shape.len()),
    );
    let scaled = s.binary(BinaryOp::Mul, back, scale, None)?;
    s.binary(BinaryOp::Add, scaled, bias, Some(0))?;
    Ok(())
}

pub(super) fn lp_norm(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let rank = lw.shape(x).len();
    let axis = normalize_axis(node.int("axis", -1)?, rank)?;
    let op = match node.int("p", 2)? {
        1 => ReduceOp::L1,
        2 => ReduceOp::L2,
        p => return Err(format!("p {p} is not 1 or 2")),
    };
    let mut s = Steps::new(lw, node);
    let norm = s.reduce(op, x, 1 << axis, None)?;
    // An all-zero lane stays zero (0 / tiny), as the ONNX reference.
    let tiny = s.scalar("smallest_norm", f32::MIN_POSITIVE);
    let norm = s.binary(BinaryOp::Max, norm, tiny, None)?;
    s.binary(BinaryOp::Div, x, norm, Some(0))?;
    Ok(())
}

/// DepthToSpace and SpaceToDepth: a reshape to rank 6, a Transpose, a reshape back.
pub(super) fn depth_space(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    let shape = lw.shape(x);
    let [n, c, h, w] = shape[..] else {
        return Err("the input must be [N, C, H, W]".into());
    };
    let b = node.int("blocksize", 0)?;
    if b < 1 {
        return Err(format!("blocksize {b} must be positive"));
    }
    let b = b as usize;
    let (inner, perm, out) = if node.op_type == "DepthToSpace" {
        if c % (b * b) != 0 {
            return Err(format!(
                "{c} channels are not a multiple of blocksize² ({})",
                b * b
            ));
        }
        let cb = c / (b * b);
        let out = vec![n, cb, h * b, w * b];
        match node.string("mode", "DCR")?.as_str() {
            "DCR" => (vec![n, b, b, cb, h, w], [0, 3, 4, 1, 5, 2], out),
            "CRD" => (vec![n, cb, b, b, h, w], [0, 1, 4, 2, 5, 3], out),
            other => return Err(format!("mode '{other}' is not DCR or CRD")),
        }
    } else {
        if h % b != 0 || w % b != 0 {
            return Err(format!("{h}×{w} is not a multiple of blocksize {b}"));
        }
        let out = vec![n, c * b * b, h / b, w / b];
        (vec![n, c, h / b, b, w / b, b], [0, 3, 5, 1, 2, 4], out)
    };
    let mut s = Steps::new(lw, node);
    let six = s.view(x, inner);
    let moved = s.transpose(six, &perm)?;
    s.lw.alias_output(node, 0, moved, out)
}
