/* Reset for the C firmware: the vector table (initial stack, reset handler), the FPU enabled,
 * .bss cleared, main's status handed to QEMU. QEMU loads .data where it runs (in RAM), so
 * nothing is copied from flash. */
#include <stdint.h>

#include "semihosting.h"

extern uint32_t __bss_start, __bss_end, __stack_top;
int main(void);

__attribute__((noreturn)) void reset(void) {
    /* CPACR: full access to CP10 and CP11 (the FPU) before any float instruction. */
    *(volatile uint32_t *)0xE000ED88 |= 0xFu << 20;
    __asm__ volatile("dsb\n isb");
    for (uint32_t *p = &__bss_start; p < &__bss_end; p++) *p = 0;
    exit_with(main());
}

__attribute__((section(".vectors"), used)) const void *const vectors[2] = {&__stack_top, reset};
