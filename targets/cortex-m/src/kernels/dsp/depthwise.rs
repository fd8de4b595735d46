//! Depthwise integer convolution (one input channel per group, any channel multiplier) for the
//! DSP extension. Each input channel's plane is copied into the step's arena scratch with a
//! border of the input zero point as wide as the padding, so every tap reads in bounds and
//! `Σ w·(x − zx) = Σ w·x − zx·Σ w`, the correction folded into the bias. Each output channel's
//! plane is then accumulated [`CHUNK`] outputs at a time and requantized by
//! [`requantize_rows`]:
//!
//! - 3×3 windows without dilation at stride 1 (nearly every depthwise layer): pairs of
//!   neighbouring outputs from one word per input row, all three rows in one assembly loop
//!   ([`rows3_pairs`], thirteen instructions an output) with the nine weights in registers.
//!   Planes up to [`CHUNK`] bytes wide run several padded rows as one flattened run, computing
//!   and dropping the outputs whose windows straddle a row's end;
//! - 3×3 at other strides: output by output, one word per row;
//! - any other window: tap by tap.
//!
//! Integer sums are exact (wrapping, like the portable kernels), so results are bit-exact with
//! `ferrite_cpu::ops::conv::int8::qconv`.

use super::conv::{carve_then, requant_pair, word, Geometry};
use super::instructions::{smlabb, smlad, sxtb16, sxtb16_ror8};
use super::requantize::{requantize_into, requantize_rows, ChannelRequantizer};
use ferrite_cpu::CpuError;
use ferrite_hal::Step;

/// Outputs accumulated before they are requantized together (whole rows when rows are short).
const CHUNK: usize = 28;

/// A 3×3 depthwise window's weights, packed for `SMLAD`: per row the outer pair (w0, w2) as
/// int16 halves and the middle weight.
struct Taps3 {
    outer: [u32; 3],
    middle: [u32; 3],
    plain: [i32; 9],
}

impl Taps3 {
    fn new(w: &[u8]) -> Taps3 {
        let v = |i: usize| w.get(i).map_or(0, |&b| b as i8 as i32);
        let half = |x: i32| x as u32 & 0xffff;
        Taps3 {
            outer: [0, 1, 2].map(|r| half(v(3 * r)) | (half(v(3 * r + 2)) << 16)),
            middle: [0, 1, 2].map(|r| half(v(3 * r + 1))),
            plain: core::array::from_fn(v),
        }
    }

    /// The accumulator of the output whose window starts at byte `at` of `padded` (rows `pw`
    /// bytes apart): per row one word where it can be read ((x0, x2) with `SMLAD`, x1 with
    /// `SMLABB`), else value by value.
    #[inline(always)]
    fn one(&self, padded: &[u8], at: usize, pw: usize, base: i32) -> Option<i32> {
        let mut acc = base;
        for r in 0..3 {
            let x = at + r * pw;
            let (outer, middle) = (*self.outer.get(r)?, *self.middle.get(r)?);
            match padded.get(x..x + 4) {
                Some(&[a, b, c, d]) => {
                    let word = u32::from_le_bytes([a, b, c, d]);
                    acc = smlabb(middle, sxtb16_ror8(word), smlad(outer, sxtb16(word), acc));
                }
                _ => {
                    for (t, &v) in padded.get(x..x + 3)?.iter().enumerate() {
                        let w = self.plain.get(3 * r + t).copied().unwrap_or(0);
                        acc = acc.wrapping_add(w * v as i8 as i32);
                    }
                }
            }
        }
        Some(acc)
    }
}

