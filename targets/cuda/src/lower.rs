//! Lowers each verified step to CUDA commands: kernel launches whose arguments follow the
//! kernels' signatures in `kernels/*.cu`, or device-to-device copies.
//!
//! Everything here runs once, at session creation. Reshape-like ops never reach a device (the
//! planner aliases them); ops without a kernel are refused with a reason, and the device's
//! capabilities leave them out so a session refuses such a model before lowering.

use crate::launch::{Arg, Command, Kernel, Launch};
use ferrite_hal::geometry::{broadcast_strides, lanes, nchw, MatMulGeometry, StridedCopy};
use ferrite_hal::op::{
    BinaryOp, Cell, CompareOp, LogicalOp, PadMode, Recurrent, ReduceOp, Reduction, Window,
};
use ferrite_hal::words::WordWriter;
use ferrite_hal::{Activation, DType, Location, Op, Shape, Step, TensorDesc, MAX_RANK};

/// Why a step cannot be lowered.
pub type Refusal = &'static str;

/// Threads per block of the grid-stride kernels.
pub const BLOCK: u32 = 256;
/// Most blocks of a grid-stride launch: its threads then loop over the rest.
pub const MAX_BLOCKS: usize = 4096;
/// Side of the shared-memory tiles (`FERRITE_TILE` in `kernels/common.cuh`).
pub const TILE: usize = 16;
/// Columns per block of the row kernel (`FERRITE_ROW_COLUMNS` in `kernels/common.cuh`).
pub const ROW_COLUMNS: usize = 8;
/// A grid's y and z extents are at most this (CUDA's limit).
const MAX_GRID_YZ: usize = 65_535;
/// Convolutions whose groups have at least this many output channels and this product depth
/// (input channels × window) run as an implicit GEMM; thinner ones (depthwise) run direct.
pub const GEMM_MIN: usize = 16;

/// Arguments under construction.
#[derive(Default)]
struct Args(Vec<Arg>);

impl Args {
    fn tensor(&mut self, t: &TensorDesc) -> &mut Self {
        self.0.push(Arg::Tensor(t.location));
        self
    }

    fn at(&mut self, location: Location) -> &mut Self {
        self.0.push(Arg::Tensor(location));
        self
    }

    fn optional(&mut self, t: Option<TensorDesc>) -> &mut Self {
        self.0
            .push(t.map_or(Arg::Null, |t| Arg::Tensor(t.location)));
        self
    }

    fn status(&mut self) -> &mut Self {
        self.0.push(Arg::Status);
        self
    }

    /// A 32-bit unsigned scalar.
    fn u(&mut self, v: usize) -> Result<&mut Self, Refusal> {
        self.0.push(Arg::Words(vec![u32_of(v)?]));
        Ok(self)
    }

    fn f(&mut self, v: f32) -> &mut Self {
        self.0.push(Arg::Words(vec![v.to_bits()]));
        self
    }

    /// A struct (or scalar) passed by value.
    fn value(&mut self, words: Words) -> &mut Self {
        self.0.push(Arg::Words(words.0));
        self
    }

    fn activation(&mut self, a: Activation) -> Result<&mut Self, Refusal> {
        let mut w = Words::default();
        w.activation(a)?;
        Ok(self.value(w))
    }

    /// A grid-stride launch over `work` items.
    fn launch(self, kernel: Kernel, work: usize) -> Vec<Command> {
        if work == 0 {
            return Vec::new();
        }
        let blocks = work.div_ceil(BLOCK as usize).min(MAX_BLOCKS) as u32;
        vec![Command::Launch(Launch {
            kernel,
            grid: [blocks, 1, 1],
            block: [BLOCK, 1, 1],
            args: self.0,
        })]
    }

    /// A matrix product of `m` × `n` outputs per batch: the row kernel below `TILE` rows (a
    /// batch-1 dense layer), else output tiles.
    fn product(self, m: usize, n: usize, batches: usize) -> Result<Vec<Command>, Refusal> {
        if m < TILE {
            self.tiled(Kernel::MatMulRows, [n.div_ceil(ROW_COLUMNS), m, batches])
        } else {
            self.tiled(
                Kernel::MatMul,
                [n.div_ceil(TILE), m.div_ceil(TILE), batches],
            )
        }
    }

    /// A tiled launch (`TILE × TILE` threads per block).
    fn tiled(self, kernel: Kernel, grid: [usize; 3]) -> Result<Vec<Command>, Refusal> {
        if grid.contains(&0) {
            return Ok(Vec::new());
        }
        if grid[1] > MAX_GRID_YZ || grid[2] > MAX_GRID_YZ {
            return Err("a product exceeds CUDA's grid limits");
        }
        Ok(vec![Command::Launch(Launch {
            kernel,
            grid: [u32_of(grid[0])?, grid[1] as u32, grid[2] as u32],
            block: [TILE as u32, TILE as u32, 1],
            args: self.0,
        })])
    }
}

fn u32_of(v: usize) -> Result<u32, Refusal> {
    u32::try_from(v).map_err(|_| "a size exceeds 32-bit GPU indexing")
}

/// The words of a by-value struct whose fields are all 4 bytes.
#[derive(Default)]
struct Words(Vec<u32>);

