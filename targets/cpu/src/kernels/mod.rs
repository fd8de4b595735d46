//! The portable kernels, one module per family, and [`run_step`], which carves a step's operands
//! out of the arena and calls the right kernel.

#[cfg(feature = "quantized")]
pub mod accumulate;
pub mod conv;
pub mod elementwise;
pub mod fourier;
pub mod gemm;
pub mod index;
pub mod indexing;
#[cfg(feature = "quantized")]
pub mod integer;
#[cfg(all(
    feature = "quantized",
    feature = "std",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod integer_simd;
pub mod logic;
pub mod matmul;
pub mod movement;
pub mod numeric;
pub mod pool;
pub mod quantize;
pub mod recurrent;
pub mod reduce;
pub mod resample;
pub mod trees;

use crate::memory::{carve, carve_spans, f32s, f32s_mut, span, Readable, Src};
use crate::CpuError;
use elementwise::Operand;
use ferrite_hal::geometry::{nchw, MatMulGeometry};
use ferrite_hal::{
    selects, selects_dtype, selects_size, Activation, DType, Op, OpKind, Selection, Step,
    TensorDesc, ALL_OPS,
};

/// Runs `$body` with `$src`/`$dst` bound to the byte slices viewed as elements of `$dtype`'s
/// size (u8, u32 or u64): data movement only copies elements, whatever their type.
macro_rules! with_elements {
    ($ops:ident, $dtype:expr, $src:expr, $dst:expr, |$s:ident, $d:ident| $body:expr) => {{
        let bad = |_| CpuError::Misaligned;
        match $dtype.size() {
            1 if selects_size($ops, 1) => {
                let ($s, $d): (&[u8], &mut [u8]) = ($src, $dst);
                $body;
            }
            2 if selects_size($ops, 2) => {
                let $s: &[u16] = bytemuck::try_cast_slice($src).map_err(bad)?;
                let $d: &mut [u16] = bytemuck::try_cast_slice_mut($dst).map_err(bad)?;
                $body;
            }
            4 if selects_size($ops, 4) => {
                let $s: &[u32] = bytemuck::try_cast_slice($src).map_err(bad)?;
                let $d: &mut [u32] = bytemuck::try_cast_slice_mut($dst).map_err(bad)?;
                $body;
            }
            8 if selects_size($ops, 8) => {
                let $s: &[u64] = bytemuck::try_cast_slice($src).map_err(bad)?;
                let $d: &mut [u64] = bytemuck::try_cast_slice_mut($dst).map_err(bad)?;
                $body;
            }
            _ => return Err(CpuError::Unsupported),
        }
    }};
}

/// Evaluates `$body` with the type alias `$t` naming the Rust type of integer dtype `$dtype`,
/// or `$otherwise` for any other dtype: one dispatch for every integer kernel.
macro_rules! with_integer {
    ($ops:ident, $dtype:expr, $t:ident => $body:expr, _ => $otherwise:expr) => {
        match $dtype {
            DType::I8 if selects_dtype($ops, DType::I8) => {
                type $t = i8;
                $body
            }
            DType::U8 if selects_dtype($ops, DType::U8) => {
                type $t = u8;
                $body
            }
            DType::I16 if selects_dtype($ops, DType::I16) => {
                type $t = i16;
                $body
            }
            DType::U16 if selects_dtype($ops, DType::U16) => {
                type $t = u16;
                $body
            }
            DType::I32 if selects_dtype($ops, DType::I32) => {
                type $t = i32;
                $body
            }
            DType::U32 if selects_dtype($ops, DType::U32) => {
                type $t = u32;
                $body
            }
            DType::I64 if selects_dtype($ops, DType::I64) => {
                type $t = i64;
                $body
            }
            DType::U64 if selects_dtype($ops, DType::U64) => {
                type $t = u64;
                $body
            }
            _ => $otherwise,
        }
    };
}

/// Runs one verified step on `arena` (tensors at their planned offsets) and `weights`.
///
/// With `std` on x86-64 the kernels are also compiled for AVX2+FMA (they are inlined into one
/// step function built both ways) and that build is chosen at run time (module `simd`).
pub fn run_step(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if simd::level() >= simd::Level::Avx2 {
        return simd::run_step(step, arena, weights);
    }
    run_step_inline::<ALL_OPS>(step, arena, weights, 0)
}

/// [`run_step`] with only the kernels of the op kinds in mask `OPS` compiled in
/// (`ferrite_hal::op_mask`; `ferrite pack --emit rust` writes a model's as `OPS`): a firmware
/// that runs one model links just its kernels. Other kinds return [`CpuError::Unsupported`]
/// (a device built so does not list them, so the core refuses such a model at load). The
/// portable build; x86-64 SIMD dispatch is for [`ALL_OPS`].
pub fn run_step_selected<const OPS: Selection>(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    if OPS == ALL_OPS {
        return run_step(step, arena, weights);
    }
    run_step_inline::<OPS>(step, arena, weights, 0)
}

/// [`run_step_selected`] for a device that runs the int8 (int8 in, int8 out) steps of the
/// kinds in `covered_int8` with kernels of its own: their portable int8 kernels are left out
/// (a step that reaches them is [`CpuError::Unsupported`]). `covered_int8` must be a constant.
/// On a host, [`ALL_OPS`] keeps the one shared build of every kernel ([`run_step`], with its
/// SIMD builds); a microcontroller's every-kernel firmware has this one build, without the
/// covered kernels.
#[inline(always)]
pub fn run_step_after<const OPS: Selection>(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
    #[cfg_attr(not(feature = "quantized"), allow(unused_variables))] covered_int8: Selection,
) -> Result<(), CpuError> {
    if OPS == ALL_OPS && cfg!(feature = "std") {
        return run_step(step, arena, weights);
    }
    run_step_inline::<OPS>(step, arena, weights, covered_int8)
}

/// Whether a build selecting `OPS`, whose int8 steps of the kinds in `covered_int8` run
/// elsewhere, needs the portable kernel of `kind`: not when the kind is covered and no other
/// activation type (uint8, int16) is selected (then the arm, with its operand decoding, is not
/// linked at all).
#[cfg(feature = "quantized")]
#[inline(always)]
const fn needs_portable(ops: Selection, covered_int8: Selection, kind: OpKind) -> bool {
    let other_types = selects_dtype(ops, DType::U8) || selects_dtype(ops, DType::I16);
    selects(ops, kind) && (!selects(covered_int8, kind) || other_types)
}

/// Which SIMD build runs (std, x86-64): chosen once per process from the CPU's features, or
/// forced with `FERRITE_CPU_SIMD=portable|avx2|avx512` (tests run every build this way).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[allow(unsafe_code)]
pub(crate) mod simd {
    use super::{run_step_inline, CpuError, Step};

