//! Requantization of a run of int32 accumulators to 8-bit outputs, for the kernels that
//! accumulate first and requantize after (the depthwise planes): with the high-word form
//! ([`HighWordRequantizer`], nearly every channel) one assembly loop with every constant in a
//! register, nineteen instructions an output; else the portable [`Requantizer`].

use ferrite_cpu::kernels::integer::{HighWordRequantizer, Requantizer};
use ferrite_hal::op::Requantize;

/// A channel's requantizer in the fastest form that gives its results.
#[derive(Clone, Copy)]
pub enum ChannelRequantizer {
    /// A right shift of 33 or more: the high-word form.
    HighWord(HighWordRequantizer),
    /// Any other.
    Any(Requantizer),
}

impl ChannelRequantizer {
    /// The fastest form of the requantizer of a `(multiplier, shift)` pair and `q`.
    #[inline(always)]
    pub fn of(pair: [i32; 2], q: &Requantize) -> ChannelRequantizer {
        match HighWordRequantizer::new(pair, q) {
            Some(fast) => ChannelRequantizer::HighWord(fast),
            None => ChannelRequantizer::Any(Requantizer::new(pair, q)),
        }
    }

    /// The output integer of `acc`.
    #[inline(always)]
    pub fn apply(&self, acc: i32) -> i32 {
        match self {
            ChannelRequantizer::HighWord(fast) => fast.apply(acc),
            ChannelRequantizer::Any(rq) => rq.apply(acc),
        }
    }
}

/// `out[i]` = the output byte of `accs[i]`, for as many as both hold. (The value is clamped to
/// the output type's range, so its low byte is the int8 or uint8 output.)
#[inline(never)]
pub fn requantize_into(accs: &[i32], rq: &ChannelRequantizer, out: &mut [u8]) {
    let n = accs.len().min(out.len());
    match rq {
        ChannelRequantizer::HighWord(fast) if n > 0 => high_word(accs, fast, out, n),
        _ => {
            for (slot, &acc) in out.iter_mut().zip(accs) {
                *slot = apply(rq, acc) as u8;
            }
        }
    }
}

/// [`ChannelRequantizer::apply`] out of line: the loop above, for the rare channel without the
/// high-word form, stays a few instructions long.
#[inline(never)]
fn apply(rq: &ChannelRequantizer, acc: i32) -> i32 {
    rq.apply(acc)
}

/// [`HighWordRequantizer::apply`] over the first `n ≥ 1` accumulators, in assembly: `SMULL`,
/// the half added to the high word, the tie test (`CMP`, `TSTEQ`) before the shift, the tie
/// cleared to even, the zero point added with saturation, the clamp, one `STRB`.
#[inline(always)]
fn high_word(accs: &[i32], rq: &HighWordRequantizer, out: &mut [u8], n: usize) {
    let [multiplier, half, shift, mask, zero, min, max] = rq.words();
    let (src, dst) = (accs.as_ptr(), out.as_mut_ptr());
    let end = dst.wrapping_add(n);
    // SAFETY: the loop reads `n` words from `accs` and writes `n` bytes to `out`, both at least
    // `n` long (`n ≥ 1`: the loop runs at least once); it touches no other memory and no stack.
    unsafe {
        core::arch::asm!(
            "2:",
            "ldr {lo}, [{src}], #4",
            "smull {lo}, lr, {lo}, {m}",
            "add lr, lr, {half}",
            "cmp {lo}, #0",
            "it eq",
            "tsteq lr, {mask}",
            "asr.w lr, lr, {shift}",
            "it eq",
            "biceq lr, lr, #1",
            "qadd lr, lr, {zero}",
            "cmp lr, {min}",
            "it lt",
            "movlt lr, {min}",
            "cmp lr, {max}",
            "it gt",
            "movgt lr, {max}",
            "strb lr, [{dst}], #1",
            "cmp {dst}, {end}",
            "bne 2b",
            src = inout(reg) src => _,
            dst = inout(reg) dst => _,
            end = in(reg) end,
            m = in(reg) multiplier,
            half = in(reg) half,
            shift = in(reg) shift,
            mask = in(reg) mask,
            zero = in(reg) zero,
            min = in(reg) min,
            max = in(reg) max,
            lo = out(reg) _,
            out("lr") _,
            options(nostack),
        );
    }
}