impl Words {
    fn u(&mut self, v: usize) -> Result<&mut Self, Refusal> {
        self.0.push(u32_of(v)?);
        Ok(self)
    }

    fn all(&mut self, values: &[usize]) -> Result<&mut Self, Refusal> {
        for v in values {
            self.u(*v)?;
        }
        Ok(self)
    }

    fn f(&mut self, v: f32) -> &mut Self {
        self.0.push(v.to_bits());
        self
    }

    /// `FERRITE_MAX_RANK` words: `values`, then zeros.
    fn axes(&mut self, values: &[usize]) -> Result<&mut Self, Refusal> {
        for i in 0..MAX_RANK {
            self.u(values.get(i).copied().unwrap_or(0))?;
        }
        Ok(self)
    }

    /// Signed variant of [`Words::axes`].
    fn signed_axes(&mut self, values: &[isize]) -> Result<&mut Self, Refusal> {
        for i in 0..MAX_RANK {
            let v = values.get(i).copied().unwrap_or(0);
            let v = i32::try_from(v).map_err(|_| "an offset exceeds 32-bit GPU indexing")?;
            self.0.push(v as u32);
        }
        Ok(self)
    }

    /// `struct Activation` (common.cuh): hal's encoding, code then two f32 parameters.
    fn activation(&mut self, a: Activation) -> Result<&mut Self, Refusal> {
        let mut w = WordWriter::default();
        a.encode(&mut w);
        let words = w.words().ok_or("activation encoding")?;
        if words.len() != 3 {
            return Err("an activation with more than two parameters");
        }
        self.0.extend_from_slice(words);
        Ok(self)
    }

    /// `struct Window` (common.cuh).
    fn window(&mut self, win: &Window) -> Result<&mut Self, Refusal> {
        self.all(&win.kernel)?
            .all(&win.stride)?
            .all(&win.dilation)?
            .all(&win.pads)
    }
}

/// 32-bit words per element for the movement kernels.
fn element_words(dtype: DType) -> Result<usize, Refusal> {
    match dtype.size() {
        4 => Ok(1),
        8 => Ok(2),
        _ => Err("the CUDA movement kernels move 4- and 8-byte elements"),
    }
}

/// The dtypes whose tensors the movement kernels handle (whole 32-bit words).
pub const WORD_DTYPES: [DType; 3] = [DType::F32, DType::I32, DType::I64];