    /// A SIMD build of the kernels.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    pub(crate) enum Level {
        /// Baseline x86-64 (SSE2), as compiled.
        Portable,
        /// AVX2 + FMA.
        Avx2,
        /// AVX-512F (matrix products; everything else as AVX2).
        Avx512,
    }

    /// The build to use.
    pub(crate) fn level() -> Level {
        static LEVEL: std::sync::OnceLock<Level> = std::sync::OnceLock::new();
        *LEVEL.get_or_init(|| {
            let avx2 =
                std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
            let avx512 = avx2 && std::is_x86_feature_detected!("avx512f");
            let best = match (avx512, avx2) {
                (true, _) => Level::Avx512,
                (false, true) => Level::Avx2,
                _ => Level::Portable,
            };
            match std::env::var("FERRITE_CPU_SIMD").as_deref() {
                Ok("portable") => Level::Portable,
                Ok("avx2") => best.min(Level::Avx2),
                _ => best,
            }
        })
    }

    #[target_feature(enable = "avx2,fma")]
    fn run_step_avx2(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
        run_step_inline::<{ ferrite_hal::ALL_OPS }>(step, arena, weights, 0)
    }

    /// Runs a step with the AVX2 build of every kernel.
    pub(super) fn run_step(
        step: &Step<'_>,
        arena: &mut [u8],
        weights: &[u8],
    ) -> Result<(), CpuError> {
        // SAFETY: only called when `level()` is at least AVX2, i.e. the CPU has AVX2 and FMA.
        unsafe { run_step_avx2(step, arena, weights) }
    }
}