/// Adds a 3×3 window's terms to `accs.len() / 2` pairs of neighbouring stride-1 outputs whose
/// first window starts at byte `at` of `padded` (rows `pw` bytes apart); `accs` holds their
/// starting values (the bias). Pair `i` reads one word per input row at `at + 2i`: its bytes
/// (x0, x1, x2, x3) unpack to (x0, x2) and (x1, x3), which meet the outer weights with `SMLAD`
/// while the middle weight takes x1 and x2 (`SMLABB`/`SMLABT`, `SMLATB`/`SMLATT` for the second
/// row's, packed in the top half beside the first's). `None`, with nothing done, when a read
/// would leave `padded`.
#[inline(never)]
fn rows3_pairs(taps: &Taps3, padded: &[u8], at: usize, pw: usize, accs: &mut [i32]) -> Option<()> {
    let pairs = accs.len() / 2;
    if pairs == 0 {
        return Some(());
    }
    // The last pair's last row reads the word at at + 2·pw + 2·(pairs − 1).
    let end = at
        .checked_add(pw.checked_mul(2)?)?
        .checked_add(2 * pairs + 2)?;
    if end > padded.len() {
        return None;
    }
    let p = padded.as_ptr().wrapping_add(at);
    let out = accs.as_mut_ptr();
    let out_end = out.wrapping_add(2 * pairs);
    let middle01 = taps.middle[0] | (taps.middle[1] << 16);
    // SAFETY: the loop runs `pairs ≥ 1` times; pass `i` reads the words at p + 2i, p + 2i + pw
    // and p + 2i + 2·pw, all inside `padded` (checked above), and reads and writes accs[2i] and
    // accs[2i + 1]. Every operand is in a named register, so r7 (the frame pointer, which inline
    // assembly may not name) is no operand's: it serves as the second accumulator and is saved on
    // the stack around the loop.
    unsafe {
        core::arch::asm!(
            "push {{r7}}",
            "2:",
            "ldrd lr, r7, [r1]",
            "ldr r11, [r0]",
            "sxtb16 r12, r11, ror #8",
            "sxtb16 r11, r11",
            "smlad lr, r4, r11, lr",
            "smlabb lr, r9, r12, lr",
            "smlad r7, r4, r12, r7",
            "smlabt r7, r9, r11, r7",
            "ldr r11, [r0, r3]",
            "sxtb16 r12, r11, ror #8",
            "sxtb16 r11, r11",
            "smlad lr, r5, r11, lr",
            "smlatb lr, r9, r12, lr",
            "smlad r7, r5, r12, r7",
            "smlatt r7, r9, r11, r7",
            "ldr r11, [r0, r3, lsl #1]",
            "sxtb16 r12, r11, ror #8",
            "sxtb16 r11, r11",
            "smlad lr, r8, r11, lr",
            "smlabb lr, r10, r12, lr",
            "smlad r7, r8, r12, r7",
            "smlabt r7, r10, r11, r7",
            "strd lr, r7, [r1], #8",
            "adds r0, #2",
            "cmp r1, r2",
            "bne 2b",
            "pop {{r7}}",
            inout("r0") p => _,
            inout("r1") out => _,
            in("r2") out_end,
            in("r3") pw,
            in("r4") taps.outer[0],
            in("r5") taps.outer[1],
            in("r8") taps.outer[2],
            in("r9") middle01,
            in("r10") taps.middle[2],
            out("r11") _,
            out("r12") _,
            out("lr") _,
        );
    }
    Some(())
}

/// The accumulators of `n` outputs of one row of a 3×3 window without dilation, the first
/// window at byte `at` of `padded`, into `accs` (at least `n` long; one more lets an odd `n` end
/// with a whole pair, the extra value being dropped).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn run3x3(
    taps: &Taps3,
    padded: &[u8],
    at: usize,
    pw: usize,
    sw: usize,
    base: i32,
    accs: &mut [i32],
    n: usize,
) -> Option<()> {
    if sw != 1 {
        for (j, acc) in accs.get_mut(..n)?.iter_mut().enumerate() {
            *acc = taps.one(padded, at + j * sw, pw, base)?;
        }
        return Some(());
    }
    let whole = accs.get_mut(..(n + 1) & !1).unwrap_or(&mut []);
    if !whole.is_empty() && n % 2 == 1 {
        whole.fill(base);
        if rows3_pairs(taps, padded, at, pw, whole).is_some() {
            return Some(());
        }
    }
    // An even run, or an odd one whose last pair would read past the plane: pairs, then the
    // last output alone.
    let even = n & !1;
    let (pairs, rest) = accs.split_at_mut_checked(even)?;
    pairs.fill(base);
    rows3_pairs(taps, padded, at, pw, pairs)?;
    if n % 2 == 1 {
        *rest.first_mut()? = taps.one(padded, at + even, pw, base)?;
    }
    Some(())
}