/// Lowers one step to commands (none for a step without work).
pub fn lower(step: &Step<'_>) -> Result<Vec<Command>, Refusal> {
    let input = |i: usize| step.inputs.get(i).ok_or("missing input");
    let out = step.outputs.get(0).ok_or("missing output")?;
    let count = out.elements();
    let mut a = Args::default();
    match step.op {
        Op::Conv(conv) => {
            let shape = conv_shape(step, conv.group)?;
            let [n, c, _, _, oc, oh, ow, group] = shape;
            let (icg, ocg) = (c / group, oc / group);
            let depth = icg * conv.window.kernel[0] * conv.window.kernel[1];
            conv_args(&mut a, step, shape, &conv.window, conv.activation)?;
            if ocg >= GEMM_MIN && depth >= GEMM_MIN {
                let columns = n * oh * ow;
                a.tiled(
                    Kernel::ConvGemm,
                    [columns.div_ceil(TILE), ocg.div_ceil(TILE), group],
                )
            } else {
                Ok(a.launch(Kernel::Conv, count))
            }
        }
        Op::ConvTranspose(conv) => {
            let shape = conv_shape(step, conv.group)?;
            conv_args(&mut a, step, shape, &conv.window, conv.activation)?;
            Ok(a.launch(Kernel::ConvTranspose, count))
        }
        Op::Gemm(g) => {
            let (x, w) = (input(0)?, input(1)?);
            let (m, k, n) = (x.shape.dim(0), x.shape.dim(1), w.shape.dim(1));
            let c = step.inputs.get(2);
            let [sm, sn] = match c {
                Some(c) => {
                    let s = broadcast_strides(&c.shape, &out.shape);
                    [s[0], s[1]]
                }
                None => [0, 0],
            };
            let mut p = Words::default();
            p.all(&[m, k, n])?
                .f(g.alpha)
                .f(g.beta)
                .all(&[sm, sn, 0])?
                .axes(&[])?
                .axes(&[])?
                .axes(&[])?;
            a.tensor(&x)
                .tensor(&w)
                .optional(c)
                .tensor(&out)
                .value(p)
                .activation(g.activation)?;
            a.product(m, n, 1)
        }
        Op::MatMul { activation } => {
            let (x, w) = (input(0)?, input(1)?);
            let g = MatMulGeometry::new(&x.shape, &w.shape).ok_or("matmul shapes")?;
            let batches = g.batch.elements().ok_or("batch size")?;
            let rank = g.batch.rank();
            let mut p = Words::default();
            p.all(&[g.m, g.k, g.n])?
                .f(1.0)
                .f(0.0)
                .all(&[0, 0, rank])?
                .axes(g.batch.dims())?
                .axes(&g.a_batch_strides[..rank])?
                .axes(&g.b_batch_strides[..rank])?;
            a.tensor(&x)
                .tensor(&w)
                .optional(None)
                .tensor(&out)
                .value(p)
                .activation(activation)?;
            a.product(g.m, g.n, batches)
        }
        Op::Binary { op, activation } => {
            let (x, y) = (input(0)?, input(1)?);
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
                BinaryOp::ShiftLeft => 10,
                BinaryOp::ShiftRight => 11,
            };
            let rank = out.shape.rank();
            let mut shape = Words::default();
            shape
                .u(rank)?
                .axes(out.shape.dims())?
                .axes(&broadcast_strides(&x.shape, &out.shape)[..rank])?
                .axes(&broadcast_strides(&y.shape, &out.shape)[..rank])?;
            a.tensor(&x).tensor(&y).tensor(&out).u(count)?.u(code)?;
            if x.dtype == DType::F32 {
                if code > 9 {
                    return Err("shifts need integer operands");
                }
                a.value(shape).activation(activation)?;
                return Ok(a.launch(Kernel::Binary, count));
            }
            a.u(integer_kind(x.dtype)?)?.value(shape).status();
            Ok(a.launch(Kernel::BinaryInteger, count))
        }
        Op::Unary(activation) => {
            a.tensor(&input(0)?)
                .tensor(&out)
                .u(count)?
                .activation(activation)?;
            Ok(a.launch(Kernel::Unary, count))
        }
        Op::BatchNorm {
            epsilon,
            activation,
        } => {
            let x = input(0)?;
            let rank = x.shape.rank();
            let channels = if rank > 1 { x.shape.dim(1) } else { 1 };
            let inner = if rank > 2 {
                x.shape.product(2..rank)
            } else {
                1
            };
            for i in 0..5 {
                a.tensor(&input(i)?);
            }
            a.tensor(&out)
                .u(count)?
                .u(channels)?
                .u(inner)?
                .f(epsilon)
                .activation(activation)?;
            Ok(a.launch(Kernel::BatchNorm, count))
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } | Op::Hardmax { axis } => {
            let [outer, len, inner] = lanes(&out.shape, axis);
            let mode = match step.op {
                Op::Softmax { .. } => 0,
                Op::LogSoftmax { .. } => 1,
                _ => 2,
            };
            a.tensor(&input(0)?)
                .tensor(&out)
                .u(outer)?
                .u(len)?
                .u(inner)?
                .u(mode)?;
            Ok(a.launch(Kernel::Softmax, outer * inner))
        }
        Op::ArgMax(arg) | Op::ArgMin(arg) => {
            let x = input(0)?;
            let [outer, len, inner] = lanes(&x.shape, arg.axis);
            let is_max = usize::from(matches!(step.op, Op::ArgMax(_)));
            a.tensor(&x)
                .tensor(&out)
                .u(outer)?
                .u(len)?
                .u(inner)?
                .u(is_max)?
                .u(usize::from(arg.last))?;
            Ok(a.launch(Kernel::ArgExtreme, outer * inner))
        }
        Op::MaxPool(pool) | Op::AvgPool(pool) => {
            let x = input(0)?;
            let [n, c, h, w] = nchw(&x.shape).ok_or("pool input rank")?;
            let [_, _, oh, ow] = nchw(&out.shape).ok_or("pool output rank")?;
            let is_max = matches!(step.op, Op::MaxPool(_));
            let mut shape = Words::default();
            shape.all(&[
                n * c,
                h,
                w,
                oh,
                ow,
                usize::from(is_max),
                usize::from(pool.count_include_pad),
            ])?;
            let mut win = Words::default();
            win.window(&pool.window)?;
            a.tensor(&x).tensor(&out).value(shape).value(win);
            Ok(a.launch(Kernel::Pool, count))
        }
        Op::GlobalAvgPool => {
            let x = input(0)?;
            let split = 2.min(x.shape.rank());
            let planes = x.shape.product(0..split);
            let plane = x.shape.product(split..x.shape.rank());
            a.tensor(&x).tensor(&out).u(planes)?.u(plane)?;
            Ok(a.launch(Kernel::GlobalAvgPool, planes))
        }
        Op::Reduce { op, axes } => {
            let x = input(0)?;
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
            let mut r = Words::default();
            r.u(x.shape.rank())?
                .axes(x.shape.dims())?
                .u(axes as usize & ((1 << MAX_RANK) - 1))?
                .u(code)?;
            a.tensor(&x).tensor(&out).u(count)?.value(r);
            Ok(a.launch(Kernel::Reduce, count))
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
            let mut shape = Words::default();
            shape
                .u(rank)?
                .axes(out.shape.dims())?
                .axes(x.shape.dims())?
                .axes(&begins[..rank])?;
            let mode = match mode {
                PadMode::Constant => 0,
                PadMode::Reflect => 1,
                PadMode::Edge => 2,
            };
            a.tensor(&x)
                .tensor(&out)
                .u(count)?
                .u(words)?
                .u(mode)?
                .value(Words(vec![fill as u32]))
                .value(Words(vec![(fill >> 32) as u32]))
                .value(shape);
            Ok(a.launch(Kernel::Pad, count))
        }
        Op::Gather { axis } => {
            let (x, idx) = (input(0)?, input(1)?);
            let index_words = match idx.dtype {
                DType::I32 => 1,
                DType::I64 => 2,
                _ => return Err("gather indices must be int32 or int64"),
            };
            let [_, len, inner] = lanes(&x.shape, axis);
            a.tensor(&x)
                .tensor(&idx)
                .tensor(&out)
                .u(count)?
                .u(len)?
                .u(idx.elements())?
                .u(inner)?
                .u(element_words(x.dtype)?)?
                .u(index_words)?
                .status();
            Ok(a.launch(Kernel::Gather, count))
        }
        Op::Resample {
            axis,
            extrapolation,
        } => {
            let (x, idx, w) = (input(0)?, input(1)?, input(2)?);
            if idx.dtype != DType::I32 {
                return Err("resample tables must be int32");
            }
            let [_, out_len, inner] = lanes(&out.shape, axis);
            a.tensor(&x)
                .tensor(&idx)
                .tensor(&w)
                .tensor(&out)
                .u(count)?
                .u(out_len)?
                .u(inner)?
                .u(x.shape.dim(axis))?
                .u(idx.shape.dim(1))?
                .f(extrapolation)
                .status();
            Ok(a.launch(Kernel::Resample, count))
        }
        Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Expand
        | Op::Concat { .. }
        | Op::Split { .. } => {
            let mut commands = Vec::new();
            StridedCopy::of_step(step, &mut |src, dst, copy| {
                commands.extend(strided_copy(&src, &dst, &copy)?);
                Ok(())
            })?;
            Ok(commands)
        }
        Op::Copy => Ok(vec![Command::Copy {
            src: input(0)?.location,
            dst: match out.location {
                Location::Arena(o) => o,
                Location::Weights(_) => return Err("an output in the weights"),
            },
            bytes: out.bytes,
        }]),
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
        | Op::QAvgPool(_) => Err("quantized ops are not implemented by the CUDA kernels"),
        Op::Dft(_) => Err("DFT is not implemented by the CUDA kernels"),
        Op::TreeEnsemble(_) => Err("tree ensembles are not implemented by the CUDA kernels"),
        Op::Compare(op) => {
            let (x, y) = (input(0)?, input(1)?);
            let code = match op {
                CompareOp::Equal => 0,
                CompareOp::Less => 1,
                CompareOp::LessOrEqual => 2,
                CompareOp::Greater => 3,
                CompareOp::GreaterOrEqual => 4,
            };
            a.tensor(&x)
                .tensor(&y)
                .tensor(&out)
                .u(count)?
                .u(code)?
                .u(compare_kind(x.dtype)?)?
                .value(broadcast3(&out.shape, [Some(&x), Some(&y), None])?);
            Ok(a.launch(Kernel::Compare, count))
        }
        Op::Logical(op) => {
            let (x, y) = (input(0)?, input(1)?);
            let code = match op {
                LogicalOp::And => 0,
                LogicalOp::Or => 1,
                LogicalOp::Xor => 2,
            };
            a.tensor(&x)
                .tensor(&y)
                .tensor(&out)
                .u(count)?
                .u(code)?
                .value(broadcast3(&out.shape, [Some(&x), Some(&y), None])?);
            Ok(a.launch(Kernel::Logical, count))
        }
        Op::Not => {
            let x = input(0)?;
            a.tensor(&x)
                .tensor(&x)
                .tensor(&out)
                .u(count)?
                .u(3)?
                .value(broadcast3(&out.shape, [Some(&x), Some(&x), None])?);
            Ok(a.launch(Kernel::Logical, count))
        }
        Op::Where => {
            let (c, x, y) = (input(0)?, input(1)?, input(2)?);
            a.tensor(&c)
                .tensor(&x)
                .tensor(&y)
                .tensor(&out)
                .u(count)?
                .u(out.dtype.size())?
                .value(broadcast3(&out.shape, [Some(&c), Some(&x), Some(&y)])?);
            Ok(a.launch(Kernel::Choose, count))
        }
        Op::Trilu { upper, k } => {
            let x = input(0)?;
            let rank = x.shape.rank();
            if rank < 2 {
                return Err("Trilu needs a matrix");
            }
            a.tensor(&x)
                .tensor(&out)
                .u(count)?
                .u(x.dtype.size())?
                .u(x.shape.dim(rank - 2))?
                .u(x.shape.dim(rank - 1))?
                .u(usize::from(upper))?
                .value(Words(vec![k as u32]));
            Ok(a.launch(Kernel::Trilu, count))
        }
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => {
            let x = input(0)?;
            let [outer, len, inner] = lanes(&x.shape, axis);
            a.tensor(&x)
                .tensor(&out)
                .u(outer)?
                .u(len)?
                .u(inner)?
                .u(number_kind(x.dtype)?)?
                .u(usize::from(exclusive))?
                .u(usize::from(reverse))?;
            Ok(a.launch(Kernel::CumSum, outer * inner))
        }
        Op::Recurrent(rec) => lower_recurrent(step, &rec),
        Op::Convert => {
            let x = input(0)?;
            a.tensor(&x)
                .tensor(&out)
                .u(count)?
                .u(cast_kind(x.dtype)?)?
                .u(cast_kind(out.dtype)?)?;
            Ok(a.launch(Kernel::Convert, count))
        }
        Op::Classify(detect) => {
            a.tensor(&input(0)?)
                .tensor(&out)
                .u(count)?
                .u(usize::from(detect.nan))?
                .u(usize::from(detect.positive_infinity))?
                .u(usize::from(detect.negative_infinity))?;
            Ok(a.launch(Kernel::Classify, count))
        }
        Op::GatherElements { axis } => {
            let (x, idx) = (input(0)?, input(1)?);
            let index_words = match idx.dtype {
                DType::I32 => 1,
                DType::I64 => 2,
                _ => return Err("gather indices must be int32 or int64"),
            };
            let rank = out.shape.rank();
            let mut walk = Words::default();
            walk.all(&[rank, axis, x.shape.dim(axis)])?
                .axes(out.shape.dims())?
                .axes(&x.shape.strides()[..rank])?;
            a.tensor(&x)
                .tensor(&idx)
                .tensor(&out)
                .u(count)?
                .u(element_words(x.dtype)?)?
                .u(index_words)?
                .value(walk)
                .status();
            Ok(a.launch(Kernel::GatherElements, count))
        }
        Op::TopK { axis, largest } => {
            let x = input(0)?;
            let indices = step.outputs.get(1).ok_or("missing output")?;
            let [outer, len, inner] = lanes(&x.shape, axis);
            a.tensor(&x)
                .tensor(&out)
                .tensor(&indices)
                .u(outer)?
                .u(len)?
                .u(inner)?
                .u(out.shape.dim(axis))?
                .u(usize::from(largest))?
                .u(number_kind(x.dtype)?)?;
            Ok(a.launch(Kernel::TopK, outer * inner))
        }
        Op::ScatterElements { axis, reduction } => {
            let (data, idx, updates) = (input(0)?, input(1)?, input(2)?);
            let rank = updates.shape.rank();
            let mut walk = Words::default();
            walk.all(&[rank, axis, data.shape.dim(axis)])?
                .axes(updates.shape.dims())?
                .axes(&out.shape.strides()[..rank])?;
            let along = updates.shape.dim(axis);
            let fibers = updates.elements().checked_div(along).unwrap_or(0);
            let mut commands = copy_into(&data, &out)?;
            a.tensor(&out)
                .tensor(&idx)
                .tensor(&updates)
                .u(fibers)?
                .u(reduction_code(reduction))?
                .u(number_kind(data.dtype)?)?
                .u(index_words(idx.dtype)?)?
                .value(walk)
                .status();
            commands.extend(a.launch(Kernel::ScatterElements, fibers));
            Ok(commands)
        }
        Op::GatherNd { batch_dims } => {
            let (data, idx) = (input(0)?, input(1)?);
            let walk = tuple_walk(&data.shape, &idx.shape, batch_dims)?;
            a.tensor(&data)
                .tensor(&idx)
                .tensor(&out)
                .u(count)?
                .u(element_words(data.dtype)?)?
                .u(index_words(idx.dtype)?)?
                .value(walk)
                .status();
            Ok(a.launch(Kernel::GatherNd, count))
        }
        Op::ScatterNd { reduction } => {
            let (data, idx, updates) = (input(0)?, input(1)?, input(2)?);
            let walk = tuple_walk(&data.shape, &idx.shape, 0)?;
            let r = idx.shape.rank();
            let tuples = idx.shape.product(0..r - 1);
            let q = idx.shape.dim(r - 1);
            let slice = data.shape.product(q..data.shape.rank());
            let mut commands = copy_into(&data, &out)?;
            a.tensor(&out)
                .tensor(&idx)
                .tensor(&updates)
                .u(tuples)?
                .u(reduction_code(reduction))?
                .u(number_kind(data.dtype)?)?
                .u(index_words(idx.dtype)?)?
                .value(walk)
                .status();
            if tuples > 0 {
                commands.extend(a.launch(Kernel::ScatterNd, slice));
            }
            Ok(commands)
        }
        Op::Det => {
            let x = input(0)?;
            let n = x.shape.dim(x.shape.rank() - 1);
            let scratch = step.scratch.ok_or("a determinant without scratch")?;
            a.tensor(&x)
                .tensor(&out)
                .at(scratch.location)
                .u(count)?
                .u(n)?;
            // One thread: the matrices share the scratch, one after another.
            Ok(if count == 0 {
                Vec::new()
            } else {
                a.launch(Kernel::Det, 1)
            })
        }
    }
}