/// The body of [`run_step`], inlined into each build of it.
#[inline(always)]
fn run_step_inline<const OPS: Selection>(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
    #[cfg_attr(not(feature = "quantized"), allow(unused_variables))] covered_int8: Selection,
) -> Result<(), CpuError> {
    match step.op {
        Op::Split { axis } if selects(OPS, OpKind::Split) => {
            return split::<OPS>(step, axis, arena, weights)
        }
        Op::DynamicQuantize if selects(OPS, OpKind::DynamicQuantize) => {
            return dynamic_quantize(step, arena, weights)
        }
        Op::TopK { axis, largest } if selects(OPS, OpKind::TopK) => {
            return top_k::<OPS>(step, axis, largest, arena, weights)
        }
        Op::Recurrent(r) if selects(OPS, OpKind::Recurrent) => {
            return recurrent::<OPS>(step, &r, arena, weights)
        }
        _ => {}
    }
    let out_desc = step.outputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let out_span = span(&out_desc).ok_or(CpuError::CorruptPlan)?;
    let scratch_span = step.scratch.as_ref().and_then(span);
    let (view, out, scratch) = carve(arena, weights, out_span, scratch_span)?;
    let input = |i: usize| step.inputs.get(i).ok_or(CpuError::CorruptPlan);
    let f32_in = |i: usize| -> Result<&[f32], CpuError> { f32s(view.bytes(&input(i)?)?) };
    let optional_f32 = |i: usize| -> Result<Option<&[f32]>, CpuError> {
        match step.inputs.get(i) {
            Some(t) => Ok(Some(f32s(view.bytes(&t)?)?)),
            None => Ok(None),
        }
    };
    match step.op {
        Op::Conv(c) if selects(OPS, OpKind::Conv) => {
            let dims = conv::ConvDims::of(&input(0)?.shape, &out_desc.shape)
                .ok_or(CpuError::CorruptPlan)?;
            let scratch = match scratch {
                Some(s) => f32s_mut(s)?,
                None => &mut [][..],
            };
            let out = f32s_mut(out)?;
            conv::conv(
                &c,
                dims,
                f32_in(0)?,
                f32_in(1)?,
                optional_f32(2)?,
                out,
                scratch,
            );
            fused::<OPS>(c.activation, out);
        }
        Op::ConvTranspose(c) if selects(OPS, OpKind::ConvTranspose) => {
            let dims = conv::ConvDims::of(&input(0)?.shape, &out_desc.shape)
                .ok_or(CpuError::CorruptPlan)?;
            let out = f32s_mut(out)?;
            conv::conv_transpose(&c, dims, f32_in(0)?, f32_in(1)?, optional_f32(2)?, out);
            fused::<OPS>(c.activation, out);
        }
        Op::Gemm(g) if selects(OPS, OpKind::Gemm) => {
            let (a, b) = (input(0)?, input(1)?);
            let c = match step.inputs.get(2) {
                Some(t) => Some((f32s(view.bytes(&t)?)?, t.shape)),
                None => None,
            };
            let (m, k, n) = (a.shape.dim(0), a.shape.dim(1), b.shape.dim(1));
            let out = f32s_mut(out)?;
            matmul::gemm(&g, m, k, n, f32_in(0)?, f32_in(1)?, c, out);
            fused::<OPS>(g.activation, out);
        }
        Op::MatMul { activation } if selects(OPS, OpKind::MatMul) => {
            let g = MatMulGeometry::new(&input(0)?.shape, &input(1)?.shape)
                .ok_or(CpuError::CorruptPlan)?;
            let out = f32s_mut(out)?;
            matmul::matmul(&g, f32_in(0)?, f32_in(1)?, out);
            fused::<OPS>(activation, out);
        }
        Op::Binary { op, activation } if selects(OPS, OpKind::Binary) => {
            let (a, b) = (input(0)?, input(1)?);
            if a.dtype == DType::F32 {
                let (a, b) = (operand(&view, &a)?, operand(&view, &b)?);
                let out = f32s_mut(out)?;
                if OPS == ALL_OPS {
                    elementwise::binary::<OPS>(op, a, b, out, &out_desc.shape)
                } else {
                    elementwise::binary_out_of_line::<OPS>(op, a, b, out, &out_desc.shape)
                }
                fused::<OPS>(activation, out);
            } else {
                let (ab, bb) = (view.bytes(&a)?, view.bytes(&b)?);
                integer_binary::<OPS>(op, (a, ab), (b, bb), out, &out_desc.shape)?;
            }
        }
        Op::Resample {
            axis,
            extrapolation,
        } if selects(OPS, OpKind::Resample) => {
            let [outer, in_len, inner] = lanes(&input(0)?.shape, axis);
            let lanes = resample::Lanes {
                outer,
                in_len,
                inner,
            };
            let indices = cast::<i32>(view.bytes(&input(1)?)?)?;
            resample::resample(
                f32_in(0)?,
                lanes,
                indices,
                f32_in(2)?,
                extrapolation,
                f32s_mut(out)?,
            )?;
        }
        Op::Expand if selects(OPS, OpKind::Expand) => {
            let x = input(0)?;
            let bytes = view.bytes(&x)?;
            with_elements!(OPS, x.dtype, bytes, out, |src, dst| movement::expand(
                src,
                &x.shape,
                dst,
                &out_desc.shape
            ));
        }
        Op::GatherElements { axis } if selects(OPS, OpKind::GatherElements) => {
            let (x, idx) = (input(0)?, input(1)?);
            let (bytes, indices) = (view.bytes(&x)?, index_view(&view, &idx)?);
            with_elements!(OPS, x.dtype, bytes, out, |src, dst| {
                indexing::gather_elements(src, &x.shape, indices, &idx.shape, axis, dst)?
            });
        }
        Op::ScatterElements { axis, reduction } if selects(OPS, OpKind::ScatterElements) => {
            let (x, idx, up) = (input(0)?, input(1)?, input(2)?);
            let (bytes, indices) = (view.bytes(&x)?, index_view(&view, &idx)?);
            let values = view.bytes(&up)?;
            if x.dtype == DType::F32 {
                let u = indexing::Updates {
                    indices,
                    values: f32s(values)?,
                    reduction,
                };
                let (src, dst) = (f32s(bytes)?, f32s_mut(out)?);
                indexing::scatter_elements(src, &x.shape, u, &idx.shape, axis, dst)?;
            } else {
                with_elements!(OPS, x.dtype, bytes, out, |src, dst| {
                    let u = indexing::Updates {
                        indices,
                        values: cast(values)?,
                        reduction,
                    };
                    indexing::scatter_elements(src, &x.shape, u, &idx.shape, axis, dst)?
                });
            }
        }
        Op::GatherNd { batch_dims } if selects(OPS, OpKind::GatherNd) => {
            let (x, idx) = (input(0)?, input(1)?);
            let (bytes, indices) = (view.bytes(&x)?, index_view(&view, &idx)?);
            let (q, layout) = nd_layout(&x, &idx, batch_dims);
            with_elements!(OPS, x.dtype, bytes, out, |src, dst| {
                indexing::gather_nd(src, &x.shape, batch_dims, q, layout, indices, dst)?
            });
        }
        Op::ScatterNd { reduction } if selects(OPS, OpKind::ScatterNd) => {
            let (x, idx, up) = (input(0)?, input(1)?, input(2)?);
            let (bytes, indices) = (view.bytes(&x)?, index_view(&view, &idx)?);
            let values = view.bytes(&up)?;
            let (q, layout) = nd_layout(&x, &idx, 0);
            if x.dtype == DType::F32 {
                let u = indexing::Updates {
                    indices,
                    values: f32s(values)?,
                    reduction,
                };
                let (src, dst) = (f32s(bytes)?, f32s_mut(out)?);
                indexing::scatter_nd(src, &x.shape, q, layout, u, dst)?;
            } else {
                with_elements!(OPS, x.dtype, bytes, out, |src, dst| {
                    let u = indexing::Updates {
                        indices,
                        values: cast(values)?,
                        reduction,
                    };
                    indexing::scatter_nd(src, &x.shape, q, layout, u, dst)?
                });
            }
        }
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } if selects(OPS, OpKind::CumSum) => {
            let x = input(0)?;
            let lanes = lanes(&x.shape, axis);
            let bytes = view.bytes(&x)?;
            match x.dtype {
                DType::F32 => reduce::cumulative_sum(
                    f32s(bytes)?,
                    lanes,
                    exclusive,
                    reverse,
                    0.0,
                    |a, b| a + b,
                    f32s_mut(out)?,
                ),
                DType::I32 => reduce::cumulative_sum(
                    cast::<i32>(bytes)?,
                    lanes,
                    exclusive,
                    reverse,
                    0,
                    i32::wrapping_add,
                    cast_mut(out)?,
                ),
                DType::I64 => reduce::cumulative_sum(
                    cast::<i64>(bytes)?,
                    lanes,
                    exclusive,
                    reverse,
                    0,
                    i64::wrapping_add,
                    cast_mut(out)?,
                ),
                _ => return Err(CpuError::Unsupported),
            }
        }
        Op::Det if selects(OPS, OpKind::Det) => {
            let x = input(0)?;
            let n = x.shape.dim(x.shape.rank() - 1);
            let scratch = cast_mut::<f64>(scratch.ok_or(CpuError::CorruptPlan)?)?;
            reduce::determinant(f32_in(0)?, n, scratch, f32s_mut(out)?);
        }
        Op::Convert if selects(OPS, OpKind::Convert) => {
            let x = input(0)?;
            numeric::convert(x.dtype, view.bytes(&x)?, out_desc.dtype, out)?;
        }
        Op::Unary(act) if selects(OPS, OpKind::Unary) => {
            let out = f32s_mut(out)?;
            if let Src::Bytes(x) = view.src(&input(0)?)? {
                out.copy_from_slice(f32s(x)?);
            }
            elementwise::activate::<OPS>(act, out);
        }
        Op::LogSoftmax { axis } if selects(OPS, OpKind::LogSoftmax) => {
            elementwise::log_softmax(Some(f32_in(0)?), &out_desc.shape, axis, f32s_mut(out)?);
        }
        Op::Hardmax { axis } if selects(OPS, OpKind::Hardmax) => {
            elementwise::hardmax(f32_in(0)?, &out_desc.shape, axis, f32s_mut(out)?);
        }
        Op::ArgMax(a) | Op::ArgMin(a)
            if selects(OPS, OpKind::ArgMax) || selects(OPS, OpKind::ArgMin) =>
        {
            let lanes = lanes(&input(0)?.shape, a.axis);
            let max = matches!(step.op, Op::ArgMax(_));
            reduce::arg_extreme(f32_in(0)?, lanes, max, a.last, cast_mut(out)?);
        }
        Op::Compare(c) if selects(OPS, OpKind::Compare) => {
            let (a, b) = (input(0)?, input(1)?);
            let (ab, bb) = (view.bytes(&a)?, view.bytes(&b)?);
            let shape = out_desc.shape;
            fn operands<'x, T: bytemuck::Pod>(
                a: &'x [u8],
                sa: ferrite_hal::Shape,
                b: &'x [u8],
                sb: ferrite_hal::Shape,
            ) -> Result<[logic::Operand<'x, T>; 2], CpuError> {
                Ok([
                    logic::Operand {
                        data: cast(a)?,
                        shape: sa,
                    },
                    logic::Operand {
                        data: cast(b)?,
                        shape: sb,
                    },
                ])
            }
            let (sa, sb) = (a.shape, b.shape);
            match a.dtype {
                DType::F32 => {
                    let [x, y] = operands::<f32>(ab, sa, bb, sb)?;
                    logic::compare(c, x, y, out, &shape)
                }
                DType::Bool => {
                    let [x, y] = operands::<u8>(ab, sa, bb, sb)?;
                    logic::compare(c, x, y, out, &shape)
                }
                other => with_integer!(OPS, other, T => {
                    let [x, y] = operands::<T>(ab, sa, bb, sb)?;
                    logic::compare(c, x, y, out, &shape)
                }, _ => return Err(CpuError::Unsupported)),
            }
        }
        Op::Logical(l) if selects(OPS, OpKind::Logical) => {
            let (a, b) = (input(0)?, input(1)?);
            let x = logic::Operand {
                data: view.bytes(&a)?,
                shape: a.shape,
            };
            let y = logic::Operand {
                data: view.bytes(&b)?,
                shape: b.shape,
            };
            logic::logical(l, x, y, out, &out_desc.shape);
        }
        Op::Trilu { upper, k } if selects(OPS, OpKind::Trilu) => {
            let x = input(0)?;
            let r = x.shape.rank();
            let (rows, cols) = (x.shape.dim(r - 2), x.shape.dim(r - 1));
            let bytes = view.bytes(&x)?;
            with_elements!(OPS, x.dtype, bytes, &mut *out, |src, dst| {
                movement::trilu(src, rows, cols, upper, k as i64, dst)
            });
        }
        Op::Not if selects(OPS, OpKind::Not) => logic::not(view.bytes(&input(0)?)?, out),
        Op::Classify(d) if selects(OPS, OpKind::Classify) => logic::classify(d, f32_in(0)?, out),
        Op::Where if selects(OPS, OpKind::Where) => {
            let (c, x, y) = (input(0)?, input(1)?, input(2)?);
            let condition = logic::Operand {
                data: view.bytes(&c)?,
                shape: c.shape,
            };
            let (xb, yb) = (view.bytes(&x)?, view.bytes(&y)?);
            let shape = out_desc.shape;
            with_elements!(OPS, x.dtype, xb, &mut *out, |xs, dst| {
                let ys = bytemuck::try_cast_slice(yb).map_err(|_| CpuError::Misaligned)?;
                let x = logic::Operand {
                    data: xs,
                    shape: x.shape,
                };
                let y = logic::Operand {
                    data: ys,
                    shape: y.shape,
                };
                logic::select(condition, x, y, dst, &shape)
            });
        }
        Op::Softmax { axis } if selects(OPS, OpKind::Softmax) => {
            let x = f32s(view.bytes(&input(0)?)?)?;
            elementwise::softmax(Some(x), &out_desc.shape, axis, f32s_mut(out)?);
        }
        Op::MaxPool(p) | Op::AvgPool(p)
            if selects(OPS, OpKind::MaxPool) || selects(OPS, OpKind::AvgPool) =>
        {
            let input_dims = nchw(&input(0)?.shape).ok_or(CpuError::CorruptPlan)?;
            let [_, _, oh, ow] = nchw(&out_desc.shape).ok_or(CpuError::CorruptPlan)?;
            let dims = pool::PoolDims {
                input: input_dims,
                output: [oh, ow],
            };
            let is_max = matches!(step.op, Op::MaxPool(_));
            let x = input(0)?;
            match x.dtype {
                DType::I8 if is_max => {
                    let xs = cast::<i8>(view.bytes(&x)?)?;
                    pool::max_pool_integer(&p, dims, xs, cast_mut(out)?, i8::MIN);
                }
                DType::U8 if is_max => {
                    pool::max_pool_integer(&p, dims, view.bytes(&x)?, out, u8::MIN);
                }
                DType::I16 if is_max && selects_dtype(OPS, DType::I16) => {
                    let xs = cast::<i16>(view.bytes(&x)?)?;
                    pool::max_pool_integer(&p, dims, xs, cast_mut(out)?, i16::MIN);
                }
                _ => pool::pool(&p, dims, is_max, f32_in(0)?, f32s_mut(out)?),
            }
        }
        Op::GlobalAvgPool if selects(OPS, OpKind::GlobalAvgPool) => {
            let x = input(0)?;
            let plane = x.shape.product(2..x.shape.rank());
            pool::global_avg_pool(f32_in(0)?, plane, f32s_mut(out)?);
        }
        Op::BatchNorm {
            epsilon,
            activation,
        } if selects(OPS, OpKind::BatchNorm) => {
            let x = match view.src(&input(0)?)? {
                Src::Bytes(b) => Some(f32s(b)?),
                Src::Output => None,
            };
            let out = f32s_mut(out)?;
            elementwise::batch_norm(
                x,
                &out_desc.shape,
                f32_in(1)?,
                f32_in(2)?,
                f32_in(3)?,
                f32_in(4)?,
                epsilon,
                out,
            );
            fused::<OPS>(activation, out);
        }
        Op::Reduce { op, axes } if selects(OPS, OpKind::Reduce) => {
            let x = input(0)?;
            reduce::reduce(op, f32_in(0)?, &x.shape, axes, f32s_mut(out)?);
        }
        Op::Transpose { perm } if selects(OPS, OpKind::Transpose) => {
            let x = input(0)?;
            let bytes = view.bytes(&x)?;
            with_elements!(OPS, x.dtype, bytes, out, |src, dst| movement::transpose(
                src,
                &x.shape,
                &perm,
                dst,
                &out_desc.shape
            ));
        }
        Op::Slice { starts, steps } if selects(OPS, OpKind::Slice) => {
            let x = input(0)?;
            let bytes = view.bytes(&x)?;
            with_elements!(OPS, x.dtype, bytes, out, |src, dst| movement::slice(
                src,
                &x.shape,
                &starts,
                &steps,
                dst,
                &out_desc.shape
            ));
        }
        Op::Pad {
            mode,
            begins,
            value,
            ..
        } if selects(OPS, OpKind::Pad) => {
            let x = input(0)?;
            let bytes = view.bytes(&x)?;
            pad::<OPS>(x, bytes, mode, &begins, value, out, &out_desc)?;
        }
        Op::Concat { axis } if selects(OPS, OpKind::Concat) => {
            let mut offset = 0;
            for part in step.inputs.iter() {
                let part = part.ok_or(CpuError::CorruptPlan)?;
                let len = part.shape.dim(axis);
                let bytes = view.bytes(&part)?;
                with_elements!(OPS, part.dtype, bytes, &mut *out, |src, dst| {
                    movement::concat_into(src, dst, &out_desc.shape, len, axis, offset)
                });
                offset += len;
            }
        }
        Op::Gather { axis } if selects(OPS, OpKind::Gather) => {
            let (x, idx) = (input(0)?, input(1)?);
            let bytes = view.bytes(&x)?;
            let idx_bytes = view.bytes(&idx)?;
            gather::<OPS>(x, bytes, axis, &idx, idx_bytes, out)?;
        }
        Op::Copy if selects(OPS, OpKind::Copy) => {
            let bytes = view.bytes(&input(0)?)?;
            out.copy_from_slice(bytes);
        }
        Op::Quantize { axis } if selects(OPS, OpKind::Quantize) => {
            let x = input(0)?;
            let zero = input(2)?;
            let ch = channels(&x, axis, &input(1)?);
            let (x, scale) = (f32_in(0)?, f32_in(1)?);
            let zero = view.bytes(&zero)?;
            match out_desc.dtype {
                DType::I8 if selects_dtype(OPS, DType::I8) => {
                    quantize::quantize(x, scale, cast::<i8>(zero)?, ch, cast_mut(out)?)
                }
                DType::U8 if selects_dtype(OPS, DType::U8) => {
                    quantize::quantize(x, scale, cast::<u8>(zero)?, ch, cast_mut(out)?)
                }
                DType::I16 if selects_dtype(OPS, DType::I16) => {
                    quantize::quantize(x, scale, cast::<i16>(zero)?, ch, cast_mut(out)?)
                }
                DType::U16 if selects_dtype(OPS, DType::U16) => {
                    quantize::quantize(x, scale, cast::<u16>(zero)?, ch, cast_mut(out)?)
                }
                _ => return Err(CpuError::Unsupported),
            }
        }
        Op::Dequantize { axis } if selects(OPS, OpKind::Dequantize) => {
            let x = input(0)?;
            let ch = channels(&x, axis, &input(1)?);
            let (bytes, scale, y) = (view.bytes(&x)?, f32_in(1)?, f32s_mut(out)?);
            let zero = match step.inputs.get(2) {
                Some(z) => Some(view.bytes(&z)?),
                None => None,
            };
            match x.dtype {
                DType::I8 if selects_dtype(OPS, DType::I8) => {
                    dequantize_typed::<i8>(bytes, scale, zero, ch, y)?
                }
                DType::U8 if selects_dtype(OPS, DType::U8) => {
                    dequantize_typed::<u8>(bytes, scale, zero, ch, y)?
                }
                DType::I16 if selects_dtype(OPS, DType::I16) => {
                    dequantize_typed::<i16>(bytes, scale, zero, ch, y)?
                }
                DType::U16 if selects_dtype(OPS, DType::U16) => {
                    dequantize_typed::<u16>(bytes, scale, zero, ch, y)?
                }
                DType::I32 if selects_dtype(OPS, DType::I32) => {
                    dequantize_typed::<i32>(bytes, scale, zero, ch, y)?
                }
                _ => return Err(CpuError::Unsupported),
            }
        }
        #[cfg(feature = "quantized")]
        Op::QConv(c) if needs_portable(OPS, covered_int8, OpKind::QConv) => {
            let dims = conv::ConvDims::of(&input(0)?.shape, &out_desc.shape)
                .ok_or(CpuError::CorruptPlan)?;
            let x = input(0)?;
            let (xb, w) = (view.bytes(&x)?, cast::<i8>(view.bytes(&input(1)?)?)?);
            let bias = cast::<i32>(view.bytes(&input(2)?)?)?;
            let rq = cast::<i32>(view.bytes(&input(3)?)?)?;
            let scratch = scratch.unwrap_or(&mut []);
            let done = with_quantized_pair!(
                OPS,
                covered_int8,
                OpKind::QConv,
                true,
                x.dtype,
                out_desc.dtype,
                xb,
                out,
                |xs, ys| integer::qconv(&c, dims, xs, w, bias, rq, ys, scratch)
            );
            if !done {
                return Err(CpuError::CorruptPlan);
            }
        }
        #[cfg(feature = "quantized")]
        Op::QGemm(q) if needs_portable(OPS, covered_int8, OpKind::QGemm) => {
            let (a, b) = (input(0)?, input(1)?);
            let (layout, n, _) =
                ferrite_hal::op::QGemmWeights::of(&b.shape).ok_or(CpuError::CorruptPlan)?;
            // Only the selected layouts' loops are linked (the build's selection is a constant).
            if !ferrite_hal::selects_qgemm_weights(OPS, layout) {
                return Err(CpuError::CorruptPlan);
            }
            let dims = [a.shape.dim(0), a.shape.dim(1), n];
            let (ab, bw) = (view.bytes(&a)?, cast::<i8>(view.bytes(&b)?)?);
            let bias = cast::<i32>(view.bytes(&input(2)?)?)?;
            let rq = cast::<i32>(view.bytes(&input(3)?)?)?;
            with_quantized_pair!(
                OPS,
                covered_int8,
                OpKind::QGemm,
                true,
                a.dtype,
                out_desc.dtype,
                ab,
                out,
                |xs, ys| integer::qgemm(&q, dims, layout, xs, bw, bias, rq, ys)
            );
        }
        #[cfg(feature = "quantized")]
        Op::QAdd(q) if selects(OPS, OpKind::QAdd) => {
            let (a, b) = (input(0)?, input(1)?);
            let (ab, bb) = (view.bytes(&a)?, view.bytes(&b)?);
            let tables: &mut [i32] = match scratch {
                Some(s) => cast_mut(s)?,
                None => &mut [],
            };
            match (a.dtype, b.dtype, out_desc.dtype) {
                (DType::I8, DType::I8, DType::I8) if selects_dtype(OPS, DType::I8) => {
                    integer::qadd::<i8, i8, i8>(&q, cast(ab)?, cast(bb)?, cast_mut(out)?, tables)
                }
                (DType::U8, DType::U8, DType::U8) if selects_dtype(OPS, DType::U8) => {
                    integer::qadd::<u8, u8, u8>(&q, cast(ab)?, cast(bb)?, cast_mut(out)?, tables)
                }
                (DType::I16, DType::I16, DType::I16) if selects_dtype(OPS, DType::I16) => {
                    integer::qadd_wide::<i16>(&q, cast(ab)?, cast(bb)?, cast_mut(out)?)
                }
                _ => return Err(CpuError::Unsupported),
            }
        }
        #[cfg(feature = "quantized")]
        Op::QGlobalAvgPool(q) if selects(OPS, OpKind::QGlobalAvgPool) => {
            let x = input(0)?;
            let plane = x.shape.product(2..x.shape.rank());
            with_quantized_pair!(
                OPS,
                covered_int8,
                OpKind::QGlobalAvgPool,
                true,
                x.dtype,
                out_desc.dtype,
                view.bytes(&x)?,
                out,
                |xs, ys| integer::qglobal_avg_pool(&q, plane, xs, ys)
            );
        }
        #[cfg(feature = "quantized")]
        Op::QMul(q) if selects(OPS, OpKind::QMul) => {
            let (a, b) = (input(0)?, input(1)?);
            let (ab, bb) = (view.bytes(&a)?, view.bytes(&b)?);
            let shape = out_desc.shape;
            let strides = [
                shape.strides(),
                ferrite_hal::geometry::broadcast_strides(&a.shape, &shape),
                ferrite_hal::geometry::broadcast_strides(&b.shape, &shape),
            ];
            let pairs = |f: &mut dyn FnMut([usize; 3])| {
                index::for_each_index(shape.dims(), [&strides[0], &strides[1], &strides[2]], f)
            };
            match out_desc.dtype {
                DType::I8 if selects_dtype(OPS, DType::I8) => {
                    integer::qmul::<i8>(&q, cast(ab)?, cast(bb)?, cast_mut(out)?, pairs)
                }
                DType::U8 if selects_dtype(OPS, DType::U8) => {
                    integer::qmul::<u8>(&q, ab, bb, out, pairs)
                }
                _ => return Err(CpuError::Unsupported),
            }
        }
        #[cfg(feature = "quantized")]
        Op::QLookup if selects(OPS, OpKind::QLookup) => {
            let (x, table) = (view.bytes(&input(0)?)?, view.bytes(&input(1)?)?);
            let table: &[u8; 256] = table.try_into().map_err(|_| CpuError::CorruptPlan)?;
            for (y, &b) in out.iter_mut().zip(x) {
                *y = table[b as usize];
            }
        }
        #[cfg(feature = "quantized")]
        Op::MatMulInteger if selects(OPS, OpKind::MatMulInteger) => {
            let (a, b, za, zb) = (input(0)?, input(1)?, input(2)?, input(3)?);
            let g = MatMulGeometry::new(&a.shape, &b.shape).ok_or(CpuError::CorruptPlan)?;
            let bytes = |t: &TensorDesc| -> Result<accumulate::Bytes<'_>, CpuError> {
                Ok(accumulate::Bytes::new(view.bytes(t)?, t.dtype == DType::I8))
            };
            let y = cast_mut::<i32>(out)?;
            accumulate::matmul_integer(&g, bytes(&a)?, bytes(&b)?, bytes(&za)?, bytes(&zb)?, y);
        }
        #[cfg(feature = "quantized")]
        Op::ConvInteger(c) if selects(OPS, OpKind::ConvInteger) => {
            let (x, w, zx, zw) = (input(0)?, input(1)?, input(2)?, input(3)?);
            let dims =
                conv::ConvDims::of(&x.shape, &out_desc.shape).ok_or(CpuError::CorruptPlan)?;
            let bytes = |t: &TensorDesc| -> Result<accumulate::Bytes<'_>, CpuError> {
                Ok(accumulate::Bytes::new(view.bytes(t)?, t.dtype == DType::I8))
            };
            let y = cast_mut::<i32>(out)?;
            let (x, w, zx, zw) = (bytes(&x)?, bytes(&w)?, bytes(&zx)?, bytes(&zw)?);
            accumulate::conv_integer(&c, dims, x, w, zx, zw, y);
        }
        #[cfg(feature = "quantized")]
        Op::QSoftmax(q) if selects(OPS, OpKind::QSoftmax) => {
            let x = input(0)?;
            let rank = x.shape.rank();
            let lanes = [
                x.shape.product(0..q.axis),
                x.shape.dim(q.axis),
                x.shape.product(q.axis + 1..rank),
            ];
            let table = cast::<i32>(view.bytes(&input(1)?)?)?;
            with_quantized_pair!(
                OPS,
                covered_int8,
                OpKind::QSoftmax,
                false,
                x.dtype,
                out_desc.dtype,
                view.bytes(&x)?,
                out,
                |xs, ys| integer::qsoftmax(&q, lanes, xs, table, ys)
            );
        }
        #[cfg(feature = "quantized")]
        Op::QAvgPool(q) if selects(OPS, OpKind::QAvgPool) => {
            let x = input(0)?;
            let [n, c, h, w] = nchw(&x.shape).ok_or(CpuError::CorruptPlan)?;
            let [_, _, oh, ow] = nchw(&out_desc.shape).ok_or(CpuError::CorruptPlan)?;
            let dims = pool::PoolDims {
                input: [n, c, h, w],
                output: [oh, ow],
            };
            with_quantized_pair!(
                OPS,
                covered_int8,
                OpKind::QAvgPool,
                false,
                x.dtype,
                out_desc.dtype,
                view.bytes(&x)?,
                out,
                |xs, ys| integer::qavg_pool(&q, dims, xs, ys)
            );
        }
        Op::TreeEnsemble(e) if selects(OPS, OpKind::TreeEnsemble) => {
            let x = input(0)?;
            let tables = trees::Tables {
                nodes: cast::<i32>(view.bytes(&input(1)?)?)?,
                thresholds: f32_in(2)?,
                roots: cast::<i32>(view.bytes(&input(3)?)?)?,
                targets: cast::<i32>(view.bytes(&input(4)?)?)?,
                weights: f32_in(5)?,
            };
            trees::tree_ensemble(&e, x.shape.dim(1), f32_in(0)?, &tables, f32s_mut(out)?)?;
        }
        Op::Dft(d) if selects(OPS, OpKind::Dft) => {
            let g = ferrite_hal::geometry::DftGeometry::new(&d, &input(0)?.shape)
                .ok_or(CpuError::CorruptPlan)?;
            let v = fourier::Operands {
                x: f32_in(0)?,
                twiddles: f32_in(1)?,
                window: optional_f32(2)?,
            };
            let scratch = f32s_mut(scratch.ok_or(CpuError::CorruptPlan)?)?;
            if !fourier::dft(&d, &g, &v, f32s_mut(out)?, scratch) {
                return Err(CpuError::CorruptPlan);
            }
        }
        // Not selected (`OPS`), or built without the integer kernels (the `quantized` feature).
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}

