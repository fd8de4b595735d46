//! The vector table's interrupt entries for QEMU's mps2-an386: its NVIC has 32 external
//! interrupts, all sent to cortex-m-rt's default handler (the firmware uses none). Without a
//! device's table, cortex-m-rt reserves 240 entries for any ARMv7-M part, 832 bytes more flash;
//! on a real board, the chip's peripheral access crate (its `rt` feature) provides its own.

extern "C" {
    fn DefaultHandler();
}

/// The 32 entries, placed after the core exceptions by cortex-m-rt's `link.x`.
#[link_section = ".vector_table.interrupts"]
#[no_mangle]
static __INTERRUPTS: [unsafe extern "C" fn(); 32] = [DefaultHandler; 32];