/// The `compare` kernel's code for an element type: f32 0, bool as uint8, integers as
/// [`integer_kind`].
fn compare_kind(dtype: DType) -> Result<usize, Refusal> {
    match dtype {
        DType::F32 => Ok(0),
        DType::Bool => Ok(4),
        other => integer_kind(other),
    }
}

/// The `binary_integer` kernel's code for an integer type.
fn integer_kind(dtype: DType) -> Result<usize, Refusal> {
    match dtype {
        DType::I32 => Ok(1),
        DType::I64 => Ok(2),
        DType::U8 => Ok(4),
        DType::I8 => Ok(5),
        DType::I16 => Ok(6),
        DType::U16 => Ok(7),
        DType::U32 => Ok(8),
        DType::U64 => Ok(9),
        _ => Err("integer arithmetic needs an integer type"),
    }
}

/// Words per index: int32 1, int64 2.
fn index_words(dtype: DType) -> Result<usize, Refusal> {
    match dtype {
        DType::I32 => Ok(1),
        DType::I64 => Ok(2),
        _ => Err("indices must be int32 or int64"),
    }
}

/// The kernels' code for a scatter's reduction.
fn reduction_code(reduction: Reduction) -> usize {
    match reduction {
        Reduction::None => 0,
        Reduction::Add => 1,
        Reduction::Mul => 2,
        Reduction::Max => 3,
        Reduction::Min => 4,
    }
}