/// Applies an op's fused activation to its f32 output, after its kernel: one out-of-line copy
/// of the activations' code, shared by every kernel that fuses one (Conv, ConvTranspose, Gemm,
/// MatMul, float binary ops, batch norm).
#[inline(never)]
fn fused<const OPS: Selection>(act: Activation, out: &mut [f32]) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if simd::level() >= simd::Level::Avx2 {
        // SAFETY: the AVX2 level runs only where the CPU has AVX2 and FMA.
        #[allow(unsafe_code)]
        unsafe {
            fused_avx2::<OPS>(act, out)
        };
        return;
    }
    elementwise::activate_fused::<OPS>(act, out)
}

/// [`fused`] built for AVX2 (out of line, it had been built for the baseline: half as wide).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
unsafe fn fused_avx2<const OPS: Selection>(act: Activation, out: &mut [f32]) {
    elementwise::activate_fused::<OPS>(act, out)
}

/// TopK writes two outputs: the values (carved as the output) and the indices (carved where a
/// scratch would be: another disjoint span).
#[inline(always)]
fn top_k<const OPS: Selection>(
    step: &Step<'_>,
    axis: usize,
    largest: bool,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    let x = step.inputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let desc = |i: usize| step.outputs.get(i).ok_or(CpuError::CorruptPlan);
    let (values, indices) = (desc(0)?, desc(1)?);
    let span_of = |t: &TensorDesc| span(t).ok_or(CpuError::CorruptPlan);
    let (view, out, idx) = carve(arena, weights, span_of(&values)?, Some(span_of(&indices)?))?;
    let idx = cast_mut::<i64>(idx.ok_or(CpuError::CorruptPlan)?)?;
    let lanes = lanes(&x.shape, axis);
    let bytes = view.bytes(&x)?;
    fn typed<T: bytemuck::Pod + PartialOrd>(
        bytes: &[u8],
        lanes: [usize; 3],
        largest: bool,
        out: &mut [u8],
        idx: &mut [i64],
    ) -> Result<(), CpuError> {
        reduce::top_k(cast::<T>(bytes)?, lanes, largest, cast_mut::<T>(out)?, idx);
        Ok(())
    }
    match x.dtype {
        DType::F32 => typed::<f32>(bytes, lanes, largest, out, idx),
        other => with_integer!(OPS, other, T => typed::<T>(bytes, lanes, largest, out, idx),
            _ => Err(CpuError::Unsupported)),
    }
}

