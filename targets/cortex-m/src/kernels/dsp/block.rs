//! The micro-kernel of [`super::conv::columns`]: every output channel of a group against one
//! block of four unfolded columns, in one assembly loop — per channel the bias into four
//! accumulators, the weight row against the columns ([`super::conv`]'s layout: per group of four
//! weights, the columns' first words then their second words), the four results requantized in
//! the high-word form with `SSAT`'s clamp and stored. The loop keeps what it advances from
//! channel to channel (bias, requantization pair, output) in a [`Channels`] record, so the
//! multiply-accumulates have every register they need.
//!
//! It covers the common case only; [`Channels::new`] says when, and the caller runs the
//! portable-form loop otherwise.

use super::requantize::Clamp;
use ferrite_hal::op::Requantize;

/// One group of four weights against the block's columns, in the registers of
/// [`Channels::run`] (and `conv::groups4`): r9 the weights, r11 the column words, r0–r3 four of them, r4, r5, r8,
/// r10 the accumulators, lr the even and r7 the odd weights.
macro_rules! column_group {
    () => {
        concat!(
            "ldr lr, [r9], #4\n",
            "ldm r11!, {{r0, r1, r2, r3}}\n",
            "sxtb16 r7, lr, ror #8\n",
            "sxtb16 lr, lr\n",
            "smlad r4, lr, r0, r4\n",
            "smlad r5, lr, r1, r5\n",
            "smlad r8, lr, r2, r8\n",
            "smlad r10, lr, r3, r10\n",
            "ldm r11!, {{r0, r1, r2, r3}}\n",
            "smlad r4, r7, r0, r4\n",
            "smlad r5, r7, r1, r5\n",
            "smlad r8, r7, r2, r8\n",
            "smlad r10, r7, r3, r10\n",
        )
    };
}

/// Whether every `(multiplier, shift)` pair of `requant` has the high-word form (a right shift
/// of 33 to 62), which the assembly loop assumes.
pub(super) fn high_word_pairs(requant: &[u8]) -> bool {
    requant.chunks_exact(8).all(|pair| match pair {
        &[_, _, _, _, a, b, c, d] => (-31..=-2).contains(&i32::from_le_bytes([a, b, c, d])),
        _ => false,
    })
}

/// The channel loop's state, read and advanced by the assembly at fixed offsets.
#[repr(C)]
pub(super) struct Channels {
    /// The block's interleaved column words (offset 0) and their end (offset 4).
    cols: *const u32,
    cols_end: *const u32,
    /// The next channel's bias (offset 8; advanced by 4) and the end of the biases (offset 12).
    bias: *const u8,
    bias_end: *const u8,
    /// The next channel's `(multiplier, shift)` pair (offset 16) and the step to the next pair
    /// (offset 20): 8, or 0 when one pair serves every channel.
    requant: *const u8,
    requant_step: usize,
    /// The next channel's four output bytes (offset 24) and the step between channels' planes
    /// (offset 28).
    out: *mut u8,
    out_step: usize,
    /// The output zero point (offset 32).
    zero: i32,
}