/// One output channel's plane of a 3×3 depthwise window without dilation: `padded` holds the
/// padded input plane (`pw` bytes per row) and may run on (the scratch past it), which lets a
/// row's last pair read its word whole. Short rows are accumulated several to a chunk, long
/// ones [`CHUNK`] outputs at a time; each chunk is then requantized at once. Out of line, so
/// that its loops have the registers.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn plane3x3(
    taps: &Taps3,
    padded: &[u8],
    pw: usize,
    [sh, sw]: [usize; 2],
    base: i32,
    rq: &ChannelRequantizer,
    out: &mut [u8],
    ow: usize,
) -> Option<()> {
    let mut chunk = [0i32; CHUNK + 1];
    let ow = ow.max(1);
    if [sh, sw] == [1, 1] && pw <= CHUNK {
        // Whole padded rows at once, as one run over the flattened plane: the outputs whose
        // windows straddle a row's end (pw − ow of them per row) are computed and dropped.
        let rows = CHUNK / pw.max(1);
        for (band, out_band) in out.chunks_mut((rows * ow).max(1)).enumerate() {
            let n = out_band.len() / ow;
            let valid = n.checked_sub(1)? * pw + ow;
            let accs = chunk.get_mut(..valid + 1)?;
            run3x3(taps, padded, band * rows * pw, pw, 1, base, accs, valid)?;
            requantize_rows(accs, pw, rq, out_band, ow);
        }
        return Some(());
    }
    if ow <= CHUNK {
        let rows = CHUNK / ow;
        for (band, out_band) in out.chunks_mut(rows * ow).enumerate() {
            let accs = chunk.get_mut(..out_band.len() + 1)?;
            for r in 0..out_band.len() / ow {
                let at = (band * rows + r) * sh * pw;
                run3x3(taps, padded, at, pw, sw, base, accs.get_mut(r * ow..)?, ow)?;
            }
            requantize_into(accs, rq, out_band);
        }
        return Some(());
    }
    for (oy, out_row) in out.chunks_exact_mut(ow).enumerate() {
        for (i, piece) in out_row.chunks_mut(CHUNK).enumerate() {
            let at = oy * sh * pw + i * CHUNK * sw;
            let accs = chunk.get_mut(..piece.len() + 1)?;
            run3x3(taps, padded, at, pw, sw, base, accs, piece.len())?;
            requantize_into(accs, rq, piece);
        }
    }
    Some(())
}

/// One output channel's plane of any other depthwise window, tap by tap.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn plane_any(
    g: &Geometry,
    wo: &[u8],
    padded: &[u8],
    pw: usize,
    base: i32,
    rq: &ChannelRequantizer,
    out: &mut [u8],
) -> Option<()> {
    let [kh, kw] = g.kernel;
    let [sh, sw] = g.stride;
    let [dh, dw] = g.dilation;
    let mut chunk = [0i32; CHUNK];
    let ow = g.d.ow.max(1);
    for (i, out_chunk) in out.chunks_mut(CHUNK).enumerate() {
        let accs = chunk.get_mut(..out_chunk.len())?;
        for (j, acc) in accs.iter_mut().enumerate() {
            let (oy, ox) = ((i * CHUNK + j) / ow, (i * CHUNK + j) % ow);
            let mut sum = base;
            for ky in 0..kh {
                let at = (oy * sh + ky * dh) * pw + ox * sw;
                for (kx, &wv) in wo.get(ky * kw..(ky + 1) * kw)?.iter().enumerate() {
                    let v = *padded.get(at + kx * dw)?;
                    sum = sum.wrapping_add(wv as i8 as i32 * v as i8 as i32);
                }
            }
            *acc = sum;
        }
        requantize_into(accs, rq, out_chunk);
    }
    Some(())
}

