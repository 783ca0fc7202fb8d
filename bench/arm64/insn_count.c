/* A QEMU TCG plugin that counts the guest instructions a program executes
 * and prints the total when it exits ("insns: N"), for bench/arm64: under
 * an emulator wall time means nothing, instruction counts do not depend on
 * the host's load. Built for the build machine and loaded by qemu-aarch64:
 *
 *   cc -shared -fPIC -O2 -o insn_count.so insn_count.c
 *   qemu-aarch64 -cpu max -L /usr/aarch64-linux-gnu -plugin ./insn_count.so -d plugin PROGRAM ...
 *
 * Debian 12's qemu-user (7.2) loads plugins but ships neither QEMU's
 * example plugins (libinsn.so) nor qemu-plugin.h, so the few declarations
 * of QEMU's public plugin API (version 1, include/qemu/qemu-plugin.h) that
 * this uses are written out below. Each translated block adds its
 * instruction count to one counter when it starts (an inline add, as
 * libinsn.so does by default): a block left early by an exception would
 * count whole, which a single-threaded inference loop does not do. One
 * counter: the runner is single-threaded.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static uint64_t insns;

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  (void)id;
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &insns, qemu_plugin_tb_n_insns(tb));
}

static void at_exit(qemu_plugin_id_t id, void *userdata) {
  (void)id;
  (void)userdata;
  char line[64];
  snprintf(line, sizeof(line), "insns: %" PRIu64 "\n", insns);
  qemu_plugin_outs(line);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                                               char **argv) {
  (void)info;
  (void)argc;
  (void)argv;
  qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
  qemu_plugin_register_atexit_cb(id, at_exit, NULL);
  return 0;
}