/// A copy of `data` into `out` (scatters start from it), unless they are the same bytes.
fn copy_into(data: &TensorDesc, out: &TensorDesc) -> Result<Vec<Command>, Refusal> {
    let dst = match out.location {
        Location::Arena(o) => o,
        Location::Weights(_) => return Err("an output in the weights"),
    };
    Ok(if data.location == out.location || out.bytes == 0 {
        Vec::new()
    } else {
        vec![Command::Copy {
            src: data.location,
            dst,
            bytes: out.bytes,
        }]
    })
}

/// `struct TupleWalk` (indexing.cu) for index tuples `indices` `[..., q]` into `data` after
/// `batch` shared leading axes.
fn tuple_walk(data: &Shape, indices: &Shape, batch: usize) -> Result<Words, Refusal> {
    let r = indices.rank();
    if r == 0 {
        return Err("index tuples need a last axis");
    }
    let q = indices.dim(r - 1);
    if batch + q > data.rank() || batch > r - 1 {
        return Err("index tuples longer than the data's rank");
    }
    let strides = data.strides();
    let mut w = Words::default();
    w.all(&[
        q,
        indices.product(batch..r - 1),
        data.product(batch + q..data.rank()),
        data.product(batch..data.rank()),
    ])?
    .axes(&data.dims()[batch..batch + q])?
    .axes(&strides[batch..batch + q])?;
    Ok(w)
}