/// A recurrent layer writes Y, Y_h (and Y_c) and uses a scratch: four disjoint spans.
#[inline(always)]
fn recurrent<const OPS: Selection>(
    step: &Step<'_>,
    op: &ferrite_hal::op::Recurrent,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    let bad = CpuError::CorruptPlan;
    let output = |i: usize| step.outputs.get(i).ok_or(bad);
    let span_of = |t: &TensorDesc| span(t).ok_or(bad);
    let scratch = step.scratch.as_ref().ok_or(bad)?;
    let (x, r) = (
        step.inputs.get(0).ok_or(bad)?,
        step.inputs.get(2).ok_or(bad)?,
    );
    let dims = recurrent::Dims {
        seq: x.shape.dim(0),
        batch: x.shape.dim(1),
        input: x.shape.dim(2),
        hidden: r.shape.dim(1),
    };
    let (y, h) = (span_of(&output(0)?)?, span_of(&output(1)?)?);
    let s = span_of(scratch)?;
    let lstm = matches!(op.cell, ferrite_hal::op::Cell::Lstm { .. });
    let (view, y, h, c, s) = if lstm {
        let c = span_of(&output(2)?)?;
        let (view, [y, h, c, s]) = carve_spans(arena, weights, [y, h, c, s])?;
        (view, y, h, Some(c), s)
    } else {
        let (view, [y, h, s]) = carve_spans(arena, weights, [y, h, s])?;
        (view, y, h, None, s)
    };
    let operand = |i: usize| -> Result<Option<&[f32]>, CpuError> {
        match step.inputs.get(i) {
            Some(t) => Ok(Some(f32s(view.bytes(&t)?)?)),
            None => Ok(None),
        }
    };
    let operands = recurrent::Operands {
        x: operand(0)?.ok_or(bad)?,
        w: operand(1)?.ok_or(bad)?,
        r: operand(2)?.ok_or(bad)?,
        b: operand(3)?,
        initial_h: operand(4)?,
        initial_c: operand(5)?,
        p: operand(6)?,
    };
    let c = match c {
        Some(c) => Some(f32s_mut(c)?),
        None => None,
    };
    recurrent::recurrent::<OPS>(
        op,
        dims,
        &operands,
        f32s_mut(y)?,
        f32s_mut(h)?,
        c,
        f32s_mut(s)?,
    )
}

