//! Requantization of int32 accumulators to 8-bit outputs in assembly, with the high-word form
//! ([`HighWordRequantizer`], nearly every channel) and every constant in a register: runs and
//! rows of them for the kernels that accumulate first (the depthwise planes,
//! [`requantize_rows`]), four at a time ([`saturate4`], [`saturate4_pairs`] with a pair each). When the
//! clamp is int8's whole range an output takes eight instructions (`SSAT` clamps, and
//! a possible tie, a product with a zero low word, branches out of the way); a narrower clamp
//! (a fused activation) takes sixteen; any other requantizer is the portable [`Requantizer`].

use ferrite_cpu::base::requantize::{HighWordRequantizer, Requantizer};
use ferrite_hal::op::Requantize;

/// How an output's clamp to `[min, max]` is computed: one `SSAT` when the range is int8's whole
/// range (no fused activation narrows it), else two comparisons.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Clamp {
    /// `[−128, 127]`: `SSAT #8`.
    Int8,
    /// Any other range.
    Range,
}

impl Clamp {
    /// The clamp of `q`'s `[min, max]`.
    pub fn of(q: &Requantize) -> Clamp {
        match (q.min, q.max) {
            (-128, 127) => Clamp::Int8,
            _ => Clamp::Range,
        }
    }
}

/// One requantized output in assembly: `$acc` (an input register, overwritten) becomes the
/// output value, saturated by `$sat` to 8 bits, and is stored at `$store`. A product whose low
/// word is zero may be a tie: it branches to label `$tie` ([`tie_output`], out of the way),
/// which rounds it and comes back to label `$back`. Eight instructions with the store.
macro_rules! saturated_output {
    ($sat:literal, $acc:literal, $store:literal, $tie:literal, $back:literal) => {
        saturated_output!(
            $sat, $acc, $store, $tie, $back; "{lo}", "{m}", "{half}", "{shift}", "{zero}"
        )
    };
    (
        $sat:literal, $acc:literal, $store:literal, $tie:literal, $back:literal;
        $lo:literal, $m:literal, $half:literal, $shift:literal, $zero:literal
    ) => {
        concat!(
            "smull ", $lo, ", ", $acc, ", ", $acc, ", ", $m, "\n",
            "add ", $acc, ", ", $acc, ", ", $half, "\n",
            "cmp ", $lo, ", #0\n",
            "beq ", $tie, "f\n",
            "asr.w ", $acc, ", ", $acc, ", ", $shift, "\n",
            $back, ":\n",
            "add ", $acc, ", ", $acc, ", ", $zero, "\n",
            $sat, " ", $acc, ", #8, ", $acc, "\n",
            "strb ", $acc, ", ", $store, "\n",
        )
    };
}

/// The rounding of a possible tie of [`saturated_output`] (label `$tie`): a tie also has the
/// high word's dropped bits zero, and is rounded to even; then back to label `$back`.
macro_rules! tie_output {
    ($acc:literal, $tie:literal, $back:literal) => {
        tie_output!($acc, $tie, $back; "{mask}", "{shift}")
    };
    ($acc:literal, $tie:literal, $back:literal; $mask:literal, $shift:literal) => {
        concat!(
            $tie, ":\n",
            "tst ", $acc, ", ", $mask, "\n",
            "asr.w ", $acc, ", ", $acc, ", ", $shift, "\n",
            "it eq\n",
            "biceq ", $acc, ", ", $acc, ", #1\n",
            "b ", $back, "b\n",
        )
    };
}

/// The four outputs of the registers `{a0}`–`{a3}` into bytes `[{dst}]` to `[{dst}, #3]`, each
/// made by the macro `$output` (given the accumulator, its pair's byte offset, the store and its
/// tie labels), their possible ties rounded out of the way.
macro_rules! four_outputs {
    ($output:ident) => {
        concat!(
            $output!("{a0}", "0", "[{dst}]", "22", "32"),
            $output!("{a1}", "8", "[{dst}, #1]", "23", "33"),
            $output!("{a2}", "16", "[{dst}, #2]", "24", "34"),
            $output!("{a3}", "24", "[{dst}, #3]", "25", "35"),
            "b 4f\n",
            tie_output!("{a0}", "22", "32"),
            tie_output!("{a1}", "23", "33"),
            tie_output!("{a2}", "24", "34"),
            tie_output!("{a3}", "25", "35"),
            "4:\n",
        )
    };
}