/// The kernels' code for an element type they compute on: f32 0, int32 1, int64 2.
fn number_kind(dtype: DType) -> Result<usize, Refusal> {
    match dtype {
        DType::F32 => Ok(0),
        DType::I32 => Ok(1),
        DType::I64 => Ok(2),
        _ => Err("the CUDA kernels compare and sum float32, int32 and int64"),
    }
}

/// The `convert` kernel's code for an element type.
fn cast_kind(dtype: DType) -> Result<usize, Refusal> {
    match dtype {
        DType::F32 => Ok(0),
        DType::I32 => Ok(1),
        DType::I64 => Ok(2),
        DType::Bool => Ok(3),
        DType::U8 => Ok(4),
        DType::I8 => Ok(5),
        DType::F64 => Ok(6),
        DType::F16 => Ok(7),
        DType::BF16 => Ok(8),
        DType::I16 => Ok(9),
        DType::U16 => Ok(10),
        DType::U32 => Ok(11),
        _ => Err("the CUDA Cast does not convert uint64"),
    }
}

/// `struct Broadcast3` (logic.cu): the output's dims and up to three operands' strides.
fn broadcast3(out: &Shape, operands: [Option<&TensorDesc>; 3]) -> Result<Words, Refusal> {
    let rank = out.rank();
    let mut w = Words::default();
    w.u(rank)?.axes(out.dims())?;
    for t in operands {
        match t {
            Some(t) => w.axes(&broadcast_strides(&t.shape, out)[..rank])?,
            None => w.axes(&[])?,
        };
    }
    Ok(w)
}

/// `location` moved on by `bytes`.
fn offset(location: Location, bytes: usize) -> Location {
    match location {
        Location::Arena(o) => Location::Arena(o + bytes),
        Location::Weights(o) => Location::Weights(o + bytes),
    }
}

