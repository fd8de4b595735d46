//! Lowers each verified step to GPU commands: compute dispatches with their parameter words
//! (layouts documented next to each kernel in `shaders/*.wgsl`) or buffer copies.
//!
//! Everything here runs once, at session creation; a run replays the recorded result.

use crate::shaders::Kernel;
use ferrite_hal::geometry::{broadcast_strides, nchw, MatMulGeometry, StridedCopy};
use ferrite_hal::op::{BinaryOp, PadMode, ReduceOp};
use ferrite_hal::words::WordWriter;
use ferrite_hal::{Activation, DType, Location, Op, Step, TensorDesc, MAX_RANK};

/// Marks a word address in the weights buffer (the shaders' `IN_WEIGHTS`).
const IN_WEIGHTS: u32 = 0x8000_0000;
/// An absent optional operand (the shaders' `ABSENT`).
const ABSENT: u32 = u32::MAX;
/// Invocations per workgroup of the 1-D kernels (the shaders' `GROUP`).
const GROUP: usize = 64;

/// One GPU command.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Run `kernel` over `work` items with these parameter words.
    Dispatch {
        /// The kernel.
        kernel: Kernel,
        /// Its parameters.
        params: Vec<u32>,
        /// Workgroups wanted per axis before clamping to the device's limits (kernels loop
        /// with a grid stride, so fewer is always correct).
        groups: [usize; 3],
    },
    /// Copy `bytes` from `src` to arena byte offset `dst`.
    Copy {
        /// Source.
        src: Location,
        /// Destination offset in the arena.
        dst: usize,
        /// Length.
        bytes: usize,
    },
}

/// Why a step cannot be encoded.
pub type Refusal = &'static str;

/// Parameter words under construction.
#[derive(Default)]
struct Params(Vec<u32>);

impl Params {
    fn u(&mut self, v: usize) -> Result<&mut Self, Refusal> {
        self.0
            .push(u32::try_from(v).map_err(|_| "a size exceeds 32-bit GPU indexing")?);
        Ok(self)
    }

    fn all(&mut self, values: &[usize]) -> Result<&mut Self, Refusal> {
        for v in values {
            self.u(*v)?;
        }
        Ok(self)
    }

    fn i(&mut self, v: isize) -> Result<&mut Self, Refusal> {
        let v = i32::try_from(v).map_err(|_| "an offset exceeds 32-bit GPU indexing")?;
        self.0.push(v as u32);
        Ok(self)
    }

    fn f(&mut self, v: f32) -> &mut Self {
        self.0.push(v.to_bits());
        self
    }

    fn word(&mut self, v: u32) -> &mut Self {
        self.0.push(v);
        self
    }

    /// `MAX_RANK` words: the first `values.len()` from `values`, then zeros.
    fn axes(&mut self, values: &[usize]) -> Result<&mut Self, Refusal> {
        for i in 0..MAX_RANK {
            self.u(values.get(i).copied().unwrap_or(0))?;
        }
        Ok(self)
    }

    /// Signed variant of [`Params::axes`].
    fn signed_axes(&mut self, values: &[isize]) -> Result<&mut Self, Refusal> {
        for i in 0..MAX_RANK {
            self.i(values.get(i).copied().unwrap_or(0))?;
        }
        Ok(self)
    }

    /// The word address of a tensor.
    fn tensor(&mut self, t: &TensorDesc) -> Result<&mut Self, Refusal> {
        let address = word_address(t)?;
        self.0.push(address);
        Ok(self)
    }

    fn optional(&mut self, t: Option<TensorDesc>) -> Result<&mut Self, Refusal> {
        match t {
            Some(t) => self.tensor(&t),
            None => Ok(self.word(ABSENT)),
        }
    }

    /// An activation's three words, in hal's encoding.
    fn activation(&mut self, a: Activation) -> Result<&mut Self, Refusal> {
        let mut w = WordWriter::default();
        a.encode(&mut w);
        self.0
            .extend_from_slice(w.words().ok_or("activation encoding")?);
        Ok(self)
    }

