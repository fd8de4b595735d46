//! Stack painting: fill the free RAM below the stack pointer with a pattern at boot, and find
//! the deepest word the program overwrote since.

const PATTERN: u32 = 0xF00D_CAFE;

extern "C" {
    /// End of `.bss`/`.uninit` in RAM (cortex-m-rt): the lowest address the stack may reach.
    static __sheap: u32;
    /// Initial stack pointer (top of RAM).
    static _stack_start: u32;
}

fn bounds() -> (usize, usize) {
    // Only the symbols' addresses are taken, never their contents.
    (
        core::ptr::addr_of!(__sheap) as usize,
        core::ptr::addr_of!(_stack_start) as usize,
    )
}

/// Paints from the end of static RAM up to just below the current stack pointer (again, to
/// measure what follows from here).
#[inline(never)]
pub fn paint() {
    let (bottom, _) = bounds();
    let sp = cortex_m::register::msp::read() as usize;
    let mut at = bottom.next_multiple_of(4);
    while at + 64 < sp {
        // SAFETY: RAM between the end of the statics and the live stack is unused.
        unsafe { core::ptr::write_volatile(at as *mut u32, PATTERN) };
        at += 4;
    }
}

/// Bytes of stack used at the deepest point since the last `paint`.
#[inline(never)]
pub fn max_depth() -> usize {
    let (bottom, top) = bounds();
    let mut at = bottom.next_multiple_of(4);
    // SAFETY: reads words of RAM between the statics and the stack top.
    while at < top && unsafe { core::ptr::read_volatile(at as *const u32) } == PATTERN {
        at += 4;
    }
    top - at
}

/// Bytes of stack in use right now (from the top to the stack pointer).
pub fn current_depth() -> usize {
    let (_, top) = bounds();
    top.saturating_sub(cortex_m::register::msp::read() as usize)
}