/// The four output bytes of `acc` into `out[..4]` when `clamp` is `SSAT`'s (eight instructions
/// an output, in assembly); false, with nothing written, otherwise or when `out` is shorter.
#[inline(always)]
pub fn saturate4(acc: [i32; 4], rq: &HighWordRequantizer, clamp: Clamp, out: &mut [u8]) -> bool {
    let (Clamp::Int8, Some(out)) = (clamp, out.get_mut(..4)) else {
        return false;
    };
    let [m, half, shift, mask, zero, _, _] = rq.words();
    // Every output with the one pair's constants, in registers.
    macro_rules! one_pair {
        ($acc:literal, $at:literal, $store:literal, $tie:literal, $back:literal) => {
            saturated_output!("ssat", $acc, $store, $tie, $back)
        };
    }
    // SAFETY: writes the four bytes of `out` (checked to be four long), nothing else.
    unsafe {
        core::arch::asm!(
            four_outputs!(one_pair),
            a0 = inout(reg) acc[0] => _,
            a1 = inout(reg) acc[1] => _,
            a2 = inout(reg) acc[2] => _,
            a3 = inout(reg) acc[3] => _,
            dst = in(reg) out.as_mut_ptr(),
            m = in(reg) m,
            half = in(reg) half,
            shift = in(reg) shift,
            mask = in(reg) mask,
            zero = in(reg) zero,
            lo = out(reg) _,
            options(nostack),
        )
    }
    true
}

/// The output bytes of four accumulators, each with its own `(multiplier, shift)` pair (`pairs`,
/// four of them back to back, every one in the high-word form: the caller checks), `SSAT`'s
/// clamp and the output zero point `zero`, in assembly: sixteen instructions an output.
#[inline(always)]
pub fn saturate4_pairs(acc: [i32; 4], pairs: &[u8; 32], zero: i32, out: &mut [u8; 4]) {
    // Each output with its pair's constants, loaded from `pairs` at byte `$at` and derived.
    macro_rules! own_pair {
        ($acc:literal, $at:literal, $store:literal, $tie:literal, $back:literal) => {
            concat!(
                "ldr {m}, [{pairs}, #",
                $at,
                "]\n",
                "ldr {shift}, [{pairs}, #",
                $at,
                " + 4]\n",
                "mvn {shift}, {shift}\n",
                "movs {half}, #1\n",
                "lsl {half}, {half}, {shift}\n",
                "sub {mask}, {half}, #1\n",
                "lsr {half}, {half}, #1\n",
                saturated_output!("ssat", $acc, $store, $tie, $back),
            )
        };
    }
    // SAFETY: reads the 32 bytes of `pairs` and writes the four bytes of `out`, nothing else.
    unsafe {
        core::arch::asm!(
            four_outputs!(own_pair),
            a0 = inout(reg) acc[0] => _,
            a1 = inout(reg) acc[1] => _,
            a2 = inout(reg) acc[2] => _,
            a3 = inout(reg) acc[3] => _,
            pairs = in(reg) pairs.as_ptr(),
            dst = in(reg) out.as_mut_ptr(),
            zero = in(reg) zero,
            m = out(reg) _,
            shift = out(reg) _,
            half = out(reg) _,
            mask = out(reg) _,
            lo = out(reg) _,
            options(nostack, readonly),
        );
    }
}

/// A channel's requantizer in the fastest form that gives its results.
#[derive(Clone, Copy)]
pub enum ChannelRequantizer {
    /// A right shift of 33 or more: the high-word form, and how its clamp is computed.
    HighWord(HighWordRequantizer, Clamp),
    /// Any other.
    Any(Requantizer),
}

impl ChannelRequantizer {
    /// The fastest form of the requantizer of a `(multiplier, shift)` pair and `q`.
    #[inline(always)]
    pub fn of(pair: [i32; 2], q: &Requantize) -> ChannelRequantizer {
        match HighWordRequantizer::new(pair, q) {
            Some(fast) => ChannelRequantizer::HighWord(fast, Clamp::of(q)),
            None => ChannelRequantizer::Any(Requantizer::new(pair, q)),
        }
    }

    /// The output integer of `acc`.
    #[inline(always)]
    pub fn apply(&self, acc: i32) -> i32 {
        match self {
            ChannelRequantizer::HighWord(fast, _) => fast.apply(acc),
            ChannelRequantizer::Any(rq) => rq.apply(acc),
        }
    }
}