    fn dispatch(self, kernel: Kernel, work: usize) -> Command {
        Command::Dispatch {
            kernel,
            params: self.0,
            groups: [work.div_ceil(GROUP), 1, 1],
        }
    }
}

/// A tensor's address in 32-bit words, with [`IN_WEIGHTS`] for the weights buffer.
fn word_address(t: &TensorDesc) -> Result<u32, Refusal> {
    let (offset, flag) = match t.location {
        Location::Arena(o) => (o, 0),
        Location::Weights(o) => (o, IN_WEIGHTS),
    };
    if offset % 4 != 0 {
        return Err("a tensor is not 4-byte aligned");
    }
    let words = u32::try_from(offset / 4)
        .ok()
        .filter(|w| w & IN_WEIGHTS == 0)
        .ok_or("a tensor lies beyond 8 GiB")?;
    Ok(words | flag)
}

/// 32-bit words per element for the movement kernels.
fn element_words(dtype: DType) -> Result<usize, Refusal> {
    match dtype.size() {
        4 => Ok(1),
        8 => Ok(2),
        _ => Err("1-byte elements are not supported by the Vulkan movement kernels"),
    }
}

/// The dtypes whose tensors the movement kernels handle (whole 32-bit words).
pub const WORD_DTYPES: [DType; 3] = [DType::F32, DType::I32, DType::I64];