/// DynamicQuantizeLinear writes three outputs: the integers, then the scale and zero point.
#[inline(always)]
fn dynamic_quantize(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
    let x = step.inputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let desc = |i: usize| step.outputs.get(i).ok_or(CpuError::CorruptPlan);
    let (y, scale_desc, zero_desc) = (desc(0)?, desc(1)?, desc(2)?);
    let (view, out, _) = carve(arena, weights, span(&y).ok_or(CpuError::CorruptPlan)?, None)?;
    let (scale, zero) = quantize::dynamic_quantize(f32s(view.bytes(&x)?)?, out);
    let scalar_out = |t: &TensorDesc, bytes: &[u8], arena: &mut [u8]| -> Result<(), CpuError> {
        let (_, out, _) = carve(arena, weights, span(t).ok_or(CpuError::CorruptPlan)?, None)?;
        out.get_mut(..bytes.len())
            .ok_or(CpuError::CorruptPlan)?
            .copy_from_slice(bytes);
        Ok(())
    };
    scalar_out(&scale_desc, &scale.to_le_bytes(), arena)?;
    scalar_out(&zero_desc, &[zero], arena)
}

/// The bytes of a step's first `N` inputs (none may be the output itself) and of its output,
/// carved out of the arena without `unsafe`: for device crates that bring kernels of their own
/// for some ops (the Cortex-M DSP kernels) and reuse this crate's checks.
pub fn step_operands<'x, const N: usize>(
    step: &Step<'_>,
    arena: &'x mut [u8],
    weights: &'x [u8],
) -> Result<([&'x [u8]; N], &'x mut [u8]), CpuError> {
    let out_desc = step.outputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let out_span = span(&out_desc).ok_or(CpuError::CorruptPlan)?;
    let (view, out, _) = carve(arena, weights, out_span, None)?;
    let mut inputs: [&'x [u8]; N] = [&[]; N];
    for (i, slot) in inputs.iter_mut().enumerate() {
        let t = step.inputs.get(i).ok_or(CpuError::CorruptPlan)?;
        *slot = view.bytes(&t)?;
    }
    Ok((inputs, out))
}

/// [`step_operands`] plus the step's arena scratch (empty when it has none). Out of line: the
/// integer kernels that call it share one copy, and its frame is gone before theirs grows.
#[allow(clippy::type_complexity)]
#[inline(never)]
pub fn step_operands_and_scratch<'x, const N: usize>(
    step: &Step<'_>,
    arena: &'x mut [u8],
    weights: &'x [u8],
) -> Result<([&'x [u8]; N], &'x mut [u8], &'x mut [u8]), CpuError> {
    let out_desc = step.outputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let out_span = span(&out_desc).ok_or(CpuError::CorruptPlan)?;
    let scratch_span = step.scratch.as_ref().and_then(span);
    let (view, out, scratch) = carve(arena, weights, out_span, scratch_span)?;
    let mut inputs: [&'x [u8]; N] = [&[]; N];
    for (i, slot) in inputs.iter_mut().enumerate() {
        *slot = input_bytes(step, &view, i)?;
    }
    Ok((inputs, out, scratch.unwrap_or(&mut [])))
}

/// The bytes of input `i` of `step`. Out of line, so that the callers' frames hold no tensor
/// descriptor (the deepest stack of an int8 firmware runs through them).
#[inline(never)]
fn input_bytes<'x>(step: &Step<'_>, view: &Readable<'x>, i: usize) -> Result<&'x [u8], CpuError> {
    let t = step.inputs.get(i).ok_or(CpuError::CorruptPlan)?;
    view.bytes(&t)
}

/// Runs `$body` with `$xs`/`$ys` as the input and output slices their dtype says (both int8 or
/// both uint8, or both int16 where `$int16` says the kind takes it, as the verifier requires;
/// int8 only when the kind is not in `$covered`); anything else is `Unsupported`.
#[cfg(feature = "quantized")]
macro_rules! with_quantized_pair {
    ($ops:ident, $covered:expr, $kind:expr, $int16:literal, $x_dtype:expr, $y_dtype:expr, $x:expr, $y:expr, |$xs:ident, $ys:ident| $body:expr) => {
        match ($x_dtype, $y_dtype) {
            (DType::I8, DType::I8)
                if selects_dtype($ops, DType::I8) && !selects($covered, $kind) =>
            {
                let ($xs, $ys) = (cast::<i8>($x)?, cast_mut::<i8>($y)?);
                $body
            }
            (DType::U8, DType::U8) if selects_dtype($ops, DType::U8) => {
                let ($xs, $ys) = (cast::<u8>($x)?, cast_mut::<u8>($y)?);
                $body
            }
            (DType::I16, DType::I16) if $int16 && selects_dtype($ops, DType::I16) => {
                let ($xs, $ys) = (cast::<i16>($x)?, cast_mut::<i16>($y)?);
                $body
            }
            _ => return Err(CpuError::Unsupported),
        }
    };
}
#[cfg(feature = "quantized")]
use with_quantized_pair;

/// Per-channel layout of quantization parameters `scale` for `x` along `axis`.
#[inline(always)]
fn channels(x: &TensorDesc, axis: usize, scale: &TensorDesc) -> quantize::Channels {
    let channels = scale.elements();
    let inner = if channels > 1 {
        x.shape.product(axis + 1..x.shape.rank())
    } else {
        1
    };
    quantize::Channels { channels, inner }
}

/// Bytes viewed as `T` (aligned by the planner).
#[inline(always)]
fn cast<T: bytemuck::Pod>(bytes: &[u8]) -> Result<&[T], CpuError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| CpuError::Misaligned)
}

/// Mutable bytes viewed as `T`.
#[inline(always)]
fn cast_mut<T: bytemuck::Pod>(bytes: &mut [u8]) -> Result<&mut [T], CpuError> {
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| CpuError::Misaligned)
}