impl Channels {
    /// The loop over the `biases.len() / 4` channels whose weight rows lie back to back at
    /// `rows` (each `4 × groups` bytes long), multiplying the block's columns `full` (`8 ×
    /// groups` words) and writing four bytes at `out[c · out_step..]` for channel `c`. `None`
    /// unless every check the assembly relies on holds: some channels and groups, the slices as
    /// long as they must be, every pair in the high-word form (a right shift of 33 to 62), and a
    /// clamp that is int8's whole range.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        rows: &[u8],
        groups: usize,
        full: &[u32],
        biases: &[u8],
        requant: &[u8],
        out: &mut [u8],
        out_step: usize,
        q: &Requantize,
    ) -> Option<Channels> {
        let channels = biases.len() / 4;
        if Clamp::of(q) != Clamp::Int8 {
            return None;
        }
        let requant_step = if requant.len() == 8 { 0 } else { 8 };
        let fits = channels >= 1
            && groups >= 1
            && rows.len() >= channels.checked_mul(4 * groups)?
            && full.len() >= 8 * groups
            && requant.len() >= 8 * if requant_step == 0 { 1 } else { channels }
            && out.len() >= (channels - 1).checked_mul(out_step)?.checked_add(4)?;
        if !fits {
            return None;
        }
        Some(Channels {
            cols: full.as_ptr(),
            cols_end: full.as_ptr().wrapping_add(8 * groups),
            bias: biases.as_ptr(),
            bias_end: biases.as_ptr().wrapping_add(4 * channels),
            requant: requant.as_ptr(),
            requant_step,
            out: out.as_mut_ptr(),
            out_step,
            zero: q.output_zero,
        })
    }

    /// Runs the loop: every channel's four outputs, the weight rows read from `rows` on (as
    /// [`Channels::new`] was given them).
    pub(super) fn run(mut self, rows: &[u8]) {
        let state: *mut Channels = &mut self;
        let pw = rows.as_ptr();
        macro_rules! run {
            () => {
                // SAFETY: per channel the loop reads one bias word, one pair, `4 × groups`
                // weight bytes (unaligned words, which cores with the DSP extension load) and
                // the `8 × groups` column words, and writes four output bytes, all inside the
                // slices `Channels::new` checked; it reads and writes the record `state` points
                // to. r6 and r7, which inline assembly may not name, are saved on the stack
                // around the loop and serve as the record's pointer and the odd weights.
                unsafe {
                    core::arch::asm!(
                        "push {{r6, r7}}",
                        "mov r6, r0",
                        "2:",
                        "ldrd r11, r12, [r6]",
                        "ldr r4, [r6, #8]",
                        "ldr r5, [r4], #4",
                        "str r4, [r6, #8]",
                        "mov r4, r5",
                        "mov r8, r5",
                        "mov r10, r5",
                        // An odd count of groups runs one first, then pairs of groups.
                        "sub lr, r12, r11",
                        "tst lr, #32",
                        "beq 3f",
                        column_group!(),
                        "cmp r11, r12",
                        "beq 4f",
                        "3:",
                        column_group!(),
                        column_group!(),
                        "cmp r11, r12",
                        "bne 3b",
                        "4:",
                        // The pair's constants: r0 multiplier, r1 the high word's shift,
                        // r2 the half, r3 the mask, r7 the zero point.
                        "ldrd lr, r2, [r6, #16]",
                        "ldr r0, [lr]",
                        "ldr r1, [lr, #4]",
                        "add lr, r2",
                        "str lr, [r6, #16]",
                        "mvn r1, r1",
                        "movs r2, #1",
                        "lsl r2, r2, r1",
                        "sub r3, r2, #1",
                        "lsr r2, r2, #1",
                        "ldr r7, [r6, #32]",
                        "ldr r12, [r6, #24]",
                        saturated_output!("ssat", "r4", "[r12]", "22", "32";
                            "r11", "r0", "r2", "r1", "r7"),
                        saturated_output!("ssat", "r5", "[r12, #1]", "23", "33";
                            "r11", "r0", "r2", "r1", "r7"),
                        saturated_output!("ssat", "r8", "[r12, #2]", "24", "34";
                            "r11", "r0", "r2", "r1", "r7"),
                        saturated_output!("ssat", "r10", "[r12, #3]", "25", "35";
                            "r11", "r0", "r2", "r1", "r7"),
                        "ldr lr, [r6, #28]",
                        "add r12, lr",
                        "str r12, [r6, #24]",
                        "ldrd r0, r1, [r6, #8]",
                        "cmp r0, r1",
                        "bne 2b",
                        "b 5f",
                        tie_output!("r4", "22", "32"; "r3", "r1"),
                        tie_output!("r5", "23", "33"; "r3", "r1"),
                        tie_output!("r8", "24", "34"; "r3", "r1"),
                        tie_output!("r10", "25", "35"; "r3", "r1"),
                        "5:",
                        "pop {{r6, r7}}",
                        inout("r0") state => _,
                        inout("r9") pw => _,
                        out("r1") _,
                        out("r2") _,
                        out("r3") _,
                        out("r4") _,
                        out("r5") _,
                        out("r8") _,
                        out("r10") _,
                        out("r11") _,
                        out("r12") _,
                        out("lr") _,
                    )
                }
            };
        }
        run!()
    }
}