/// Lowers one step to commands.
pub fn encode(step: &Step<'_>) -> Result<Vec<Command>, Refusal> {
    let input = |i: usize| step.inputs.get(i).ok_or("missing input");
    let out = step.outputs.get(0).ok_or("missing output")?;
    let count = out.elements();
    let mut p = Params::default();
    let one = |c: Command| Ok(vec![c]);
    match step.op {
        Op::Conv(conv) => {
            let (dims, ocg) = conv_params(&mut p, step, &conv.window, conv.group, conv.activation)?;
            let [n, _, _, _, oc, oh, ow] = dims;
            let work = n * (oc / ocg.max(1)) * ocg.div_ceil(4) * oh * ow;
            one(p.dispatch(Kernel::Conv, work))
        }
        Op::ConvTranspose(conv) => {
            conv_params(&mut p, step, &conv.window, conv.group, conv.activation)?;
            one(p.dispatch(Kernel::ConvTranspose, count))
        }
        Op::Gemm(g) => {
            let (a, b) = (input(0)?, input(1)?);
            let (m, k, n) = (a.shape.dim(0), a.shape.dim(1), b.shape.dim(1));
            let c = step.inputs.get(2);
            let [sm, sn] = match c {
                Some(c) => {
                    let s = broadcast_strides(&c.shape, &out.shape);
                    [s[0], s[1]]
                }
                None => [0, 0],
            };
            p.all(&[m, n, k, 1, 0])?
                .tensor(&a)?
                .tensor(&b)?
                .tensor(&out)?
                .optional(c)?
                .all(&[sm, sn])?
                .f(g.alpha)
                .f(g.beta)
                .activation(g.activation)?
                .axes(&[])?
                .axes(&[])?
                .axes(&[])?;
            one(matmul_dispatch(p, m, n, 1))
        }
        Op::MatMul { activation } => {
            let (a, b) = (input(0)?, input(1)?);
            let g = MatMulGeometry::new(&a.shape, &b.shape).ok_or("matmul shapes")?;
            let batches = g.batch.elements().ok_or("batch size")?;
            let rank = g.batch.rank();
            p.all(&[g.m, g.n, g.k, batches, rank])?
                .tensor(&a)?
                .tensor(&b)?
                .tensor(&out)?
                .word(ABSENT)
                .all(&[0, 0])?
                .f(1.0)
                .f(0.0)
                .activation(activation)?
                .axes(g.batch.dims())?
                .axes(&g.a_batch_strides[..rank])?
                .axes(&g.b_batch_strides[..rank])?;
            one(matmul_dispatch(p, g.m, g.n, batches))
        }
        Op::Binary { op, activation } => {
            let (a, b) = (input(0)?, input(1)?);
            let code = match op {
                BinaryOp::Add => 0,
                BinaryOp::Sub => 1,
                BinaryOp::Mul => 2,
                BinaryOp::Div => 3,
                BinaryOp::Pow => 4,
                BinaryOp::Max => 5,
                BinaryOp::Min => 6,
                BinaryOp::PRelu => 7,
                BinaryOp::Fmod => 8,
                BinaryOp::Mod => 9,
                BinaryOp::ShiftLeft | BinaryOp::ShiftRight => {
                    return Err("integer shifts are not implemented by the Vulkan kernels")
                }
            };
            let rank = out.shape.rank();
            p.all(&[count, rank, code])?
                .tensor(&a)?
                .tensor(&b)?
                .tensor(&out)?
                .activation(activation)?
                .axes(out.shape.dims())?
                .axes(&broadcast_strides(&a.shape, &out.shape)[..rank])?
                .axes(&broadcast_strides(&b.shape, &out.shape)[..rank])?;
            one(p.dispatch(Kernel::Binary, count))
        }
        Op::Unary(activation) => {
            p.u(count)?
                .tensor(&input(0)?)?
                .tensor(&out)?
                .activation(activation)?;
            one(p.dispatch(Kernel::Unary, count))
        }
        Op::BatchNorm {
            epsilon,
            activation,
        } => {
            let x = input(0)?;
            let channels = if x.shape.rank() > 1 {
                x.shape.dim(1)
            } else {
                1
            };
            let rank = x.shape.rank();
            let inner = if rank > 2 {
                x.shape.product(2..rank)
            } else {
                1
            };
            p.all(&[count, channels, inner])?;
            for i in 0..5 {
                p.tensor(&input(i)?)?;
            }
            p.tensor(&out)?.f(epsilon).activation(activation)?;
            one(p.dispatch(Kernel::BatchNorm, count))
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } | Op::Hardmax { axis } => {
            let s = &out.shape;
            let (outer, len, inner) = (
                s.product(0..axis),
                s.dim(axis),
                s.product(axis + 1..s.rank()),
            );
            let mode = match step.op {
                Op::Softmax { .. } => 0,
                Op::LogSoftmax { .. } => 1,
                _ => 2,
            };
            p.all(&[outer, len, inner, mode])?
                .tensor(&input(0)?)?
                .tensor(&out)?;
            one(p.dispatch(Kernel::Softmax, outer * inner))
        }
        Op::ArgMax(a) | Op::ArgMin(a) => {
            let x = input(0)?;
            let s = &x.shape;
            let (outer, len, inner) = (
                s.product(0..a.axis),
                s.dim(a.axis),
                s.product(a.axis + 1..s.rank()),
            );
            let max = usize::from(matches!(step.op, Op::ArgMax(_)));
            p.all(&[outer, len, inner, max, usize::from(a.last)])?
                .tensor(&x)?
                .tensor(&out)?;
            one(p.dispatch(Kernel::ArgExtreme, outer * inner))
        }
        Op::MaxPool(pool) | Op::AvgPool(pool) => {
            let x = input(0)?;
            let [n, c, h, w] = nchw(&x.shape).ok_or("pool input rank")?;
            let [_, _, oh, ow] = nchw(&out.shape).ok_or("pool output rank")?;
            let win = &pool.window;
            p.all(&[n * c, h, w, oh, ow])?
                .all(&win.kernel)?
                .all(&win.stride)?
                .all(&win.dilation)?
                .all(&win.pads)?
                .u(pool.count_include_pad as usize)?
                .tensor(&x)?
                .tensor(&out)?;
            let kernel = if matches!(step.op, Op::MaxPool(_)) {
                Kernel::MaxPool
            } else {
                Kernel::AvgPool
            };
            one(p.dispatch(kernel, count))
        }
        Op::GlobalAvgPool => {
            let x = input(0)?;
            let planes = x.shape.product(0..2.min(x.shape.rank()));
            let plane = x.shape.product(2.min(x.shape.rank())..x.shape.rank());
            p.all(&[planes, plane])?.tensor(&x)?.tensor(&out)?;
            one(p.dispatch(Kernel::GlobalAvgPool, planes))
        }
        Op::Reduce { op, axes } => {
            let x = input(0)?;
            let strides = x.shape.strides();
            let (mut kept, mut kept_strides, mut reduced, mut reduced_strides) =
                (vec![], vec![], vec![], vec![]);
            for (a, &d) in x.shape.dims().iter().enumerate() {
                if axes & (1 << a) != 0 {
                    reduced.push(d);
                    reduced_strides.push(strides[a]);
                } else {
                    kept.push(d);
                    kept_strides.push(strides[a]);
                }
            }
            let code = match op {
                ReduceOp::Mean => 0,
                ReduceOp::Sum => 1,
                ReduceOp::Max => 2,
                ReduceOp::Min => 3,
                ReduceOp::Prod => 4,
                ReduceOp::L1 => 5,
                ReduceOp::L2 => 6,
                ReduceOp::LogSum => 7,
                ReduceOp::SumSquare => 8,
            };
            let reduced_count: usize = reduced.iter().product();
            p.all(&[count, code, kept.len(), reduced.len(), reduced_count])?
                .tensor(&x)?
                .tensor(&out)?
                .axes(&kept)?
                .axes(&kept_strides)?
                .axes(&reduced)?
                .axes(&reduced_strides)?;
            one(p.dispatch(Kernel::Reduce, count))
        }
        Op::Pad {
            mode,
            begins,
            value,
            ..
        } => {
            let x = input(0)?;
            let words = element_words(x.dtype)?;
            let fill: u64 = match x.dtype {
                DType::F32 => value.to_bits() as u64,
                DType::I32 => (value as i32) as u32 as u64,
                _ => (value as i64) as u64,
            };
            let rank = x.shape.rank();
            p.all(&[count, rank, words])?
                .u(match mode {
                    PadMode::Constant => 0,
                    PadMode::Reflect => 1,
                    PadMode::Edge => 2,
                })?
                .tensor(&x)?
                .tensor(&out)?
                .word(fill as u32)
                .word((fill >> 32) as u32)
                .axes(out.shape.dims())?
                .axes(x.shape.dims())?
                .axes(&begins[..rank])?;
            one(p.dispatch(Kernel::Pad, count))
        }
        Op::Gather { axis } => {
            let (x, idx) = (input(0)?, input(1)?);
            let index_words = match idx.dtype {
                DType::I32 => 1,
                DType::I64 => 2,
                _ => return Err("gather indices must be int32 or int64"),
            };
            let s = &x.shape;
            p.all(&[
                count,
                s.product(0..axis),
                s.dim(axis),
                idx.elements(),
                s.product(axis + 1..s.rank()),
                element_words(x.dtype)?,
            ])?
            .tensor(&x)?
            .tensor(&idx)?
            .u(index_words)?
            .tensor(&out)?;
            one(p.dispatch(Kernel::Gather, count))
        }
        Op::Quantize { .. }
        | Op::Dequantize { .. }
        | Op::QConv(_)
        | Op::QGemm(_)
        | Op::QAdd(_)
        | Op::QGlobalAvgPool(_)
        | Op::QLookup
        | Op::QMul(_)
        | Op::MatMulInteger
        | Op::ConvInteger(_)
        | Op::DynamicQuantize
        | Op::QSoftmax(_)
        | Op::QAvgPool(_) => Err("quantized ops are not implemented by the Vulkan kernels"),
        Op::Compare(_) | Op::Logical(_) | Op::Not | Op::Where | Op::Classify(_) => {
            Err("ops on bool tensors are not implemented by the Vulkan kernels")
        }
        Op::Trilu { .. } => Err("Trilu is not implemented by the Vulkan kernels"),
        Op::Dft(_) => Err("DFT is not implemented by the Vulkan kernels"),
        Op::TreeEnsemble(_) => Err("tree ensembles are not implemented by the Vulkan kernels"),
        Op::Convert => Err("Cast is not implemented by the Vulkan kernels"),
        Op::Resample {
            axis,
            extrapolation,
        } => {
            let (x, idx, w) = (input(0)?, input(1)?, input(2)?);
            let s = &out.shape;
            p.all(&[
                count,
                s.dim(axis),
                s.product(axis + 1..s.rank()),
                x.shape.dim(axis),
                idx.shape.dim(1),
            ])?
            .tensor(&x)?
            .tensor(&idx)?
            .tensor(&w)?
            .tensor(&out)?
            .u(extrapolation.to_bits() as usize)?;
            one(p.dispatch(Kernel::Resample, count))
        }
        Op::GatherElements { .. }
        | Op::ScatterElements { .. }
        | Op::GatherNd { .. }
        | Op::ScatterNd { .. }
        | Op::TopK { .. }
        | Op::CumSum { .. }
        | Op::Recurrent(_)
        | Op::Det => Err("not implemented by the Vulkan kernels"),
        Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Expand
        | Op::Concat { .. }
        | Op::Split { .. } => {
            let mut commands = Vec::new();
            StridedCopy::of_step(step, &mut |src, dst, copy| {
                commands.push(strided_copy(&src, &dst, &copy)?);
                Ok(())
            })?;
            Ok(commands)
        }
        Op::Copy => one(Command::Copy {
            src: input(0)?.location,
            dst: match out.location {
                Location::Arena(o) => o,
                Location::Weights(_) => return Err("an output in the weights"),
            },
            bytes: out.bytes,
        }),
    }
}

