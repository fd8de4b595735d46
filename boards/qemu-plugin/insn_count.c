/*
 * Counts guest instructions exactly, for Ferrite's firmware on QEMU (which is not cycle-accurate,
 * but executes a deterministic instruction stream).
 *
 * Every translation block adds its instruction count to a counter when it runs (inline, cheap).
 * With `marker=ADDR` (the address of the firmware's `ferrite_marker` function), each time the
 * block at ADDR runs the plugin prints `ferrite-insns: marker N COUNT`: the instructions executed
 * before that call. The host subtracts consecutive markers to get instructions per inference.
 * At exit it prints `ferrite-insns: total COUNT`.
 *
 * With `histogram=FILE` it also counts how often each translation block ran and writes
 * `ADDRESS INSTRUCTIONS EXECUTIONS` per block to FILE at exit: where the instructions go, for
 * `scripts/qemu_hotspots.py` to attribute to functions and source lines.
 *
 * Build: gcc -shared -fPIC -O2 -o libinsn_count.so insn_count.c
 * Use:   qemu-system-arm ... -plugin ./libinsn_count.so,marker=0x1234 -d plugin
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu-plugin-api.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

static uint64_t count;   /* instructions executed so far (one vCPU) */
static uint64_t marker;  /* address of the marker function, 0 if none */
static uint64_t markers; /* marker hits so far */

/* The histogram: one slot per translated block (a block retranslated gets a new slot). */
struct block {
    uint64_t vaddr;
    uint64_t insns;
    uint64_t runs;
};
static const char *histogram; /* output file, NULL when off */
static struct block *blocks;
static size_t n_blocks, cap_blocks;

static void print(const char *what, uint64_t n)
{
    char line[96];
    if (what) {
        snprintf(line, sizeof line, "ferrite-insns: marker %" PRIu64 " %" PRIu64 "\n", n, count);
    } else {
        snprintf(line, sizeof line, "ferrite-insns: total %" PRIu64 "\n", count);
    }
    qemu_plugin_outs(line);
}

static void on_marker(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    (void)udata;
    print("marker", markers++);
}

static void on_block(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    blocks[(uintptr_t)udata].runs++;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    /* The marker callback runs before the inline add of its own block, so a marker reports
     * the instructions executed strictly before the marker function. */
    if (marker && qemu_plugin_tb_vaddr(tb) == marker) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_marker, QEMU_PLUGIN_CB_NO_REGS, NULL);
    }
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &count,
                                             qemu_plugin_tb_n_insns(tb));
    if (histogram) {
        if (n_blocks == cap_blocks) {
            size_t cap = cap_blocks ? 2 * cap_blocks : 4096;
            struct block *grown = realloc(blocks, cap * sizeof *blocks);
            if (!grown) {
                return; /* out of memory: this block goes uncounted */
            }
            blocks = grown;
            cap_blocks = cap;
        }
        struct block *b = &blocks[n_blocks++];
        b->vaddr = qemu_plugin_tb_vaddr(tb);
        b->insns = qemu_plugin_tb_n_insns(tb);
        b->runs = 0;
        /* Counted through the slot's index: a later realloc may move `blocks`. */
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS,
                                             (void *)(uintptr_t)(n_blocks - 1));
    }
}

static void on_qemu_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    print(NULL, 0);
    if (histogram) {
        FILE *f = fopen(histogram, "w");
        if (!f) {
            qemu_plugin_outs("ferrite-insns: cannot write the histogram\n");
            return;
        }
        for (size_t i = 0; i < n_blocks; i++) {
            if (blocks[i].runs) {
                fprintf(f, "%#" PRIx64 " %" PRIu64 " %" PRIu64 "\n", blocks[i].vaddr,
                        blocks[i].insns, blocks[i].runs);
            }
        }
        fclose(f);
    }
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "marker=", 7) == 0) {
            /* Thumb function addresses have bit 0 set; blocks start at the even address. */
            marker = strtoull(argv[i] + 7, NULL, 0) & ~(uint64_t)1;
        } else if (strncmp(argv[i], "histogram=", 10) == 0) {
            histogram = argv[i] + 10;
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
    return 0;
}