#[inline(always)]
fn dequantize_typed<T: quantize::QuantInt>(
    x: &[u8],
    scale: &[f32],
    zero: Option<&[u8]>,
    ch: quantize::Channels,
    y: &mut [f32],
) -> Result<(), CpuError> {
    let zero = match zero {
        Some(z) => Some(cast::<T>(z)?),
        None => None,
    };
    quantize::dequantize(cast::<T>(x)?, scale, zero, ch, y);
    Ok(())
}

/// An index tensor's elements (the verifier allows int32 and int64).
fn index_view<'x>(view: &Readable<'x>, t: &TensorDesc) -> Result<indexing::Indices<'x>, CpuError> {
    let bytes = view.bytes(t)?;
    match t.dtype {
        DType::I32 => Ok(indexing::Indices::I32(cast(bytes)?)),
        DType::I64 => Ok(indexing::Indices::I64(cast(bytes)?)),
        _ => Err(CpuError::Unsupported),
    }
}

/// `[outer, len, inner]` of `shape` around `axis`.
fn lanes(shape: &ferrite_hal::Shape, axis: usize) -> [usize; 3] {
    [
        shape.product(0..axis),
        shape.dim(axis),
        shape.product(axis + 1..shape.rank()),
    ]
}

/// The tuple length and layout of a GatherND/ScatterND (shapes checked by the verifier).
fn nd_layout(x: &TensorDesc, idx: &TensorDesc, batch_dims: usize) -> (usize, indexing::NdLayout) {
    let (r, m) = (x.shape.rank(), idx.shape.rank());
    let q = idx.shape.dim(m - 1);
    let batch = x.shape.product(0..batch_dims);
    let layout = indexing::NdLayout {
        batch,
        tuples: idx.shape.product(batch_dims..m - 1),
        batch_elements: x.shape.product(batch_dims..r),
        slice: x.shape.product(batch_dims + q..r),
    };
    (q, layout)
}

