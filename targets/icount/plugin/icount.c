/* A QEMU TCG plugin for `cargo xtask bench --icount`: counts every instruction the
 * guest executes and, at each execution of the instruction at address `begin` or `end`
 * (the firmware's two marks, targets/icount/src/main.rs), writes "B <count>" or
 * "E <count>" to the file `out`, the count being of the instructions executed before it.
 *
 *   qemu-system-... -plugin ./libicount.so,begin=0x...,end=0x...,out=counts.txt
 *
 * One vCPU only (the counter is not per vCPU). QEMU's own plugin header is not
 * installed by Debian's packages, so the few declarations used are written out here;
 * they are those of QEMU's include/qemu/qemu-plugin.h (unchanged from plugin API
 * version 1, QEMU 4.2..8.0, through the later versions; ICOUNT_PLUGIN_VERSION picks the
 * version this file says it was built for). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ICOUNT_PLUGIN_VERSION
#define ICOUNT_PLUGIN_VERSION 1
#endif

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);

__attribute__((visibility("default"))) int qemu_plugin_version = ICOUNT_PLUGIN_VERSION;

static uint64_t count;
static uint64_t begin_addr, end_addr;
static FILE *out;

/* userdata: 0 an ordinary instruction, 1 the begin mark, 2 the end mark. */
static void on_insn(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    uintptr_t kind = (uintptr_t)udata;
    if (kind) {
        fprintf(out, "%c %llu\n", kind == 1 ? 'B' : 'E', (unsigned long long)count);
        fflush(out);
    }
    count++;
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t a = qemu_plugin_insn_vaddr(insn);
        uintptr_t kind = a == begin_addr ? 1 : a == end_addr ? 2 : 0;
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)kind);
    }
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
                                                               const qemu_info_t *info,
                                                               int argc, char **argv)
{
    (void)info;
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "begin=", 6)) {
            begin_addr = strtoull(argv[i] + 6, NULL, 0);
        } else if (!strncmp(argv[i], "end=", 4)) {
            end_addr = strtoull(argv[i] + 4, NULL, 0);
        } else if (!strncmp(argv[i], "out=", 4)) {
            path = argv[i] + 4;
        } else {
            fprintf(stderr, "icount plugin: unknown argument %s\n", argv[i]);
            return -1;
        }
    }
    if (!path || !begin_addr || !end_addr) {
        fprintf(stderr, "icount plugin: needs begin=, end= and out=\n");
        return -1;
    }
    out = fopen(path, "w");
    if (!out) {
        perror(path);
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
    return 0;
}
