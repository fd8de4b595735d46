/* An AVX2-only x86-64 host on an AVX-512 machine, for side-by-side benchmarks.
 *
 * onnxruntime's MLAS picks its kernels from the CPUID instruction and offers no switch to force an
 * instruction set, so on an AVX-512 machine it always runs its AVX-512/VNNI kernels. Loaded with
 * LD_PRELOAD, this library turns on the kernel's CPUID faulting for the process
 * (arch_prctl(ARCH_SET_CPUID, 0), as rr does): every CPUID then traps, and the SIGSEGV handler
 * below answers it with the real values less the AVX-512, AVX-VNNI, AVX10 and AMX feature bits.
 * Everything in the process (onnxruntime, numpy, Ferrite's own detection) then dispatches as on an
 * AVX2 machine and runs that code at native speed. Threads inherit the setting; exec clears it,
 * and LD_PRELOAD sets it again in the child.
 *
 * Build: gcc -O2 -shared -fPIC -o avx2_host.so avx2_host.c  (benches/side_by_side.py --avx2-host
 * does it). Needs a CPU and kernel with CPUID faulting (`cpuid_fault` in /proc/cpuinfo). A
 * program that installs a SIGSEGV handler of its own after this one (Python's faulthandler, a
 * JVM) takes the CPUID traps itself and cannot run under it; Rust's std keeps a handler it
 * finds in place. A fault that is not a CPUID restores the default action and faults again, so
 * the process still dies of it.
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static int hiding;

/* 1 when CPUID faulting is on and the feature bits are hidden (ctypes reads it). */
int avx2_host_active(void) { return hiding; }

static long cpuid_enabled(int enabled) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled); }

/* The feature bits an AVX2-only host (Haswell to Comet Lake, Zen 1 to 3) lacks. */
static void hide_features(uint32_t leaf, uint32_t subleaf, uint32_t regs[4]) {
    if (leaf == 7 && subleaf == 0) {
        /* EBX: AVX512F, DQ, IFMA, PF, ER, CD, BW, VL. */
        regs[1] &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) |
                     (1u << 30) | (1u << 31));
        /* ECX: AVX512_VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ. */
        regs[2] &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
        /* EDX: AVX512_4VNNIW, 4FMAPS, VP2INTERSECT, AMX-BF16, AVX512_FP16, AMX-TILE, AMX-INT8. */
        regs[3] &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) |
                     (1u << 25));
    } else if (leaf == 7 && subleaf == 1) {
        /* EAX: AVX-VNNI, AVX512_BF16, AVX-IFMA; EDX: AVX-VNNI-INT8, AVX-NE-CONVERT,
         * AVX-VNNI-INT16, AVX10. */
        regs[0] &= ~((1u << 4) | (1u << 5) | (1u << 23));
        regs[3] &= ~((1u << 4) | (1u << 5) | (1u << 10) | (1u << 19));
    } else if (leaf == 0x24) {
        memset(regs, 0, 4 * sizeof regs[0]); /* AVX10's leaf */
    }
}

static void on_fault(int signal_number, siginfo_t *info, void *context) {
    (void)info;
    ucontext_t *state = context;
    greg_t *gregs = state->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)gregs[REG_RIP];
    if (ip[0] != 0x0f || ip[1] != 0xa2) {
        /* Not a CPUID: a real fault. Restore the default action; the instruction faults again. */
        signal(signal_number, SIG_DFL);
        return;
    }
    uint32_t leaf = (uint32_t)gregs[REG_RAX], subleaf = (uint32_t)gregs[REG_RCX], regs[4];
    cpuid_enabled(1);
    __cpuid_count(leaf, subleaf, regs[0], regs[1], regs[2], regs[3]);
    cpuid_enabled(0);
    hide_features(leaf, subleaf, regs);
    gregs[REG_RAX] = regs[0];
    gregs[REG_RBX] = regs[1];
    gregs[REG_RCX] = regs[2];
    gregs[REG_RDX] = regs[3];
    gregs[REG_RIP] += 2;
}

__attribute__((constructor)) static void hide_avx512(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, NULL) == 0 && cpuid_enabled(0) == 0)
        hiding = 1;
}