/// [`numeric::binary`] on integer operands `a`, `b` (descriptor and bytes) of one type.
fn integer_binary<const OPS: Selection>(
    op: ferrite_hal::op::BinaryOp,
    a: (TensorDesc, &[u8]),
    b: (TensorDesc, &[u8]),
    out: &mut [u8],
    shape: &ferrite_hal::Shape,
) -> Result<(), CpuError> {
    fn typed<const OPS: Selection, T: numeric::Integer>(
        op: ferrite_hal::op::BinaryOp,
        a: (TensorDesc, &[u8]),
        b: (TensorDesc, &[u8]),
        out: &mut [u8],
        shape: &ferrite_hal::Shape,
    ) -> Result<(), CpuError> {
        let x = logic::Operand {
            data: cast::<T>(a.1)?,
            shape: a.0.shape,
        };
        let y = logic::Operand {
            data: cast::<T>(b.1)?,
            shape: b.0.shape,
        };
        numeric::binary::<OPS, T>(op, x, y, cast_mut::<T>(out)?, shape)
    }
    with_integer!(OPS, a.0.dtype, T => typed::<OPS, T>(op, a, b, out, shape), _ => Err(CpuError::Unsupported))
}

#[inline(always)]
fn operand<'x>(view: &Readable<'x>, t: &TensorDesc) -> Result<Operand<'x>, CpuError> {
    Ok(match view.src(t)? {
        Src::Bytes(b) => Operand::Data(f32s(b)?, t.shape),
        Src::Output => Operand::Output,
    })
}

#[inline(always)]
fn pad<const OPS: Selection>(
    x: TensorDesc,
    src: &[u8],
    mode: ferrite_hal::op::PadMode,
    begins: &[usize; ferrite_hal::MAX_RANK],
    value: f32,
    dst: &mut [u8],
    out: &TensorDesc,
) -> Result<(), CpuError> {
    let (x_shape, out_shape) = (&x.shape, &out.shape);
    // The fill value converts like an ONNX cast of the constant to the tensor's type; the copy
    // only moves elements, so one instance per element size serves every type.
    let bits: u64 = match x.dtype {
        DType::F32 => value.to_bits().into(),
        DType::F64 => f64::from(value).to_bits(),
        DType::F16 => half::f16::from_f32(value).to_bits().into(),
        DType::BF16 => half::bf16::from_f32(value).to_bits().into(),
        DType::I8 => (value as i8 as u8).into(),
        DType::U8 | DType::Bool => (value as u8).into(),
        DType::I16 => (value as i16 as u16).into(),
        DType::U16 => (value as u16).into(),
        DType::I32 => (value as i32 as u32).into(),
        DType::U32 => (value as u32).into(),
        DType::I64 => value as i64 as u64,
        DType::U64 => value as u64,
    };
    match x.dtype.size() {
        1 if selects_size(OPS, 1) => {
            pad_typed(src, x_shape, mode, begins, bits as u8, dst, out_shape)
        }
        2 if selects_size(OPS, 2) => {
            pad_typed(src, x_shape, mode, begins, bits as u16, dst, out_shape)
        }
        4 if selects_size(OPS, 4) => {
            pad_typed(src, x_shape, mode, begins, bits as u32, dst, out_shape)
        }
        8 if selects_size(OPS, 8) => pad_typed(src, x_shape, mode, begins, bits, dst, out_shape),
        _ => Err(CpuError::Unsupported),
    }
}

/// [`movement::pad`] on bytes viewed as `T`.
#[inline(always)]
fn pad_typed<T: bytemuck::Pod>(
    src: &[u8],
    x_shape: &ferrite_hal::Shape,
    mode: ferrite_hal::op::PadMode,
    begins: &[usize; ferrite_hal::MAX_RANK],
    value: T,
    dst: &mut [u8],
    out_shape: &ferrite_hal::Shape,
) -> Result<(), CpuError> {
    let src: &[T] = bytemuck::try_cast_slice(src).map_err(|_| CpuError::Misaligned)?;
    let dst: &mut [T] = bytemuck::try_cast_slice_mut(dst).map_err(|_| CpuError::Misaligned)?;
    movement::pad(src, x_shape, mode, begins, value, dst, out_shape);
    Ok(())
}

#[inline(always)]
fn gather<const OPS: Selection>(
    x: TensorDesc,
    src: &[u8],
    axis: usize,
    idx: &TensorDesc,
    idx_bytes: &[u8],
    dst: &mut [u8],
) -> Result<(), CpuError> {
    let bad = |_| CpuError::Misaligned;
    let indices: &[u8] = idx_bytes;
    match idx.dtype {
        DType::I64 if selects_dtype(OPS, DType::I64) => {
            let ix: &[i64] = bytemuck::try_cast_slice(indices).map_err(bad)?;
            gather_typed::<OPS>(x, src, axis, ix.iter().copied(), dst)
        }
        DType::I32 if selects_dtype(OPS, DType::I32) => {
            let ix: &[i32] = bytemuck::try_cast_slice(indices).map_err(bad)?;
            gather_typed::<OPS>(x, src, axis, ix.iter().map(|&v| v as i64), dst)
        }
        _ => Err(CpuError::Unsupported),
    }
}

#[inline(always)]
fn gather_typed<const OPS: Selection>(
    x: TensorDesc,
    src: &[u8],
    axis: usize,
    ix: impl Iterator<Item = i64> + Clone,
    dst: &mut [u8],
) -> Result<(), CpuError> {
    let bad = |_| CpuError::Misaligned;
    match x.dtype.size() {
        1 if selects_size(OPS, 1) => movement::gather(src, &x.shape, axis, ix, dst),
        4 if selects_size(OPS, 4) => movement::gather::<u32>(
            bytemuck::try_cast_slice(src).map_err(bad)?,
            &x.shape,
            axis,
            ix,
            bytemuck::try_cast_slice_mut(dst).map_err(bad)?,
        ),
        8 if selects_size(OPS, 8) => movement::gather::<u64>(
            bytemuck::try_cast_slice(src).map_err(bad)?,
            &x.shape,
            axis,
            ix,
            bytemuck::try_cast_slice_mut(dst).map_err(bad)?,
        ),
        _ => Err(CpuError::Unsupported),
    }
}

/// Split writes several outputs: carve each in turn.
#[inline(always)]
fn split<const OPS: Selection>(
    step: &Step<'_>,
    axis: usize,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    let x = step.inputs.get(0).ok_or(CpuError::CorruptPlan)?;
    let mut offset = 0;
    for out_desc in step.outputs.iter() {
        let out_desc = out_desc.ok_or(CpuError::CorruptPlan)?;
        let (view, out, _) = carve(
            arena,
            weights,
            span(&out_desc).ok_or(CpuError::CorruptPlan)?,
            None,
        )?;
        let len = out_desc.shape.dim(axis);
        let bytes = view.bytes(&x)?;
        with_elements!(OPS, x.dtype, bytes, out, |src, dst| movement::split_from(
            src, &x.shape, dst, len, axis, offset
        ));
        offset += len;
    }
    Ok(())
}