/// [`HighWordRequantizer::apply`] with a saturating clamp over `rows ≥ 1` rows of `width ≥ 1`
/// accumulators, `stride` words apart, into consecutive bytes, in assembly: eleven
/// instructions an output with its load and the loop, and six a row.
macro_rules! saturated {
    ($accs:expr, $stride:expr, $rq:expr, $out:expr, $width:expr, $rows:expr, $sat:literal) => {{
        let [m, half, shift, mask, zero, _, _] = $rq.words();
        let (src, dst) = ($accs.as_ptr(), $out.as_mut_ptr());
        let rows = [
            $width as u32,
            4 * ($stride - $width) as u32,
            dst.wrapping_add($rows * $width) as u32,
        ];
        // SAFETY: row r reads words r·stride .. r·stride + width of `accs` and writes bytes
        // r·width .. (r + 1)·width of `out`, for r < rows, all inside them (checked by the
        // caller; rows and width ≥ 1, so each loop runs at least once), and reads `rows`.
        unsafe {
            core::arch::asm!(
                "2:",
                "ldr {lo}, [{rows}]",
                "add {row_end}, {dst}, {lo}",
                "3:",
                "ldr {acc}, [{src}], #4",
                saturated_output!($sat, "{acc}", "[{dst}], #1", "5", "6"),
                "cmp {dst}, {row_end}",
                "bne 3b",
                "ldrd {lo}, {acc}, [{rows}, #4]",
                "add {src}, {lo}",
                "cmp {dst}, {acc}",
                "bne 2b",
                "b 7f",
                tie_output!("{acc}", "5", "6"),
                "7:",
                src = inout(reg) src => _,
                dst = inout(reg) dst => _,
                rows = in(reg) rows.as_ptr(),
                m = in(reg) m,
                half = in(reg) half,
                shift = in(reg) shift,
                mask = in(reg) mask,
                zero = in(reg) zero,
                row_end = out(reg) _,
                acc = out(reg) _,
                lo = out(reg) _,
                options(nostack, readonly),
            );
        }
    }};
}

/// `out[i]` = the output byte of `accs[i]`, for as many as both hold. (The value is clamped to
/// the output type's range, so its low byte is the int8 or uint8 output.)
#[inline(always)]
pub fn requantize_into(accs: &[i32], rq: &ChannelRequantizer, out: &mut [u8]) {
    let n = accs.len().min(out.len());
    if let Some(out) = out.get_mut(..n) {
        requantize_rows(accs, n, rq, out, n);
    }
}

/// The rows of `width` bytes of `out` = the output bytes of the rows of `accs`, `stride` words
/// apart: row `r` of `out` from `accs[r·stride..r·stride + width]`. Rows past the end of
/// `accs` are left as they are.
#[inline(never)]
pub fn requantize_rows(
    accs: &[i32],
    stride: usize,
    rq: &ChannelRequantizer,
    out: &mut [u8],
    width: usize,
) {
    let rows = out.len() / width.max(1);
    let fits = width >= 1
        && rows >= 1
        && stride >= width
        && (rows - 1)
            .checked_mul(stride)
            .and_then(|n| n.checked_add(width))
            .is_some_and(|n| n <= accs.len());
    match rq {
        ChannelRequantizer::HighWord(fast, Clamp::Int8) if fits => {
            saturated!(accs, stride, fast, out, width, rows, "ssat")
        }
        _ => {
            let width = width.max(1);
            for (out_row, acc_row) in out.chunks_exact_mut(width).zip(accs.chunks(stride.max(1))) {
                match rq {
                    ChannelRequantizer::HighWord(fast, _) if acc_row.len() >= out_row.len() => {
                        high_word(acc_row, fast, out_row, width)
                    }
                    _ => {
                        for (slot, &acc) in out_row.iter_mut().zip(acc_row) {
                            *slot = apply(rq, acc) as u8;
                        }
                    }
                }
            }
        }
    }
}

/// The output byte of `acc` under the requantizer of `pair` and `q` (its low byte: the value is
/// clamped to the output type): one shared copy, out of line, for the kernels' rare paths
/// (partial blocks, tails, channels without the high-word form).
#[inline(never)]
pub fn output_byte(acc: i32, pair: [i32; 2], q: &Requantize) -> u8 {
    ChannelRequantizer::of(pair, q).apply(acc) as u8
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