/// The parameter words both convolution kernels read (`shaders/conv.wgsl`); returns
/// `[n, c, h, w, oc, oh, ow]` and the output channels per group.
fn conv_params(
    p: &mut Params,
    step: &Step<'_>,
    win: &ferrite_hal::op::Window,
    group: usize,
    activation: Activation,
) -> Result<([usize; 7], usize), Refusal> {
    let x = step.inputs.get(0).ok_or("missing input")?;
    let y = step.outputs.get(0).ok_or("missing output")?;
    let [n, c, h, w] = nchw(&x.shape).ok_or("convolution input rank")?;
    let [_, oc, oh, ow] = nchw(&y.shape).ok_or("convolution output rank")?;
    let group = group.max(1);
    let (icg, ocg) = (c / group, oc / group);
    let dims = [n, c, h, w, oc, oh, ow];
    p.all(&dims)?
        .all(&win.kernel)?
        .all(&win.stride)?
        .all(&win.dilation)?
        .all(&win.pads[..2])?
        .all(&[icg, ocg])?
        .tensor(&x)?
        .tensor(&step.inputs.get(1).ok_or("missing weights")?)?
        .optional(step.inputs.get(2))?
        .tensor(&y)?
        .activation(activation)?;
    Ok((dims, ocg))
}

