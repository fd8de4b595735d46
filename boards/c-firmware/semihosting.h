/* Semihosting for the C firmware: text out and exit through the debugger's (QEMU's) host calls,
 * so the firmware needs no C library. */
#ifndef SEMIHOSTING_H
#define SEMIHOSTING_H

/* Semihosting call `op` with argument `arg` (BKPT 0xAB). */
static inline int semihost(int op, const void *arg) {
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

/* Writes a NUL-terminated string (SYS_WRITE0). */
static inline void print(const char *text) { semihost(0x04, text); }

/* Writes `value` with exactly `digits` decimal digits, zero-padded. */
static inline void print_digits(unsigned value, int digits) {
    char text[12];
    text[digits] = 0;
    for (int i = digits - 1; i >= 0; i--, value /= 10) text[i] = (char)('0' + value % 10);
    print(text);
}

/* Writes `value` in decimal. */
static inline void print_unsigned(unsigned value) {
    int digits = 1;
    for (unsigned v = value; v >= 10; v /= 10) digits++;
    print_digits(value, digits);
}

/* Ends the program with `code` (SYS_EXIT_EXTENDED: ADP_Stopped_ApplicationExit and the code). */
__attribute__((noreturn)) static inline void exit_with(int code) {
    int block[2] = {0x20026, code};
    semihost(0x20, block);
    for (;;) {}
}

#endif