/// One recurrent direction: its initial state, then per time step a `recurrent_gates` launch
/// and one `recurrent_cell` launch (two for a GRU: its z and r gates first) that writes the
/// step's H into its slot of Y; finally the last H copied to Y_h. Y_c holds the running cell
/// state; the scratch holds the two gate products.
fn lower_recurrent(step: &Step<'_>, rec: &Recurrent) -> Result<Vec<Command>, Refusal> {
    let input = |i: usize| step.inputs.get(i).ok_or("missing input");
    let output = |i: usize| step.outputs.get(i).ok_or("missing output");
    let in_arena = |t: &TensorDesc| match t.location {
        Location::Arena(o) => Ok(o),
        Location::Weights(_) => Err("a recurrent output in the weights"),
    };
    let (x, w, r) = (input(0)?, input(1)?, input(2)?);
    let (bias, initial_h, initial_c, peep) = (
        step.inputs.get(3),
        step.inputs.get(4),
        step.inputs.get(5),
        step.inputs.get(6),
    );
    let scratch = step.scratch.ok_or("a recurrent step without scratch")?;
    let (seq, batch, features) = (x.shape.dim(0), x.shape.dim(1), x.shape.dim(2));
    let hidden = r.shape.dim(1);
    let rows = rec.cell.gates() * hidden;
    let state = batch * hidden * 4;
    let y = in_arena(&output(0)?)?;
    let y_h = in_arena(&output(1)?)?;
    let (kind, flag) = match rec.cell {
        Cell::Rnn => (0, false),
        Cell::Gru {
            linear_before_reset,
        } => (1, linear_before_reset),
        Cell::Lstm { input_forget } => (2, input_forget),
    };
    let mut commands = Vec::new();
    let h0 = match initial_h {
        Some(t) => t.location,
        None => {
            commands.push(Command::Zero {
                dst: y_h,
                bytes: state,
            });
            Location::Arena(y_h)
        }
    };
    let c = if kind == 2 {
        let y_c = in_arena(&output(2)?)?;
        commands.push(match initial_c {
            Some(t) => Command::Copy {
                src: t.location,
                dst: y_c,
                bytes: state,
            },
            None => Command::Zero {
                dst: y_c,
                bytes: state,
            },
        });
        Some(Location::Arena(y_c))
    } else {
        None
    };
    let from_x = scratch.location;
    let from_h = offset(scratch.location, batch * rows * 4);
    let mut shape = Words::default();
    shape.all(&[batch, features, hidden, rows])?;
    let shape = shape.0;
    let time = |step: usize| if rec.reverse { seq - 1 - step } else { step };
    for s in 0..seq {
        let t = time(s);
        let previous = if s == 0 {
            h0
        } else {
            Location::Arena(y + time(s - 1) * state)
        };
        let mut gates = Args::default();
        gates
            .at(offset(x.location, t * batch * features * 4))
            .tensor(&w)
            .tensor(&r)
            .optional(bias)
            .at(previous)
            .at(from_x)
            .at(from_h)
            .value(Words(shape.clone()));
        commands.extend(gates.launch(Kernel::RecurrentGates, 2 * batch * rows));
        let phases: &[usize] = if kind == 1 { &[0, 1] } else { &[1] };
        for &phase in phases {
            let mut cell = Args::default();
            cell.at(from_x).at(from_h).at(previous);
            match c {
                Some(c) => cell.at(c),
                None => cell.optional(None),
            };
            let mut settings = Words::default();
            settings.all(&[kind, usize::from(flag), phase])?.f(rec.clip);
            cell.optional(peep)
                .tensor(&r)
                .optional(bias)
                .at(Location::Arena(y + t * state))
                .value(Words(shape.clone()))
                .value(settings);
            for act in rec.activations {
                cell.activation(act)?;
            }
            let work = batch * hidden * if phase == 0 { 2 } else { 1 };
            commands.extend(cell.launch(Kernel::RecurrentCell, work));
        }
    }
    if seq > 0 {
        commands.push(Command::Copy {
            src: Location::Arena(y + time(seq - 1) * state),
            dst: y_h,
            bytes: state,
        });
    } else if let Some(h) = initial_h {
        commands.push(Command::Copy {
            src: h.location,
            dst: y_h,
            bytes: state,
        });
    }
    Ok(commands)
}

/// `[n, c, h, w, oc, oh, ow, group]` of a convolution step.
fn conv_shape(step: &Step<'_>, group: usize) -> Result<[usize; 8], Refusal> {
    let x = step.inputs.get(0).ok_or("missing input")?;
    let y = step.outputs.get(0).ok_or("missing output")?;
    let [n, c, h, w] = nchw(&x.shape).ok_or("convolution input rank")?;
    let [_, oc, oh, ow] = nchw(&y.shape).ok_or("convolution output rank")?;
    Ok([n, c, h, w, oc, oh, ow, group.max(1)])
}

/// The arguments every convolution kernel takes: `x, weight, bias, y, ConvShape, Window,
/// Activation`.
fn conv_args(
    a: &mut Args,
    step: &Step<'_>,
    shape: [usize; 8],
    win: &Window,
    activation: Activation,
) -> Result<(), Refusal> {
    let x = step.inputs.get(0).ok_or("missing input")?;
    let weight = step.inputs.get(1).ok_or("missing weights")?;
    let y = step.outputs.get(0).ok_or("missing output")?;
    let mut s = Words::default();
    s.all(&shape)?;
    let mut w = Words::default();
    w.window(win)?;
    a.tensor(&x)
        .tensor(&weight)
        .optional(step.inputs.get(2))
        .tensor(&y)
        .value(s)
        .value(w)
        .activation(activation)?;
    Ok(())
}