/// Products with fewer rows than this use `matmul_rows` instead of 16 x 16 tiles.
pub const TILED_MIN_ROWS: usize = 16;

/// The tiled kernel for products with at least [`TILED_MIN_ROWS`] rows, else the row kernel.
fn matmul_dispatch(p: Params, m: usize, n: usize, batches: usize) -> Command {
    if m < TILED_MIN_ROWS {
        return p.dispatch(Kernel::MatMulRows, batches * m * n);
    }
    Command::Dispatch {
        kernel: Kernel::MatMul,
        params: p.0,
        groups: [n.div_ceil(16), m.div_ceil(16), batches],
    }
}

/// A `copy_strided` dispatch running `copy` from `src` to `dst`.
fn strided_copy(
    src: &TensorDesc,
    dst: &TensorDesc,
    copy: &StridedCopy,
) -> Result<Command, Refusal> {
    let dims = &copy.dims;
    let count = dims.elements().ok_or("copy size")?;
    let rank = dims.rank();
    let mut p = Params::default();
    p.all(&[count, rank, element_words(src.dtype)?])?
        .tensor(src)?
        .i(copy.src_base)?
        .tensor(dst)?
        .u(copy.dst_base)?
        .axes(dims.dims())?
        .signed_axes(&copy.src_strides[..rank])?
        .axes(&copy.dst_strides[..rank])?;
    Ok(p.dispatch(Kernel::CopyStrided, count))
}