/// Depthwise `QConv` on int8 input (one input channel per group, any channel multiplier).
#[inline(never)]
pub fn depthwise(step: &Step<'_>, arena: &mut [u8], weights: &[u8]) -> Result<(), CpuError> {
    carve_then(step, arena, weights, planes)
}

/// [`depthwise`] once the step's operands are carved out ([`carve_then`]).
#[inline(never)]
fn planes(
    g: &Geometry,
    [x, w, bias, requant]: [&[u8]; 4],
    out: &mut [u8],
    scratch: &mut [u8],
) -> Result<(), CpuError> {
    let d = g.d;
    let multiplier = d.oc / g.group;
    let [kh, kw] = g.kernel;
    let [sh, sw] = g.stride;
    let [dh, dw] = g.dilation;
    // The padded plane: every position the outputs read.
    let ph = (d.oh - 1) * sh + (kh - 1) * dh + 1;
    let pw = (d.ow - 1) * sw + (kw - 1) * dw + 1;
    let zx = g.q.input_zero;
    let taps = kh * kw;
    let fast3x3 = kh == 3 && kw == 3 && dh == 1 && dw == 1;
    // The padded plane: zero-point borders, filled once, around a copy of each channel's rows
    // and columns read.
    let left = g.pad[1].min(pw);
    let copied = d.w.min(pw - left);
    let padded = scratch.get_mut(..ph * pw).ok_or(CpuError::CorruptPlan)?;
    padded.fill(zx as i8 as u8);
    for b in 0..d.n {
        for c in 0..d.c {
            let plane = x
                .get((b * d.c + c) * d.h * d.w..(b * d.c + c + 1) * d.h * d.w)
                .ok_or(CpuError::CorruptPlan)?;
            let padded = scratch.get_mut(..ph * pw).ok_or(CpuError::CorruptPlan)?;
            let rows = padded.chunks_exact_mut(pw.max(1)).skip(g.pad[0]);
            for (row, src) in rows.zip(plane.chunks_exact(d.w.max(1))) {
                let (Some(body), Some(src)) = (row.get_mut(left..left + copied), src.get(..copied))
                else {
                    return Err(CpuError::CorruptPlan);
                };
                body.copy_from_slice(src);
            }
            let padded = &*scratch;
            for m in 0..multiplier {
                let o = c * multiplier + m;
                let wo = w
                    .get(o * taps..(o + 1) * taps)
                    .ok_or(CpuError::CorruptPlan)?;
                let w_sum: i32 = wo.iter().map(|&v| v as i8 as i32).sum();
                let base = word(bias, o)?.wrapping_sub(zx.wrapping_mul(w_sum));
                let rq = ChannelRequantizer::of(requant_pair(requant, o)?, &g.q);
                let out_base = (b * d.oc + o) * d.oh * d.ow;
                let out_plane = out
                    .get_mut(out_base..out_base + d.oh * d.ow)
                    .ok_or(CpuError::CorruptPlan)?;
                let done = if fast3x3 {
                    let taps3 = Taps3::new(wo);
                    plane3x3(&taps3, padded, pw, g.stride, base, &rq, out_plane, d.ow)
                } else {
                    plane_any(g, wo, padded, pw, base, &rq, out_plane)
                };
                done.ok_or(CpuError::CorruptPlan)?;
            }
        }
    }
    Ok(())
}