/// A `copy_strided` launch running `copy` from `src` to `dst`.
fn strided_copy(
    src: &TensorDesc,
    dst: &TensorDesc,
    copy: &StridedCopy,
) -> Result<Vec<Command>, Refusal> {
    let dims = &copy.dims;
    let count = dims.elements().ok_or("copy size")?;
    let rank = dims.rank();
    let mut walk = Words::default();
    walk.u(rank)?
        .axes(dims.dims())?
        .signed_axes(&copy.src_strides[..rank])?
        .axes(&copy.dst_strides[..rank])?;
    let src_base =
        i32::try_from(copy.src_base).map_err(|_| "an offset exceeds 32-bit GPU indexing")?;
    let mut a = Args::default();
    a.tensor(src)
        .tensor(dst)
        .u(count)?
        .u(element_words(src.dtype)?)?
        .value(Words(vec![src_base as u32]))
        .u(copy.dst_base)?
        .value(walk);
    Ok(a.launch(Kernel::CopyStrided, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_hal::op::Conv;
    use ferrite_hal::{TensorList, Tensors};

    /// Tensors by index, for hand-built steps.
    struct Table(Vec<TensorDesc>);

    impl Tensors for Table {
        fn tensor(&self, index: u32) -> Option<TensorDesc> {
            self.0.get(index as usize).copied()
        }
    }

    fn f32_tensor(dims: &[usize], offset: usize) -> TensorDesc {
        let shape = Shape::new(dims).unwrap();
        TensorDesc {
            dtype: DType::F32,
            bytes: shape.elements().unwrap() * 4,
            shape,
            location: Location::Arena(offset),
        }
    }

    fn indices(list: &[u32]) -> Vec<u8> {
        list.iter().flat_map(|i| i.to_le_bytes()).collect()
    }

    fn lowered(op: Op, table: &Table, inputs: &[u32], outputs: &[u32]) -> Vec<Command> {
        let (i, o) = (indices(inputs), indices(outputs));
        let step = Step {
            index: 0,
            op,
            inputs: TensorList::new(&i, table),
            outputs: TensorList::new(&o, table),
            scratch: None,
        };
        lower(&step).unwrap()
    }

    fn launch(commands: &[Command]) -> &Launch {
        match commands {
            [Command::Launch(l)] => l,
            other => panic!("expected one launch, got {other:?}"),
        }
    }

    fn conv(c: usize, oc: usize, group: usize) -> Vec<Command> {
        let table = Table(vec![
            f32_tensor(&[1, c, 8, 8], 0),
            f32_tensor(&[oc, c / group, 3, 3], 1 << 20),
            f32_tensor(&[1, oc, 8, 8], 2 << 20),
        ]);
        let window = Window {
            kernel: [3, 3],
            stride: [1, 1],
            dilation: [1, 1],
            pads: [1, 1, 1, 1],
        };
        let op = Op::Conv(Conv {
            window,
            group,
            activation: Activation::Relu,
        });
        lowered(op, &table, &[0, 1, ferrite_hal::device::ABSENT], &[2])
    }

    #[test]
    fn wide_convolutions_run_as_implicit_gemm_thin_ones_direct() {
        let gemm = conv(16, 32, 1);
        let l = launch(&gemm);
        assert_eq!(l.kernel, Kernel::ConvGemm);
        // 64 output positions / 16, 32 channels / 16, one group.
        assert_eq!(l.grid, [4, 2, 1]);
        assert_eq!(l.block, [16, 16, 1]);
        // x, weight, bias (absent), y, ConvShape (8 words), Window (10), Activation (3).
        assert_eq!(l.args.len(), 7);
        assert_eq!(l.args[2], Arg::Null);
        assert!(matches!(&l.args[4], Arg::Words(w) if w.len() == 8));
        assert!(matches!(&l.args[5], Arg::Words(w) if w.len() == 10));
        assert!(matches!(&l.args[6], Arg::Words(w) if w.len() == 3));
        let depthwise = conv(16, 16, 16);
        assert_eq!(launch(&depthwise).kernel, Kernel::Conv);
    }

    /// The lowering's launch geometry is the kernels' (`kernels/common.cuh`).
    #[test]
    fn launch_geometry_matches_the_kernels() {
        let header = include_str!("../kernels/common.cuh");
        let define = |name: &str| {
            header.lines().find_map(|line| {
                let rest = line.strip_prefix("#define ")?.strip_prefix(name)?;
                rest.trim().parse::<usize>().ok()
            })
        };
        assert_eq!(define("FERRITE_TILE"), Some(TILE));
        assert_eq!(define("FERRITE_ROW_COLUMNS"), Some(ROW_COLUMNS));
    }

    /// Products of fewer than `TILE` rows take the row kernel (one block row per output row),
    /// larger ones the output tiles; batched MatMul keeps its batch on the grid's z.
    #[test]
    fn products_of_few_rows_split_k_and_larger_ones_tile() {
        let cases = [
            (1, 1, Kernel::MatMulRows, [5, 1, 1]),
            (15, 1, Kernel::MatMulRows, [5, 15, 1]),
            (16, 1, Kernel::MatMul, [3, 1, 1]),
            (40, 1, Kernel::MatMul, [3, 3, 1]),
            (2, 5, Kernel::MatMulRows, [5, 2, 5]),
        ];
        for (m, batches, kernel, grid) in cases {
            let table = Table(vec![
                f32_tensor(&[batches, m, 20], 0),
                f32_tensor(&[batches, 20, 40], 1 << 20),
                f32_tensor(&[batches, m, 40], 2 << 20),
            ]);
            let op = Op::MatMul {
                activation: Activation::None,
            };
            let l = lowered(op, &table, &[0, 1], &[2]);
            let got = launch(&l);
            assert_eq!((got.kernel, got.grid), (kernel, grid), "m = {m}");
            assert_eq!(got.block, [TILE as u32, TILE as u32, 1]);
        }
    }

    #[test]
    fn grids_are_clamped_and_empty_steps_launch_nothing() {
        let big = Table(vec![
            f32_tensor(&[1 << 24], 0),
            f32_tensor(&[1 << 24], 1 << 26),
        ]);
        let unary = Op::Unary(Activation::Relu);
        let l = lowered(unary, &big, &[0], &[1]);
        assert_eq!(launch(&l).grid, [MAX_BLOCKS as u32, 1, 1]);
        let empty = Table(vec![f32_tensor(&[0], 0), f32_tensor(&[0], 0)]);
        assert!(lowered(unary, &empty, &[0], &[1]).is_empty());
    }
}
