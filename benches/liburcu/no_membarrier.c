/*
 * no_membarrier <program> <args>...: runs <program> with the membarrier system call
 * refused (ENOSYS, as on a kernel built without it), through a seccomp filter that the
 * program inherits across exec.
 *
 * liburcu's memb flavour decides at start-up whether membarrier works; when it does
 * not, its read side falls back to full fences (urcu_memb_smp_mb_slave: one in the
 * lock, two in the unlock, the mb flavour's). `cargo xtask bench` runs memb_gp under
 * this to measure memb where rcuref's static full fence is the mode to use: a platform
 * without a heavy fence. memb_gp's `urcu` row prints `membarrier=0` there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: no_membarrier <program> <args>...\n");
		return 2;
	}
	/* The system call's number: membarrier answers ENOSYS, everything else runs. */
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = sizeof(filter) / sizeof(filter[0]),
		.filter = filter,
	};
	/* No new privileges: what lets an unprivileged process install a filter. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		perror("no_membarrier: PR_SET_NO_NEW_PRIVS");
		return 2;
	}
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		perror("no_membarrier: PR_SET_SECCOMP");
		return 2;
	}
	execvp(argv[1], argv + 1);
	perror("no_membarrier: exec");
	return 2;
}
